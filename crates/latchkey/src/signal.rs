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
//! let receivers = client.signal("cache-warm", b"v42").await?;
//! println!("{receivers} subscriber connection(s) got it");
//! # let _ = waiting.await;
//! # Ok(()) }
//! ```
//!
//! What signals promise and what they do not (pub/sub is fire-and-forget)
//! is documented for users on [`Listener`], the public face of this module;
//! the wire format is in `signal_wire.rs` and `docs/protocol.md`.

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
        crate::metrics::signal_sent(false);
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
    /// random; returns whether one did (`false`: nobody waits, and nothing
    /// was sent).
    ///
    /// Pattern waiters are never candidates. See [`Listener`] ("Unicast")
    /// for who counts as waiting. The script lists the waiters'
    /// channels (`PUBSUB CHANNELS`), so its cost grows with the channels
    /// subscribed on the server, and Redis serves nobody else meanwhile (the
    /// figure for 10,000 waiters is in `bench/RESULTS.md`, "signals").
    pub async fn signal_one(
        &self,
        name: impl AsRef<[u8]>,
        payload: impl AsRef<[u8]>,
    ) -> Result<bool> {
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
        if heard > 0 {
            crate::metrics::signal_sent(true);
        }
        Ok(heard > 0)
    }

    /// Subscribes to `names` and returns a [`Listener`] that hears every
    /// signal on any of them from now on. Returns once the subscriptions are
    /// confirmed (with replicas: by at least one server).
    ///
    /// Fails with [`Error::InvalidInput`] for no names or a name given twice,
    /// [`Error::InvalidName`] as [`Client::signal`] does, and with
    /// [`Error::Unreachable`] or [`Error::Timeout`] when no server can be
    /// subscribed to.
    pub async fn listen<N: AsRef<[u8]>>(
        &self,
        names: impl IntoIterator<Item = N>,
    ) -> Result<Listener> {
        let names = names.into_iter().map(|n| n.as_ref().to_vec()).collect();
        Listener::open(self, names, false).await
    }

    /// Subscribes to Redis glob `patterns` over signal names (`*`, `?`,
    /// `[abc]`, `\` escapes) and returns a [`Listener`]; each [`Signal`] it
    /// returns carries the name that matched. Pattern listeners hear
    /// broadcasts only, never [`Client::signal_one`].
    pub async fn listen_patterns<P: AsRef<[u8]>>(
        &self,
        patterns: impl IntoIterator<Item = P>,
    ) -> Result<Listener> {
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
    pub async fn wait_pattern(
        &self,
        pattern: impl AsRef<[u8]>,
        timeout: Duration,
    ) -> Result<Option<Signal>> {
        within(timeout, async {
            let mut listener = self.listen_patterns([pattern]).await?;
            Ok(listener.recv().await)
        })
        .await
    }
}

/// Runs `wait` for at most `timeout`: `Ok(None)` if it did not finish.
async fn within<T>(
    timeout: Duration,
    wait: impl std::future::Future<Output = Result<T>>,
) -> Result<Option<T>> {
    match tokio::time::timeout(timeout, wait).await {
        Ok(result) => result.map(Some),
        Err(_) => Ok(None),
    }
}
