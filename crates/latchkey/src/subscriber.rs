//! The shared subscriber: one pub/sub connection per [`Client`](crate::Client)
//! that serves every waiter in the process.
//!
//! Waiters call [`Subscriber::subscribe`] and get a [`Subscription`]: a
//! receiver of [`Event`]s for one channel or pattern. Many subscriptions to
//! the same channel share one server-side `SUBSCRIBE` (reference counted);
//! the last one dropped sends `UNSUBSCRIBE`, so nothing leaks on the server.
//!
//! One background task (the *actor*) owns the connection. All `SUBSCRIBE` and
//! `UNSUBSCRIBE` requests go through it in order, so an unsubscribe of a
//! channel that is being resubscribed can never overtake the subscribe.
//! When the connection dies (closed, reset, or a health-check `PING` that
//! does not come back) the actor reconnects with backoff, subscribes to
//! everything still wanted, and sends [`Event::Resubscribed`] to every
//! subscription: messages published during the gap are lost (pub/sub keeps
//! nothing), so lock waiters use that event to re-check their lock.
//!
//! `subscribe` returns only after the server confirmed the subscription, so
//! "subscribe, then try the lock, then wait" cannot miss a release.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::error::{Error, Result};

/// What a subscription receives.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// A message published on the channel (or on a channel matching the pattern).
    #[allow(dead_code)] // lock waiters only need the wake-up; signals read the fields
    Message {
        channel: Arc<[u8]>,
        payload: Arc<[u8]>,
    },
    /// A lock on this channel was released by this same client: wake at once
    /// instead of waiting for our own PUBLISH to come back.
    LocalRelease,
    /// The connection was re-established; messages may have been missed.
    Resubscribed,
}

/// A channel name or a glob pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Topic {
    Channel(Vec<u8>),
    Pattern(Vec<u8>),
}

struct Entry {
    refs: usize,
    /// Set once the server confirmed the current connection's SUBSCRIBE.
    confirmed: bool,
    tx: broadcast::Sender<Event>,
}

/// How many events a slow subscription may fall behind before it sees a
/// `Lagged` error (which waiters treat as "something happened").
const EVENT_BUFFER: usize = 16;

enum Request {
    Subscribe(Topic, oneshot::Sender<Result<()>>),
    Unsubscribe(Topic),
}

struct Shared {
    registry: Mutex<HashMap<Topic, Entry>>,
    requests: mpsc::UnboundedSender<Request>,
    timeout: Duration,
}

/// Handle to the shared subscriber connection; see the module docs.
#[derive(Clone)]
pub(crate) struct Subscriber {
    shared: Arc<Shared>,
}

/// One interest in one topic. Dropping it gives the interest up.
pub(crate) struct Subscription {
    shared: Arc<Shared>,
    topic: Topic,
    rx: broadcast::Receiver<Event>,
}

impl Subscriber {
    /// Starts the actor. Needs a tokio runtime.
    pub(crate) fn start(client: redis::Client, timeout: Duration, ping_every: Duration) -> Self {
        let (requests, inbox) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            registry: Mutex::new(HashMap::new()),
            requests,
            timeout,
        });
        // The actor holds the registry weakly: when the last client handle and
        // subscription are gone, the request channel closes and it exits.
        tokio::spawn(actor(client, Arc::downgrade(&shared), inbox, timeout, ping_every));
        Subscriber { shared }
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
        let (rx, confirmed) = {
            let mut registry = lock(&self.shared.registry);
            let entry = registry.entry(topic.clone()).or_insert_with(|| Entry {
                refs: 0,
                confirmed: false,
                tx: broadcast::channel(EVENT_BUFFER).0,
            });
            entry.refs += 1;
            (entry.tx.subscribe(), entry.confirmed)
        };
        let subscription = Subscription {
            shared: self.shared.clone(),
            topic: topic.clone(),
            rx,
        };
        if !confirmed {
            // SUBSCRIBE is idempotent on the server, so concurrent first
            // subscribers may each ask; each then knows it is confirmed.
            let (done, confirmation) = oneshot::channel();
            let unreachable = || {
                Error::Unreachable(redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "subscriber connection is closed",
                )))
            };
            self.shared
                .requests
                .send(Request::Subscribe(topic, done))
                .map_err(|_| unreachable())?;
            match tokio::time::timeout(self.shared.timeout, confirmation).await {
                Ok(Ok(result)) => result?,
                Ok(Err(_)) => return Err(unreachable()),
                Err(_) => {
                    return Err(Error::Timeout {
                        op: "SUBSCRIBE",
                        after: self.shared.timeout,
                    })
                }
            }
        }
        Ok(subscription)
    }

    /// Delivers `event` to the local subscribers of `topic`, if any, without
    /// touching the server.
    pub(crate) fn notify_local(&self, topic: &Topic, event: Event) {
        if let Some(entry) = lock(&self.shared.registry).get(topic) {
            let _ = entry.tx.send(event);
        }
    }
}

impl Subscription {
    /// The next event. Falling behind (more than a few events unread) is
    /// reported as [`Event::Resubscribed`]: "you may have missed something".
    ///
    /// # Cancel safety
    /// Cancel safe: no event is lost when the future is dropped.
    pub(crate) async fn recv(&mut self) -> Event {
        match self.rx.recv().await {
            Ok(event) => event,
            Err(broadcast::error::RecvError::Lagged(_)) => Event::Resubscribed,
            // The sender lives in the registry as long as this subscription
            // holds a reference, so it cannot close; never busy-loop anyway.
            Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut registry = lock(&self.shared.registry);
        if let Some(entry) = registry.get_mut(&self.topic) {
            entry.refs -= 1;
            if entry.refs == 0 {
                registry.remove(&self.topic);
                let _ = self
                    .shared
                    .requests
                    .send(Request::Unsubscribe(self.topic.clone()));
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The registry holds no invariant a panic elsewhere could break halfway.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn actor(
    client: redis::Client,
    shared: Weak<Shared>,
    mut inbox: mpsc::UnboundedReceiver<Request>,
    timeout: Duration,
    ping_every: Duration,
) {
    let mut backoff = Duration::from_millis(10);
    let mut reconnecting = false;
    loop {
        let connected = match tokio::time::timeout(timeout, client.get_async_pubsub()).await {
            Ok(Ok(pubsub)) => Some(pubsub),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "subscriber connection failed; waiters poll until it is back");
                None
            }
            Err(_) => {
                tracing::warn!(?timeout, "subscriber connection timed out; waiters poll until it is back");
                None
            }
        };
        let Some(pubsub) = connected else {
            // Fail pending subscribes at once (their waiters then poll), and
            // drop the unsubscribes: the new connection starts empty.
            if !fail_pending(&mut inbox) {
                return;
            }
            tokio::time::sleep(jitter(backoff)).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
            reconnecting = true;
            continue;
        };
        backoff = Duration::from_millis(10);
        let (mut sink, mut stream) = pubsub.split();

        // Subscribe to everything that is wanted now.
        let Some(wanted) = shared.upgrade().map(|s| {
            lock(&s.registry).keys().cloned().collect::<Vec<Topic>>()
        }) else {
            return;
        };
        if let Err(e) = resubscribe(&mut sink, &wanted, timeout).await {
            tracing::warn!(error = %e, "resubscribing failed; reconnecting");
            continue;
        }
        if let Some(s) = shared.upgrade() {
            for (topic, entry) in lock(&s.registry).iter_mut() {
                if wanted.contains(topic) {
                    entry.confirmed = true;
                }
                if reconnecting {
                    let _ = entry.tx.send(Event::Resubscribed);
                }
            }
        }
        if reconnecting {
            tracing::info!(topics = wanted.len(), "subscriber connection re-established");
        }
        reconnecting = true;

        let mut ping = tokio::time::interval(ping_every);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ping.tick().await;
        loop {
            tokio::select! {
                message = stream.next() => {
                    let Some(message) = message else {
                        tracing::warn!("subscriber connection closed; reconnecting");
                        break;
                    };
                    let Some(s) = shared.upgrade() else { return };
                    dispatch(&s, &message);
                }
                request = inbox.recv() => {
                    let Some(request) = request else { return };
                    if let Err(e) = handle(&shared, &mut sink, request, timeout).await {
                        tracing::warn!(error = %e, "subscriber request failed; reconnecting");
                        break;
                    }
                }
                _ = ping.tick() => {
                    let alive = tokio::time::timeout(timeout, sink.ping::<String>()).await;
                    if !matches!(alive, Ok(Ok(_))) {
                        tracing::warn!("subscriber connection did not answer PING; reconnecting");
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

/// Answers every queued subscribe with an error. Returns false when the
/// subscriber is gone for good.
fn fail_pending(inbox: &mut mpsc::UnboundedReceiver<Request>) -> bool {
    loop {
        match inbox.try_recv() {
            Ok(Request::Subscribe(_, done)) => {
                let _ = done.send(Err(Error::Unreachable(redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "subscriber connection is down",
                )))));
            }
            Ok(Request::Unsubscribe(_)) => {}
            Err(mpsc::error::TryRecvError::Empty) => return true,
            Err(mpsc::error::TryRecvError::Disconnected) => return false,
        }
    }
}

async fn resubscribe(
    sink: &mut redis::aio::PubSubSink,
    wanted: &[Topic],
    timeout: Duration,
) -> redis::RedisResult<()> {
    for topic in wanted {
        bounded(timeout, subscribe_one(sink, topic)).await?;
    }
    Ok(())
}

async fn handle(
    shared: &Weak<Shared>,
    sink: &mut redis::aio::PubSubSink,
    request: Request,
    timeout: Duration,
) -> redis::RedisResult<()> {
    match request {
        Request::Subscribe(topic, done) => {
            let result = bounded(timeout, subscribe_one(sink, &topic)).await;
            if result.is_ok() {
                if let Some(s) = shared.upgrade() {
                    if let Some(entry) = lock(&s.registry).get_mut(&topic) {
                        entry.confirmed = true;
                    }
                }
            }
            let reply = result.clone().map_err(|e| Error::from_redis(e, b""));
            let _ = done.send(reply);
            result
        }
        Request::Unsubscribe(topic) => {
            // Re-wanted meanwhile? Then keep it: a subscribe for it follows.
            let wanted_again = shared
                .upgrade()
                .is_some_and(|s| lock(&s.registry).contains_key(&topic));
            if wanted_again {
                return Ok(());
            }
            bounded(timeout, async {
                match &topic {
                    Topic::Channel(c) => sink.unsubscribe(c).await,
                    Topic::Pattern(p) => sink.punsubscribe(p).await,
                }
            })
            .await
        }
    }
}

async fn subscribe_one(sink: &mut redis::aio::PubSubSink, topic: &Topic) -> redis::RedisResult<()> {
    match topic {
        Topic::Channel(c) => sink.subscribe(c).await,
        Topic::Pattern(p) => sink.psubscribe(p).await,
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

fn dispatch(shared: &Shared, message: &redis::Msg) {
    let Ok(channel) = message.get_channel::<Vec<u8>>() else {
        return;
    };
    let channel: Arc<[u8]> = Arc::from(channel);
    let payload: Arc<[u8]> = Arc::from(message.get_payload_bytes());
    let topic = if message.from_pattern() {
        match message.get_pattern::<Vec<u8>>() {
            Ok(pattern) => Topic::Pattern(pattern),
            Err(_) => return,
        }
    } else {
        Topic::Channel(channel.to_vec())
    };
    if let Some(entry) = lock(&shared.registry).get(&topic) {
        let _ = entry.tx.send(Event::Message { channel, payload });
    }
}

/// `d` scaled by a random factor in [0.5, 1.5): spreads out reconnects and
/// polls of many processes.
pub(crate) fn jitter(d: Duration) -> Duration {
    let mut byte = [0u8; 1];
    let r = if getrandom::fill(&mut byte).is_ok() { byte[0] } else { 128 };
    d.mul_f64(0.5 + f64::from(r) / 256.0)
}
