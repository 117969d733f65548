//! [`Listener`]: an open ear for signals on some names or patterns.
//!
//! User docs (example, what signals promise) are on the type.
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
//!
//! The module is split along its seams: `open.rs` chooses the channels and
//! subscribes on every server, `merge.rs` waits on all subscriptions at once
//! and turns events into signals, `recent.rs` drops the copies that arrive
//! more than once. This file is the public API.

use std::time::Duration;

use self::merge::{Joining, Sub, Watch};
use self::recent::Recent;
// The facade, for the doc links only (the listener is made by `open.rs`).
#[cfg(doc)]
use crate::Client;

mod merge;
mod open;
mod recent;

/// A signal received by a waiter.
///
/// Sent by [`Client::signal`] (to every waiter of a name) or
/// [`Client::signal_one`] (to one); received by [`Client::wait`] and its
/// siblings, or by a [`Listener`]. What signals promise, and what they do
/// not (pub/sub is fire-and-forget), is on [`Listener`].
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
///
/// // Somewhere, a waiter:
/// let waiter = client.clone();
/// let waiting = tokio::spawn(async move { waiter.wait("cache-warm", Duration::from_secs(30)).await });
///
/// // Elsewhere, the signal (to every waiter; `signal_one` picks one):
/// let receivers = client.signal("cache-warm", b"v42").await?;
/// println!("{receivers} subscriber connection(s) got it");
/// # let _ = waiting.await;
/// # Ok(()) }
/// ```
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
///     Ok(signal) => println!("build says {:?}", String::from_utf8_lossy(&signal.payload)),
///     Err(latchkey::Error::WaitTimedOut { .. }) => println!("no word from the build"),
///     Err(e) => return Err(e),
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
    /// The subscribers it listens through (the primary's, the replicas'),
    /// for [`Listener::close`].
    subscribers: Vec<crate::transport::subscriber::Subscriber>,
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

impl Listener {
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
    /// Cancel safe: dropping the future at any await point (a `select!`
    /// branch that lost, a timeout) loses no signal, and the listener stays
    /// subscribed and usable. `recv` only awaits receivers that keep their
    /// message while nobody takes it (each subscription's buffer and, with
    /// replicas, the answer of a server still joining), and what it does
    /// with a message it took happens without a further await. A signal that
    /// arrived while the dropped future waited is returned by the next
    /// `recv`, `recv_timeout` or `try_recv`, so `recv` can be called afresh
    /// on every turn of a `select!` loop.
    pub async fn recv(&mut self) -> Signal {
        loop {
            if let Some(signal) = self.next_signal(false).await {
                return signal;
            }
        }
    }

    /// The next signal, or [`Error::WaitTimedOut`](crate::Error::WaitTimedOut)
    /// (naming the listener's names) when `timeout` passes first: the one
    /// timeout of every bounded wait.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`recv`](Listener::recv): whether the timeout passes
    /// or the future is dropped, no signal is lost. One that arrives after
    /// the last look is kept for the next call, and a timed-out call leaves
    /// the listener subscribed, ready to be called again.
    pub async fn recv_timeout(&mut self, timeout: Duration) -> crate::Result<Signal> {
        let names: Vec<Box<[u8]>> = self.watches.iter().map(|w| w.what.clone()).collect();
        crate::primitives::signal::within(&names, timeout, async { Ok(self.recv().await) }).await
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
    /// Cancel safe: each signal collected is kept in the listener the moment
    /// it is taken, and its name is given up at once, so dropping the future
    /// loses nothing: a later call goes on from there, hears only the names
    /// still missing, and returns the first signal of every name, including
    /// those collected by the dropped call. Once it returned, the listener
    /// hears nothing more; a further `recv_all` returns the same signals
    /// without waiting.
    pub async fn recv_all(&mut self) -> Vec<Signal> {
        while self.watches.iter().any(|w| w.got.is_none()) {
            self.next_signal(true).await;
        }
        self.watches.iter().filter_map(|w| w.got.clone()).collect()
    }

    /// Stops listening, and returns once the servers have been told: a
    /// signal sent after `close` returns neither reaches this listener nor
    /// is counted by [`Client::signal`] (a dropped listener gives its
    /// subscriptions up a little later, in the background, so a `signal`
    /// right after the drop may still count it, and be lost). Every
    /// [`Client::wait`] closes its listener this way before it returns.
    /// Bounded by the client's command timeout; a server that cannot be
    /// reached has no subscription to give up.
    ///
    /// # Cancel safety
    /// Cancel safe: the subscriptions are given up either way (dropped,
    /// they are unsubscribed in the background, as for a dropped listener).
    pub async fn close(self) {
        let subscribers = self.subscribers.clone();
        drop(self);
        settle(&subscribers).await;
    }
}

/// Waits until each of `subscribers` has given up the subscriptions
/// dropped so far (see `Subscriber::settle`), all at once. A failure is
/// logged only: a connection that is down has no subscriptions left.
pub(crate) async fn settle(subscribers: &[crate::transport::subscriber::Subscriber]) {
    let settled = subscribers.iter().map(|s| s.settle());
    for result in futures_util::future::join_all(settled).await {
        if let Err(e) = result {
            tracing::debug!(error = %e, "giving up a listener's subscriptions was not confirmed");
        }
    }
}
