//! # latchkey: distributed locks, self-healing leases and fencing tokens on Redis
//!
//! Two processes on two machines must not run the same critical section at
//! once. latchkey gives them a lock in Redis that is safe to use:
//!
//! * **atomic and owner-only**: acquiring is one `SET key token NX PX ttl`;
//!   the token is 128 random bits from the OS, so only the holder can
//!   release or extend (Lua compare-and-delete / compare-and-pexpire);
//! * **always expiring**: a TTL is mandatory, so a crashed holder frees the
//!   lock after at most its TTL;
//! * **self-healing**: the [watchdog](Lock::with_watchdog) renews a held lock
//!   in the background and [`LockGuard::lost`] tells the holder, *before* the
//!   TTL runs out, when it can no longer prove ownership;
//! * **fenced**: every hold can have a [fencing token](LockGuard::fencing_token)
//!   greater than those of all holds before it, so a resource can reject a
//!   stale holder. It is issued while the hold lasts, on request (one round
//!   trip) or with every acquisition ([`Lock::with_fencing`]);
//! * **fast to hand over**: waiters sleep until a release message (one shared
//!   pub/sub connection per client) or the holder's TTL, instead of polling;
//! * **fair on request**: a [`Lock::fair`] queues its waiters in Redis in
//!   arrival order, across processes, and its release hands the lock to the
//!   next live waiter in the same script;
//! * **on one Redis or several**: [`Redlock`] holds the same [`Lock`] over N
//!   independent instances (a majority must agree), one constructor away
//!   (`docs/redlock.md`);
//! * **over TLS, as a least-privilege user**: `rediss://` with a private CA
//!   and a client certificate ([`ClientBuilder::tls_ca_file`],
//!   [`ClientBuilder::tls_client_cert_files`]), and the ACL rule of [`acl`]
//!   (`docs/security.md`).
//!
//! Beside locks, the other tools of distributed coordination, each a small
//! module over the same session, wake-ups, watchdog and fencing:
//! a counting [`Semaphore`] whose permits are leases, a phase-fair
//! read-write lock ([`RwLock`]), and a count-down [`Latch`] and a
//! [`Barrier`] whose state lives in Redis (a late waiter returns at once).
//!
//! And [signals](Client::signal): one process waits, another
//! signals it (to all waiters or [to one](Client::signal_one)), over the
//! same shared pub/sub connection — fire-and-forget, see [`Listener`].
//! And [leader election](Client::election): candidates
//! [`campaign`](Election::campaign) until one leads; its [`Leadership`] is
//! renewed like a lock and says when it is [lost](Leadership::lost), its
//! [term](Leadership::term) is a fencing token, and an [`Observer`] follows
//! every change of leader.
//!
//! ## Example
//!
//! ```no_run
//! use std::time::Duration;
//!
//! # async fn demo() -> latchkey::Result<()> {
//! let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
//! let lock = client.lock("nightly-report", Duration::from_secs(30))?;
//!
//! match lock.try_acquire().await? {
//!     Some(guard) => {
//!         println!("ours; fencing token {}", guard.fencing_token().await?);
//!         // ... the critical section ...
//!         guard.release().await?;
//!     }
//!     None => println!("someone else is running the report"),
//! }
//!
//! // Or wait for it, at most 5 s:
//! let guard = lock.acquire_timeout(Duration::from_secs(5)).await?;
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! ## What a lock in Redis can and cannot promise
//! A lock with a TTL can be held by two processes at once when the first
//! pauses (GC, swap, `SIGSTOP`) or is cut off past its TTL. The guard's
//! [`deadline`](LockGuard::deadline) and [`lost`](LockGuard::lost) narrow
//! that window; only the resource checking fencing tokens closes it.
//!
//! The data layout in Redis (keys, values, channels, scripts) is a documented
//! protocol: see `docs/protocol.md` in the repository.
//!
//! ## How the crate is built: five layers, each looking only down
//!
//! Every file belongs to one layer and imports only from its own layer or
//! those below (no two files import each other). A new primitive (a
//! semaphore, an election) is a small file in layer 4 over the same session,
//! backends and lease, plus a few lines in a facade.
//!
//! 1. **Vocabulary**: what every layer speaks. [`acl`] (the ACL rule latchkey
//!    needs), `error` ([`Error`],
//!    [`Result`]; `error_tls` explains TLS failures), `outcome` ([`Ownership`]), `names` ([`MAX_NAME_LEN`],
//!    [`MIN_TTL`], [`MAX_TTL`]; name and TTL checks, a lock's keys),
//!    `token` ([`Holder`]; owner tokens), [`protocol`] (the layout's
//!    constants), `scripts` (the Lua, one `.lua` file each), [`metrics`]
//!    ([`MetricsLabels`]).
//! 2. **Transport**: `connection` ([`Connection`]: standalone, cluster or
//!    Sentinel), `sentinel` (the primary Sentinels name, followed across
//!    failovers), `builder` (the options and connecting: [`ClientBuilder`]),
//!    `session` (one server's command connection, options, background
//!    work: [`DEFAULT_COMMAND_TIMEOUT`], [`DEFAULT_PREFIX`]), `deferred`
//!    (a session's jobs for later, on one timer task), `tls` (`rediss://`: CA and client
//!    certificates), `subscriber` (the shared pub/sub connection and
//!    its registry), `queue` (this process's waiters per lock name).
//! 3. **Backends**: `backend` — where a lock lives, behind one enum: a
//!    single server (`backend/single.rs`) or Redlock's N instances
//!    (`backend/redlock/`: the group, its rounds, and every quorum rule in
//!    `tally.rs`; [`Fencing`], [`MIN_INSTANCE_TIMEOUT`],
//!    [`MAX_INSTANCE_TIMEOUT`]), and `backend/replicas.rs` (`WAIT` for a
//!    lock's replicas on its own node; [`DEFAULT_REPLICA_TIMEOUT`]). A Redis
//!    Cluster or a Sentinel-watched primary is not a backend: each is a
//!    kind of connection under the single-server backend (on a cluster each
//!    lock's keys share a slot, and the subscriber is sharded:
//!    `subscriber/sharded.rs`).
//! 4. **Primitives**: `spec` and `lock` ([`Lock`]), `attempt` (one
//!    attempt's bookkeeping), `wait` (the waiting loop), `guard` ([`LockGuard`]), `watchdog` (the lease, [`LostSignal`]),
//!    `handoff` (when a release wakes this process's waiters), `fair` and
//!    `fair_wait` (fair locks: a queue in Redis, direct hand-off), `by_token`,
//!    `fence` ([`FencedResource`], [`FencedWrite`]), `latch` ([`Latch`]),
//!    `barrier` ([`Barrier`]), `semaphore` ([`Semaphore`]) and `permit`
//!    ([`PermitGuard`]), `rwlock` ([`RwLock`]) and `rwguard` ([`RwGuard`]),
//!    `primitive` (what those share: keys,
//!    wake-ups, background clean-up), `signal` and
//!    `signal_wire`, `listener` ([`Listener`], [`Signal`]), `inspect`
//!    ([`LockInfo`]; `inspect/`: [`PrimitiveInfo`], [`Kind`]), `election_spec` ([`Leader`]), `election` ([`Election`]), `leadership`
//!    ([`Leadership`]) and `observe` ([`Observer`]).
//! 5. **Facades**: [`Client`] and [`Redlock`], thin: each method is a few
//!    lines over the primitive that does the work.
//!
//! ## Cancel safety
//! Every public `async fn` says in a `# Cancel safety` section what happens
//! when its future is dropped at an await point. Nothing leaks: a lock that
//! a dropped acquisition may have taken, or that a dropped release did not
//! finish releasing, is released in the background
//! ([`Client::flush`] waits for that before a process exits); a dropped
//! waiter leaves its queue and its subscription.

#![warn(missing_docs)]

// 1. Vocabulary
pub mod acl;
mod error;
mod error_acl;
mod error_tls;
pub mod metrics;
mod names;
mod outcome;
pub mod protocol;
mod scripts;
mod token;
// 2. Transport
mod builder;
mod connection;
mod deferred;
mod pinned;
mod queue;
mod sentinel;
mod session;
mod subscriber;
mod tls;
mod tls_name;
// 3. Backends
mod backend;
// 4. Primitives
mod attempt;
mod barrier;
mod by_token;
mod election;
mod election_spec;
mod fair;
mod fair_wait;
mod fence;
mod guard;
mod handoff;
mod inspect;
mod latch;
mod leadership;
mod listener;
mod lock;
mod observe;
mod permit;
mod primitive;
mod rwguard;
mod rwlock;
mod semaphore;
mod signal;
mod signal_wire;
mod spec;
mod wait;
mod watchdog;
// 5. Facades
mod client;
mod redlock;

// 1. Vocabulary
pub use crate::metrics::MetricsLabels;
pub use error::{Error, Result};
pub use names::{MAX_COUNT, MAX_NAME_LEN, MAX_TTL, MIN_TTL};
pub use outcome::Ownership;
pub use token::Holder;
// 2. Transport
pub use builder::ClientBuilder;
pub use connection::Connection;
pub use session::{DEFAULT_COMMAND_TIMEOUT, DEFAULT_PREFIX};
// 3. Backends
pub use backend::replicas::DEFAULT_REPLICA_TIMEOUT;
pub use redlock::{Fencing, MAX_INSTANCE_TIMEOUT, MIN_INSTANCE_TIMEOUT};
// 4. Primitives
pub use barrier::Barrier;
pub use election::Election;
pub use election_spec::Leader;
pub use fair::{DEFAULT_WAITER_LEASE, MIN_WAITER_LEASE};
pub use fence::{FencedResource, FencedWrite};
pub use guard::LockGuard;
pub use inspect::{
    BarrierInfo, ElectionInfo, FairLockInfo, Holding, Kind, LatchInfo, LockInfo, PrimitiveInfo,
    RwLockInfo, SemaphoreInfo,
};
pub use latch::Latch;
pub use leadership::Leadership;
pub use listener::{Listener, Signal};
pub use lock::Lock;
pub use observe::Observer;
pub use permit::{PermitGuard, PermitHolder};
pub use rwguard::{RwAccess, RwGuard};
pub use rwlock::RwLock;
pub use semaphore::Semaphore;
pub use watchdog::LostSignal;
// 5. Facades
pub use client::Client;
pub use redlock::Redlock;
