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
//! let guard = lock.acquire_until(Duration::from_secs(5)).await?;
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! ## Choosing a primitive
//!
//! | You need | Use | What it promises | What it costs |
//! |---|---|---|---|
//! | one process at a time runs a job | [`Lock`] ([`Client::lock`]) | one holder at a time, expiring, owner-only release; a [fencing token](LockGuard::fencing_token) on request | a `SET NX` to take it, one script to release; waiters sleep until a release message |
//! | several locks at once, without deadlock | [`MultiLock`] ([`Client::lock_all`]) | every lock or none, whatever order callers name them in; each an ordinary lock to everyone else; a [fencing token](MultiGuard::fencing_tokens) per lock | one script each way on one server (or one cluster slot); else one round trip per lock, in key order; not on a Redlock |
//! | the same, and no waiter starves across processes | [`Lock::fair`] | arrival order across processes, the lock handed to the next waiter in the release's script | a script per acquire and release, a queue in Redis; not on a Redlock |
//! | the same lock, taken again and again by one process | [`CachedLock`] ([`Lock::with_caching`]) | a released hold is kept while nobody else wants it: re-taking it costs no round trip; given back at once when another process waits | one subscription per lock; a contender waits one message and one release longer |
//! | a lock that outlives the loss of one Redis | [`Redlock`] | held while a majority of N independent instances agree | every operation on N instances at once; barging only |
//! | at most N at once | [`Semaphore`] | at most N permits held, each a lease (k at once, all or none: [`acquire_many`](Semaphore::acquire_many)); not FIFO | a script per acquire and release |
//! | many readers or one writer | [`RwLock`] | phase-fair: neither readers nor writers starve | a script per hold and release |
//! | go on once N tasks are done, whenever you look | [`Latch`] | state kept in Redis: a late waiter returns at once; opens once | a script per count-down; one key until its TTL |
//! | N parties meet, round after round | [`Barrier`] | all N of a generation released together; cyclic | a script per arrival |
//! | one leader, and everyone knows who | [`Election`], [`Observer`] | at most one leader with a valid lease; terms that fence; changes reported in order (missed ones counted) | a lease like a lock's, renewed by its watchdog |
//! | tell the processes waiting now | [signals](Client::signal), [`Listener`] | delivered to whoever listens at that moment (one, or all) | one publish (a script for `signal_one`); nothing is kept: a signal nobody hears is lost |
//! | a resource that refuses stale holders | [`FencedResource`] | a write with a token below the highest seen is refused | a script per write |
//!
//! Every hold (a [`LockGuard`], [`CachedGuard`], [`PermitGuard`],
//! [`RwGuard`], [`MultiGuard`] or [`Leadership`]) is a lease and implements
//! one trait, [`Guard`]: it has a deadline, can be renewed by a watchdog,
//! says when it is [lost](Guard::lost) — a *stop margin* before its
//! deadline or its cap (a fifth of the TTL unless
//! [`with_stop_margin`](Lock::with_stop_margin) says otherwise), and at once
//! when it hears that it was revoked or that Redis restarted without it —
//! and [why](Guard::lost_reason), and is released in the background if it is
//! dropped. Every guard but a kept lock's is one generic type, [`Hold<K>`](Hold)
//! (`LockGuard` is `Hold<LockKind>`), whose surface is written once; code
//! that handles any hold takes a `Box<dyn Guard>`, and code that acquires
//! any of them a `Box<dyn `[`Acquire`]`>`. Each type's docs open with an example and say
//! what it promises and where that stops. The measured costs are in the
//! repository's `bench/RESULTS.md`.
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
//! ## How the crate is built
//! Five layers, each looking only down, from the vocabulary (errors, names,
//! the layout) through transport, backends and primitives to the facades
//! [`Client`] and [`Redlock`]: see `crates/latchkey/ARCHITECTURE.md` in the
//! repository for the code map and the invariants.
//!
//! ## Cancel safety
//! Every public `async fn` says in a `# Cancel safety` section what happens
//! when its future is dropped at an await point. Nothing leaks: a lock that
//! a dropped acquisition may have taken, or that a dropped release did not
//! finish releasing, is released in the background
//! ([`Client::flush`] waits for that before a process exits); a dropped
//! waiter leaves its queue and its subscription.

#![warn(missing_docs)]

// The layers, each looking only down (see ARCHITECTURE.md).
// 1. Vocabulary
mod vocab;
// 2. Transport
mod transport;
// 3. Backends
mod backend;
// 4. Primitives
mod primitives;
// 5. Facades
mod client;
mod redlock;

// 1. Vocabulary
pub use vocab::deadline::Deadline;
pub use vocab::error::{Error, Result};
pub use vocab::metrics::MetricsLabels;
pub use vocab::outcome::{LostReason, Ownership};
pub use vocab::url::redact_url;
pub use vocab::{acl, metrics, protocol};
// 2. Transport
pub use transport::builder::ClientBuilder;
pub use transport::connection::Connection;
// 3. Backends
pub use redlock::Fencing;
// 4. Primitives
pub use primitives::acquire::{Acquire, Candidacy, Permits, RwSide};
pub use primitives::barrier::Barrier;
pub use primitives::control::revoke::Revocation;
pub use primitives::election::leadership::{LeaderKind, Leadership};
pub use primitives::election::observer::Observer;
pub use primitives::election::spec::Leader;
pub use primitives::election::Election;
pub use primitives::fence::{FencedResource, FencedWrite};
pub use primitives::guard::{BoxFuture, Guard, HoldOptions};
pub use primitives::inspect::Kind;
pub use primitives::latch::Latch;
pub use primitives::lease::hold::{Hold, HoldKind};
pub use primitives::lease::state::LostSignal;
pub use primitives::lock::cached::guard::CachedGuard;
pub use primitives::lock::cached::CachedLock;
pub use primitives::lock::guard::{LockGuard, LockKind};
pub use primitives::lock::Lock;
pub use primitives::multi::guard::{MultiGuard, MultiKind};
pub use primitives::multi::MultiLock;
pub use primitives::rwlock::guard::{RwAccess, RwGuard, RwKind};
pub use primitives::rwlock::RwLock;
pub use primitives::semaphore::permit::{PermitGuard, PermitKind};
pub use primitives::semaphore::Semaphore;
pub use primitives::signal::listener::{Listener, Signal};
// 5. Facades
pub use client::kept::Kept;
pub use client::weak::WeakClient;
pub use client::Client;
pub use redlock::Redlock;

/// What inspection reads: who holds a name, of which kind, for how long,
/// who waits ([`Client::describe`], [`Client::inspect`],
/// [`Client::list_all`], [`Semaphore::holders`]). Read-only views: none of
/// these can release or extend anything; a [`inspect::Holding`]
/// names its owner token, which only the owner-only calls by token
/// ([`Lock::extend_token`], [`Lock::release_token`]) act on.
pub mod inspect {
    pub use crate::primitives::inspect::{
        BarrierInfo, ElectionInfo, FairLockInfo, Holding, Kind, LatchInfo, LockInfo, PrimitiveInfo,
        RwLockInfo, SemaphoreInfo,
    };
    pub use crate::vocab::token::Holder;
}

/// The bounds latchkey checks its input against, and the defaults it uses
/// where the caller says nothing: a TTL out of bounds, a name too long or a
/// count too large is refused with a typed error before anything is sent.
pub mod limits {
    pub use crate::backend::replicas::DEFAULT_REPLICA_TIMEOUT;
    pub use crate::primitives::lock::fair::{DEFAULT_WAITER_LEASE, MIN_WAITER_LEASE};
    pub use crate::redlock::{MAX_INSTANCE_TIMEOUT, MIN_INSTANCE_TIMEOUT};
    pub use crate::transport::session::{DEFAULT_COMMAND_TIMEOUT, DEFAULT_PREFIX};
    pub use crate::vocab::names::{MAX_COUNT, MAX_NAME_LEN, MAX_TTL, MIN_TTL};
}
