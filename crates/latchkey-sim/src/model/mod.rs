//! Executable models of latchkey's protocol, run against the simulated
//! server with the library's real scripts, and the explorers that search
//! them for broken invariants.
//!
//! The plain lock with fencing ([`lock`]): its client side as a
//! state machine (attempt, wait, renew, issue a fencing token, write to a
//! fenced resource, release), time and faults as transitions, and the
//! invariants of exclusion and fencing checked after every step.
//!
//! Several names at once ([`multi`]): `lock_all` clients
//! (`multi_acquire.lua`, `multi_extend.lua`, `multi_release.lua`) beside
//! plain locks of the same names and keepers of holds kept while idle
//! (`CachedLock`, `cached.rs`), with exclusion per name, all or none (in
//! the clients' beliefs and in the keyspace), and a liveness bound: with
//! no fault, no waiter waits more than a tick while its names are free or
//! kept idle (no deadlock, no lost wake-up, a kept hold given back when
//! wanted, by a plain waiter or a `lock_all` one). Requests to release
//! (`Client::request_release`) arrive there as transitions too.
//!
//! The fair lock ([`fair`]: `fair_model.rs` what is enabled when,
//! `fair_step.rs` the transitions,
//! `fair_client.rs` a client's steps, `fair_check.rs` the invariants): a
//! first try and queueing (`fair_acquire.lua`), the renewal task's
//! renewal of its process's record and its entry's own lease
//! (`fair_renew.lua`), the hand-off message or a look finding the
//! hand-off, the watchdog and
//! the hand-off's extension, a release handing on (`fair_release.lua`), a
//! waiter leaving (`fair_leave.lua`), an operator's revocation
//! (`fair_revoke.lua`); checked for exclusion, fencing (strictly rising
//! tokens, every later one above a revocation's fence), FIFO among
//! waiters that kept their leases (an entry live while its own lease and
//! its process's record both run), hand-offs only to live entries, and the
//! delay a dead waiter can cause.
//! The semaphore ([`semaphore`]: N permits, holds of k at once) and the
//! read-write lock ([`rwlock`]) share one state and one step
//! ([`common::keyed`]; a `*_step.rs` each for a client's steps), over the
//! keyspace kept as data ([`common::snapshot`]): at most N permits believed
//! held; a writer believed holding excludes every other believed holder;
//! and each acquire's verdict is the documented rule (the semaphore's
//! room for k, the read-write lock's phase-fair policy) applied to the
//! keys live before it.
//!
//! The election ([`elect`]: campaign, wait for a vacancy, renew, proclaim,
//! resign; one leader per term, terms strictly increasing), the latch and
//! the barrier ([`latch`], [`barrier`]: counts and generations as
//! documented), and signals ([`signal`]: `signal_one.lua` hands a signal to
//! at most one waiter of the name, a broadcast reaches every one), over
//! the same keyspace snapshot.
//!
//! What the models share is in [`common`]: the fault transitions (a pause
//! and resume, a lost message, a restart; a lost reply as a client's step
//! whose reply does not arrive), which every model's `Action` carries as
//! `Action::Fault`, so that a new fault comes to all of them at once; the
//! keyspace snapshot; the scripts' texts and a mutant's change; and the
//! harness every model's tests search and check mutants with.
//!
//! The models are the protocol in executable form, and [`conform`] keeps
//! them honest: each says, per operation, what it sends (from the code its
//! steps send with), and `tests/conformance.rs` asserts that the real
//! library sends a real server the same scripts with the same argument
//! shapes. Every model is plugged in; a new model plugs in as
//! [`conform`]'s module docs say.

pub mod barrier;
mod barrier_step;
mod cached;
pub mod common;
pub mod conform;
mod conform_lock;
mod conform_roles;
mod count_request;
pub mod elect;
mod elect_request;
mod elect_step;
pub mod explore;
pub mod fair;
mod fair_check;
mod fair_client;
mod fair_model;
mod fair_request;
mod fair_step;
pub mod latch;
pub mod lock;
mod lock_cap;
pub mod lock_failover;
mod lock_request;
mod lock_step;
pub mod multi;
mod multi_check;
mod multi_request;
mod multi_scripts;
mod multi_step;
pub mod runner;
mod rw_check;
mod rw_request;
mod rw_step;
pub mod rwlock;
mod sem_request;
mod sem_step;
pub mod semaphore;
pub mod signal;
mod signal_request;
pub mod trace;
pub mod walks;

pub use common::harness::replay;
pub use common::harness::replay as replay_fair;
pub use common::harness::replay as replay_rwlock;
pub use common::harness::replay as replay_semaphore;
pub use lock_request::Request;
