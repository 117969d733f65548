//! [`Redlock`]: one lock over N independent Redis instances, held while a
//! majority of them agree (layer 5, a facade over the Redlock backend).
//!
//! User docs (example, the algorithm) are on the type.

use std::time::Duration;

use crate::backend::redlock::Group;
use crate::backend::Backend;
use crate::client::Client;
use crate::primitives::lock::Lock;
use crate::primitives::multi::MultiLock;
use crate::transport::builder::ClientBuilder;
use crate::vocab::error::{Error, Result};

pub use crate::backend::redlock::{Fencing, MAX_INSTANCE_TIMEOUT, MIN_INSTANCE_TIMEOUT};

/// A lock service over N independent Redis instances (Redlock). Cheap to
/// clone; clones share connections, the local wait queues and the
/// reconnection of instances that were down at connect time.
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let redlock = latchkey::Redlock::connect(&[
///     "redis://127.0.0.1:7001/",
///     "redis://127.0.0.1:7002/",
///     "redis://127.0.0.1:7003/",
/// ])
/// .await?;
/// // The same `Lock`, guard, watchdog, lost() and fencing as `Client::lock`:
/// let lock = redlock.lock("invoices", Duration::from_secs(10))?.with_watchdog();
/// let guard = lock.acquire_until(Duration::from_secs(5)).await?;
/// tokio::select! {
///     _ = guard.lost() => eprintln!("lost the lock: stop touching the invoices"),
///     _ = async { /* write, passing guard.fencing_token().await? */ } => {}
/// }
/// let outcome = guard.release().await?; // Owned: a majority confirmed
/// # Ok(()) }
/// ```
///
/// The algorithm is the one on redis.io ("Distributed Locks with Redis") and
/// in antirez's reference code; `docs/redlock.md` describes it as
/// implemented here, with the timeouts chosen, the fencing guarantee, the
/// persistence and clock assumptions, and when not to use it.
///
/// Make locks with [`Redlock::lock`]: they are the same [`Lock`] as
/// [`Client::lock`] makes, so code written against `Lock` and
/// [`LockGuard`](crate::LockGuard) switches with one constructor. Or turn
/// the Redlock into a [`Client`] (`Client::from(redlock)`) and write the
/// code once against `Client`: its locks are this Redlock's, and what a
/// Redlock does not offer fails with [`Error::Unsupported`](crate::Error::Unsupported).
#[derive(Clone)]
pub struct Redlock {
    group: Group,
}

impl std::fmt::Debug for Redlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.group.fmt(f)
    }
}

impl Redlock {
    /// A Redlock over these connected clients, one per independent Redis
    /// instance (not replicas of each other: a replica can lose the lock in
    /// a failover).
    ///
    /// Fails with [`Error::InvalidInput`](crate::Error::InvalidInput) for no
    /// clients, for two clients of the same server, and for clients with
    /// different key prefixes (the instances must agree on the key). Warns
    /// (a log line) for fewer than three or an even number of instances: an
    /// even N tolerates no more failures than N − 1.
    ///
    /// A client made from a Redlock is no instance: it fails with
    /// `InvalidInput` too.
    pub fn new(clients: Vec<Client>) -> Result<Redlock> {
        let sessions = clients
            .into_iter()
            .map(|c| match c.backend {
                Backend::Single(session) => Ok(session),
                Backend::Redlock(_) => Err(Error::InvalidInput(
                    "a Redlock's instances are clients of one Redis server each, not a Redlock's client".into(),
                )),
            })
            .collect::<Result<_>>()?;
        Ok(Redlock {
            group: Group::new(sessions)?,
        })
    }

    /// Connects to every URL concurrently with default client options. See
    /// [`Redlock::connect_with`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Redlock::connect_with`].
    pub async fn connect(urls: &[&str]) -> Result<Redlock> {
        Self::connect_with(urls, |builder| builder).await
    }

    /// Connects to every URL concurrently, each client made by
    /// `configure(Client::builder(url))` (all must end up with the same key
    /// prefix).
    ///
    /// Starts with a majority: when at least `N/2 + 1` instances connect,
    /// the Redlock is returned and each instance that could not be reached
    /// is reconnected in the background (jittered backoff from 100 ms to
    /// 5 s) and joins in when it answers; meanwhile it counts as
    /// unreachable, without waiting for it. The quorum is always a majority
    /// of *all* N. With fewer than a majority reachable, fails with
    /// [`Error::NoQuorum`](crate::Error::NoQuorum); with a bad URL or
    /// option, with the error of that instance. Needs a tokio runtime.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future drops the connections made so far;
    /// no background reconnection is started before it returns.
    pub async fn connect_with(
        urls: &[&str],
        configure: impl Fn(ClientBuilder) -> ClientBuilder,
    ) -> Result<Redlock> {
        Ok(Redlock {
            group: Group::connect_with(urls, configure).await?,
        })
    }

    /// A lock called `name`, held while a majority of the instances hold it,
    /// for at most `ttl` unless extended. The same checks and the same
    /// [`Lock`] as [`Client::lock`].
    pub fn lock(&self, name: impl AsRef<[u8]>, ttl: Duration) -> Result<Lock> {
        self.client().lock(name, ttl)
    }

    /// Several locks at once ([`Client::lock_all`]) are not offered over a
    /// Redlock: fails with [`Error::Unsupported`](crate::Error::Unsupported).
    /// All or nothing over N instances would need every instance's script
    /// to take every name, a majority of instances to agree for every name
    /// at once, and what a minority took to be retracted name by name
    /// (each lock's own retraction, rounds and drift), and no such
    /// protocol is specified or tested here. Take the locks on one server
    /// or one cluster, or take Redlock locks one by one in a fixed order.
    pub fn lock_all<N: AsRef<[u8]>>(&self, names: &[N], ttl: Duration) -> Result<MultiLock> {
        self.client().lock_all(names, ttl)
    }

    /// Sets how long each instance may take to answer one command of an
    /// acquire, extend or release round (all instances are asked at once,
    /// so this bounds the round).
    ///
    /// By default it is `ttl / 10`, at least [`MIN_INSTANCE_TIMEOUT`] and
    /// at most [`MAX_INSTANCE_TIMEOUT`], and never more than the client's
    /// command timeout: far below the TTL, as the algorithm asks, so a slow
    /// or silent instance costs a round at most a tenth of the lease
    /// instead of all of it, yet far above a LAN round trip. Release (which
    /// has no TTL at hand) uses [`MAX_INSTANCE_TIMEOUT`]. Set it when your
    /// instances are farther apart than a LAN. Fails with
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for zero.
    pub fn with_instance_timeout(self, timeout: Duration) -> Result<Self> {
        Ok(Redlock {
            group: self.group.with_instance_timeout(timeout)?,
        })
    }

    /// Chooses how fencing tokens are made (default [`Fencing::Strict`]).
    pub fn with_fencing_mode(self, fencing: Fencing) -> Self {
        Redlock {
            group: self.group.with_fencing_mode(fencing),
        }
    }

    /// The number of instances, N.
    pub fn instances(&self) -> usize {
        self.group.instances()
    }

    /// How many instances must agree: `N/2 + 1`.
    pub fn quorum(&self) -> usize {
        self.group.quorum()
    }

    /// How many instances have a connection (those down at connect time
    /// count once they came back). Says nothing about whether they answer now.
    pub fn connected(&self) -> usize {
        self.group.connected()
    }

    /// The key prefix shared by all instances.
    pub fn prefix(&self) -> &[u8] {
        self.group.prefix()
    }

    /// Waits, at most `within`, for the releases this Redlock finishes in
    /// the background (dropped guards, cancelled or unanswered releases) to
    /// end; see [`Client::flush`]. Returns whether all of them did.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future stops the waiting, not the work.
    pub async fn flush(&self, within: Duration) -> bool {
        self.group.flush(within).await
    }

    /// Ends every hold taken through this Redlock and refuses new ones; see
    /// [`Client::close`](crate::Client::close).
    ///
    /// # Cancel safety
    /// Cancel safe: the Redlock stays closed, and the releases already sent
    /// finish in the background.
    pub async fn close(&self, within: Duration) -> bool {
        self.group.close(within).await
    }

    /// A client over this Redlock's group, sharing everything with it.
    fn client(&self) -> Client {
        Client::from(self.clone())
    }
}

impl From<Redlock> for Client {
    /// A client whose locks are this Redlock's (held by a majority of its
    /// instances), sharing its connections, queues and background work:
    /// closing either closes both. Every other primitive, inspection and
    /// signal of the client fails with
    /// [`Error::Unsupported`](crate::Error::Unsupported).
    fn from(redlock: Redlock) -> Client {
        Client {
            backend: Backend::Redlock(redlock.group),
        }
    }
}

// Here rather than in `client/`: this file names `Client` (`Redlock::new`
// takes clients), so `client/` must not name `Redlock` (no two files
// import each other), and a client keeps the group, not a `Redlock`.
impl Client {
    /// The Redlock this client was made from (`Client::from(redlock)`), a
    /// handle sharing everything with it (its instances, quorum and
    /// connected count); `None` for a client of one server or cluster.
    pub fn redlock(&self) -> Option<Redlock> {
        match &self.backend {
            Backend::Redlock(group) => Some(Redlock {
                group: group.clone(),
            }),
            Backend::Single(_) => None,
        }
    }
}
