//! The subscriber connection's commands: `SUBSCRIBE`, `PSUBSCRIBE`,
//! `UNSUBSCRIBE` and `PUNSUBSCRIBE`, chunked and pipelined, each bounded by
//! the command timeout, and a refusal told apart from a broken connection.
//!
//! Plumbing without state: it knows topics and the sink, not the registry,
//! so the actor decides *what* to send and this file only *how*. (A RESP3
//! connection: the confirmations are pushes, which redis-rs counts.)

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::registry::Topic;

/// Topics per command: bounds one command's size (and the time messages
/// wait behind it).
const TOPICS_PER_COMMAND: usize = 1024;

/// True when `e` means the connection is unusable (it is then replaced);
/// false for a refusal by the server, such as an ACL that forbids a
/// channel, after which the connection works as before.
fn broken(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
}

/// [`apply`], and when the server refuses it, the topics it refuses with
/// why: a `SUBSCRIBE` of many channels is refused as a whole when one is
/// forbidden, so each topic is then tried alone, and the others are not
/// held hostage by one. Errs only when the connection is broken.
pub(super) async fn subscribe_checked(
    conn: &redis::aio::MultiplexedConnection,
    subscribe: &[Arc<Topic>],
    unsubscribe: &[Arc<Topic>],
    timeout: Duration,
) -> redis::RedisResult<HashMap<Arc<Topic>, redis::RedisError>> {
    match bounded(timeout, apply(conn, subscribe, unsubscribe)).await {
        Ok(()) => return Ok(HashMap::new()),
        Err(e) if broken(&e) => return Err(e),
        Err(_) => {}
    }
    let alone = subscribe.iter().map(|topic| async move {
        let result = apply(conn, std::slice::from_ref(topic), &[]).await;
        (topic.clone(), result)
    });
    let results = bounded(timeout, async {
        Ok(futures_util::future::join_all(alone).await)
    })
    .await?;
    let mut refused = HashMap::new();
    for (topic, result) in results {
        match result {
            Ok(()) => {}
            Err(e) if broken(&e) => return Err(e),
            Err(e) => {
                refused.insert(topic, e);
            }
        }
    }
    Ok(refused)
}

#[derive(Clone, Copy)]
enum Command {
    Subscribe,
    PSubscribe,
    Unsubscribe,
    PUnsubscribe,
}

/// Sends the (un)subscribe commands for `subscribe` and `unsubscribe`, at
/// most [`TOPICS_PER_COMMAND`] topics each, pipelined, and waits for every
/// confirmation.
async fn apply(
    conn: &redis::aio::MultiplexedConnection,
    subscribe: &[Arc<Topic>],
    unsubscribe: &[Arc<Topic>],
) -> redis::RedisResult<()> {
    let (sub_channels, sub_patterns) = split(subscribe);
    let (unsub_channels, unsub_patterns) = split(unsubscribe);
    let mut commands = Vec::new();
    for (command, names) in [
        (Command::Subscribe, &sub_channels),
        (Command::PSubscribe, &sub_patterns),
        (Command::Unsubscribe, &unsub_channels),
        (Command::PUnsubscribe, &unsub_patterns),
    ] {
        for chunk in names.chunks(TOPICS_PER_COMMAND) {
            commands.push(send(conn.clone(), command, chunk));
        }
    }
    // The connection is a pipeline: every command is written before the first
    // confirmation is awaited, in this order.
    futures_util::future::try_join_all(commands)
        .await
        .map(|_| ())
}

/// The names of `topics`: channels, then patterns.
fn split(topics: &[Arc<Topic>]) -> (Vec<&[u8]>, Vec<&[u8]>) {
    let mut channels: Vec<&[u8]> = Vec::new();
    let mut patterns: Vec<&[u8]> = Vec::new();
    for topic in topics {
        match &**topic {
            Topic::Channel(c) => channels.push(c),
            Topic::Pattern(p) => patterns.push(p),
        }
    }
    (channels, patterns)
}

async fn send(
    mut conn: redis::aio::MultiplexedConnection,
    command: Command,
    names: &[&[u8]],
) -> redis::RedisResult<()> {
    match command {
        Command::Subscribe => conn.subscribe(names).await,
        Command::PSubscribe => conn.psubscribe(names).await,
        Command::Unsubscribe => conn.unsubscribe(names).await,
        Command::PUnsubscribe => conn.punsubscribe(names).await,
    }
}

async fn bounded<T>(
    timeout: Duration,
    fut: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> redis::RedisResult<T> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(result) => result,
        Err(_) => Err(redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "subscriber command timed out",
        ))),
    }
}
