//! [`Client`]: the front door (layer 5, a facade). Every method here is a
//! few lines over the primitive that does the work; the crate docs list the
//! layers. Signals and waiting for them are in `signals.rs`, inspection
//! and an operator's control (revoke, asking to let go) in `control.rs`.

/// The refusal of `$what` by a client made from a Redlock, whole (the
/// error holds a `&'static str`).
macro_rules! locks_only {
    ($what:literal) => {
        concat!(
            $what,
            " on a Redlock: a Redlock client has locks only; use a client of one Redis server or cluster"
        )
    };
}

mod control;
pub(crate) mod kept;
mod signals;
pub(crate) mod weak;

use std::time::Duration;

use crate::backend::Backend;
use crate::primitives::barrier::Barrier;
use crate::primitives::election::Election;
use crate::primitives::fence::FencedResource;
use crate::primitives::latch::Latch;
use crate::primitives::lock::Lock;
use crate::primitives::multi::MultiLock;
use crate::primitives::rwlock::RwLock;
use crate::primitives::semaphore::Semaphore;
use crate::transport::builder::ClientBuilder;
use crate::transport::connection::Connection;
use crate::transport::session::Session;
use crate::vocab::error::{Error, Result};

/// A handle to one Redis server: the connections, options and shared state
/// every lock, guard, signal and listener made from it uses. Cheap to clone;
/// clones share all of it.
///
/// A client can also be made from a [`Redlock`](crate::Redlock)
/// (`Client::from(redlock)`): its [`lock`](Client::lock)s are then held
/// while a majority of the instances agree, [`lock_all`](Client::lock_all)
/// is refused as [`Redlock::lock_all`](crate::Redlock::lock_all) refuses it,
/// `flush`, `close` and `prefix` work as on one server, and every other
/// primitive, inspection and signal fails with
/// [`Error::Unsupported`](crate::Error::Unsupported): none is defined over
/// a majority of independent servers. Code that takes locks is then written
/// once against `Client`, whatever the deployment.
///
/// # Example
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::builder("redis://127.0.0.1:6380/")
///     .prefix("billing:")
///     .command_timeout(Duration::from_millis(500))
///     .connect()
///     .await?;
/// let lock = client.lock("nightly-report", Duration::from_secs(30))?;
/// # Ok(()) }
/// ```
///
/// # What it promises
/// One command connection (multiplexed, reconnecting by itself) and at most
/// one pub/sub connection per server, whatever the number of locks, guards
/// and waiters made from it; a standalone server, a Redis Cluster and a
/// Sentinel-watched primary look the same from here. Nothing leaks: what a
/// dropped guard or a cancelled acquisition may hold is released in the
/// background ([`flush`](Client::flush) waits for it). Every command waits
/// at most the [command timeout](ClientBuilder::command_timeout); which
/// errors are worth retrying is on [`Error`](crate::Error).
#[derive(Clone)]
pub struct Client {
    /// One server's session, or a Redlock's instances.
    pub(crate) backend: Backend,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.backend.fmt(f)
    }
}

impl ClientBuilder {
    /// Connects. Fails with [`Error::Unreachable`](crate::Error::Unreachable),
    /// [`Error::Timeout`](crate::Error::Timeout) or [`Error::Auth`](crate::Error::Auth)
    /// when the server cannot be used.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future drops the half-made connection.
    pub async fn connect(self) -> Result<Client> {
        Ok(Client {
            backend: Backend::Single(self.open().await?),
        })
    }
}

impl Client {
    /// Connects with default options. See [`Client::builder`] for the rest.
    ///
    /// The URL is a redis-rs URL: `redis://[[user]:password@]host[:port][/db]`.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`ClientBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Client> {
        Self::builder(url).connect().await
    }

    /// Starts building a client for `url`.
    pub fn builder(url: &str) -> ClientBuilder {
        ClientBuilder::new(url)
    }

    /// Starts building a client for the primary that the Redis Sentinels at
    /// `sentinels` (`host:port` each) name for `master`, followed across
    /// failovers; see [`ClientBuilder::sentinel`].
    ///
    /// ```no_run
    /// # async fn demo() -> latchkey::Result<()> {
    /// let client = latchkey::Client::builder_sentinel(["10.0.0.1:26379", "10.0.0.2:26379"], "jobs")
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn builder_sentinel<S: AsRef<str>>(
        sentinels: impl IntoIterator<Item = S>,
        master: &str,
    ) -> ClientBuilder {
        ClientBuilder::new("redis://127.0.0.1/").sentinel(sentinels, master)
    }

    /// The one server's session; a client made from a Redlock refuses
    /// with `refusal` (see `locks_only!`).
    fn one_server(&self, refusal: &'static str) -> Result<&Session> {
        match &self.backend {
            Backend::Single(session) => Ok(session),
            Backend::Redlock(_) => Err(Error::Unsupported(refusal)),
        }
    }

    /// The key prefix in force (a Redlock's instances share one).
    pub fn prefix(&self) -> &[u8] {
        self.backend.prefix()
    }

    /// The per-command timeout in force. A client made from a Redlock
    /// answers with its first connected instance's (instances made by
    /// [`Redlock::connect_with`](crate::Redlock::connect_with) all have the
    /// same); its rounds are bounded by the
    /// [instance timeout](crate::Redlock::with_instance_timeout).
    pub fn command_timeout(&self) -> Duration {
        self.backend.command_timeout()
    }

    /// The host and port of the server, for messages; for a client made
    /// from a Redlock, every instance's, joined by ", " (an instance not
    /// connected yet is named by its URL).
    pub fn server(&self) -> String {
        self.backend.server()
    }

    /// A handle to the client's shared command connection (it reconnects by
    /// itself), for commands latchkey has no method for: the CLI's `SCAN`,
    /// monitoring. Unlike latchkey's own calls, these are bounded only by
    /// the connection's response timeout (the command timeout). On a Redis
    /// Cluster it routes each command by its first key (see [`Connection`]).
    /// For a client made from a Redlock it is the connection of the first
    /// instance that was connected when the Redlock was made (one always
    /// is): a command sent there reaches that one instance only.
    pub fn connection(&self) -> Connection {
        self.backend.connection()
    }

    /// Waits, at most `within`, for the work this client does in the
    /// background to finish: releases of guards dropped without
    /// [`release`](crate::LockGuard::release), of releases and acquisitions
    /// that were cancelled or failed after their request was sent. First it
    /// gives back the holds kept while idle ([`Lock::with_caching`]; one in
    /// use is given back at its release). Returns
    /// whether all of it finished. Call it before the process exits (a
    /// runtime that shuts down cancels such a release, and the lock then
    /// stays held until its TTL); the client stays usable.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future stops the waiting, not the work.
    pub async fn flush(&self, within: Duration) -> bool {
        self.backend.flush(within).await
    }

    /// Ends every hold this client has out and refuses new ones, as etcd's
    /// `Session.Close` does: each live guard is released (owner-only) and
    /// marked lost ([`LostReason::Closed`](crate::LostReason::Closed): its
    /// `lost()` fires, its later `release()` finds it `Expired` and sends
    /// nothing), the holds kept while idle are given back, and every later
    /// acquisition, and every wait's next attempt, fails with
    /// [`Error::ClientClosed`](crate::Error::ClientClosed). Waits at most
    /// `within` for the releases; returns whether all of them finished. Idempotent.
    /// Clones of this client are the same client: closed too.
    ///
    /// ```no_run
    /// # async fn demo() -> latchkey::Result<()> {
    /// use std::time::Duration;
    /// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
    /// let guard = client.lock("report", Duration::from_secs(30))?.acquire().await?;
    /// // ... shutting down: give back whatever is held, at once.
    /// client.close(Duration::from_secs(5)).await;
    /// assert!(!guard.is_held());
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: the client stays closed, and the releases already sent
    /// finish in the background.
    pub async fn close(&self, within: Duration) -> bool {
        self.backend.close(within).await
    }

    // ---- Locks --------------------------------------------------------

    /// A lock called `name` whose holder owns it for at most `ttl` unless it
    /// extends it (by hand or with the [watchdog](Lock::with_watchdog)).
    ///
    /// Fails with [`Error::InvalidName`](crate::Error::InvalidName) for an
    /// empty name, one longer than [`MAX_NAME_LEN`](crate::limits::MAX_NAME_LEN)
    /// bytes or ending in `:fence`, and with
    /// [`Error::InvalidTtl`](crate::Error::InvalidTtl) for a TTL outside
    /// [`MIN_TTL`](crate::limits::MIN_TTL)..=[`MAX_TTL`](crate::limits::MAX_TTL). Any other
    /// bytes are fine in a name.
    ///
    /// On a client made from a Redlock, the lock is held while a majority
    /// of the instances hold it ([`Redlock::lock`](crate::Redlock::lock)).
    pub fn lock(&self, name: impl AsRef<[u8]>, ttl: Duration) -> Result<Lock> {
        Lock::new(self.backend.clone(), name.as_ref(), ttl)
    }

    /// Several locks, `names`, taken together or not at all, each a lease of
    /// `ttl`, held by one guard ([`MultiGuard`](crate::MultiGuard)) with
    /// one fencing token per lock; deadlock-free whatever order callers
    /// name them in. Each is the ordinary lock of its name to everyone
    /// else (a plain [`Client::lock`] of it excludes it). One script on one
    /// server, or on a Redis Cluster when all share a slot (a hash tag:
    /// `{acct}:7`); one lock after the other otherwise. See [`MultiLock`].
    ///
    /// Fails as [`Client::lock`] for a bad name or TTL, and with
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for no name or a
    /// name given twice. A client made from a Redlock refuses it with
    /// [`Error::Unsupported`](crate::Error::Unsupported): see
    /// [`Redlock::lock_all`](crate::Redlock::lock_all) for why.
    pub fn lock_all<N: AsRef<[u8]>>(&self, names: &[N], ttl: Duration) -> Result<MultiLock> {
        let session = self.one_server(
            "several locks at once (lock_all) over a Redlock: take them on one server or cluster, or one by one in a fixed order",
        )?;
        let names: Vec<&[u8]> = names.iter().map(AsRef::as_ref).collect();
        MultiLock::on_session(session, &names, ttl)
    }

    /// The election called `name`: candidates [`campaign`](Election::campaign)
    /// until one leads; its lease of `ttl` is renewed by a watchdog while
    /// it does, and its [term](crate::Leadership::term) is a fencing token.
    /// Same naming and TTL rules as [`Client::lock`]; an election's keys
    /// (`{prefix + name}:leader`, `:election`) do not collide with a lock
    /// of the same name. See [`Election`].
    pub fn election(&self, name: impl AsRef<[u8]>, ttl: Duration) -> Result<Election> {
        Election::on_session(
            self.one_server(locks_only!("elections"))?,
            name.as_ref(),
            ttl,
        )
    }

    /// The fenced resource called `name` (same naming rules as locks): a
    /// value that refuses writes carrying a fencing token lower than the
    /// highest it has seen. See [`FencedResource`].
    ///
    /// A fenced resource is a hash at `prefix + name`, the same key as a
    /// lock of that name: give the resource and the lock that guards it
    /// different names (`report` and `report-output`), or they collide.
    pub fn fenced(&self, name: impl AsRef<[u8]>) -> Result<FencedResource> {
        FencedResource::on_session(
            self.one_server(locks_only!("fenced resources"))?,
            name.as_ref(),
        )
    }

    // ---- Latches and barriers ----------------------------------------

    /// The count-down latch called `name`, which lives `ttl` after its
    /// creation by this handle (count-downs keep the creator's TTL; same
    /// naming and TTL rules as [`Client::lock`]). See [`Latch`].
    pub fn latch(&self, name: impl AsRef<[u8]>, ttl: Duration) -> Result<Latch> {
        Latch::on_session(self.one_server(locks_only!("latches"))?, name.as_ref(), ttl)
    }

    /// The barrier called `name` of `parties` parties (1 to
    /// [`MAX_COUNT`](crate::limits::MAX_COUNT), else
    /// [`Error::InvalidCount`](crate::Error::InvalidCount)), which lives
    /// `ttl` after its last arrival while nobody waits (and as long as its
    /// parties wait). See [`Barrier`].
    pub fn barrier(&self, name: impl AsRef<[u8]>, parties: u64, ttl: Duration) -> Result<Barrier> {
        Barrier::on_session(
            self.one_server(locks_only!("barriers"))?,
            name.as_ref(),
            parties,
            ttl,
        )
    }

    // ---- Semaphores ----------------------------------------------------

    /// The counting semaphore called `name` of `permits` permits (1 to
    /// [`MAX_COUNT`](crate::limits::MAX_COUNT), else
    /// [`Error::InvalidCount`](crate::Error::InvalidCount)), each a lease of
    /// `ttl` (same naming and TTL rules as [`Client::lock`]). Every caller
    /// passes N; see [`Semaphore`] for changing it.
    pub fn semaphore(
        &self,
        name: impl AsRef<[u8]>,
        permits: u64,
        ttl: Duration,
    ) -> Result<Semaphore> {
        Semaphore::on_session(
            self.one_server(locks_only!("semaphores"))?,
            name.as_ref(),
            permits,
            ttl,
        )
    }

    /// The read-write lock called `name`, each hold a lease of `ttl` (same
    /// naming and TTL rules as [`Client::lock`]). See [`RwLock`] for the
    /// policy (phase-fair: neither writers nor readers starve).
    pub fn rwlock(&self, name: impl AsRef<[u8]>, ttl: Duration) -> Result<RwLock> {
        RwLock::on_session(
            self.one_server(locks_only!("read-write locks"))?,
            name.as_ref(),
            ttl,
        )
    }
}
