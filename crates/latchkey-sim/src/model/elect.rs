//! The election, client side, as a state machine that calls the real
//! scripts with the arguments the library sends
//! (`primitives/election/mod.rs`, `leadership.rs`), following
//! `docs/protocol.md`, "Elections":
//!
//! - a candidate subscribes to the changes channel, then tries
//!   `elect_campaign.lua` (`token ttl value channel PUBLISH`); busy, it
//!   sleeps until a change message or the lease's `pttl + 1 ms`, then tries
//!   again;
//! - elected, it believes it leads until `sent + ttl − drift` minus the stop
//!   margin (`ttl/5`), as a lock's hold; the watchdog renews the lease with
//!   `extend.lua` (`token ttl`) every `ttl/3`; a renewal answered 0 or −1
//!   loses the leadership, one unanswered is tried again;
//! - a leader proclaims a new value (`elect_proclaim.lua`, `token value
//!   channel PUBLISH`; anything but `{1, …}` loses the leadership) and
//!   resigns (`elect_resign.lua`, `token channel PUBLISH ''`), also a
//!   leadership found lost (the guard's drop);
//! - a campaign whose reply is lost may have won: the library's armed guard
//!   resigns with that attempt's token in the background.
//!
//! The invariants: no two clients believe they lead at once (unless a
//! restart without persistence came between their elections; then the
//! older one's term is below the newer's); terms strictly increase; a
//! believed leader's term is the last one issued (the same exception); the
//! state hash's `last_term` is the last term issued; the change messages
//! (what observers apply in order) carry change numbers that strictly
//! increase, one each, and the hash's `change` is the last one published;
//! an observer's `elect_leader.lua` (no arguments) names as leader the
//! holder of the lease, with the last term issued and the last change.

use crate::model::common::{time_left, Fault, FaultWindow, Faults, Keys};
use crate::model::explore::Model;
use crate::model::trace::Record;
use crate::server::Server;

/// A deliberate bug, to show the checker catches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// `elect_campaign.lua` elects whoever asks, ignoring the current leader.
    CampaignIgnoresLeader,
    /// `elect_campaign.lua` issues `last_term` again instead of a higher term.
    TermNotRaised,
}

/// A bounded configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// How many candidates.
    pub clients: usize,
    /// How many leaderships each candidate takes before it stops.
    pub leads: u8,
    /// The lease's TTL, in ms.
    pub ttl: i64,
    /// One tick of the clock, in ms.
    pub tick: i64,
    /// Time stops here (ms); `None`: it never stops (random walks).
    pub max_time: Option<i64>,
    /// Faults allowed in one run.
    pub max_faults: u8,
    /// Which faults may happen.
    pub faults: Faults,
    /// A deliberate bug, or none.
    pub mutant: Option<Mutant>,
}

/// A leadership's beliefs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lead {
    /// The campaign attempt whose token holds the lease.
    pub attempt: u32,
    /// The term it was elected with.
    pub term: u64,
    /// Valid until (ms): `sent + ttl − drift`.
    pub deadline: i64,
    /// When the watchdog renews next.
    pub next_renew: i64,
    /// Found lost (a renewal or a proclaim said so).
    pub lost: bool,
    /// Proclaimed once already (once per leadership keeps the space small).
    pub proclaimed: bool,
    /// Restarts the server had had when it was elected.
    pub epoch: u8,
}

/// Where a candidate is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// About to campaign (subscribed, first attempt).
    Idle,
    /// Busy: tries again at `recheck_at` (ms) or on a change message.
    Waiting {
        /// When it tries again without a message.
        recheck_at: i64,
    },
    /// Leads, as far as it knows.
    Leading(Lead),
    /// A campaign's reply was lost: resign with that attempt's token.
    Cleanup {
        /// The attempt whose token to resign.
        attempt: u32,
    },
    /// Took all its leaderships.
    Done,
}

/// One candidate.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// Where it is.
    pub phase: Phase,
    /// Paused: takes no step while time runs.
    pub paused: bool,
    /// Campaign attempts made (each has its own token).
    pub attempts: u32,
    /// Leaderships ended.
    pub leads: u8,
    /// A change message arrived and was not acted on yet.
    pub woken: bool,
}

/// A whole state of the model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The server's clock, ms since the model's start.
    pub now: i64,
    /// The live keys.
    pub keys: Keys,
    /// The candidates.
    pub clients: Vec<Client>,
    /// The highest term issued (0: none).
    pub last_term: u64,
    /// The last change number published (0: none since the start or the
    /// last restart, which loses the counter: documented).
    pub last_change: i64,
    /// Something went wrong that only a step sees (a term that did not
    /// increase, an error reply): kept to report.
    pub broken: Option<String>,
    /// Restarts so far.
    pub restarts: u8,
    /// Faults so far.
    pub faults: u8,
}

/// What a candidate can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// A campaign attempt.
    Campaign,
    /// The watchdog's renewal.
    Renew,
    /// Proclaim a new value.
    Proclaim,
    /// Resign.
    Resign,
    /// Resign a leadership a campaign may have won unseen.
    Cleanup,
}

/// A transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The clock moves one tick.
    Tick,
    /// A fault, or a paused client's resume.
    Fault(Fault),
    /// An observer reads the leader with `elect_leader.lua`.
    Observe,
    /// A candidate steps; `true`: the reply is lost.
    Step(usize, Op, bool),
}

crate::model::common::fault_action!(Action);

crate::model::common::fault_target!(
    State,
    "change message",
    |client| client.woken = false,
    |state| state.last_change = 0
);

/// The election model under one configuration.
pub struct ElectionModel {
    /// The configuration.
    pub config: Config,
    pub(crate) scripts: super::elect_step::Scripts,
}

crate::model::common::explorable!(ElectionModel, Config, Mutant, State);

impl ElectionModel {
    /// The model of `config`, its scripts mutated as `config.mutant` says.
    pub fn new(config: Config) -> Result<ElectionModel, String> {
        let scripts = super::elect_step::Scripts::load(config.mutant)?;
        Ok(ElectionModel { config, scripts })
    }

    /// Whether a leadership is believed at `now`: not found lost, and
    /// before its deadline minus the stop margin (`ttl/5`).
    pub fn believes(&self, lead: &Lead, now: i64) -> bool {
        !lead.lost && now < lead.deadline - self.config.ttl / 5
    }

    fn client_ops(&self, c: &Client, now: i64) -> Vec<Op> {
        if c.paused {
            return Vec::new();
        }
        match &c.phase {
            Phase::Idle => vec![Op::Campaign],
            Phase::Waiting { recheck_at } if c.woken || now >= *recheck_at => {
                vec![Op::Campaign]
            }
            Phase::Waiting { .. } | Phase::Done => Vec::new(),
            Phase::Cleanup { .. } => vec![Op::Cleanup],
            Phase::Leading(l) => {
                let mut ops = vec![Op::Resign];
                let live = self.believes(l, now);
                if live && now >= l.next_renew {
                    ops.push(Op::Renew);
                }
                if live && !l.proclaimed {
                    ops.push(Op::Proclaim);
                }
                ops
            }
        }
    }
}

impl Model for ElectionModel {
    type State = State;
    type Action = Action;

    fn initial(&self) -> State {
        let client = Client {
            phase: Phase::Idle,
            paused: false,
            attempts: 0,
            leads: 0,
            woken: false,
        };
        State {
            now: 0,
            keys: Keys::new(),
            clients: vec![client; self.config.clients],
            last_term: 0,
            last_change: 0,
            broken: None,
            restarts: 0,
            faults: 0,
        }
    }

    fn actions(&self, s: &State) -> Vec<Action> {
        let cfg = &self.config;
        let mut out = Vec::new();
        let can_tick = time_left(cfg.max_time, s.now, cfg.tick);
        if can_tick {
            out.push(Action::Tick);
        }
        let faults = FaultWindow::new(cfg.faults, s.faults, cfg.max_faults, can_tick);
        for (i, c) in s.clients.iter().enumerate() {
            for op in self.client_ops(c, s.now) {
                faults.step(&mut out, true, |lost| Action::Step(i, op, lost));
            }
            faults.client(&mut out, i, c.paused, c.phase != Phase::Done, c.woken);
        }
        if !s.keys.is_empty() {
            out.push(Action::Observe);
        }
        faults.restart(&mut out, s.keys.is_empty());
        out
    }

    fn step(&self, server: &mut Server, s: &State, action: &Action) -> (State, Record) {
        super::elect_step::step(self, server, s, action)
    }

    fn check(&self, s: &State) -> Result<(), String> {
        if let Some(why) = &s.broken {
            return Err(why.clone());
        }
        let leaders: Vec<(usize, &Lead)> = s
            .clients
            .iter()
            .enumerate()
            .filter_map(|(i, c)| match &c.phase {
                Phase::Leading(l) if self.believes(l, s.now) => Some((i, l)),
                _ => None,
            })
            .collect();
        for (n, (a, la)) in leaders.iter().enumerate() {
            for (b, lb) in &leaders[n + 1..] {
                if la.epoch == lb.epoch {
                    return Err(format!(
                        "one leader: c{a} (term {}) and c{b} (term {}) both believe they lead at {} ms",
                        la.term, lb.term, s.now
                    ));
                }
                let (old, new) = if la.epoch < lb.epoch {
                    (la, lb)
                } else {
                    (lb, la)
                };
                if old.term >= new.term {
                    return Err(format!(
                        "after a restart the stale leader's term {} is not below the new one's {}",
                        old.term, new.term
                    ));
                }
            }
        }
        // A believed leader's term is the last issued, unless a restart
        // without persistence came since its election (documented: then a
        // later term orders them, checked above).
        for (a, la) in &leaders {
            if la.epoch == s.restarts && la.term != s.last_term {
                return Err(format!(
                    "c{a} believes it leads with term {} but term {} was issued since",
                    la.term, s.last_term
                ));
            }
        }
        let state_key = crate::model::elect_step::state_key();
        let change = crate::model::common::field(&s.keys, &state_key, b"change");
        if change.is_some_and(|c| c != s.last_change) {
            return Err(format!(
                "the state hash's change {change:?} is not the last one published, {}",
                s.last_change
            ));
        }
        if let Some(stored) = crate::model::common::field(&s.keys, &state_key, b"last_term") {
            if u64::try_from(stored).ok() != Some(s.last_term) {
                return Err(format!(
                    "the state hash's last_term {stored} is not the last term issued, {}",
                    s.last_term
                ));
            }
        }
        Ok(())
    }
}
