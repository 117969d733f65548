//! Signals: one process waits, another signals; over Redis pub/sub.
//!
//! What signals promise and what they do not (pub/sub is fire-and-forget)
//! is documented for users on [`Listener`](crate::Listener), the public face of this module;
//! the wire format is in `wire.rs` and `docs/protocol.md`.

pub(crate) mod listener;
pub(crate) mod wire;

use std::time::Duration;

use crate::transport::session::Session;
use crate::vocab::error::{Error, Result};
use crate::vocab::protocol::scripts;

crate::transport::session::session_view! {
    /// A session as the sender of signals.
    Signals
}

impl Signals<'_> {
    /// See [`Client::signal`](crate::Client::signal).
    pub(crate) async fn signal(&self, name: &[u8], payload: &[u8]) -> Result<usize> {
        wire::check_name(name)?;
        let channel = wire::broadcast_channel(self.prefix(), name);
        let message = wire::seal(wire::random_u64(), payload);
        // SPUBLISH on a cluster, where waiters SSUBSCRIBE (see the subscriber).
        let mut publish = redis::Cmd::new();
        publish
            .arg(self.publish_command())
            .arg(&channel)
            .arg(&message);
        let heard: i64 = self.query("PUBLISH", publish, &channel).await?;
        crate::vocab::metrics::signal_sent(false);
        usize::try_from(heard).map_err(|_| Error::Protocol(format!("PUBLISH returned {heard}")))
    }

    /// See [`Client::waiters`](crate::Client::waiters).
    pub(crate) async fn waiters(&self, name: &[u8]) -> Result<usize> {
        wire::check_name(name)?;
        self.refuse_on_cluster("counting waiters")?;
        let pattern = wire::waiters_pattern(self.prefix(), name);
        let mut list = redis::cmd("PUBSUB");
        list.arg("CHANNELS").arg(&pattern);
        let channels: Vec<Vec<u8>> = self.query("PUBSUB CHANNELS", list, &pattern).await?;
        Ok(channels.len())
    }

    /// See [`Client::signal_one`](crate::Client::signal_one).
    pub(crate) async fn signal_one(&self, name: &[u8], payload: &[u8]) -> Result<bool> {
        wire::check_name(name)?;
        self.refuse_on_cluster("signal_one")?;
        let prefix = self.prefix();
        let waiters = wire::waiters_pattern(prefix, name);
        // Lua's math.random is seeded the same way for every script call on
        // some Redis versions; a number from the client is random everywhere.
        // 48 bits: exact in a Lua number.
        let pick = (wire::random_u64() >> 16).to_string();
        let message = wire::seal(wire::random_u64(), payload);
        let heard: i64 = self
            .eval(
                "signal_one",
                &scripts::SIGNAL_ONE,
                &[],
                &[&waiters, pick.as_bytes(), &message],
            )
            .await?;
        if heard > 0 {
            crate::vocab::metrics::signal_sent(true);
        }
        Ok(heard > 0)
    }
}

impl Signals<'_> {
    /// Unicast and counting waiters list the waiters' channels with
    /// `PUBSUB CHANNELS`, which on a cluster sees one node's subscribers
    /// only: refused there rather than wrong.
    fn refuse_on_cluster(&self, what: &str) -> Result<()> {
        if self.is_cluster() {
            return Err(Error::InvalidInput(format!(
                "{what} is not supported on a Redis Cluster yet (it lists one node's subscribers only); broadcast signals work"
            )));
        }
        Ok(())
    }
}

/// What one wait takes from its listener.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Take {
    /// The first signal on any of the names (or patterns).
    First,
    /// The first signal of every name (or pattern), in their order.
    Each,
}

/// One wait ([`Client::wait`](crate::Client::wait) and its siblings): a
/// listener on `items` (patterns when `patterns`), what `take` says taken
/// from it within `timeout` (subscribing included), and the listener
/// closed before this returns, whatever the outcome: a wait that has
/// returned is not subscribed any more, so a `signal` sent after it counts
/// nobody for it (and the "send until someone hears" loop cannot hand its
/// signal to a waiter that has stopped listening).
pub(crate) async fn wait_once(
    session: &Session,
    items: Vec<Vec<u8>>,
    patterns: bool,
    take: Take,
    timeout: Duration,
) -> Result<Vec<listener::Signal>> {
    let started = std::time::Instant::now();
    let deadline = tokio::time::Instant::now() + timeout;
    let timed_out =
        |items: &[Vec<u8>]| crate::primitives::wait::timed_out(&items.join(&b","[..]), started);
    let opening = listener::Listener::open(session, items.clone(), patterns);
    let mut listener = match tokio::time::timeout_at(deadline, opening).await {
        Ok(Ok(listener)) => listener,
        failed => {
            // A subscribe given up (or refused) midway: settled, so that
            // what it may have subscribed is given up before we return.
            let subscribers: Vec<_> = std::iter::once(session.subscriber())
                .chain(session.replica_subscribers())
                .cloned()
                .collect();
            listener::settle(&subscribers).await;
            return match failed {
                Ok(Err(e)) => Err(e),
                _ => Err(timed_out(&items)),
            };
        }
    };
    let taking = async {
        match take {
            Take::First => vec![listener.recv().await],
            Take::Each => listener.recv_all().await,
        }
    };
    let got = tokio::time::timeout_at(deadline, taking).await;
    listener.close().await;
    got.map_err(|_| timed_out(&items))
}

/// Runs `wait` for at most `timeout`: [`Error::WaitTimedOut`] (naming
/// `names`, comma-separated) if it did not finish, the one timeout of every
/// bounded wait (`primitives/wait/`).
pub(crate) async fn within<T, N: AsRef<[u8]>>(
    names: &[N],
    timeout: Duration,
    wait: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    let started = std::time::Instant::now();
    match tokio::time::timeout(timeout, wait).await {
        Ok(result) => result,
        Err(_) => {
            let names: Vec<&[u8]> = names.iter().map(AsRef::as_ref).collect();
            Err(crate::primitives::wait::timed_out(
                &names.join(&b","[..]),
                started,
            ))
        }
    }
}
