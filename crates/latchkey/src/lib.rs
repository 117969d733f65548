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
//! * **on one Redis or several**: [`Redlock`] holds the same [`Lock`] over N
//!   independent instances (a majority must agree), one constructor away
//!   (`docs/redlock.md`).
//!
//! Beside locks, [signals](Client::signal): one process waits, another
//! signals it (to all waiters or [to one](Client::signal_one)), over the
//! same shared pub/sub connection — fire-and-forget, see [`Listener`].
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

#![warn(missing_docs)]

mod backend;
mod by_token;
mod client;
mod error;
mod fence;
mod guard;
mod handoff;
mod inspect;
mod listener;
mod lock;
pub mod metrics;
mod names;
mod outcome;
pub mod protocol;
mod queue;
mod redlock;
mod scripts;
mod session;
mod signal;
mod signal_wire;
mod spec;
mod subscriber;
mod token;
mod wait;
mod watchdog;

pub use crate::metrics::MetricsLabels;
pub use client::Client;
pub use error::{Error, Result};
pub use fence::{FencedResource, FencedWrite};
pub use guard::LockGuard;
pub use inspect::LockInfo;
pub use listener::{Listener, Signal};
pub use lock::Lock;
pub use names::{MAX_NAME_LEN, MAX_TTL, MIN_TTL};
pub use outcome::Ownership;
pub use redlock::{Fencing, Redlock, MAX_INSTANCE_TIMEOUT, MIN_INSTANCE_TIMEOUT};
pub use session::{ClientBuilder, DEFAULT_COMMAND_TIMEOUT, DEFAULT_PREFIX};
pub use token::Holder;
pub use watchdog::LostSignal;
