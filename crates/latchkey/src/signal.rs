//! Signals: one process waits, another signals; over Redis pub/sub.
//!
//! ```no_run
//! # async fn demo() -> latchkey::Result<()> {
//! use std::time::Duration;
//! let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
//!
//! // Somewhere, a waiter:
//! let waiter = client.clone();
//! let waiting = tokio::spawn(async move { waiter.wait("cache-warm", Duration::from_secs(30)).await });
//!
//! // Elsewhere, the signal (to every waiter; `signal_one` picks one):
//! let heard_by = client.signal("cache-warm", b"v42").await?;
//! println!("{heard_by} waiter(s) heard it");
//! # let _ = waiting.await;
//! # Ok(()) }
//! ```
//!
//! # What you get
//! * [`Client::signal`] broadcasts to every current waiter on a name and
//!   returns how many subscribers (connections) received it;
//!   [`Client::signal_one`] hands it to exactly one current waiter, picked
//!   at random, or reports that nobody waits; [`Client::waiters`] counts
//!   the waiters on a name.
//! * [`Client::wait`], [`Client::wait_any`], [`Client::wait_all`] and
//!   [`Client::wait_pattern`] wait with a timeout; [`Client::listen`] and
//!   [`Client::listen_patterns`] return a [`Listener`] that is already
//!   subscribed when it is returned, so "listen, then start whatever will
//!   signal, then receive" cannot miss the signal.
//! * Thousands of waiters in one process share one subscriber connection
//!   (per server); a waiter that times out or is dropped unsubscribes.
//! * With replicas ([`ClientBuilder::replica`](crate::ClientBuilder::replica))
//!   waiters listen on every server, so a waiter still hears signals while
//!   its connection to the primary is down; each signal reaches it once.
//!
//! # What you do not get: pub/sub is fire-and-forget
//! Redis keeps no pub/sub message. A signal sent while nobody listens is
//! lost, and so is one sent while a waiter is reconnecting to every server
//! it listens on (with replicas, all of them at once). A waiter hears only
//! what is signalled after it subscribed. When a signal must not be lost —
//! "the migration is done" for a process that starts later — use a
//! persistent primitive instead (a latch or barrier, which keep their state
//! in a key), or pair the signal with state in Redis that the waiter checks
//! after subscribing.
//!
//! There is no `try_wait`: since nothing is kept, a wait that does not wait
//! could only see a signal published in the instant it listens, which is
//! almost never, whatever happened before. [`Listener::try_recv`] is the
//! honest form: it returns, without waiting, what arrived since the listener
//! was made.
//!
//! # Unicast
//! Every waiter on a name also subscribes to a channel of its own
//! (`P + "signal-one:" + len + ":" + name + ":" + waiter id`); `signal_one`
//! runs a script that lists those channels (`PUBSUB CHANNELS`) and publishes
//! to one of them, picked with a random number from the client, atomically.
//! Only waiters subscribed on the primary are candidates. If the chosen
//! waiter is cancelled at that very moment the signal is lost with it. A
//! waiter given several signals at once by `wait`/`wait_any` returns with one
//! of them and drops the rest; a [`Listener`] kept across calls buffers them.
//!
//! The channel layout and message format are in `docs/protocol.md`
//! ("Signals"); other programs may publish plain messages on the broadcast
//! channel, and waiters receive them as they are.

use std::time::Duration;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::listener::{Listener, Signal};
use crate::scripts;
use crate::signal_wire as wire;

impl Client {
    /// Sends `payload` to every current waiter on `name` and returns how many
    /// subscribers received it, as `PUBLISH` counts them: each connection
    /// subscribed to the name once — and a process's waiters share one
    /// connection, so 1,000 waiters in one process count 1 — plus each
    /// pattern subscription (per connection and pattern) that matched.
    /// Zero means nobody was listening: the signal is gone. The count is
    /// the primary's; waiters listening only on a replica at that moment are
    /// not counted but do hear it. [`Client::waiters`] counts waiters.
    ///
    /// One `PUBLISH`: the cost does not grow with the number of waiters.
    ///
    /// Fails with [`Error::InvalidName`] for an empty name, one longer than
    /// [`MAX_NAME_LEN`](crate::MAX_NAME_LEN) bytes, or one ending in a lock
    /// channel suffix (`:released`, `:retracted`).
    pub async fn signal(&self, name: impl AsRef<[u8]>, payload: impl AsRef<[u8]>) -> Result<usize> {
        let name = name.as_ref();
        wire::check_name(name)?;
        let channel = wire::broadcast_channel(self.prefix(), name);
        let message = wire::seal(wire::random_u64(), payload.as_ref());
        let mut publish = redis::cmd("PUBLISH");
        publish.arg(&channel).arg(&message);
        let heard: i64 = self.query("PUBLISH", publish, &channel).await?;
        usize::try_from(heard).map_err(|_| Error::Protocol(format!("PUBLISH returned {heard}")))
    }

    /// How many latchkey waiters listen on `name` on the primary now (each
    /// waiter once, whichever process it is in); pattern listeners are not
    /// counted. These are the candidates of [`Client::signal_one`].
    ///
    /// Lists the waiters' channels (`PUBSUB CHANNELS`), which costs the
    /// server time in proportion to all channels subscribed on it: for
    /// monitoring, not for every signal.
    pub async fn waiters(&self, name: impl AsRef<[u8]>) -> Result<usize> {
        let name = name.as_ref();
        wire::check_name(name)?;
        let pattern = wire::waiters_pattern(self.prefix(), name);
        let mut list = redis::cmd("PUBSUB");
        list.arg("CHANNELS").arg(&pattern);
        let channels: Vec<Vec<u8>> = self.query("PUBSUB CHANNELS", list, &pattern).await?;
        Ok(channels.len())
    }

    /// Sends `payload` to exactly one current waiter on `name`, picked at
    /// random; returns 1, or 0 when nobody waits (then nothing was sent).
    ///
    /// Pattern waiters are never candidates. See the [module docs](self)
    /// ("Unicast") for who counts as waiting. The script lists the waiters'
    /// channels, so its cost grows with the channels subscribed on the
    /// server (about 0.5 µs each; 5 ms with 10,000 waiters).
    pub async fn signal_one(&self, name: impl AsRef<[u8]>, payload: impl AsRef<[u8]>) -> Result<usize> {
        let name = name.as_ref();
        wire::check_name(name)?;
        let prefix = self.prefix();
        let waiters = wire::waiters_pattern(prefix, name);
        // Lua's math.random is seeded the same way for every script call on
        // some Redis versions; a number from the client is random everywhere.
        // 48 bits: exact in a Lua number.
        let pick = (wire::random_u64() >> 16).to_string();
        let message = wire::seal(wire::random_u64(), payload.as_ref());
        let heard: i64 = self
            .eval(
                "signal_one",
                &scripts::SIGNAL_ONE,
                &[],
                &[&waiters, pick.as_bytes(), &message],
            )
            .await?;
        Ok(usize::from(heard > 0))
    }

    /// Subscribes to `names` and returns a [`Listener`] that hears every
    /// signal on any of them from now on. Returns once the subscriptions are
    /// confirmed (with replicas: by at least one server).
    ///
    /// Fails with [`Error::InvalidInput`] for no names or a name given twice,
    /// [`Error::InvalidName`] as [`Client::signal`] does, and with
    /// [`Error::Unreachable`] or [`Error::Timeout`] when no server can be
    /// subscribed to.
    pub async fn listen<N: AsRef<[u8]>>(&self, names: impl IntoIterator<Item = N>) -> Result<Listener> {
        let names = names.into_iter().map(|n| n.as_ref().to_vec()).collect();
        Listener::open(self, names, false).await
    }

    /// Subscribes to Redis glob `patterns` over signal names (`*`, `?`,
    /// `[abc]`, `\` escapes) and returns a [`Listener`]; each [`Signal`] it
    /// returns carries the name that matched. Pattern listeners hear
    /// broadcasts only, never [`Client::signal_one`].
    pub async fn listen_patterns<P: AsRef<[u8]>>(&self, patterns: impl IntoIterator<Item = P>) -> Result<Listener> {
        let patterns = patterns.into_iter().map(|p| p.as_ref().to_vec()).collect();
        Listener::open(self, patterns, true).await
    }

    /// Waits at most `timeout` (subscribing included) for a signal on
    /// `name`; `Ok(None)` when none came.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future unsubscribes.
    pub async fn wait(&self, name: impl AsRef<[u8]>, timeout: Duration) -> Result<Option<Signal>> {
        self.wait_any([name], timeout).await
    }

    /// Waits at most `timeout` for the first signal on any of `names`;
    /// [`Signal::name`] says which.
    pub async fn wait_any<N: AsRef<[u8]>>(
        &self,
        names: impl IntoIterator<Item = N>,
        timeout: Duration,
    ) -> Result<Option<Signal>> {
        within(timeout, async {
            let mut listener = self.listen(names).await?;
            Ok(listener.recv().await)
        })
        .await
    }

    /// Waits at most `timeout` until each of `names` has been signalled and
    /// returns the first signal of each, in the order of `names`. A name
    /// stops listening (and being a `signal_one` candidate) once it got its
    /// signal. `Ok(None)` when the timeout passed first.
    pub async fn wait_all<N: AsRef<[u8]>>(
        &self,
        names: impl IntoIterator<Item = N>,
        timeout: Duration,
    ) -> Result<Option<Vec<Signal>>> {
        within(timeout, async {
            let mut listener = self.listen(names).await?;
            Ok(listener.recv_all().await)
        })
        .await
    }

    /// Waits at most `timeout` for a signal whose name matches the Redis
    /// glob `pattern`; [`Signal::name`] is the name that matched.
    pub async fn wait_pattern(&self, pattern: impl AsRef<[u8]>, timeout: Duration) -> Result<Option<Signal>> {
        within(timeout, async {
            let mut listener = self.listen_patterns([pattern]).await?;
            Ok(listener.recv().await)
        })
        .await
    }
}

/// Runs `wait` for at most `timeout`: `Ok(None)` if it did not finish.
async fn within<T>(timeout: Duration, wait: impl std::future::Future<Output = Result<T>>) -> Result<Option<T>> {
    match tokio::time::timeout(timeout, wait).await {
        Ok(result) => result.map(Some),
        Err(_) => Ok(None),
    }
}
