//! The semaphore (N permits, a hold taking k of them at once), client side,
//! as a state machine that calls the real scripts with the arguments the
//! library sends (`primitives/semaphore/`), following `docs/protocol.md`,
//! "Semaphores":
//!
//! - every try, first or a waiter's, is `sem_acquire.lua` with a new token
//!   (`token N ttl issue k`); a first try that finds too few permits starts
//!   the wait, which tries again at once (subscribed by then); a waiter
//!   refused sleeps until the reply's `wait_ms` has run (`+ 1 ms`) or a
//!   release's message wakes it (every waiter: the semaphore's one channel);
//! - a hold's beliefs as the library computes them: valid until
//!   `sent + ttl − drift`, held while not lost and before that deadline
//!   minus the stop margin (`ttl/5`);
//! - the watchdog renews (`sem_extend.lua`, `token ttl k`) every `ttl/3`;
//!   answered 0 the hold is lost; unanswered it is tried again;
//! - a fencing token: from the acquire (`issue` `1`), or `sem_fence.lua`;
//! - a release (`sem_release.lua`, `token PUBLISH channel k`), also of a hold
//!   found lost.
//!
//! A lost reply: the script ran, the client saw a timeout. An acquire's is
//! undone as the library's armed guard does (`sem_release.lua` with that
//! attempt's token and k) before the wait tries again with a new token.
//!
//! Invariants, after every step: the permits believed held (a hold of k
//! counts k) are at most N among the holds taken since the last restart
//! (a restart without persistence loses the older ones: the documented
//! case; a holder paused past its TTL no longer believes, as for locks);
//! fencing tokens strictly increase; and each acquire's verdict is the
//! documented rule applied to the permits live before it ("takes k when at
//! most N − k unexpired permits are held"), so a script that refuses with
//! room, or grants without it, is caught at the step that does.

use crate::model::common::{margin, time_left, FaultWindow, Faults};
use crate::model::explore::Model;
use crate::model::trace::Record;
use crate::server::Server;

/// A deliberate bug, to show the checker catches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// `sem_acquire.lua` checks room for one permit whatever k is: the
    /// permit limit ignored for multi-permit acquires.
    TakeIgnoresK,
    /// `sem_acquire.lua` counts expired permits (no pruning before `ZCARD`).
    CountsExpired,
    /// `sem_extend.lua` renews the token's own member only, not `#2` … `#k`.
    ExtendOneMember,
}

/// A bounded configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// N, the permits every caller passes.
    pub permits: u32,
    /// The permits each client takes at once (one entry per client).
    pub takes: Vec<u32>,
    /// How many holds each client takes before it stops.
    pub holds: u8,
    /// The permits' TTL, in ms (the library's minimum is 10).
    pub ttl: i64,
    /// One tick of the clock, in ms.
    pub tick: i64,
    /// Time stops here (ms); `None`: it never stops (random walks).
    pub max_time: Option<i64>,
    /// Faults allowed in one run.
    pub max_faults: u8,
    /// Made `with_fencing`: the token comes with the acquire; else it is
    /// issued on demand (`sem_fence.lua`).
    pub fenced: bool,
    /// The watchdog renews the hold.
    pub watchdog: bool,
    /// Which faults may happen.
    pub faults: Faults,
    /// A deliberate bug, or none.
    pub mutant: Option<Mutant>,
}

/// Where a client is.
pub type Phase = crate::model::common::Phase<Hold>;

/// One client.
pub type Client = crate::model::common::Client<Phase>;

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
    /// The fencing token, once issued.
    pub fence: Option<u64>,
    /// Restarts the server had had when this hold was taken.
    pub epoch: u8,
}

/// A whole state of the model.
pub type State = crate::model::common::KeyedState<Phase>;

/// A transition.
pub type Action = crate::model::common::KeyedAction<Op>;

/// What a client can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// The first try.
    Try,
    /// A waiter's try.
    Retry,
    /// The watchdog's renewal.
    Renew,
    /// Issue the fencing token on demand.
    Issue,
    /// Release the hold.
    Release,
    /// Release the permits an acquire may have taken unseen.
    Cleanup,
}

crate::model::common::fault_target!(State, "wake-up", |client| client.woken = false);

/// The semaphore model under one configuration.
pub struct SemaphoreModel {
    /// The configuration.
    pub config: Config,
    pub(crate) scripts: super::sem_step::Scripts,
}

crate::model::common::explorable!(SemaphoreModel, Config, Mutant, State);

impl SemaphoreModel {
    /// The model of `config`, its scripts mutated as `config.mutant` says;
    /// an error when a client's k is not 1 to N (the library refuses it
    /// before sending anything).
    pub fn new(config: Config) -> Result<SemaphoreModel, String> {
        if let Some(k) = config.takes.iter().find(|&&k| k < 1 || k > config.permits) {
            return Err(format!("k = {k} is not 1 to N = {}", config.permits));
        }
        let scripts = super::sem_step::Scripts::load(config.mutant)?;
        Ok(SemaphoreModel { config, scripts })
    }

    /// Whether a client believes it holds its permits at `now`.
    pub fn believes(&self, hold: &Hold, now: i64) -> bool {
        !hold.lost && now < hold.deadline - margin(self.config.ttl)
    }

    /// The permits client `c` takes at once.
    pub fn take(&self, c: usize) -> u32 {
        self.config.takes.get(c).copied().unwrap_or(1)
    }

    fn client_ops(&self, c: &Client, now: i64) -> Vec<Op> {
        if c.paused {
            return Vec::new();
        }
        match &c.phase {
            Phase::Idle => vec![Op::Try],
            Phase::Waiting { recheck_at } if c.woken || now >= *recheck_at => vec![Op::Retry],
            Phase::Waiting { .. } | Phase::Done => Vec::new(),
            Phase::Cleanup { .. } => vec![Op::Cleanup],
            Phase::Held(h) => {
                let mut ops = vec![Op::Release];
                let live = self.believes(h, now);
                if self.config.watchdog && now >= h.next_renew && live {
                    ops.push(Op::Renew);
                }
                if live && h.fence.is_none() && !self.config.fenced {
                    ops.push(Op::Issue);
                }
                ops
            }
        }
    }
}

impl Model for SemaphoreModel {
    type State = State;
    type Action = Action;

    fn initial(&self) -> State {
        let client = Client::starting(Phase::Idle);
        State::initial(vec![client; self.config.takes.len()])
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
            for op in self.client_ops(c, s.now) {
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
        if let Some(why) = super::sem_step::unwoken_waiter(self, s) {
            return Err(why);
        }
        // Permits believed held, per epoch: holds from before a restart
        // were lost with the keyspace (the documented case).
        let mut by_epoch: std::collections::BTreeMap<u8, (u32, Vec<String>)> = Default::default();
        for (i, c) in s.clients.iter().enumerate() {
            if let Phase::Held(h) = &c.phase {
                if self.believes(h, s.now) {
                    let e = by_epoch.entry(h.epoch).or_default();
                    e.0 += self.take(i);
                    e.1.push(format!("c{i} ({})", self.take(i)));
                }
            }
        }
        for (epoch, (held, who)) in by_epoch {
            if held > self.config.permits {
                return Err(format!(
                    "permits: {held} believed held at {} ms (N = {}; epoch {epoch}): {}",
                    s.now,
                    self.config.permits,
                    who.join(", ")
                ));
            }
        }
        Ok(())
    }
}
