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
//! Dropping a subscription only adds its topic to a list of releases (no
//! lookup, no wake-up of the actor: a signal may wake and end thousands of
//! waiters at once); a little later the actor counts the interest down, and
//! unsubscribes what nobody wants any more.
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

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::error::{Error, Result};

/// What a subscription receives.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// A message published on the channel (or on a channel matching the
    /// pattern). Lock waiters only need the wake-up; signals read it. One
    /// `Arc` for both parts: every receiver of a topic clones the event.
    Message(Arc<Published>),
    /// A lock on this channel was released by this same client: wake at once
    /// instead of waiting for our own PUBLISH to come back.
    LocalRelease,
    /// The connection was re-established; messages may have been missed.
    Resubscribed,
}

/// A message as it came from the server.
#[derive(Debug)]
pub(crate) struct Published {
    pub(crate) channel: Box<[u8]>,
    pub(crate) payload: Box<[u8]>,
}

/// A channel name or a glob pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Topic {
    Channel(Vec<u8>),
    Pattern(Vec<u8>),
}

struct Entry {
    /// Live subscriptions plus releases the actor has not counted yet: an
    /// entry stays (and stays subscribed) until its last release is counted.
    refs: usize,
    /// Set once the server confirmed the current connection's SUBSCRIBE.
    confirmed: bool,
    tx: broadcast::Sender<Event>,
}

/// How many events a slow subscription may fall behind before it sees a
/// `Lagged` error (which waiters treat as "something happened").
pub(crate) const EVENT_BUFFER: usize = 16;

/// Requests taken from the queue at a time, and topics per command: bounds
/// one batch's commands (and the time messages wait behind them).
const MAX_BATCH: usize = 4096;
const TOPICS_PER_COMMAND: usize = 1024;

/// How long releases (and the unsubscribes they lead to) may wait. Nobody
/// waits for them, and they come in bursts (a signal wakes many waiters,
/// which then all leave): handled a little later they neither compete with
/// the waiters still waking nor cost a command each. A subscribe takes them
/// along at once.
const RELEASE_LINGER: Duration = Duration::from_millis(50);

enum Request {
    /// Subscribe to all of these; one answer once all are confirmed.
    Subscribe(Vec<Arc<Topic>>, oneshot::Sender<Result<()>>),
    /// The list of releases is no longer empty: count it within the linger.
    Released,
}

struct Shared {
    /// Keyed by shared topics: each subscription holds the same `Arc`.
    registry: Mutex<HashMap<Arc<Topic>, Entry>>,
    /// Topics of dropped subscriptions, not yet counted down in the registry.
    releases: Mutex<Vec<Arc<Topic>>>,
    requests: mpsc::UnboundedSender<Request>,
    timeout: Duration,
    /// Random per subscriber: names this connection in per-waiter channels.
    id: u64,
    /// Source of per-waiter sequence numbers, unique within `id`.
    next_waiter: AtomicU64,
}

/// Handle to the shared subscriber connection; see the module docs.
#[derive(Clone)]
pub(crate) struct Subscriber {
    shared: Arc<Shared>,
}

/// One interest in one topic. Dropping it gives the interest up.
pub(crate) struct Subscription {
    shared: Arc<Shared>,
    /// Always `Some` until dropped (then moved to the releases).
    topic: Option<Arc<Topic>>,
    rx: broadcast::Receiver<Event>,
}

impl Subscriber {
    /// Starts the actor. Needs a tokio runtime.
    pub(crate) fn start(client: redis::Client, timeout: Duration, ping_every: Duration) -> Self {
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
        let shared = Arc::new(Shared {
            registry: Mutex::new(HashMap::new()),
            releases: Mutex::new(Vec::new()),
            requests,
            timeout,
            id: u64::from_le_bytes(id),
            next_waiter: AtomicU64::new(0),
        });
        // The actor holds the registry weakly: when the last client handle and
        // subscription are gone, the request channel closes and it exits.
        tokio::spawn(actor(
            client,
            Arc::downgrade(&shared),
            inbox,
            timeout,
            ping_every,
        ));
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
        let mut subscriptions = Vec::with_capacity(topics.len());
        let mut unconfirmed = Vec::new();
        {
            let mut registry = lock(&self.shared.registry);
            for (topic, capacity) in topics {
                let slot = registry.entry(Arc::new(topic));
                // The registry's own key when there is one, so that all
                // subscriptions of a topic share one copy of its name.
                let topic = slot.key().clone();
                let entry = slot.or_insert_with(|| Entry {
                    refs: 0,
                    confirmed: false,
                    tx: broadcast::channel(capacity.max(1)).0,
                });
                entry.refs += 1;
                if !entry.confirmed {
                    unconfirmed.push(topic.clone());
                }
                subscriptions.push(Subscription {
                    shared: self.shared.clone(),
                    rx: entry.tx.subscribe(),
                    topic: Some(topic),
                });
            }
        }
        if !unconfirmed.is_empty() {
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
                .send(Request::Subscribe(unconfirmed, done))
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
        Ok(subscriptions)
    }

    /// A name for a new waiter, unique among all waiters of all processes
    /// (with overwhelming probability): 32 lowercase hex digits, the first
    /// 16 naming this subscriber (random), the last 16 a sequence number.
    pub(crate) fn new_waiter_id(&self) -> String {
        let seq = self.shared.next_waiter.fetch_add(1, Ordering::Relaxed);
        format!("{:016x}{seq:016x}", self.shared.id)
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
        self.rx = self.rx.resubscribe();
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let Some(topic) = self.topic.take() else {
            return;
        };
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

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The registry holds no invariant a panic elsewhere could break halfway.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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
    let server = client.get_connection_info().addr().to_string();
    loop {
        // A new connection starts empty: releases count down the registry,
        // there is nothing to unsubscribe.
        count_releases(&shared);
        let connected = match tokio::time::timeout(timeout, client.get_async_pubsub()).await {
            Ok(Ok(pubsub)) => Some(pubsub),
            Ok(Err(e)) => {
                tracing::warn!(%server, error = %e, "subscriber connection failed; waiters poll until it is back");
                None
            }
            Err(_) => {
                tracing::warn!(%server, ?timeout, "subscriber connection timed out; waiters poll until it is back");
                None
            }
        };
        let Some(pubsub) = connected else {
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
        let (mut sink, mut stream) = pubsub.split();

        // Subscribe to everything that is wanted now.
        let Some(wanted) = shared.upgrade().map(|s| {
            lock(&s.registry)
                .keys()
                .cloned()
                .collect::<Vec<Arc<Topic>>>()
        }) else {
            return;
        };
        let refused = match subscribe_checked(&sink, &wanted, &[], timeout).await {
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
                    let _ = entry.tx.send(Event::Resubscribed);
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
                message = stream.next() => {
                    let Some(message) = message else {
                        tracing::warn!(%server, "subscriber connection closed; reconnecting");
                        break;
                    };
                    let Some(s) = shared.upgrade() else { return };
                    dispatch(&s, &message);
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
                    if let Err(e) = handle(&shared, &mut sink, batch, timeout).await {
                        tracing::warn!(%server, error = %e, "subscriber request failed; reconnecting");
                        break;
                    }
                }
                _ = flush, if flush_at.is_some() => {
                    flush_at = None;
                    if let Err(e) = handle(&shared, &mut sink, Vec::new(), timeout).await {
                        tracing::warn!(%server, error = %e, "subscriber request failed; reconnecting");
                        break;
                    }
                }
                _ = ping.tick() => {
                    // Any reply will do: a subscribed RESP2 connection
                    // answers `["pong", ""]`, not `PONG`, which a `String`
                    // would refuse (and every ping would reconnect).
                    let alive = tokio::time::timeout(timeout, sink.ping::<redis::Value>()).await;
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

/// Answers every queued subscribe with an error and counts the releases.
/// Returns false when the subscriber is gone for good.
fn fail_pending(shared: &Weak<Shared>, inbox: &mut mpsc::UnboundedReceiver<Request>) -> bool {
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

/// Counts the releases down in the registry and removes the entries nobody
/// wants any more; returns their topics.
fn count_releases(shared: &Weak<Shared>) -> Vec<Arc<Topic>> {
    let mut gone = Vec::new();
    let Some(s) = shared.upgrade() else {
        return gone;
    };
    let released = std::mem::take(&mut *lock(&s.releases));
    let mut registry = lock(&s.registry);
    for topic in released {
        if let Some(entry) = registry.get_mut(&*topic) {
            entry.refs = entry.refs.saturating_sub(1);
            if entry.refs == 0 {
                registry.remove(&*topic);
                gone.push(topic);
            }
        }
    }
    gone
}

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
async fn subscribe_checked(
    sink: &redis::aio::PubSubSink,
    subscribe: &[Arc<Topic>],
    unsubscribe: &[Arc<Topic>],
    timeout: Duration,
) -> redis::RedisResult<HashMap<Arc<Topic>, redis::RedisError>> {
    match bounded(timeout, apply(sink, subscribe, unsubscribe)).await {
        Ok(()) => return Ok(HashMap::new()),
        Err(e) if broken(&e) => return Err(e),
        Err(_) => {}
    }
    let alone = subscribe.iter().map(|topic| async move {
        let result = apply(sink, std::slice::from_ref(topic), &[]).await;
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

/// Counts the releases, brings the server in line with the registry for
/// every topic they or `batch` name, then answers the batch's subscribes.
async fn handle(
    shared: &Weak<Shared>,
    sink: &mut redis::aio::PubSubSink,
    batch: Vec<Request>,
    timeout: Duration,
) -> redis::RedisResult<()> {
    let mut named = HashSet::new();
    let mut answers = Vec::new();
    for request in batch {
        if let Request::Subscribe(topics, done) = request {
            named.extend(topics.iter().cloned());
            answers.push((topics, done));
        }
    }
    named.extend(count_releases(shared));
    let Some(s) = shared.upgrade() else {
        return Ok(());
    };
    // Wanted now: subscribe (again; SUBSCRIBE is idempotent). Not wanted
    // (given up, perhaps before its SUBSCRIBE was even sent): unsubscribe.
    let (wanted, unwanted): (Vec<Arc<Topic>>, Vec<Arc<Topic>>) = {
        let registry = lock(&s.registry);
        named
            .into_iter()
            .partition(|topic| registry.contains_key(topic))
    };
    drop(s);
    let refused = match subscribe_checked(sink, &wanted, &unwanted, timeout).await {
        Ok(refused) => refused,
        Err(e) => {
            for (_, done) in answers {
                let _ = done.send(Err(Error::from_redis(e.clone(), &[], timeout)));
            }
            return Err(e);
        }
    };
    if let Some(s) = shared.upgrade() {
        let mut registry = lock(&s.registry);
        for topic in wanted.iter().filter(|t| !refused.contains_key(*t)) {
            if let Some(entry) = registry.get_mut(topic) {
                entry.confirmed = true;
            }
        }
    }
    for (topics, done) in answers {
        let answer = match topics.iter().find_map(|t| refused.get(t)) {
            Some(e) => Err(Error::from_redis(e.clone(), &[], timeout)),
            None => Ok(()),
        };
        let _ = done.send(answer);
    }
    Ok(())
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
    sink: &redis::aio::PubSubSink,
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
            commands.push(send(sink.clone(), command, chunk));
        }
    }
    // The sink is a pipeline: every command is written before the first
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
    mut sink: redis::aio::PubSubSink,
    command: Command,
    names: &[&[u8]],
) -> redis::RedisResult<()> {
    match command {
        Command::Subscribe => sink.subscribe(names).await,
        Command::PSubscribe => sink.psubscribe(names).await,
        Command::Unsubscribe => sink.unsubscribe(names).await,
        Command::PUnsubscribe => sink.punsubscribe(names).await,
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
    let (topic, channel) = if message.from_pattern() {
        match message.get_pattern::<Vec<u8>>() {
            Ok(pattern) => (Topic::Pattern(pattern), channel.into_boxed_slice()),
            Err(_) => return,
        }
    } else {
        (Topic::Channel(channel.clone()), channel.into_boxed_slice())
    };
    let published = Published {
        channel,
        payload: message.get_payload_bytes().into(),
    };
    if let Some(entry) = lock(&shared.registry).get(&topic) {
        let _ = entry.tx.send(Event::Message(Arc::new(published)));
    }
}

/// `d` scaled by a random factor in [0.5, 1.5): spreads out reconnects and
/// polls of many processes.
pub(crate) fn jitter(d: Duration) -> Duration {
    let mut byte = [0u8; 1];
    let r = if getrandom::fill(&mut byte).is_ok() {
        byte[0]
    } else {
        128
    };
    d.mul_f64(0.5 + f64::from(r) / 256.0)
}
