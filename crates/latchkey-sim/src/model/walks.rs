//! The larger configurations every model is walked in (5–12 clients, every
//! fault, thousands of steps), shared by the seeded walks of
//! `tests/model_*.rs` and the long runs of `./dev sim --seconds N`
//! ([`crate::model::runner`], `src/bin/walks.rs`), so that both walk the
//! same models.
//!
//! Each [`Target`] is one model in one configuration (the plain lock also
//! with holds made `with_max_hold(30 ms)`), built once and
//! walked from any seed: the configurations below with a name, the
//! invariants its `check` judges after every step, and the call that
//! replays one of its walks.

use crate::model::barrier::{self, BarrierModel};
use crate::model::common::Faults;
use crate::model::elect::{self, ElectionModel};
use crate::model::explore::{self, Model, Violation};
use crate::model::fair::{self, FairModel};
use crate::model::latch::{self, LatchModel};
use crate::model::lock::{self, LockModel};
use crate::model::multi::{self, Kind, MultiModel};
use crate::model::rwlock::{self, Access, RwLockModel};
use crate::model::semaphore::{self, SemaphoreModel};
use crate::model::signal::{self, SignalModel};

/// Five clients on one lock, a TTL of 10 ms in ticks of 2 ms, watchdogs,
/// holds without end, up to four faults of every kind.
pub fn lock(fenced: bool) -> lock::Config {
    lock::Config {
        clients: 5,
        holds: u8::MAX,
        ttl: 10,
        tick: 2,
        max_time: None,
        max_faults: 4,
        fenced,
        watchdog: true,
        faults: Faults::ALL,
        mutant: None,
    }
}

/// [`lock`]`(true)` with a TTL of 20 ms, for holds capped at 30 ms: the
/// watchdog (every 6 ms) renews for the whole TTL, then shortened to end
/// by the cap (at 12 and 18 ms after the acquire), then not at all.
pub fn lock_capped() -> lock::Config {
    lock::Config {
        ttl: 20,
        ..lock(true)
    }
}

/// Six fair clients, up to six faults and two revocations, hand-off
/// messages that may arrive late. Fenced: a waiter lease of 6 ms (shorter
/// than the TTL); not fenced: waiters that give up and a lease of 12 ms
/// (longer than the TTL).
pub fn fair(fenced: bool) -> fair::Config {
    fair::Config {
        clients: 6,
        holds: u8::MAX,
        ttl: 10,
        lease: if fenced { 6 } else { 12 },
        tick: 2,
        max_time: None,
        max_faults: 6,
        fenced,
        watchdog: true,
        leave: !fenced,
        revokes: 2,
        late_messages: true,
        faults: Faults::ALL,
        mutant: None,
    }
}

/// N = 3 permits, six clients taking 1, 1, 2, 1, 3 and 2 at once.
pub fn semaphore(fenced: bool) -> semaphore::Config {
    semaphore::Config {
        permits: 3,
        takes: vec![1, 1, 2, 1, 3, 2],
        holds: u8::MAX,
        ttl: 10,
        tick: 2,
        max_time: None,
        max_faults: 4,
        fenced,
        watchdog: true,
        faults: Faults::ALL,
        mutant: None,
    }
}

/// Four readers and two writers, waiters that may give up.
pub fn rwlock(fenced: bool) -> rwlock::Config {
    use Access::{Read, Write};
    rwlock::Config {
        roles: vec![Read, Write, Read, Read, Write, Read],
        holds: u8::MAX,
        ttl: 10,
        tick: 2,
        max_time: None,
        max_faults: 4,
        fenced,
        watchdog: true,
        give_up: true,
        faults: Faults::ALL,
        mutant: None,
    }
}

/// The several-names model's shape (`tests/model_multi.rs`' `small`) with
/// `clients`, holds without end, four faults and four requests to release.
fn multi_with(names: usize, clients: Vec<Kind>, fenced: bool) -> multi::Config {
    multi::Config {
        names,
        clients,
        holds: u8::MAX,
        ttl: 10,
        tick: 2,
        idle: 6,
        max_time: None,
        max_faults: 4,
        fenced,
        watchdog: true,
        faults: Faults::ALL,
        asks: 4,
        mutant: None,
    }
}

/// Three `lock_all`s over overlapping sets of three names, two plain locks
/// and a keeper of a hold kept while idle.
pub fn multi(fenced: bool) -> multi::Config {
    let clients = vec![
        Kind::Multi(0b111),
        Kind::Multi(0b011),
        Kind::Multi(0b110),
        Kind::Plain(0),
        Kind::Plain(2),
        Kind::Keeper(1),
    ];
    multi_with(3, clients, fenced)
}

/// Three keepers of holds kept while idle on two names, with two plain
/// waiters and a `lock_all` of both names.
pub fn cached(fenced: bool) -> multi::Config {
    let clients = vec![
        Kind::Keeper(0),
        Kind::Keeper(1),
        Kind::Keeper(0),
        Kind::Plain(0),
        Kind::Plain(1),
        Kind::Multi(0b11),
    ];
    multi_with(2, clients, fenced)
}

/// Five candidates, leaderships without end, four faults.
pub fn election() -> elect::Config {
    elect::Config {
        clients: 5,
        leads: u8::MAX,
        ttl: 10,
        tick: 2,
        max_time: None,
        max_faults: 4,
        faults: Faults::ALL,
        mutant: None,
    }
}

/// A latch of 5 with six workers and five waiters, expiring at 30 ms of
/// 40: a walk runs until every client is done and time is up.
pub fn latch() -> latch::Config {
    latch::Config {
        count: 5,
        workers: 6,
        waiters: 5,
        ttl: 30,
        tick: 2,
        max_time: 40,
        max_faults: 4,
        faults: Faults::ALL,
        mutant: None,
    }
}

/// A barrier of 4 parties among six clients, arrivals without end.
pub fn barrier() -> barrier::Config {
    barrier::Config {
        parties: 4,
        clients: 6,
        rounds: u8::MAX,
        ttl: 1000,
        tick: 500,
        max_time: 1_000_000,
        max_faults: 4,
        faults: Faults::ALL,
        mutant: None,
    }
}

/// Six waiters on `job`, three on `jo*`, 200 signals, eight faults.
pub fn signal() -> signal::Config {
    signal::Config {
        waiters: [6, 3],
        rounds: u8::MAX,
        sends: 200,
        max_faults: 8,
        faults: Faults::ALL,
        mutant: None,
    }
}

/// A walk from a seed: its steps taken, or the violation (shrunk).
type WalkFn = Box<dyn Fn(u64, usize) -> Result<usize, Box<Violation>>>;

/// One model in one configuration, ready to walk from any seed.
pub struct Target {
    /// Its name on the command line (`--model`), e.g. `lock-unfenced`.
    pub name: &'static str,
    /// The invariants its `check` judges after every step.
    pub invariants: &'static [&'static str],
    /// The steps of one walk (a walk may end sooner: every client done).
    pub steps: usize,
    /// The Rust call that replays a walk, with `SEED` for its seed.
    pub replay: &'static str,
    walk: WalkFn,
}

impl Target {
    /// Walks from `seed` for at most `steps` steps (see [`explore::walk`]).
    pub fn walk(&self, seed: u64, steps: usize) -> Result<usize, Box<Violation>> {
        (self.walk)(seed, steps)
    }
}

/// A target of `model` (the error of its `new` passed on, with the
/// name): how tests and new models plug into the runner.
pub fn target<M: Model + 'static>(
    name: &'static str,
    model: Result<M, String>,
    invariants: &'static [&'static str],
    steps: usize,
    replay: &'static str,
) -> Result<Target, String> {
    let model = model.map_err(|e| format!("{name}: {e}"))?;
    Ok(Target {
        name,
        invariants,
        steps,
        replay,
        walk: Box::new(move |seed, steps| explore::walk(&model, seed, steps).map(|(n, _)| n)),
    })
}

const LOCK: &[&str] = &[
    "exclusion: no two clients believe they hold the lock (but across a restart without persistence)",
    "across such a restart, the stale hold's fencing token is below the new one's",
    "fencing tokens strictly increase",
    "a fenced resource accepts no two holds' writes with the same token",
    "every reply is one the protocol expects",
];
const LOCK_CAPPED: &[&str] = &[
    "exclusion, fencing and replies (as for the plain lock)",
    "max hold: no client believes it holds at or past its cap minus the stop margin",
    "max hold: no renewal takes the key past the cap (expiry <= max(acquired + ttl, cap))",
];
const FAIR: &[&str] = &[
    "exclusion (as for the plain lock)",
    "fencing tokens strictly increase, every one after a revocation above its fence",
    "FIFO among waiters that kept their leases",
    "a hand-off goes to a live entry: its own lease and its process's record both run",
    "a dead waiter delays the queue by at most its lease",
    "a hand-off nobody takes up ends within its bound",
];
const SEMAPHORE: &[&str] = &[
    "at most N permits believed held (a hold of k counts k)",
    "fencing tokens strictly increase",
    "each acquire's verdict is the room-for-k rule applied to the permits live before it",
];
const RWLOCK: &[&str] = &[
    "a writer believed holding excludes every other believed holder",
    "fencing tokens strictly increase (a stale writer's below the new one's after a restart)",
    "each acquire's verdict is the phase-fair policy applied to the keys live before it",
];
const MULTI: &[&str] = &[
    "exclusion per name (a keeper's hold counts while in local use)",
    "all or none, in the clients' beliefs and in the keyspace",
    "fencing tokens per name below the newer hold's after a restart",
    "liveness: with no fault, no waiter waits over a tick while its names are free or kept idle",
    "with faults, a waiter waits at most ttl + idle while its names are free or kept idle",
];
const ELECTION: &[&str] = &[
    "one leader at a time (across a restart, the older term below the newer)",
    "terms strictly increase; a believed leader's term is the last issued",
    "change numbers strictly increase, one each; the hash's change is the last published",
    "elect_leader.lua names the lease's holder with the last term and change",
];
const LATCH: &[&str] = &[
    "a waiter is released only once a count-down took the count to 0",
    "each count-down takes exactly one off, never below 0",
    "opened is published once per latch",
];
const BARRIER: &[&str] = &[
    "a generation is released by the arrival that makes N arrivals not taken back",
    "a party passes only a generation released with its arrival counted",
    "the hash's arrived, a: fields, parties, gen and id match the arrivals",
    "a restart may forget arrivals, never make a party pass",
];
const SIGNAL: &[&str] = &[
    "signal_one.lua reaches at most one waiter, of that name",
    "it answers 0 exactly when nobody waits on the name",
    "a broadcast reaches every waiter of the name and answers their number",
    "a waiter receives only what was sent after it subscribed",
];

/// Every model in its larger configurations, in the order a long run
/// rotates over them.
pub fn targets() -> Result<Vec<Target>, String> {
    Ok(vec![
        target(
            "lock",
            LockModel::new(lock(true)),
            LOCK,
            3000,
            "LockModel::new(walks::lock(true))?.walk(SEED, 3000)",
        )?,
        target(
            "lock-unfenced",
            LockModel::new(lock(false)),
            LOCK,
            3000,
            "LockModel::new(walks::lock(false))?.walk(SEED, 3000)",
        )?,
        target(
            "lock-capped",
            LockModel::new(lock_capped()).map(|m| m.with_max_hold(30)),
            LOCK_CAPPED,
            3000,
            "LockModel::new(walks::lock_capped())?.with_max_hold(30).walk(SEED, 3000)",
        )?,
        target(
            "fair",
            FairModel::new(fair(true)),
            FAIR,
            3000,
            "FairModel::new(walks::fair(true))?.walk(SEED, 3000)",
        )?,
        target(
            "fair-unfenced",
            FairModel::new(fair(false)),
            FAIR,
            3000,
            "FairModel::new(walks::fair(false))?.walk(SEED, 3000)",
        )?,
        target(
            "semaphore",
            SemaphoreModel::new(semaphore(true)),
            SEMAPHORE,
            3000,
            "SemaphoreModel::new(walks::semaphore(true))?.walk(SEED, 3000)",
        )?,
        target(
            "semaphore-unfenced",
            SemaphoreModel::new(semaphore(false)),
            SEMAPHORE,
            3000,
            "SemaphoreModel::new(walks::semaphore(false))?.walk(SEED, 3000)",
        )?,
        target(
            "rwlock",
            RwLockModel::new(rwlock(true)),
            RWLOCK,
            3000,
            "RwLockModel::new(walks::rwlock(true))?.walk(SEED, 3000)",
        )?,
        target(
            "rwlock-unfenced",
            RwLockModel::new(rwlock(false)),
            RWLOCK,
            3000,
            "RwLockModel::new(walks::rwlock(false))?.walk(SEED, 3000)",
        )?,
        target(
            "multi",
            MultiModel::new(multi(true)),
            MULTI,
            3000,
            "MultiModel::new(walks::multi(true))?.walk(SEED, 3000)",
        )?,
        target(
            "multi-unfenced",
            MultiModel::new(multi(false)),
            MULTI,
            3000,
            "MultiModel::new(walks::multi(false))?.walk(SEED, 3000)",
        )?,
        target(
            "cached",
            MultiModel::new(cached(true)),
            MULTI,
            3000,
            "MultiModel::new(walks::cached(true))?.walk(SEED, 3000)",
        )?,
        target(
            "cached-unfenced",
            MultiModel::new(cached(false)),
            MULTI,
            3000,
            "MultiModel::new(walks::cached(false))?.walk(SEED, 3000)",
        )?,
        target(
            "election",
            ElectionModel::new(election()),
            ELECTION,
            2000,
            "ElectionModel::new(walks::election())?.walk(SEED, 2000)",
        )?,
        target(
            "latch",
            LatchModel::new(latch()),
            LATCH,
            2000,
            "LatchModel::new(walks::latch())?.walk(SEED, 2000)",
        )?,
        target(
            "barrier",
            BarrierModel::new(barrier()),
            BARRIER,
            2000,
            "BarrierModel::new(walks::barrier())?.walk(SEED, 2000)",
        )?,
        target(
            "signal",
            SignalModel::new(signal()),
            SIGNAL,
            2000,
            "SignalModel::new(walks::signal())?.walk(SEED, 2000)",
        )?,
    ])
}
