//! [`MultiLock`]: several locks taken together, all or none, held by one
//! guard ([`MultiGuard`]).
//!
//! User docs (example, promises, costs) are on the type. `spec.rs` holds
//! what it does in Redis (one script, or one lock after the other),
//! `guard.rs` the guard and its lease, `wait.rs` the waiting loop.

pub(crate) mod guard;
pub(crate) mod spec;
pub(crate) mod wait;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::primitives::lease::options::LeaseOptions;
use crate::primitives::multi::guard::MultiGuard;
use crate::primitives::multi::spec::{Attempted, Member, MultiSpec};
use crate::primitives::traced;
use crate::primitives::wait::deadline_after;
use crate::transport::session::Session;
use crate::vocab::error::{Error, Result};
use crate::vocab::kind::Kind;
use crate::vocab::metrics::LockLabel;
use crate::vocab::names::{check_cluster_name, check_name, check_ttl, LockKeys};
use crate::vocab::protocol::key_slot;

/// Several locks, taken together or not at all, held by one guard
/// ([`MultiGuard`]): a recipe, cheap to clone. Made by
/// [`Client::lock_all`](crate::Client::lock_all). Deadlock-free whatever
/// order callers name the locks in.
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// // Move money between two accounts: both locks, or neither.
/// let both = client
///     .lock_all(&["account:7", "account:3"], Duration::from_secs(10))?
///     .with_watchdog()
///     .with_fencing();
///
/// let guard = both.acquire_until(Duration::from_secs(5)).await?;
/// let tokens = guard.fencing_tokens().await?; // one per account, in this order
/// tokio::select! {
///     _ = guard.lost() => eprintln!("lost one of the locks: stop the transfer"),
///     _ = async { /* debit account:7 with tokens[0], credit account:3 with tokens[1] */ } => {}
/// }
/// guard.release().await?; // both
/// # Ok(()) }
/// ```
///
/// # What it promises
/// * **All or nothing**: a guard holds every lock; an attempt that finds
///   one busy holds none when it returns (and `try_acquire` says `None`).
/// * **Ordinary locks to everyone else**: each lock's key holds the
///   guard's owner token, as a [`Lock`](crate::Lock)'s does, with the same
///   TTL, counter and channel (`docs/protocol.md`): a plain `Lock` of one
///   of the names excludes it and is excluded by it, waits for it and is
///   woken by its release; `latchkey status`, [`Client::inspect`](crate::Client::inspect)
///   and [`Client::revoke`](crate::Client::revoke) see a held lock.
/// * **One fencing token per lock** ([`MultiGuard::fencing_tokens`]), each
///   ordered with that lock's plain holds; one watchdog for all
///   ([`with_watchdog`](MultiLock::with_watchdog)); [`MultiGuard::lost`]
///   fires when *any* lock is lost.
/// * **Woken, not polled**: a waiter sleeps on every lock's release channel
///   and tries again when any is released, or at the busy holder's TTL.
///
/// # What it costs
/// * **On one server, and on a Redis Cluster when every name is in one
///   slot** (give them one hash tag: `{acct}:7`, `{acct}:3`), an attempt,
///   a renewal and a release are each one script (`multi_acquire.lua`,
///   `multi_extend.lua`, `multi_release.lua`): one round trip whatever N.
/// * **On a Redis Cluster with names in different slots**, no script can
///   touch them all: an attempt takes the locks one after the other, in
///   one global order (sorted by key bytes), N round trips when all are
///   free; at the first busy one it gives back what it took (in flight at
///   once), backs off (jittered, doubling) and waits for that lock's
///   release. Everyone takes in the same order and nobody waits while
///   holding, so this neither deadlocks nor livelocks; but a lock
///   taken early is held (briefly, and harmlessly) while a later one is
///   found busy, and a contended set is taken less often than a plain lock.
///   Renewals and releases are one request per lock, all in flight at once.
///   [`one_round_trip`](MultiLock::one_round_trip) says which applies.
///
/// # Limits
/// A [`Redlock`](crate::Redlock) refuses it ([`Error::Unsupported`]). The
/// names must not be [fair](crate::Lock::fair) locks' (a multi lock does not
/// queue: it would barge past their waiters), and there is no
/// `with_replicas`. The limits of a lock with a TTL
/// ([`Lock`](crate::Lock), "Limits") apply to each lock.
#[derive(Clone)]
pub struct MultiLock {
    pub(crate) inner: Arc<MultiSpec>,
}

/// An attempt found one of the locks busy.
pub(crate) struct Busy {
    /// Its holder's remaining TTL, when known.
    pub(crate) retry_in: Option<Duration>,
    /// Whether its holder's release will publish a wake-up.
    pub(crate) announced: bool,
    /// Locks taken before it were given back (back off before the next try).
    pub(crate) gave_back: bool,
    /// Which lock (its place in the spec's members).
    pub(crate) index: usize,
}

impl MultiLock {
    /// See [`Client::lock_all`](crate::Client::lock_all).
    pub(crate) fn on_session(session: &Session, names: &[&[u8]], ttl: Duration) -> Result<Self> {
        if names.is_empty() {
            return Err(Error::InvalidInput(
                "lock_all: name at least one lock".into(),
            ));
        }
        check_ttl(ttl)?;
        let (prefix, cluster) = (session.prefix(), session.is_cluster());
        let mut given = Vec::with_capacity(names.len());
        for name in names {
            check_name(name)?;
            check_cluster_name(prefix, name, cluster)?;
            given.push(Member {
                name: Arc::from(*name),
                keys: LockKeys::new(prefix, name),
            });
        }
        // The one global order: by key bytes.
        let mut order: Vec<usize> = (0..given.len()).collect();
        order.sort_by(|&a, &b| given[a].keys.key.cmp(&given[b].keys.key));
        if let Some(twice) = order
            .windows(2)
            .find(|w| given[w[0]].keys.key == given[w[1]].keys.key)
        {
            return Err(Error::InvalidInput(format!(
                "the lock {:?} is named twice: name each lock once",
                String::from_utf8_lossy(&given[twice[0]].name)
            )));
        }
        let mut place = vec![0; given.len()];
        for (at, &i) in order.iter().enumerate() {
            place[i] = at;
        }
        let slot = key_slot(&given[0].keys.key);
        let one_script = !cluster || given.iter().all(|m| key_slot(&m.keys.key) == slot);
        let name: Vec<u8> = names.join(&b'+');
        let mut slots: Vec<Option<Member>> = given.into_iter().map(Some).collect();
        let members: Vec<Member> = order.iter().filter_map(|&i| slots[i].take()).collect();
        Ok(MultiLock {
            inner: Arc::new(MultiSpec {
                session: session.clone(),
                metrics_label: LockLabel::new(&session.inner.metrics_labels, Kind::Lock, &name),
                name: Arc::from(name),
                members: Arc::from(members),
                given: Arc::from(place),
                one_script,
                lease: LeaseOptions::new(ttl),
            }),
        })
    }

    crate::primitives::builder::lease_options!("multi lock", "hold", "every hold (one per lock)");

    /// The locks' names, in the order they were given.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &[u8]> {
        self.inner.names()
    }

    /// Whether an attempt, a renewal and a release are each one script
    /// (one round trip): on one server, and on a Redis Cluster when every
    /// lock's key is in one slot. Otherwise the locks are taken one after
    /// the other (see [`MultiLock`], "What it costs").
    pub fn one_round_trip(&self) -> bool {
        self.inner.one_script
    }

    /// Tries once: `Ok(Some(guard))` holding every lock, or `Ok(None)` when
    /// one is held by someone else (and then none is held by us). One
    /// round trip, or up to one per lock (see [`MultiLock`], "What it costs").
    ///
    /// Fails with [`Error::WrongType`] when a key holds something other
    /// than a lock, and (with fencing) [`Error::BadFencingCounter`];
    /// nothing is taken then.
    ///
    /// # Cancel safety
    /// If the future is dropped after a request was sent but before its
    /// reply was read, locks may have been taken for us without our
    /// knowing: every lock is then released in the background
    /// (compare-and-delete with our token, so never someone else's;
    /// [`Client::flush`](crate::Client::flush) waits for it); if that
    /// cannot run, each frees itself at its TTL.
    pub async fn try_acquire(&self) -> Result<Option<MultiGuard>> {
        let spec = &self.inner;
        let attempt = async { Ok(self.attempt(false).await?.ok()) };
        traced::first_try(&spec.metrics_label, &spec.name, attempt).await
    }

    /// Waits as long as it takes. See [`MultiLock::acquire_until`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`MultiLock::acquire_until`].
    pub async fn acquire(&self) -> Result<MultiGuard> {
        self.acquire_by(None).await
    }

    /// Waits at most `wait`, then fails with [`Error::WaitTimedOut`]. See
    /// [`MultiLock::acquire_until`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`MultiLock::acquire_until`].
    #[deprecated(
        since = "0.4.0",
        note = "use `acquire_until`, which takes a Duration (from now) as well as an Instant"
    )]
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<MultiGuard> {
        self.acquire_by(deadline_after(wait)).await
    }

    /// Waits until every lock is ours or `deadline` passes
    /// ([`Error::WaitTimedOut`]). A waiter subscribes to every lock's
    /// release channel, tries, and sleeps until one is released or the
    /// busy holder's TTL runs out, then tries again; it never holds a lock
    /// while it waits. Transient errors are retried until the deadline, and
    /// an outage at the deadline returns that error (as
    /// [`Lock::acquire_until`](crate::Lock::acquire_until) does).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future leaves no lock behind (locks a
    /// request whose reply was never read may have taken are released in
    /// the background, see [`MultiLock::try_acquire`]) and gives up the
    /// subscriptions.
    pub async fn acquire_until(
        &self,
        deadline: impl Into<crate::vocab::deadline::Deadline>,
    ) -> Result<MultiGuard> {
        self.acquire_by(deadline.into().instant()).await
    }

    /// [`MultiLock::acquire_until`] with an optional deadline (`None`: as
    /// long as it takes).
    pub(crate) async fn acquire_by(&self, deadline: Option<Instant>) -> Result<MultiGuard> {
        let spec = &self.inner;
        let started = Instant::now();
        let acquiring = traced::first_try_then_wait(
            &spec.metrics_label,
            &spec.name,
            self.attempt(false),
            || self.wait_and_acquire(deadline, started),
        );
        crate::primitives::wait::bounded(deadline, acquiring).await
    }

    /// One attempt with a new owner token: the guard, or why not.
    /// `mark`: make the busy holder's release publish (a waiter's attempt).
    pub(crate) async fn attempt(
        &self,
        mark: bool,
    ) -> Result<std::result::Result<MultiGuard, Busy>> {
        let spec = &self.inner;
        let token = spec.session.inner.identity.new_token()?;
        // Armed until the reply is understood: an attempt dropped or failed
        // after a request went out may hold locks (one after the other, an
        // error can come after the first few were taken).
        let pending = crate::primitives::lease::background::pending(spec, &token);
        let attempted = spec.attempt(&token, mark).await?;
        pending.disarm();
        drop(pending);
        Ok(match attempted {
            Attempted::Taken {
                fences,
                valid_until,
            } => Ok(MultiGuard::new(spec.clone(), token, fences, valid_until)),
            Attempted::Busy {
                index,
                retry_in,
                announced,
                gave_back,
            } => {
                let busy = &spec.members[index].name;
                tracing::trace!(lock = %String::from_utf8_lossy(busy), ?retry_in, gave_back, "one of the locks is busy");
                Err(Busy {
                    retry_in,
                    announced,
                    gave_back,
                    index,
                })
            }
        })
    }
}

crate::primitives::builder::hold_options_impl!(MultiLock);
