//! [`Client`]'s signals (layer 5, a facade): sending, listening, and
//! waiting for a signal with a timeout, over `primitives/signal`.

use std::time::Duration;

use crate::client::Client;
use crate::primitives::signal::listener::{Listener, Signal};
use crate::primitives::signal::{wait_once, Take};
use crate::vocab::error::Result;

impl Client {
    /// Sends `payload` to every current waiter on `name` and returns how many
    /// subscribers received it, as `PUBLISH` counts them: each connection
    /// subscribed to the name once — and a process's waiters share one
    /// connection, so 1,000 waiters in one process count 1 — plus each
    /// pattern subscription (per connection and pattern) that matched.
    /// Zero means nobody was listening: the signal is gone. The count is
    /// the primary's; waiters listening only on a replica at that moment are
    /// not counted but do hear it. On a Redis Cluster the signal is sent
    /// with `SPUBLISH` (sharded pub/sub) and the count is that of the node
    /// that serves the channel's slot.
    /// [`Client::waiters`] counts waiters.
    ///
    /// One `PUBLISH`: the cost does not grow with the number of waiters.
    ///
    /// Fails with [`Error::InvalidName`](crate::Error::InvalidName) for an
    /// empty name, one longer than [`MAX_NAME_LEN`](crate::limits::MAX_NAME_LEN)
    /// bytes, or one ending in a lock channel suffix (`:released`,
    /// `:retracted`).
    ///
    /// # Cancel safety
    /// If the future is dropped after the request was written, the signal
    /// may or may not have been sent; nothing else is left behind.
    pub async fn signal(&self, name: impl AsRef<[u8]>, payload: impl AsRef<[u8]>) -> Result<usize> {
        crate::primitives::signal::Signals(self.one_server(locks_only!("signals"))?)
            .signal(name.as_ref(), payload.as_ref())
            .await
    }

    /// How many latchkey waiters listen on `name` on the primary now (each
    /// waiter once, whichever process it is in); pattern listeners are not
    /// counted. These are the candidates of [`Client::signal_one`].
    ///
    /// Lists the waiters' channels (`PUBSUB CHANNELS`), which costs the
    /// server time in proportion to all channels subscribed on it: for
    /// monitoring, not for every signal.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn waiters(&self, name: impl AsRef<[u8]>) -> Result<usize> {
        crate::primitives::signal::Signals(self.one_server(locks_only!("signals"))?)
            .waiters(name.as_ref())
            .await
    }

    /// Sends `payload` to exactly one current waiter on `name`, picked at
    /// random; returns whether one got it (`false`: nobody waits, and
    /// nothing was sent).
    ///
    /// Pattern waiters are never candidates. See [`Listener`] ("Unicast")
    /// for who counts as waiting. The script lists the waiters' channels
    /// (`PUBSUB CHANNELS`), so its cost grows with the channels subscribed
    /// on the server, and Redis serves nobody else meanwhile (the figure for
    /// 10,000 waiters is in `bench/RESULTS.md`, "signals").
    ///
    /// # Cancel safety
    /// As [`Client::signal`]: dropped after the request was written, one
    /// waiter may or may not have got the signal.
    pub async fn signal_one(
        &self,
        name: impl AsRef<[u8]>,
        payload: impl AsRef<[u8]>,
    ) -> Result<bool> {
        crate::primitives::signal::Signals(self.one_server(locks_only!("signals"))?)
            .signal_one(name.as_ref(), payload.as_ref())
            .await
    }

    /// Subscribes to `names` and returns a [`Listener`] that hears every
    /// signal on any of them from now on. Returns once the subscriptions are
    /// confirmed (with replicas: by at least one server).
    ///
    /// Fails with [`Error::InvalidInput`](crate::Error::InvalidInput) for no
    /// names or a name given twice, [`Error::InvalidName`](crate::Error::InvalidName)
    /// as [`Client::signal`] does, and with [`Error::Unreachable`](crate::Error::Unreachable)
    /// or [`Error::Timeout`](crate::Error::Timeout) when no server can be
    /// subscribed to.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future gives up the subscriptions made so far.
    pub async fn listen(
        &self,
        names: impl IntoIterator<Item = impl AsRef<[u8]>>,
    ) -> Result<Listener> {
        Listener::open(
            self.one_server(locks_only!("signals"))?,
            owned(names),
            false,
        )
        .await
    }

    /// Subscribes to Redis glob `patterns` over signal names (`*`, `?`,
    /// `[abc]`, `\` escapes) and returns a [`Listener`]; each [`Signal`] it
    /// returns carries the name that matched. Pattern listeners hear
    /// broadcasts only, never [`Client::signal_one`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Client::listen`].
    pub async fn listen_patterns(
        &self,
        patterns: impl IntoIterator<Item = impl AsRef<[u8]>>,
    ) -> Result<Listener> {
        Listener::open(
            self.one_server(locks_only!("signals"))?,
            owned(patterns),
            true,
        )
        .await
    }

    /// Waits at most `timeout` (subscribing included) for a signal on
    /// `name`; [`Error::WaitTimedOut`](crate::Error::WaitTimedOut) when
    /// none came. It returns once it has unsubscribed (one round trip after
    /// the signal or the timeout, [`Listener::close`]): a [`Client::signal`]
    /// sent after it returned does not count it, so "send until someone
    /// hears" never hands a signal to a waiter that stopped listening.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future unsubscribes (in the background,
    /// shortly after: a `signal` in that instant may still count it and be
    /// lost, as with a dropped [`Listener`]). A signal that arrived
    /// but was not yet returned is lost with it (signals are
    /// fire-and-forget); keep a [`Listener`] to wait again without a gap.
    pub async fn wait(&self, name: impl AsRef<[u8]>, timeout: Duration) -> Result<Signal> {
        self.wait_any([name], timeout).await
    }

    /// Waits at most `timeout` for the first signal on any of `names`;
    /// [`Signal::name`] says which. [`Error::WaitTimedOut`](crate::Error::WaitTimedOut)
    /// (naming them, comma-separated) when none came.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Client::wait`].
    pub async fn wait_any<N: AsRef<[u8]>>(
        &self,
        names: impl IntoIterator<Item = N>,
        timeout: Duration,
    ) -> Result<Signal> {
        let names: Vec<Vec<u8>> = names.into_iter().map(|n| n.as_ref().to_vec()).collect();
        let signals = wait_once(
            self.one_server(locks_only!("signals"))?,
            names,
            false,
            Take::First,
            timeout,
        )
        .await?;
        first(signals)
    }

    /// Waits at most `timeout` until each of `names` has been signalled and
    /// returns the first signal of each, in the order of `names`. A name
    /// stops listening (and being a `signal_one` candidate) once it got its
    /// signal. [`Error::WaitTimedOut`](crate::Error::WaitTimedOut) when
    /// the timeout passed first. Returns once unsubscribed, as
    /// [`Client::wait`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future unsubscribes; the signals gathered
    /// so far are dropped with it.
    pub async fn wait_all<N: AsRef<[u8]>>(
        &self,
        names: impl IntoIterator<Item = N>,
        timeout: Duration,
    ) -> Result<Vec<Signal>> {
        let names: Vec<Vec<u8>> = names.into_iter().map(|n| n.as_ref().to_vec()).collect();
        wait_once(
            self.one_server(locks_only!("signals"))?,
            names,
            false,
            Take::Each,
            timeout,
        )
        .await
    }

    /// Waits at most `timeout` for a signal whose name matches the Redis
    /// glob `pattern`; [`Signal::name`] is the name that matched.
    /// [`Error::WaitTimedOut`](crate::Error::WaitTimedOut) (naming the
    /// pattern) when none came.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Client::wait`].
    pub async fn wait_pattern(
        &self,
        pattern: impl AsRef<[u8]>,
        timeout: Duration,
    ) -> Result<Signal> {
        let patterns = vec![pattern.as_ref().to_vec()];
        let signals = wait_once(
            self.one_server(locks_only!("signals"))?,
            patterns,
            true,
            Take::First,
            timeout,
        )
        .await?;
        first(signals)
    }
}

/// The one signal of a [`Take::First`] wait.
fn first(signals: Vec<Signal>) -> Result<Signal> {
    signals
        .into_iter()
        .next()
        .ok_or_else(|| crate::Error::Internal("a wait returned no signal".into()))
}

/// Names (or patterns) as the listener keeps them.
fn owned(names: impl IntoIterator<Item = impl AsRef<[u8]>>) -> Vec<Vec<u8>> {
    names.into_iter().map(|n| n.as_ref().to_vec()).collect()
}
