//! The shared subscriber: one pub/sub connection per [`Client`](crate::Client)
//! that serves every waiter in the process.
//!
//! Waiters call [`Subscriber::subscribe`] and get a [`Subscription`]: a
//! receiver of [`Event`]s for one channel or pattern. Many subscriptions to
//! the same channel share one server-side `SUBSCRIBE` (reference counted);
//! the last one dropped sends `UNSUBSCRIBE`, so nothing leaks on the server.
//!
//! The connection speaks RESP3: messages arrive as pushes, which go to their
//! waiters straight from the task that reads the socket (`push.rs`).
//! One background task (the *actor*) owns the connection. All `SUBSCRIBE` and
//! `UNSUBSCRIBE` requests go through it in order, so an unsubscribe of a
//! channel that is being resubscribed can never overtake the subscribe.
//! Dropping a subscription only adds its topic to a list of releases (no
//! lookup, no wake-up of the actor: a signal may wake and end thousands of
//! waiters at once); a little later the actor counts the interest down, and
//! unsubscribes what nobody wants any more. A caller that must be gone from
//! the server before it goes on (a wait that returns: a `PUBLISH` after it
//! must not count it) asks [`Subscriber::settle`], which has the actor do
//! that at once and waits for the `UNSUBSCRIBE`.
//! When the connection dies (closed, reset, or a health-check `PING` that
//! does not come back) the actor reconnects with backoff, subscribes to
//! everything still wanted, and sends [`Event::Resubscribed`] to every
//! subscription: messages published during the gap are lost (pub/sub keeps
//! nothing), so lock waiters use that event to re-check their lock.
//!
//! `subscribe` returns only after the server confirmed the subscription, so
//! "subscribe, then try the lock, then wait" cannot miss a release.
//!
//! The actor takes requests in batches: everything queued when it looks is
//! turned into at most one `SUBSCRIBE`, `PSUBSCRIBE`, `UNSUBSCRIBE` and
//! `PUNSUBSCRIBE` each (chunked, pipelined), so ten thousand waiters that
//! arrive at once cost a handful of round trips, not ten thousand. What is
//! sent is decided by the registry at that moment, not by the order of the
//! requests: a topic somebody still wants is subscribed, any other topic in
//! the batch is unsubscribed. A later change of mind comes with a later
//! request, so the server always ends up where the registry is.
//!
//! The module is split along those seams: `registry.rs` holds the shared
//! state (topics, interest counts, confirmations) that both sides use,
//! `actor.rs` the task that owns the connection, `push.rs` the delivery of
//! messages, `commands.rs` the
//! (un)subscribe commands it sends. This file is the API that waiters see.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, oneshot};

use crate::transport::sentinel::Source;
use crate::vocab::error::{Error, Result};

mod actor;
mod commands;
mod heard;
mod push;
mod registry;
mod sharded;
#[cfg(test)]
mod tests;

pub(crate) use actor::jitter;
use registry::{lock, Entry, Mailbox, Request, Shared};
pub(crate) use registry::{Event, Topic, EVENT_BUFFER};

/// Handle to the shared subscriber connection; see the module docs.
#[derive(Clone)]
pub(crate) struct Subscriber {
    shared: Arc<Shared>,
    /// A cluster's subscriber: channels only (see `sharded.rs`).
    sharded: bool,
}

/// One interest in one topic. Dropping it gives the interest up.
pub(crate) struct Subscription {
    shared: Arc<Shared>,
    /// Always `Some` until dropped (then moved to the releases).
    topic: Option<Arc<Topic>>,
    rx: Receiver,
}

/// What a subscription receives from: every message of its topic, or
/// only those its key names (`Subscriber::subscribe_keyed`).
enum Receiver {
    All(broadcast::Receiver<Event>),
    Keyed {
        key: Box<[u8]>,
        rx: mpsc::UnboundedReceiver<Event>,
    },
}

impl Subscriber {
    /// Starts the actor, which connects to `source`. Needs a tokio runtime.
    pub(crate) fn start(source: Source, timeout: Duration, ping_every: Duration) -> Self {
        let (subscriber, mailbox) = Self::new(false, timeout, ping_every);
        tokio::spawn(actor::actor(source, mailbox));
        subscriber
    }

    /// Starts the actor of a Redis Cluster's subscriber, which subscribes
    /// with `SSUBSCRIBE` at the node that owns each channel's slot (see
    /// `sharded.rs`). `seed` is any node. Needs a tokio runtime.
    pub(crate) fn start_cluster(
        seed: redis::cluster::ClusterClientBuilder,
        timeout: Duration,
        ping_every: Duration,
    ) -> Self {
        let (subscriber, mailbox) = Self::new(true, timeout, ping_every);
        tokio::spawn(sharded::actor(seed, mailbox));
        subscriber
    }

    fn new(sharded: bool, timeout: Duration, ping_every: Duration) -> (Self, Mailbox) {
        let (requests, inbox) = mpsc::unbounded_channel();
        let mut id = [0u8; 8];
        if getrandom::fill(&mut id).is_err() {
            // Only uniqueness matters here, not secrecy: fall back to the
            // clock and the process id.
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            id = (nanos ^ u64::from(std::process::id()).rotate_left(40)).to_le_bytes();
        }
        let id = u64::from_le_bytes(id);
        let shared = Arc::new(Shared {
            process: format!("{id:016x}"),
            registry: Mutex::new(HashMap::new()),
            releases: Mutex::new(Vec::new()),
            requests,
            timeout,
            id,
            next_waiter: AtomicU64::new(0),
        });
        let mailbox = Mailbox {
            shared: Arc::downgrade(&shared),
            inbox,
            timeout,
            ping_every,
        };
        (Subscriber { shared, sharded }, mailbox)
    }

    /// Subscribes to `topic`; returns once the server has confirmed it.
    ///
    /// Fails with [`Error::Timeout`] or [`Error::Unreachable`] when the
    /// subscriber connection is down; callers fall back to polling.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled call releases its interest like a dropped
    /// subscription does.
    pub(crate) async fn subscribe(&self, topic: Topic) -> Result<Subscription> {
        let mut subscriptions = self.subscribe_many(vec![(topic, EVENT_BUFFER)]).await?;
        subscriptions
            .pop()
            .ok_or_else(|| Error::Protocol("no subscription was made".into()))
    }

    /// Subscribes to all of `topics` at once (one request, confirmed
    /// together); returns their subscriptions in the same order. A topic
    /// nobody subscribes to yet gets an event buffer of the capacity given
    /// with it (at least 1; [`EVENT_BUFFER`] unless there is a reason: a
    /// buffer costs memory per topic, and a topic with one reader that only
    /// wants one message needs little).
    ///
    /// # Cancel safety
    /// Cancel safe, like [`Subscriber::subscribe`].
    pub(crate) async fn subscribe_many(
        &self,
        topics: Vec<(Topic, usize)>,
    ) -> Result<Vec<Subscription>> {
        let topics = topics.into_iter().map(|(t, c)| (t, c, None)).collect();
        self.subscribe_keyed(topics).await
    }

    /// As [`subscribe_many`](Self::subscribe_many), where a topic given a
    /// key makes a keyed subscription: it receives only the messages whose
    /// payload is the key or starts with the key and `:`, and every
    /// [`Event::Resubscribed`]. Many waiters of one process share a
    /// channel whose messages each name one of them (a fair lock's
    /// hand-offs): a message wakes the one it names, not all of them. A
    /// key is unique within its topic (a second subscription with the same
    /// key would take the messages from the first).
    ///
    /// # Cancel safety
    /// As `subscribe_many`'s.
    pub(crate) async fn subscribe_keyed(
        &self,
        topics: Vec<(Topic, usize, Option<Vec<u8>>)>,
    ) -> Result<Vec<Subscription>> {
        if self.sharded
            && topics
                .iter()
                .any(|(t, _, _)| matches!(t, Topic::Pattern(_)))
        {
            // Sharded messages never reach a pattern subscription, and a
            // PSUBSCRIBE on one node hears only what is published there.
            return Err(Error::InvalidInput(
                "pattern subscriptions are not supported on a Redis Cluster (messages are published with SPUBLISH, which patterns do not hear)".into(),
            ));
        }
        let mut subscriptions = Vec::with_capacity(topics.len());
        let mut unconfirmed = Vec::new();
        {
            let mut registry = lock(&self.shared.registry);
            for (topic, capacity, key) in topics {
                let slot = registry.entry(Arc::new(topic));
                // The registry's own key when there is one, so that all
                // subscriptions of a topic share one copy of its name.
                let topic = slot.key().clone();
                let entry = slot.or_insert_with(|| Entry::new(capacity));
                entry.refs += 1;
                if !entry.confirmed {
                    unconfirmed.push(topic.clone());
                }
                let rx = match key {
                    None => Receiver::All(entry.tx.subscribe()),
                    Some(key) => {
                        let key: Box<[u8]> = key.into();
                        let (tx, rx) = mpsc::unbounded_channel();
                        entry.keyed.insert(key.clone(), tx);
                        Receiver::Keyed { key, rx }
                    }
                };
                subscriptions.push(Subscription {
                    shared: self.shared.clone(),
                    rx,
                    topic: Some(topic),
                });
            }
        }
        if !unconfirmed.is_empty() {
            // SUBSCRIBE is idempotent on the server, so concurrent first
            // subscribers may each ask; each then knows it is confirmed.
            let (done, confirmation) = oneshot::channel();
            self.shared
                .requests
                .send(Request::Subscribe(unconfirmed, done))
                .map_err(|_| closed())?;
            match tokio::time::timeout(self.shared.timeout, confirmation).await {
                Ok(Ok(result)) => result?,
                Ok(Err(_)) => return Err(closed()),
                Err(_) => {
                    return Err(Error::Timeout {
                        op: "SUBSCRIBE",
                        after: self.shared.timeout,
                    })
                }
            }
        }
        Ok(subscriptions)
    }

    /// Returns once every subscription dropped before the call has been
    /// given up on the server: the actor counts the releases now (without
    /// the usual linger) and its `UNSUBSCRIBE` of what nobody here wants
    /// any more is confirmed. So a `PUBLISH` sent after this returns no
    /// longer counts (nor reaches) those subscriptions. Costs no command
    /// when nothing is to be given up, and no wait when nothing is
    /// subscribed on the current connection (it is down, or was never up:
    /// the server holds nothing of ours). An error means the actor did not
    /// answer within the command timeout, or the connection went down
    /// meanwhile (its subscriptions are gone with it).
    ///
    /// # Cancel safety
    /// Cancel safe: the releases are counted by the actor either way
    /// (within its linger, as for any dropped subscription).
    pub(crate) async fn settle(&self) -> Result<()> {
        if !lock(&self.shared.registry).values().any(|e| e.confirmed) {
            return Ok(());
        }
        // A subscribe of nothing: the actor takes it with every release
        // queued before it, unsubscribes what is unwanted, then answers.
        let (done, answer) = oneshot::channel();
        self.shared
            .requests
            .send(Request::Subscribe(Vec::new(), done))
            .map_err(|_| closed())?;
        match tokio::time::timeout(self.shared.timeout, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(closed()),
            Err(_) => Err(Error::Timeout {
                op: "UNSUBSCRIBE",
                after: self.shared.timeout,
            }),
        }
    }

    /// A name for a new waiter, unique among all waiters of all processes
    /// (with overwhelming probability): 32 lowercase hex digits, the first
    /// 16 naming this subscriber (random), the last 16 a sequence number.
    pub(crate) fn new_waiter_id(&self) -> String {
        let seq = self.shared.next_waiter.fetch_add(1, Ordering::Relaxed);
        format!("{:016x}{seq:016x}", self.shared.id)
    }

    /// The 16 hex digits naming this subscriber (the first half of its
    /// waiters' ids): a process in a plain lock's waiting processes, whose
    /// wake channel is the lock's wake stem + these.
    pub(crate) fn process_id(&self) -> &str {
        &self.shared.process
    }

    /// Whether `topic` is subscribed and confirmed on the current
    /// connection: subscribing to it again costs no round trip.
    pub(crate) fn is_confirmed(&self, topic: &Topic) -> bool {
        lock(&self.shared.registry)
            .get(topic)
            .is_some_and(|entry| entry.confirmed)
    }
}

impl Subscription {
    /// The next event. Falling behind (more than a few events unread) is
    /// reported as [`Event::Resubscribed`]: "you may have missed something".
    ///
    /// # Cancel safety
    /// Cancel safe: no event is lost when the future is dropped.
    pub(crate) async fn recv(&mut self) -> Event {
        let rx = match &mut self.rx {
            Receiver::All(rx) => rx,
            Receiver::Keyed { rx, .. } => {
                return match rx.recv().await {
                    Some(event) => event,
                    // The sender went with the registry's entry, which
                    // outlives this subscription: never busy-loop anyway.
                    None => std::future::pending().await,
                };
            }
        };
        match rx.recv().await {
            Ok(event) => event,
            Err(broadcast::error::RecvError::Lagged(_)) => Event::Resubscribed,
            // The sender lives in the registry as long as this subscription
            // holds a reference, so it cannot close; never busy-loop anyway.
            Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
        }
    }
}

impl Subscription {
    /// Whether the server confirmed this topic on the current connection:
    /// false while the connection is down or being re-established.
    pub(crate) fn is_confirmed(&self) -> bool {
        self.topic.as_ref().is_some_and(|topic| {
            lock(&self.shared.registry)
                .get(topic)
                .is_some_and(|entry| entry.confirmed)
        })
    }

    /// Drops the events received so far, unread.
    pub(crate) fn skip_pending(&mut self) {
        match &mut self.rx {
            Receiver::All(rx) => *rx = rx.resubscribe(),
            Receiver::Keyed { rx, .. } => while rx.try_recv().is_ok() {},
        }
    }

    /// Gives a keyed subscription a new key (a fair waiter queued again
    /// under a new id); what came for the old key unread is dropped.
    /// Nothing for a subscription that takes every message.
    pub(crate) fn set_key(&mut self, new_key: &[u8]) {
        let Receiver::Keyed { key, rx } = &mut self.rx else {
            return;
        };
        let Some(topic) = &self.topic else { return };
        let (tx, new_rx) = mpsc::unbounded_channel();
        if let Some(entry) = lock(&self.shared.registry).get_mut(&**topic) {
            entry.keyed.remove(&**key);
            entry.keyed.insert(new_key.into(), tx);
        }
        *key = new_key.into();
        *rx = new_rx;
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let Some(topic) = self.topic.take() else {
            return;
        };
        if let Receiver::Keyed { key, .. } = &self.rx {
            if let Some(entry) = lock(&self.shared.registry).get_mut(&*topic) {
                entry.keyed.remove(&**key);
            }
        }
        let first = {
            let mut releases = lock(&self.shared.releases);
            releases.push(topic);
            releases.len() == 1
        };
        if first {
            // If the actor is gone, so is the connection: nothing to give up.
            let _ = self.shared.requests.send(Request::Released);
        }
    }
}

/// The error of a request the actor can no longer take or answer (it has
/// exited: its connection is closed for good).
fn closed() -> Error {
    Error::Unreachable(redis::RedisError::from((
        redis::ErrorKind::Io,
        "subscriber connection is closed",
    )))
}
