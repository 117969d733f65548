//! [`Listener`]: an open ear for signals on some names or patterns.
//!
//! ```no_run
//! # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
//! use std::time::Duration;
//! // Listen first, then start what will signal: nothing can be missed.
//! let mut listener = client.listen(["build-done"]).await?;
//! // ... start the build ...
//! match listener.recv_timeout(Duration::from_secs(60)).await {
//!     Some(signal) => println!("build says {:?}", String::from_utf8_lossy(&signal.payload)),
//!     None => println!("no word from the build"),
//! }
//! # Ok(()) }
//! ```
//!
//! A listener on names holds, per name and per server, a subscription to the
//! name's broadcast channel and one to its own waiter channel (which makes it
//! a candidate for [`Client::signal_one`]); a listener on patterns holds one
//! pattern subscription per pattern and server. All of them go through the
//! client's shared subscriber connections. Dropping the listener gives them
//! up (the last user of a channel unsubscribes it on the server).
//!
//! With replicas ([`ClientBuilder::replica`](crate::ClientBuilder::replica))
//! every message arrives once per server; the listener passes on the first
//! copy and drops the others (see [`Recent`]).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::session::Session;
use crate::signal_wire as wire;
use crate::subscriber::{Event, Subscriber, Subscription, Topic, EVENT_BUFFER};

/// A signal received by a waiter.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Signal {
    /// The signal's name: the one waited for or, for a pattern, the name
    /// that matched.
    pub name: Vec<u8>,
    /// What the sender sent (may be empty).
    pub payload: Vec<u8>,
    /// True when it came from [`Client::signal_one`] (to this waiter alone),
    /// false for a broadcast.
    pub unicast: bool,
}

/// Event buffer of a waiter channel: only its own listener reads it, and a
/// waiter usually wants one message. Two, so that a reconnect notice right
/// behind a message does not push the message out.
const WAITER_BUFFER: usize = 2;

/// How many recently delivered messages a listener remembers to drop their
/// copies from other servers (or overlapping subscriptions).
const RECENT: usize = 64;

/// Signals from one or more names or patterns. Made by [`Client::listen`]
/// and [`Client::listen_patterns`]; [`Client::wait`] and its siblings make
/// one for a single wait.
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// use std::time::Duration;
/// // Listen first, then start what will signal: nothing can be missed.
/// let mut listener = client.listen(["build-done"]).await?;
/// // ... start the build ...
/// match listener.recv_timeout(Duration::from_secs(60)).await {
///     Some(signal) => println!("build says {:?}", String::from_utf8_lossy(&signal.payload)),
///     None => println!("no word from the build"),
/// }
/// # Ok(()) }
/// ```
///
/// # Signals: what you get
/// * [`Client::signal`] broadcasts to every current waiter on a name and
///   returns how many subscribers (connections) received it;
///   [`Client::signal_one`] hands it to exactly one current waiter, picked
///   at random, or reports that nobody waits; [`Client::waiters`] counts
///   the waiters on a name.
/// * [`Client::wait`], [`Client::wait_any`], [`Client::wait_all`] and
///   [`Client::wait_pattern`] wait with a timeout; [`Client::listen`] and
///   [`Client::listen_patterns`] return a listener that is already
///   subscribed when it is returned, so "listen, then start whatever will
///   signal, then receive" cannot miss the signal.
/// * Thousands of waiters in one process share one subscriber connection
///   (per server); a waiter that times out or is dropped unsubscribes.
/// * With replicas ([`ClientBuilder::replica`](crate::ClientBuilder::replica))
///   waiters listen on every server, so a waiter still hears signals while
///   its connection to the primary is down; each signal reaches it once.
///
/// # What you do not get: pub/sub is fire-and-forget
/// Redis keeps no pub/sub message. A signal sent while nobody listens is
/// lost, and so is one sent while a waiter is reconnecting to every server
/// it listens on (with replicas, all of them at once). A waiter hears only
/// what is signalled after it subscribed. When a signal must not be lost —
/// "the migration is done" for a process that starts later — use a
/// persistent primitive instead (a latch or barrier, which keep their state
/// in a key), or pair the signal with state in Redis that the waiter checks
/// after subscribing.
///
/// There is no `try_wait`: since nothing is kept, a wait that does not wait
/// could only see a signal published in the instant it listens, which is
/// almost never, whatever happened before. [`Listener::try_recv`] is the
/// honest form: it returns, without waiting, what arrived since the listener
/// was made.
///
/// # Unicast
/// Every waiter on a name also subscribes to a channel of its own
/// (`P + "signal-one:" + len + ":" + name + ":" + waiter id`); `signal_one`
/// runs a script that lists those channels (`PUBSUB CHANNELS`) and publishes
/// to one of them, picked with a random number from the client, atomically.
/// Only waiters subscribed on the primary are candidates. If the chosen
/// waiter is cancelled at that very moment the signal is lost with it. A
/// waiter given several signals at once by `wait`/`wait_any` returns with one
/// of them and drops the rest; a `Listener` kept across calls buffers them.
///
/// The channel layout and message format are in `docs/protocol.md`
/// ("Signals"); other programs may publish plain messages on the broadcast
/// channel, and waiters receive them as they are.
pub struct Listener {
    /// The key prefix, to tell the name in a pattern match (patterns only).
    prefix: Option<Box<[u8]>>,
    watches: Vec<Watch>,
    subs: Vec<Sub>,
    /// Servers whose subscriptions are still being confirmed (with replicas
    /// only: the listener starts hearing as soon as one server confirmed).
    joining: Vec<Joining>,
    /// Only when a message can arrive twice: with replicas, or through two
    /// patterns that match the same name. (A name's two channels never carry
    /// the same message, and names in one listener are distinct.)
    recent: Option<Recent>,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what: Vec<_> = self
            .watches
            .iter()
            .map(|w| String::from_utf8_lossy(&w.what))
            .collect();
        f.debug_struct("Listener")
            .field("watching", &what)
            .field("subscriptions", &self.subs.len())
            .finish()
    }
}

/// One name or pattern the listener was asked to watch.
struct Watch {
    what: Box<[u8]>,
    pattern: bool,
    /// For [`Listener::recv_all`]: the first signal this watch got.
    got: Option<Signal>,
}

/// One subscription on one server.
struct Sub {
    subscription: Subscription,
    watch: usize,
    unicast: bool,
    /// Stable number of (server, subscription kind) for de-duplication.
    source: u32,
}

struct Joining {
    server: usize,
    rx: oneshot::Receiver<Result<Vec<Subscription>>>,
}

/// Which subscription of a server serves which watch.
#[derive(Clone, Copy)]
struct Slot {
    watch: usize,
    unicast: bool,
}

enum Got {
    Event(usize, Event),
    Joined(usize, Result<Vec<Subscription>>),
}

impl Listener {
    /// Subscribes to `items` (names, or patterns when `patterns`) on every
    /// server of `client`; returns once at least one server confirmed.
    pub(crate) async fn open(
        client: &Session,
        items: Vec<Vec<u8>>,
        patterns: bool,
    ) -> Result<Listener> {
        if items.is_empty() {
            return Err(Error::InvalidInput(
                "nothing to wait for: no names given".into(),
            ));
        }
        for (i, item) in items.iter().enumerate() {
            if patterns {
                wire::check_pattern(item)?;
            } else {
                wire::check_name(item)?;
            }
            if items[..i].contains(item) {
                return Err(Error::InvalidInput(format!(
                    "{:?} is given twice",
                    String::from_utf8_lossy(item)
                )));
            }
        }
        let prefix = client.prefix();
        let primary = client.subscriber();
        let waiter_id = primary.new_waiter_id();
        let mut topics = Vec::new();
        let mut slots = Vec::new();
        for (watch, item) in items.iter().enumerate() {
            if patterns {
                topics.push((
                    Topic::Pattern(wire::broadcast_pattern(prefix, item)),
                    EVENT_BUFFER,
                ));
                slots.push(Slot {
                    watch,
                    unicast: false,
                });
            } else {
                topics.push((
                    Topic::Channel(wire::broadcast_channel(prefix, item)),
                    EVENT_BUFFER,
                ));
                slots.push(Slot {
                    watch,
                    unicast: false,
                });
                let own = wire::waiter_channel(prefix, item, &waiter_id);
                topics.push((Topic::Channel(own), WAITER_BUFFER));
                slots.push(Slot {
                    watch,
                    unicast: true,
                });
            }
        }
        let mut listener = Listener {
            prefix: patterns.then(|| prefix.into()),
            watches: items
                .into_iter()
                .map(|what| Watch {
                    what: what.into_boxed_slice(),
                    pattern: patterns,
                    got: None,
                })
                .collect(),
            subs: Vec::with_capacity(slots.len()),
            joining: Vec::new(),
            recent: None,
        };
        let replicas = client.replica_subscribers();
        if !replicas.is_empty() || (patterns && listener.watches.len() > 1) {
            listener.recent = Some(Recent::default());
        }
        if replicas.is_empty() {
            let subscriptions = primary.subscribe_many(topics).await?;
            listener.add(0, &slots, subscriptions);
            return Ok(listener);
        }
        // Each server on its own task: one that is down (its subscribe
        // fails only after the command timeout) must not hold up the others.
        // A task whose listener is gone drops its subscriptions.
        let servers = std::iter::once(primary).chain(replicas.iter());
        for (server, subscriber) in servers.enumerate() {
            let (tx, rx) = oneshot::channel();
            let subscriber: Subscriber = subscriber.clone();
            let topics = topics.clone();
            tokio::spawn(async move {
                let _ = tx.send(subscriber.subscribe_many(topics).await);
            });
            listener.joining.push(Joining { server, rx });
        }
        let mut first_error = None;
        while listener.subs.is_empty() {
            if listener.joining.is_empty() {
                return Err(
                    first_error.unwrap_or_else(|| Error::Protocol("no server to listen on".into()))
                );
            }
            if let Got::Joined(server, Err(e)) = listener.next_event().await {
                tracing::debug!(server, error = %e, "cannot listen for signals on one server");
                first_error.get_or_insert(e);
            }
        }
        Ok(listener)
    }

    /// Whether the listener hears signals now: at least one server has
    /// confirmed its subscriptions on its current connection. False while
    /// every connection it listens on is down or being re-established
    /// (signals sent meanwhile are lost). A caller whose wait ends without a
    /// signal can tell "nothing was signalled" from "we could not hear":
    /// the `latchkey wait` command reports the latter as Redis unavailable,
    /// not as a timeout.
    pub fn is_subscribed(&self) -> bool {
        self.subs.iter().any(|sub| sub.subscription.is_confirmed())
    }

    /// The next signal, waiting as long as it takes.
    ///
    /// A listener passes on each signal once, also when it hears it from
    /// several servers or through several of its patterns. Signals that
    /// arrive while nobody calls `recv` wait in a small buffer (16 per
    /// broadcast channel or pattern, 2 for the listener's own unicast
    /// channel; beyond that the oldest are dropped).
    ///
    /// # Cancel safety
    /// Cancel safe: a signal is never lost by dropping the future.
    pub async fn recv(&mut self) -> Signal {
        loop {
            if let Some(signal) = self.next_signal(false).await {
                return signal;
            }
        }
    }

    /// The next signal, or `None` when `timeout` passes first.
    pub async fn recv_timeout(&mut self, timeout: Duration) -> Option<Signal> {
        tokio::time::timeout(timeout, self.recv()).await.ok()
    }

    /// A signal that has already arrived (since the listener was made) and
    /// not yet been received, without waiting; `None` if there is none.
    ///
    /// This is the only honest "try": pub/sub keeps nothing, so there is no
    /// way to ask Redis whether a signal *was* sent. Keep a listener to know.
    pub fn try_recv(&mut self) -> Option<Signal> {
        loop {
            let got = self.next_event_now()?;
            if let Some(signal) = self.handle(got, false) {
                return Some(signal);
            }
        }
    }

    /// Waits until every name (or pattern) of the listener has had a signal,
    /// and returns the first signal of each, in the order they were given.
    ///
    /// A name that got its signal stops listening at once (it is no longer a
    /// candidate for [`Client::signal_one`]). One signal whose name matches
    /// two patterns satisfies both.
    ///
    /// # Cancel safety
    /// Cancel safe: what was collected is kept, and a later call goes on
    /// from there. Once it returned, the listener hears nothing more.
    pub async fn recv_all(&mut self) -> Vec<Signal> {
        while self.watches.iter().any(|w| w.got.is_none()) {
            self.next_signal(true).await;
        }
        self.watches.iter().filter_map(|w| w.got.clone()).collect()
    }

    fn add(&mut self, server: usize, slots: &[Slot], subscriptions: Vec<Subscription>) {
        for (i, (slot, subscription)) in slots.iter().zip(subscriptions).enumerate() {
            // With `recv_all` a watch may be done before this server joined.
            if self.watches[slot.watch].got.is_some() {
                continue;
            }
            self.subs.push(Sub {
                subscription,
                watch: slot.watch,
                unicast: slot.unicast,
                source: (server * slots.len() + i) as u32,
            });
        }
    }

    /// Waits for one event and handles it; a signal if it was one.
    async fn next_signal(&mut self, all: bool) -> Option<Signal> {
        let got = self.next_event().await;
        self.handle(got, all)
    }

    /// The slot layout of one server (the same for every server).
    fn slots(&self) -> Vec<Slot> {
        let mut slots = Vec::with_capacity(self.watches.len() * 2);
        for (watch, w) in self.watches.iter().enumerate() {
            slots.push(Slot {
                watch,
                unicast: false,
            });
            if !w.pattern {
                slots.push(Slot {
                    watch,
                    unicast: true,
                });
            }
        }
        slots
    }

    /// The next event of any subscription, or a server that joined (whose
    /// subscriptions are then added; the server's number is returned).
    async fn next_event(&mut self) -> Got {
        // The common shapes without boxing: one name on one server (its
        // broadcast and waiter channel), or one pattern.
        if self.joining.is_empty() {
            match self.subs.as_mut_slice() {
                [only] => return Got::Event(0, only.subscription.recv().await),
                [first, second] => {
                    // Biased: a broadcast (first) wakes many waiters at once;
                    // each then need not look at its own channel. A waiter
                    // channel is still read once the broadcasts are.
                    return tokio::select! {
                        biased;
                        event = first.subscription.recv() => Got::Event(0, event),
                        event = second.subscription.recv() => Got::Event(1, event),
                    };
                }
                _ => {}
            }
        }
        let got = {
            let mut waiting: Vec<Pin<Box<dyn Future<Output = Got> + Send + '_>>> =
                Vec::with_capacity(self.subs.len() + self.joining.len());
            for (i, sub) in self.subs.iter_mut().enumerate() {
                waiting.push(Box::pin(async move {
                    Got::Event(i, sub.subscription.recv().await)
                }));
            }
            for (k, joining) in self.joining.iter_mut().enumerate() {
                waiting.push(Box::pin(async move {
                    let result = (&mut joining.rx).await.unwrap_or_else(|_| {
                        Err(Error::Internal(
                            "a subscribing task ended without an answer".into(),
                        ))
                    });
                    Got::Joined(k, result)
                }));
            }
            if waiting.is_empty() {
                // Nothing to listen to (everything of `recv_all` is done).
                return std::future::pending().await;
            }
            futures_util::future::select_all(waiting).await.0
        };
        match got {
            Got::Joined(k, result) => self.joined(k, result),
            event => event,
        }
    }

    fn joined(&mut self, k: usize, result: Result<Vec<Subscription>>) -> Got {
        let server = self.joining.swap_remove(k).server;
        match result {
            Ok(subscriptions) => {
                let slots = self.slots();
                self.add(server, &slots, subscriptions);
                Got::Joined(server, Ok(Vec::new()))
            }
            Err(e) => Got::Joined(server, Err(e)),
        }
    }

    /// Like [`Listener::next_event`], but only what is there already.
    fn next_event_now(&mut self) -> Option<Got> {
        for k in 0..self.joining.len() {
            match self.joining[k].rx.try_recv() {
                Ok(result) => return Some(self.joined(k, result)),
                Err(oneshot::error::TryRecvError::Closed) => {
                    let e = Error::Internal("a subscribing task ended without an answer".into());
                    return Some(self.joined(k, Err(e)));
                }
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
        }
        for (i, sub) in self.subs.iter_mut().enumerate() {
            if let Some(event) = sub.subscription.recv().now_or_never() {
                return Some(Got::Event(i, event));
            }
        }
        None
    }

    /// Turns an event into a signal, or `None` (not a signal, or a copy).
    /// With `all` (for `recv_all`), a signal satisfies its watch, whose
    /// subscriptions are then given up.
    fn handle(&mut self, got: Got, all: bool) -> Option<Signal> {
        let Got::Event(i, Event::Message(message)) = got else {
            // Reconnects and lock wake-ups mean nothing to a signal waiter:
            // pub/sub keeps nothing, so there is nothing to re-check.
            return None;
        };
        let Sub {
            watch: w,
            unicast,
            source,
            ..
        } = self.subs[i];
        let watch = &self.watches[w];
        let (channel, payload) = (&message.channel, &message.payload);
        let name = if watch.pattern {
            let prefix = self.prefix.as_deref().unwrap_or_default();
            wire::name_of_broadcast_channel(prefix, channel)?.to_vec()
        } else {
            watch.what.to_vec()
        };
        let (id, body) = wire::open(payload);
        let copy = match (&mut self.recent, id) {
            (None, _) => false,
            (Some(recent), Some(id)) => recent.seen_id(id),
            (Some(recent), None) => {
                recent.seen_foreign(wire::fingerprint(channel, payload), source)
            }
        };
        // `recv_all` takes the first signal of every watch: the same signal
        // may satisfy two patterns, and a watch that is done hears nothing.
        if copy && !all {
            return None;
        }
        let signal = Signal {
            name,
            payload: body.to_vec(),
            unicast,
        };
        if !copy {
            crate::metrics::signal_received(unicast);
        }
        if all {
            if self.watches[w].got.is_none() {
                self.watches[w].got = Some(signal.clone());
            }
            self.subs.retain(|s| s.watch != w);
        }
        Some(signal)
    }
}

/// What a listener delivered lately, to drop the copies that arrive from the
/// other servers (or through overlapping names and patterns).
///
/// A latchkey message carries a random 64-bit id: a second message with the
/// same id is a copy. A message from another tool carries none; it is known
/// by a hash of channel and payload, and a copy is one that arrives through
/// a *source* (server and subscription) that has not yet delivered that
/// fingerprint, so two identical messages sent on purpose are both passed on
/// (each source delivers both, and the copies pair up in order).
#[derive(Default)]
struct Recent {
    entries: VecDeque<Seen>,
}

struct Seen {
    key: u64,
    enveloped: bool,
    sources: Vec<u32>,
}

impl Recent {
    /// True if `id` was delivered before; remembers it otherwise.
    fn seen_id(&mut self, id: u64) -> bool {
        if self.entries.iter().any(|e| e.enveloped && e.key == id) {
            return true;
        }
        self.remember(Seen {
            key: id,
            enveloped: true,
            sources: Vec::new(),
        });
        false
    }

    /// True if this is a copy of a foreign message delivered before through
    /// another source; remembers it otherwise.
    fn seen_foreign(&mut self, fingerprint: u64, source: u32) -> bool {
        let earlier = self
            .entries
            .iter_mut()
            .find(|e| !e.enveloped && e.key == fingerprint && !e.sources.contains(&source));
        if let Some(earlier) = earlier {
            earlier.sources.push(source);
            return true;
        }
        self.remember(Seen {
            key: fingerprint,
            enveloped: false,
            sources: vec![source],
        });
        false
    }

    fn remember(&mut self, seen: Seen) {
        if self.entries.len() == RECENT {
            self.entries.pop_front();
        }
        self.entries.push_back(seen);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_recognised() {
        let mut recent = Recent::default();
        assert!(!recent.seen_id(1));
        assert!(recent.seen_id(1));
        assert!(!recent.seen_id(2));
        // Foreign: the copy from source 1 pairs with the delivery from 0; a
        // second identical message from 0 is new, and so on.
        assert!(!recent.seen_foreign(9, 0));
        assert!(recent.seen_foreign(9, 1));
        assert!(!recent.seen_foreign(9, 0));
        assert!(!recent.seen_foreign(9, 0));
        assert!(recent.seen_foreign(9, 1));
        assert!(recent.seen_foreign(9, 1));
        assert!(!recent.seen_foreign(9, 1));
    }
}
