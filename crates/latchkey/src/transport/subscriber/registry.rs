//! The registry shared by the [`Subscriber`](super::Subscriber) handles and
//! the actor: which topics are wanted, by how many subscriptions, and
//! whether the server confirmed them.
//!
//! It sits below both: the API adds interest and records releases here, the
//! actor counts the releases down and marks confirmations, and neither has
//! to know the other's internals. The lock is never held across an await.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, oneshot};

use crate::vocab::error::{Error, Result};

/// What a subscription receives.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// A message published on the channel (or on a channel matching the
    /// pattern). Lock waiters only need the wake-up; signals read it. One
    /// `Arc` for both parts: every receiver of a topic clones the event.
    Message(Arc<Published>),
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

impl Topic {
    /// The channel or pattern.
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Topic::Channel(name) | Topic::Pattern(name) => name,
        }
    }
}

pub(super) struct Entry {
    /// Live subscriptions plus releases the actor has not counted yet: an
    /// entry stays (and stays subscribed) until its last release is counted.
    pub(super) refs: usize,
    /// Set once the server confirmed the current connection's SUBSCRIBE.
    pub(super) confirmed: bool,
    /// Every message, to each subscription that takes them all.
    pub(super) tx: broadcast::Sender<Event>,
    /// Keyed subscriptions, by key: each gets only the messages whose
    /// payload is its key or starts with its key and `:` (a fair lock's
    /// hand-off channel is one per process, its messages name the waiter:
    /// a hand-off wakes that waiter, not every waiter of the process).
    pub(super) keyed: HashMap<Box<[u8]>, mpsc::UnboundedSender<Event>>,
}

impl Entry {
    pub(super) fn new(capacity: usize) -> Entry {
        Entry {
            refs: 0,
            confirmed: false,
            tx: broadcast::channel(capacity.max(1)).0,
            keyed: HashMap::new(),
        }
    }

    /// Gives `event` to every subscription of the topic, keyed or not (a
    /// reconnection: anything may have been missed).
    pub(super) fn send_all(&self, event: Event) {
        for keyed in self.keyed.values() {
            let _ = keyed.send(event.clone());
        }
        let _ = self.tx.send(event);
    }

    /// Gives a message to the subscriptions that take every message, and
    /// to the keyed one its payload names.
    pub(super) fn deliver(&self, published: Arc<Published>) {
        if !self.keyed.is_empty() {
            let payload = &published.payload[..];
            let key = payload
                .iter()
                .position(|&b| b == b':')
                .map_or(payload, |at| &payload[..at]);
            if let Some(keyed) = self.keyed.get(key) {
                let _ = keyed.send(Event::Message(published.clone()));
            }
        }
        if self.tx.receiver_count() > 0 {
            let _ = self.tx.send(Event::Message(published));
        }
    }
}

/// How many events a slow subscription may fall behind before it sees a
/// `Lagged` error (which waiters treat as "something happened").
pub(crate) const EVENT_BUFFER: usize = 16;

pub(super) enum Request {
    /// Subscribe to all of these; one answer once all are confirmed.
    Subscribe(Vec<Arc<Topic>>, oneshot::Sender<Result<()>>),
    /// The list of releases is no longer empty: count it within the linger.
    Released,
}

/// How long releases (and the unsubscribes they lead to) may wait. Nobody
/// waits for them, and they come in bursts (a signal wakes many waiters,
/// which then all leave): handled a little later they neither compete with
/// the waiters still waking nor cost a command each. A subscribe takes them
/// along at once.
pub(super) const RELEASE_LINGER: Duration = Duration::from_millis(50);

/// What an actor (`actor.rs`, `sharded.rs`) serves: the registry, held
/// weakly (when the last client handle and subscription are gone, the
/// request channel closes and the actor exits), the requests, and its
/// command timeout and ping interval.
pub(super) struct Mailbox {
    pub(super) shared: Weak<Shared>,
    pub(super) inbox: mpsc::UnboundedReceiver<Request>,
    pub(super) timeout: Duration,
    pub(super) ping_every: Duration,
}

impl Mailbox {
    pub(super) fn into_parts(
        self,
    ) -> (
        Weak<Shared>,
        mpsc::UnboundedReceiver<Request>,
        Duration,
        Duration,
    ) {
        (self.shared, self.inbox, self.timeout, self.ping_every)
    }
}

pub(super) struct Shared {
    /// Keyed by shared topics: each subscription holds the same `Arc`.
    pub(super) registry: Mutex<HashMap<Arc<Topic>, Entry>>,
    /// Topics of dropped subscriptions, not yet counted down in the registry.
    pub(super) releases: Mutex<Vec<Arc<Topic>>>,
    pub(super) requests: mpsc::UnboundedSender<Request>,
    pub(super) timeout: Duration,
    /// Random per subscriber: names this connection in per-waiter channels.
    pub(super) id: u64,
    /// `id` as the 16 hex digits that name this process in a lock's waiting
    /// processes and its wake channel (made once: every release sends it).
    pub(super) process: String,
    /// Source of per-waiter sequence numbers, unique within `id`.
    pub(super) next_waiter: AtomicU64,
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The registry holds no invariant a panic elsewhere could break halfway.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Counts the releases down in the registry and removes the entries nobody
/// wants any more; returns their topics.
pub(super) fn count_releases(shared: &Weak<Shared>) -> Vec<Arc<Topic>> {
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

/// The subscribes of a batch, each waiting for its answer.
pub(super) type Answers = Vec<(Vec<Arc<Topic>>, oneshot::Sender<Result<()>>)>;

/// A batch of requests taken apart by [`take_batch`].
pub(super) struct Batch {
    /// Topics still wanted: to subscribe.
    pub(super) wanted: Vec<Arc<Topic>>,
    /// Topics nobody wants any more: to unsubscribe.
    pub(super) unwanted: Vec<Arc<Topic>>,
    pub(super) answers: Answers,
}

/// A batch taken apart: the releases counted, and every topic the batch or
/// the releases name split into those still wanted (to subscribe, again if
/// need be: subscribing is idempotent) and the rest (given up, perhaps
/// before their subscribe was even sent: to unsubscribe). What is sent is
/// decided by the registry now, not by the order of the requests. `None`
/// when the subscriber is gone.
pub(super) fn take_batch(shared: &Weak<Shared>, batch: Vec<Request>) -> Option<Batch> {
    let mut named = std::collections::HashSet::new();
    let mut answers = Vec::new();
    for request in batch {
        if let Request::Subscribe(topics, done) = request {
            named.extend(topics.iter().cloned());
            answers.push((topics, done));
        }
    }
    named.extend(count_releases(shared));
    let s = shared.upgrade()?;
    let registry = lock(&s.registry);
    let (wanted, unwanted) = named
        .into_iter()
        .partition(|topic| registry.contains_key(topic));
    Some(Batch {
        wanted,
        unwanted,
        answers,
    })
}

/// Marks every `wanted` topic the server did not refuse as confirmed, then
/// answers each subscribe: its first refused topic, named (so that an ACL
/// refusal says what is missing), or `Ok`.
pub(super) fn confirm_and_answer(
    shared: &Weak<Shared>,
    wanted: &[Arc<Topic>],
    refused: &HashMap<Arc<Topic>, redis::RedisError>,
    answers: Answers,
    timeout: Duration,
) {
    if let Some(s) = shared.upgrade() {
        let mut registry = lock(&s.registry);
        for topic in wanted.iter().filter(|t| !refused.contains_key(*t)) {
            if let Some(entry) = registry.get_mut(topic) {
                entry.confirmed = true;
            }
        }
    }
    for (topics, done) in answers {
        let answer = match topics.iter().find_map(|t| refused.get(t).map(|e| (t, e))) {
            Some((topic, e)) => Err(Error::from_redis(e.clone(), &[topic.bytes()], timeout)),
            None => Ok(()),
        };
        let _ = done.send(answer);
    }
}
