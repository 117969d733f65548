//! [`RwGuard`]: one hold of a [`RwLock`](crate::RwLock), as a reader or
//! the writer: a lease (`primitives/lease/`) over the read-write lock's
//! scripts, renewed and lost on its own (each reader's hold is its own lease).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::primitives::lease::hold::{Hold, HoldKind};
use crate::primitives::lease::options::LeaseOptions;
use crate::primitives::lease::{Lease, LeaseSpec};
use crate::primitives::shared::publish_command;
use crate::transport::session::Session;
use crate::vocab::error::{Error, Result};
use crate::vocab::metrics::LockLabel;
use crate::vocab::names::ttl_ms;
use crate::vocab::outcome::{Issued, Ownership, Renewal};
use crate::vocab::protocol::scripts;

/// How a read-write lock is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwAccess {
    /// One of many readers.
    Read,
    /// The one writer.
    Write,
}

/// What every hold of a read-write lock shares (its recipe, made by
/// [`RwLock`](crate::RwLock); here so that the guard needs nothing above it).
#[derive(Clone)]
pub(crate) struct RwSpec {
    pub(crate) session: Session,
    pub(crate) name: Arc<[u8]>,
    /// In the order of [`crate::vocab::protocol::RWLOCK_SUFFIXES`].
    pub(crate) keys: Arc<[Vec<u8>; 7]>,
    /// TTL, watchdog, cap, margin, fencing (the writer's), asking.
    pub(crate) lease: LeaseOptions,
    pub(crate) metrics_label: LockLabel,
}

impl RwSpec {
    pub(crate) fn writer(&self) -> &[u8] {
        &self.keys[0]
    }
    pub(crate) fn readers(&self) -> &[u8] {
        &self.keys[1]
    }
    pub(crate) fn channel(&self) -> &[u8] {
        &self.keys[6]
    }
}

/// A held read-write lock: a reader's hold or the writer's.
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// use latchkey::RwAccess;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let catalog = client.rwlock("catalog", Duration::from_secs(10))?.with_watchdog();
/// let hold = catalog.read_until(Duration::from_secs(5)).await?;
/// assert_eq!(hold.access(), RwAccess::Read);
/// tokio::select! {
///     _ = hold.lost() => eprintln!("read hold lost: the catalog may change under us"),
///     _ = async { /* read the catalog */ } => {}
/// }
/// hold.release().await?;
/// # Ok(()) }
/// ```
///
/// # What it promises
/// While [`is_held`](Hold::is_held) is true, a reader's hold means no
/// writer holds the lock, and the writer's hold means nobody else holds it
/// at all. Each hold is its own lease: renewed, lost and released on its own.
/// The policy (phase-fair, neither side starved) is on
/// [`RwLock`](crate::RwLock).
///
/// # Dropping
/// Release it with [`release`](Hold::release); a guard dropped without
/// it is released in the background (tracked by the client, see
/// [`Client::flush`](crate::Client::flush)); without a runtime or Redis,
/// the hold ends at its TTL.
pub type RwGuard = Hold<RwKind>;

/// The kind of an [`RwGuard`]: a read-write lock's hold, of either side.
/// Never a value.
#[derive(Debug)]
pub enum RwKind {}

impl crate::primitives::guard::sealed::Sealed for RwKind {}

#[allow(private_interfaces)]
impl HoldKind for RwKind {
    type Spec = RwHold;
    type Own = ();
    const NAME: &'static str = "RwGuard";
}

impl Hold<RwKind> {
    pub(crate) fn new(
        spec: Arc<RwSpec>,
        access: RwAccess,
        token: String,
        fencing_token: Option<u64>,
        valid_until: Instant,
    ) -> Self {
        let hold = RwHold { spec, access };
        Hold::with_lease(Lease::new(hold, token, fencing_token, valid_until), ())
    }

    /// Whether this is a reader's hold or the writer's.
    pub fn access(&self) -> RwAccess {
        self.lease.hold().access
    }
}

/// One hold of a read-write lock: the lock, and which side holds it.
#[derive(Clone)]
pub struct RwHold {
    spec: Arc<RwSpec>,
    access: RwAccess,
}

impl LeaseSpec for RwHold {
    hold_basics!(spec);
    // Readers come and go on a read-write lock's channel (a writer hears
    // nothing else while it holds).
    shared_hold!(spec);

    fn renew(
        &self,
        token: &str,
        ttl: Duration,
        batch_by: Option<Instant>,
    ) -> impl Future<Output = Renewal> + Send {
        extend(&self.spec, self.access, token, ttl, batch_by)
    }

    fn release(
        &self,
        token: &str,
        _background: bool,
    ) -> impl Future<Output = Result<Ownership>> + Send {
        release(&self.spec, self.access, token)
    }

    async fn listen(&self) -> Result<crate::backend::Wakeups> {
        crate::primitives::lease::listen_on(&self.spec.session, self.spec.channel()).await
    }

    /// The writer's: the lock's `issue_fence.lua` on the writer key and the
    /// read-write lock's counter. Readers do not write, so have none.
    async fn issue_fence(&self, token: &str, _deadline: Instant) -> Issued {
        if self.access == RwAccess::Read {
            return Err(Error::Unsupported(
                "a reader's hold has no fencing token: readers do not write (take the write side to write)",
            ));
        }
        let reply: (i64, i64) = self
            .spec
            .session
            .eval(
                "rwlock fence",
                &scripts::ISSUE_FENCE,
                &[self.spec.writer(), &self.spec.keys[5]],
                &[token.as_bytes()],
            )
            .await?;
        let found = match reply.0 {
            0 => Ownership::Expired,
            _ => Ownership::HeldByOther,
        };
        crate::primitives::shared::fence_reply("rwlock fence", reply, found)
    }
}

/// Owner-only release of a hold, waking the waiters.
pub(crate) async fn release(spec: &RwSpec, access: RwAccess, token: &str) -> Result<Ownership> {
    let publish = publish_command(&spec.session);
    let reply: i64 = match access {
        RwAccess::Read => {
            spec.session
                .eval(
                    "rwlock release",
                    &scripts::SEM_RELEASE,
                    &[spec.readers()],
                    // A reader's hold is one member: k = 1.
                    &[token.as_bytes(), publish, spec.channel(), b"1"],
                )
                .await?
        }
        RwAccess::Write => {
            let ttl = ttl_ms(spec.lease.ttl).to_string();
            let k = &spec.keys;
            spec.session
                .eval(
                    "rwlock release",
                    &scripts::RW_RELEASE_WRITE,
                    &[&k[0], &k[3], &k[4]],
                    &[token.as_bytes(), ttl.as_bytes(), publish, spec.channel()],
                )
                .await?
        }
    };
    Ok(match reply {
        1 => Ownership::Owned,
        -1 => Ownership::HeldByOther,
        _ => Ownership::Expired,
    })
}

/// Renews a hold: a reader's member (`sem_extend.lua`), or the writer's key
/// (the lock's `extend.lua`). `batch_by`: see `LeaseSpec::renew`.
pub(crate) async fn extend(
    spec: &RwSpec,
    access: RwAccess,
    token: &str,
    ttl: Duration,
    batch_by: Option<Instant>,
) -> Renewal {
    let sent = Instant::now();
    let ttl_arg = ttl_ms(ttl).to_string();
    // A reader's hold is one member of the readers' set (k = 1).
    let (script, key, args): (_, _, &[&[u8]]) = match access {
        RwAccess::Read => (
            &*scripts::SEM_EXTEND,
            spec.readers(),
            &[token.as_bytes(), ttl_arg.as_bytes(), b"1"],
        ),
        RwAccess::Write => (
            &*scripts::EXTEND,
            spec.writer(),
            &[token.as_bytes(), ttl_arg.as_bytes()],
        ),
    };
    let reply: i64 = spec
        .session
        .eval_renewal("rwlock extend", script, &[key], args, batch_by)
        .await?;
    let outcome = match reply {
        1 => Ownership::Owned,
        -1 => Ownership::HeldByOther,
        _ => Ownership::Expired,
    };
    Ok((outcome, crate::vocab::names::valid_until(sent, ttl)))
}
