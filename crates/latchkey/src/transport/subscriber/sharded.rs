//! The actor of a Redis Cluster's subscriber: sharded pub/sub.
//!
//! On a cluster, releases and signals are published with `SPUBLISH`, which
//! delivers a message only within the shard that owns its channel's slot
//! (plain `PUBLISH` would copy every message to every node over the cluster
//! bus). So each channel must be subscribed with `SSUBSCRIBE` at the node
//! that owns its slot: this actor keeps one redis-rs cluster connection in
//! RESP3 (messages arrive as pushes), which routes each `SSUBSCRIBE` by its
//! channel's slot, follows `MOVED`, and resubscribes a node's channels when
//! it reconnects to that node.
//!
//! Two things it does not do, which this actor adds:
//! * **A slot that moves.** When a slot migrates (resharding, or a failover
//!   that hands it to another node), the old owner drops the slot's
//!   subscriptions and tells the client with an unsolicited `sunsubscribe`.
//!   A channel somebody here still wants is then subscribed again — the
//!   cluster connection sends it to the new owner (after a `MOVED`) — and
//!   its subscriptions get [`Event::Resubscribed`] once that is confirmed,
//!   so lock waiters re-check the lock they may have missed a release of.
//! * **Messages lost in a disconnection.** A dropped node connection
//!   (a `Disconnection` push, or a `PING` to the primaries that fails) may
//!   have lost messages: every wanted channel is subscribed again and told
//!   [`Event::Resubscribed`].
//! * **A slot whose owner died.** Then redis-rs may take a re-`SSUBSCRIBE`
//!   for the dead node as done, and never learn the slot's new owner. So
//!   after a node is lost, every ping also asks each slot's owner whether
//!   the wanted channels are heard there (`heard.rs`); until they all are,
//!   the cluster connection is made anew (a fresh slot map) and every
//!   channel subscribed again on it.
//!
//! Patterns are refused before they get here (`mod.rs`): sharded messages
//! never reach a pattern subscription.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
use redis::{PushInfo, PushKind};

use super::actor::{fail_pending, jitter};
use super::push::Dispatcher;
use super::registry::{
    confirm_and_answer, lock, take_batch, Batch, Event, Mailbox, Request, Shared, Topic,
    RELEASE_LINGER,
};
use crate::vocab::error::Error;

/// Serves the subscriber until its last handle and subscription are gone.
pub(super) async fn actor(seed: ClusterClientBuilder, mailbox: Mailbox) {
    let (shared, mut inbox, timeout, ping_every) = mailbox.into_parts();
    // Messages go straight to their waiters (see `push.rs`).
    let (dispatcher, mut pushes) = Dispatcher::new(shared.clone());
    let client = match seed
        .use_protocol(redis::ProtocolVersion::RESP3)
        .push_sender(dispatcher)
        .connection_timeout(timeout)
        .response_timeout(timeout)
        .retries(2)
        .build()
    {
        Ok(client) => client,
        Err(e) => {
            // The command connection was made from the same address, so
            // this does not happen; answer every subscribe anyway.
            tracing::warn!(error = %e, "cannot make the cluster subscriber");
            while let Some(request) = inbox.recv().await {
                refuse(request);
            }
            return;
        }
    };
    let mut backoff = Duration::from_millis(10);
    let mut conn = loop {
        match tokio::time::timeout(timeout, client.get_async_connection()).await {
            Ok(Ok(conn)) => break conn,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cluster subscriber connection failed; waiters poll until it is up")
            }
            Err(_) => tracing::warn!(?timeout, "cluster subscriber connection timed out"),
        }
        if !fail_pending(&shared, &mut inbox) {
            return;
        }
        tokio::time::sleep(jitter(backoff)).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    };

    // Channels to subscribe again (a moved slot, a lost connection), and
    // when to try the ones that failed.
    let mut lost: HashSet<Arc<Topic>> = HashSet::new();
    let mut retry_at: Option<tokio::time::Instant> = None;
    let mut flush_at: Option<tokio::time::Instant> = None;
    // Set when a node was lost: the subscriptions are checked at their
    // slots' owners on every ping until all of them are heard.
    let mut suspect = false;
    let mut ping = tokio::time::interval(ping_every);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ping.tick().await;
    loop {
        let far = tokio::time::Instant::now() + ping_every;
        let flush = tokio::time::sleep_until(flush_at.unwrap_or(far));
        let retry = tokio::time::sleep_until(retry_at.unwrap_or(far));
        tokio::select! {
            push = pushes.recv() => {
                let Some(push) = push else { return };
                let Some(s) = shared.upgrade() else { return };
                let mut next = Some(push);
                while let Some(push) = next.take() {
                    suspect |= take_push(&s, push, &mut lost);
                    next = pushes.try_recv().ok();
                }
                drop(s);
                if !lost.is_empty() && retry_at.is_none() {
                    retry_at = Some(tokio::time::Instant::now());
                }
            }
            request = inbox.recv() => {
                let Some(request) = request else { return };
                let mut batch = vec![request];
                while let Ok(request) = inbox.try_recv() {
                    batch.push(request);
                }
                if batch.iter().all(|r| matches!(r, Request::Released)) {
                    flush_at.get_or_insert_with(|| tokio::time::Instant::now() + RELEASE_LINGER);
                    continue;
                }
                flush_at = None;
                handle(&shared, &conn, batch, timeout).await;
            }
            _ = flush, if flush_at.is_some() => {
                flush_at = None;
                handle(&shared, &conn, Vec::new(), timeout).await;
            }
            _ = retry, if retry_at.is_some() => {
                retry_at = None;
                if !resubscribe(&shared, &conn, &mut lost, timeout).await {
                    retry_at = Some(tokio::time::Instant::now() + jitter(backoff));
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                } else {
                    backoff = Duration::from_millis(10);
                }
            }
            _ = ping.tick() => {
                // A node that stopped answering sends no `Disconnection`
                // until a command to it fails: ask them all.
                let ping = conn.route_command(
                    redis::cmd("PING"),
                    RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None)),
                );
                if !matches!(tokio::time::timeout(timeout, ping).await, Ok(Ok(_))) {
                    tracing::warn!("a cluster node did not answer PING; subscribing again");
                    if let Some(s) = shared.upgrade() {
                        lost.extend(lock(&s.registry).keys().cloned());
                    }
                    retry_at.get_or_insert_with(tokio::time::Instant::now);
                    suspect = true;
                } else if suspect && lost.is_empty() {
                    let Some(s) = shared.upgrade() else { return };
                    let wanted: Vec<Arc<Topic>> = lock(&s.registry).keys().cloned().collect();
                    drop(s);
                    if wanted.is_empty() || super::heard::all_heard(&conn, &wanted, timeout).await {
                        suspect = false;
                    } else {
                        tracing::warn!("a sharded subscription is not heard at its slot's owner; reconnecting the cluster subscriber");
                        if let Ok(Ok(fresh)) = tokio::time::timeout(timeout, client.get_async_connection()).await {
                            conn = fresh;
                        }
                        lost.extend(wanted);
                        retry_at.get_or_insert_with(tokio::time::Instant::now);
                    }
                }
            }
        }
    }
}

/// Notes the channels that must be subscribed again; true when a node
/// connection was lost (then they are checked at their owners: `heard.rs`).
fn take_push(shared: &Shared, push: PushInfo, lost: &mut HashSet<Arc<Topic>>) -> bool {
    match push.kind {
        PushKind::SUnsubscribe => {
            // Ours (a channel given up) or the server's (its slot moved):
            // only a channel still wanted needs anything.
            let Some(redis::Value::BulkString(channel)) = push.data.into_iter().next() else {
                return false;
            };
            let registry = lock(&shared.registry);
            if let Some((topic, _)) = registry.get_key_value(&Topic::Channel(channel)) {
                tracing::info!(channel = ?String::from_utf8_lossy(topic.bytes()), "the server dropped a sharded subscription (its slot moved); subscribing at the new owner");
                lost.insert(topic.clone());
            }
            false
        }
        PushKind::Disconnection => {
            tracing::warn!("a cluster subscriber connection dropped; subscribing again");
            lost.extend(lock(&shared.registry).keys().cloned());
            true
        }
        _ => false,
    }
}

/// Subscribes the `lost` channels that are still wanted again, then tells
/// their subscriptions they may have missed messages. False if some failed
/// (they stay in `lost`).
async fn resubscribe(
    shared: &Weak<Shared>,
    conn: &ClusterConnection,
    lost: &mut HashSet<Arc<Topic>>,
    timeout: Duration,
) -> bool {
    let Some(s) = shared.upgrade() else {
        lost.clear();
        return true;
    };
    let wanted: Vec<Arc<Topic>> = {
        let mut registry = lock(&s.registry);
        lost.retain(|topic| registry.contains_key(topic));
        for topic in lost.iter() {
            if let Some(entry) = registry.get_mut(topic) {
                entry.confirmed = false;
            }
        }
        lost.iter().cloned().collect()
    };
    drop(s);
    let results = subscribe_each(conn, &wanted, true, timeout).await;
    let Some(s) = shared.upgrade() else {
        return true;
    };
    let mut registry = lock(&s.registry);
    let mut all = true;
    for (topic, result) in wanted.iter().zip(results) {
        match result {
            Ok(()) => {
                lost.remove(topic);
                if let Some(entry) = registry.get_mut(topic) {
                    entry.confirmed = true;
                    entry.send_all(Event::Resubscribed);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "subscribing again failed; retrying");
                all = false;
            }
        }
    }
    all
}

/// Counts the releases, brings the cluster in line with the registry for
/// every topic they or `batch` name, then answers the batch's subscribes.
async fn handle(
    shared: &Weak<Shared>,
    conn: &ClusterConnection,
    batch: Vec<Request>,
    timeout: Duration,
) {
    let Some(Batch {
        wanted,
        unwanted,
        answers,
    }) = take_batch(shared, batch)
    else {
        return;
    };
    let (subscribed, _) = tokio::join!(
        subscribe_each(conn, &wanted, true, timeout),
        subscribe_each(conn, &unwanted, false, timeout),
    );
    let refused = wanted
        .iter()
        .zip(subscribed)
        .filter_map(|(topic, result)| result.err().map(|e| (topic.clone(), e)))
        .collect();
    confirm_and_answer(shared, &wanted, &refused, answers, timeout);
}

/// `SSUBSCRIBE` (or `SUNSUBSCRIBE`) each channel on its own — channels of
/// different slots cannot share a command — all at once, each bounded by
/// `timeout`; the results in the order of `topics`.
async fn subscribe_each(
    conn: &ClusterConnection,
    topics: &[Arc<Topic>],
    subscribe: bool,
    timeout: Duration,
) -> Vec<redis::RedisResult<()>> {
    let each = topics.iter().map(|topic| {
        let mut conn = conn.clone();
        let name = topic.bytes().to_vec();
        async move {
            let sent = async {
                if subscribe {
                    conn.ssubscribe(name).await
                } else {
                    conn.sunsubscribe(name).await
                }
            };
            match tokio::time::timeout(timeout, sent).await {
                Ok(result) => result,
                Err(_) => Err(redis::RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "sharded subscribe timed out",
                ))),
            }
        }
    });
    futures_util::future::join_all(each).await
}

/// Answers a request when there is no connection to make.
fn refuse(request: Request) {
    if let Request::Subscribe(_, done) = request {
        let _ = done.send(Err(Error::Unreachable(redis::RedisError::from((
            redis::ErrorKind::Io,
            "cluster subscriber cannot connect",
        )))));
    }
}
