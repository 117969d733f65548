//! The read-write lock, client side, as a state machine that calls the real
//! scripts with the arguments the library sends (`primitives/rwlock/`),
//! following `docs/protocol.md`, "Read-write locks":
//!
//! - a read or a write is one wait with one token: every attempt, the first
//!   included, is `rw_acquire.lua` (`r|w token ttl issue 1`: the caller
//!   waits, so a refusal records its intent); refused, it sleeps until the
//!   reply's `wait_ms` has run (`+ 1 ms`) or a release's message wakes it;
//! - a hold's beliefs as the library computes them (valid until
//!   `sent + ttl − drift`, held before that minus the stop margin `ttl/5`);
//! - the watchdog renews every `ttl/3`: a reader with `sem_extend.lua`
//!   (`token ttl 1`), the writer with `extend.lua` (`token ttl`);
//! - a writer made without fencing asks for its token with
//!   `issue_fence.lua`;
//! - a release: a reader's `sem_release.lua` (`token PUBLISH channel 1`), the
//!   writer's `rw_release_write.lua` (`token ttl PUBLISH channel`);
//! - a waiter that gives up (its deadline, a cancel) runs the armed undo:
//!   `rw_forget.lua`, then the release of its access with its token.
//!
//! A lost reply of an attempt: the library's wait retries with the same
//! token (its armed undo runs only when the wait ends), so the model tries
//! again at once; a lost renewal is tried again; a lost release ends the
//! hold as far as the client knows.
//!
//! Invariants, after every step: a writer believed holding excludes every
//! other believed holder, reader or writer, among the holds taken since the
//! last restart (a restart without persistence loses the older ones, whose
//! fencing tokens must then be below the newer writer's; a holder paused
//! past its TTL no longer believes, as for locks); fencing tokens strictly
//! increase. And the phase-fair policy, stated as checks on each step
//! against the keys live before it: (1) every attempt's verdict is the
//! documented rule: a reader enters iff no writer holds and (no writer's
//! intent is live, or it is in the readers let in next); a writer enters
//! iff no writer holds, no reader holds and no batch of readers is let in
//! next; so a waiting writer stops new readers, and a batch goes before the
//! next writer; (2) a writer's release lets every reader waiting at that
//! moment (a live intent) into the next batch. Together: a writer waits at
//! most for the readers inside and one batch; a reader waiting when a
//! writer releases enters before the next writer, or its batch's TTL ends.

use crate::model::common::{margin, time_left, FaultWindow, Faults, Waits};
use crate::model::explore::Model;
use crate::model::trace::Record;
use crate::server::Server;

/// A deliberate bug, to show the checker catches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// `rw_acquire.lua` lets a writer in while readers hold.
    WriteIgnoresReaders,
    /// `rw_acquire.lua` lets a reader in while a writer waits (no phases).
    ReadIgnoresWaitingWriters,
    /// `rw_release_write.lua` lets no batch of readers in.
    ReleaseFormsNoBatch,
    /// The holder trusts its hold past the deadline: it is lost only when
    /// a renewal says so (a client-side bug, as the lock model's).
    TrustPastDeadline,
}

/// A client's side of the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// Reads: shares the lock with other readers.
    Read,
    /// Writes: alone.
    Write,
}

/// A bounded configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Each client's side (one entry per client).
    pub roles: Vec<Access>,
    /// How many holds (or waits given up) each client takes before it stops.
    pub holds: u8,
    /// The holds' TTL, in ms (the library's minimum is 10).
    pub ttl: i64,
    /// One tick of the clock, in ms.
    pub tick: i64,
    /// Time stops here (ms); `None`: it never stops (random walks).
    pub max_time: Option<i64>,
    /// Faults allowed in one run.
    pub max_faults: u8,
    /// Made `with_fencing`: a writer's token comes with its acquire; else it
    /// is issued on demand (`issue_fence.lua`).
    pub fenced: bool,
    /// The watchdog renews the holds.
    pub watchdog: bool,
    /// A waiter may give up (and withdraw its intent).
    pub give_up: bool,
    /// Which faults may happen.
    pub faults: Faults,
    /// A deliberate bug, or none.
    pub mutant: Option<Mutant>,
}

/// Where a client is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// About to start a wait.
    Idle,
    /// Waiting with the token of `attempt`: tries again at `recheck_at`
    /// (ms) or on a wake-up.
    Waiting {
        /// The wait's token's attempt number.
        attempt: u32,
        /// When it tries again without a wake-up.
        recheck_at: i64,
    },
    /// Holds its side, as far as it knows.
    Held(Hold),
    /// Took all its holds.
    Done,
}

impl Waits for Phase {
    fn waits(&self) -> bool {
        matches!(self, Phase::Waiting { .. })
    }
}

/// A hold's beliefs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Hold {
    /// The attempt whose token holds it.
    pub attempt: u32,
    /// Valid until (ms): `sent + ttl − drift`.
    pub deadline: i64,
    /// When the watchdog renews next.
    pub next_renew: i64,
    /// Found lost (a renewal said so).
    pub lost: bool,
    /// A writer's fencing token, once issued.
    pub fence: Option<u64>,
    /// Restarts the server had had when this hold was taken.
    pub epoch: u8,
}

/// One client.
pub type Client = crate::model::common::Client<Phase>;

/// A whole state of the model.
pub type State = crate::model::common::KeyedState<Phase>;

/// A transition.
pub type Action = crate::model::common::KeyedAction<Op>;

/// What a client can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// The wait's first attempt.
    Try,
    /// A waiter's attempt.
    Retry,
    /// The watchdog's renewal.
    Renew,
    /// A writer's fencing token on demand.
    Issue,
    /// Release the hold.
    Release,
    /// Give the wait up: withdraw the intent, release what it may hold.
    GiveUp,
}

crate::model::common::fault_target!(State, "wake-up", |client| client.woken = false);

/// The read-write lock model under one configuration.
pub struct RwLockModel {
    /// The configuration.
    pub config: Config,
    pub(crate) scripts: super::rw_step::Scripts,
}

crate::model::common::explorable!(RwLockModel, Config, Mutant, State);

impl RwLockModel {
    /// The model of `config`, its scripts mutated as `config.mutant` says.
    pub fn new(config: Config) -> Result<RwLockModel, String> {
        let scripts = super::rw_step::Scripts::load(config.mutant)?;
        Ok(RwLockModel { config, scripts })
    }

    /// Whether a client believes it holds its side at `now`.
    pub fn believes(&self, hold: &Hold, now: i64) -> bool {
        if hold.lost {
            return false;
        }
        self.config.mutant == Some(Mutant::TrustPastDeadline)
            || now < hold.deadline - margin(self.config.ttl)
    }

    /// Client `c`'s side.
    pub fn role(&self, c: usize) -> Access {
        self.config.roles.get(c).copied().unwrap_or(Access::Read)
    }

    fn client_ops(&self, i: usize, c: &Client, now: i64) -> Vec<Op> {
        if c.paused {
            return Vec::new();
        }
        match &c.phase {
            Phase::Idle => vec![Op::Try],
            Phase::Waiting { recheck_at, .. } => {
                let mut ops = Vec::new();
                if c.woken || now >= *recheck_at {
                    ops.push(Op::Retry);
                }
                if self.config.give_up {
                    ops.push(Op::GiveUp);
                }
                ops
            }
            Phase::Done => Vec::new(),
            Phase::Held(h) => {
                let mut ops = vec![Op::Release];
                let live = self.believes(h, now);
                if self.config.watchdog && now >= h.next_renew && live {
                    ops.push(Op::Renew);
                }
                let writer = self.role(i) == Access::Write;
                if live && writer && h.fence.is_none() && !self.config.fenced {
                    ops.push(Op::Issue);
                }
                ops
            }
        }
    }
}

impl Model for RwLockModel {
    type State = State;
    type Action = Action;

    fn initial(&self) -> State {
        let client = Client::starting(Phase::Idle);
        State::initial(vec![client; self.config.roles.len()])
    }

    fn actions(&self, s: &State) -> Vec<Action> {
        let cfg = &self.config;
        let mut out = Vec::new();
        let can_tick = time_left(cfg.max_time, s.now, cfg.tick);
        if can_tick {
            out.push(Action::Tick);
        }
        // A pause matters only while time can still run past it.
        let faults = FaultWindow::new(cfg.faults, s.faults, cfg.max_faults, can_tick);
        for (i, c) in s.clients.iter().enumerate() {
            for op in self.client_ops(i, c, s.now) {
                faults.step(&mut out, true, |lost| Action::Step(i, op, lost));
            }
            faults.client(&mut out, i, c.paused, c.phase != Phase::Done, c.woken);
        }
        faults.restart(&mut out, s.keys.is_empty());
        out
    }

    fn step(&self, server: &mut Server, s: &State, action: &Action) -> (State, Record) {
        crate::model::common::keyed_step(self, server, s, action)
    }

    fn check(&self, s: &State) -> Result<(), String> {
        if let Some(why) = &s.broken {
            return Err(why.clone());
        }
        if let Some(why) = super::rw_check::unwoken_waiter(self, s) {
            return Err(why);
        }
        let believers: Vec<(usize, &Hold)> = s
            .clients
            .iter()
            .enumerate()
            .filter_map(|(i, c)| match &c.phase {
                Phase::Held(h) if self.believes(h, s.now) => Some((i, h)),
                _ => None,
            })
            .collect();
        for (n, (a, ha)) in believers.iter().enumerate() {
            for (b, hb) in &believers[n + 1..] {
                let writers = (self.role(*a), self.role(*b));
                if writers == (Access::Read, Access::Read) {
                    continue;
                }
                if ha.epoch == hb.epoch {
                    return Err(format!(
                        "exclusion: c{a} ({:?}) and c{b} ({:?}) both believe they hold at {} ms",
                        writers.0, writers.1, s.now
                    ));
                }
                // A restart lost the older hold (the documented case):
                // two writers' tokens must still order them.
                let (old, new) = if ha.epoch < hb.epoch {
                    (ha, hb)
                } else {
                    (hb, ha)
                };
                if let (Some(o), Some(n)) = (old.fence, new.fence) {
                    if o >= n {
                        return Err(format!(
                            "after a restart the stale writer's token {o} is not below the new one's {n}"
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}
