//! The actor: the one task that owns a subscriber's pub/sub connection.
//!
//! It connects (with backoff), subscribes to everything the registry wants,
//! pings the server to find a dead connection, reconnects, and takes the
//! API's requests in batches (see the [module docs](super)). Kept apart from
//! the API because it is a long-running loop with its own failure handling;
//! the API only queues requests for it and reads the registry.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::mpsc;

use super::commands::subscribe_checked;
use super::push::Dispatcher;
use super::registry::{
    confirm_and_answer, count_releases, lock, take_batch, Batch, Event, Mailbox, Request, Shared,
    Topic, RELEASE_LINGER,
};
use crate::transport::sentinel::Source;
use crate::vocab::error::Error;

/// Requests taken from the queue at a time: bounds one batch's commands
/// (and the time messages wait behind them).
const MAX_BATCH: usize = 4096;

/// Serves the subscriber until its last handle and subscription are gone
/// (the request channel closes, or the registry can no longer be upgraded).
pub(super) async fn actor(source: Source, mailbox: Mailbox) {
    let (shared, mut inbox, timeout, ping_every) = mailbox.into_parts();
    let mut backoff = Duration::from_millis(10);
    let mut reconnecting = false;
    let mut server = source.server();
    // Told when the Sentinels name another primary: reconnect there.
    let mut moved = source.moved();
    loop {
        // A new connection starts empty: releases count down the registry,
        // there is nothing to unsubscribe.
        count_releases(&shared);
        if let Some(moved) = &mut moved {
            moved.mark_unchanged();
        }
        // Messages go straight to their waiters (see `push.rs`); the rest
        // of the pushes come here, on a channel of this connection's own.
        let (dispatcher, mut pushes) = Dispatcher::new(shared.clone());
        let config = redis::AsyncConnectionConfig::new()
            .set_push_sender(dispatcher)
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout));
        let connected = match tokio::time::timeout(timeout, source.push_connection(config)).await {
            Ok(Ok(conn)) => Some(conn),
            Ok(Err(e)) => {
                tracing::warn!(%server, error = %e, "subscriber connection failed; waiters poll until it is back");
                None
            }
            Err(_) => {
                tracing::warn!(%server, ?timeout, "subscriber connection timed out; waiters poll until it is back");
                None
            }
        };
        let Some(mut conn) = connected else {
            // Fail pending subscribes at once (their waiters then poll), and
            // count the releases: the new connection starts empty.
            if !fail_pending(&shared, &mut inbox) {
                return;
            }
            tokio::time::sleep(jitter(backoff)).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
            reconnecting = true;
            continue;
        };
        backoff = Duration::from_millis(10);
        server = source.server();

        // Subscribe to everything that is wanted now.
        let Some(wanted) = shared.upgrade().map(|s| {
            lock(&s.registry)
                .keys()
                .cloned()
                .collect::<Vec<Arc<Topic>>>()
        }) else {
            return;
        };
        let refused = match subscribe_checked(&conn, &wanted, &[], timeout).await {
            Ok(refused) => refused,
            Err(e) => {
                tracing::warn!(%server, error = %e, "resubscribing failed; reconnecting");
                tokio::time::sleep(jitter(backoff)).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        for (topic, e) in &refused {
            tracing::warn!(%server, ?topic, error = %e, "the server refused a subscription");
        }
        let wanted: HashSet<Arc<Topic>> = wanted
            .into_iter()
            .filter(|topic| !refused.contains_key(topic))
            .collect();
        if let Some(s) = shared.upgrade() {
            for (topic, entry) in lock(&s.registry).iter_mut() {
                if wanted.contains(topic) {
                    entry.confirmed = true;
                }
                if reconnecting {
                    entry.send_all(Event::Resubscribed);
                }
            }
        }
        if reconnecting {
            tracing::info!(%server, topics = wanted.len(), "subscriber connection re-established");
        }
        reconnecting = true;

        let mut ping = tokio::time::interval(ping_every);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ping.tick().await;
        let mut flush_at: Option<tokio::time::Instant> = None;
        loop {
            let flush = tokio::time::sleep_until(
                flush_at.unwrap_or_else(|| tokio::time::Instant::now() + ping_every),
            );
            tokio::select! {
                push = pushes.recv() => {
                    // Only a lost connection matters here: the server sends
                    // no unsolicited unsubscribes outside a cluster.
                    if push.is_none_or(|p| p.kind == redis::PushKind::Disconnection) {
                        tracing::warn!(%server, "subscriber connection closed; reconnecting");
                        break;
                    }
                }
                request = inbox.recv() => {
                    let Some(request) = request else { return };
                    let mut batch = vec![request];
                    while batch.len() < MAX_BATCH {
                        match inbox.try_recv() {
                            Ok(request) => batch.push(request),
                            Err(_) => break,
                        }
                    }
                    if batch.iter().all(|r| matches!(r, Request::Released)) {
                        flush_at.get_or_insert_with(|| tokio::time::Instant::now() + RELEASE_LINGER);
                        continue;
                    }
                    // A subscribe takes the releases along (see `handle`).
                    flush_at = None;
                    if let Err(e) = handle(&shared, &conn, batch, timeout).await {
                        tracing::warn!(%server, error = %e, "subscriber request failed; reconnecting");
                        break;
                    }
                }
                _ = flush, if flush_at.is_some() => {
                    flush_at = None;
                    if let Err(e) = handle(&shared, &conn, Vec::new(), timeout).await {
                        tracing::warn!(%server, error = %e, "subscriber request failed; reconnecting");
                        break;
                    }
                }
                _ = primary_moved(&mut moved) => {
                    tracing::warn!(%server, "the Sentinels name another primary; reconnecting");
                    break;
                }
                _ = ping.tick() => {
                    let ping = redis::cmd("PING");
                    let alive = tokio::time::timeout(timeout, ping.query_async::<redis::Value>(&mut conn)).await;
                    if !matches!(alive, Ok(Ok(_))) {
                        tracing::warn!(%server, "subscriber connection did not answer PING; reconnecting");
                        break;
                    }
                }
            }
        }
        // Everything must be confirmed again on the next connection.
        if let Some(s) = shared.upgrade() {
            for entry in lock(&s.registry).values_mut() {
                entry.confirmed = false;
            }
        }
    }
}

/// Completes when the Sentinels name another primary; never without Sentinels.
async fn primary_moved(moved: &mut Option<tokio::sync::watch::Receiver<Option<(String, u16)>>>) {
    if let Some(moved) = moved {
        if moved.changed().await.is_ok() {
            return;
        }
    }
    std::future::pending().await
}

/// Answers every queued subscribe with an error and counts the releases.
/// Returns false when the subscriber is gone for good.
pub(super) fn fail_pending(
    shared: &Weak<Shared>,
    inbox: &mut mpsc::UnboundedReceiver<Request>,
) -> bool {
    let open = loop {
        match inbox.try_recv() {
            Ok(Request::Subscribe(_, done)) => {
                let _ = done.send(Err(Error::Unreachable(redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "subscriber connection is down",
                )))));
            }
            Ok(Request::Released) => {}
            Err(mpsc::error::TryRecvError::Empty) => break true,
            Err(mpsc::error::TryRecvError::Disconnected) => break false,
        }
    };
    count_releases(shared);
    open
}

/// Counts the releases, brings the server in line with the registry for
/// every topic they or `batch` name, then answers the batch's subscribes.
async fn handle(
    shared: &Weak<Shared>,
    conn: &redis::aio::MultiplexedConnection,
    batch: Vec<Request>,
    timeout: Duration,
) -> redis::RedisResult<()> {
    let Some(batch) = take_batch(shared, batch) else {
        return Ok(());
    };
    let Batch {
        wanted,
        unwanted,
        answers,
    } = batch;
    let refused = match subscribe_checked(conn, &wanted, &unwanted, timeout).await {
        Ok(refused) => refused,
        Err(e) => {
            for (_, done) in answers {
                let _ = done.send(Err(Error::from_redis(e.clone(), &[], timeout)));
            }
            return Err(e);
        }
    };
    confirm_and_answer(shared, &wanted, &refused, answers, timeout);
    Ok(())
}

/// Jitter lives with the one failure policy (`vocab/retry.rs`).
pub(crate) use crate::vocab::retry::jitter;
