//! The barrier, client side, as a state machine that calls the real
//! scripts with the arguments the library sends (`primitives/barrier.rs`),
//! following `docs/protocol.md`, "Latches and barriers":
//!
//! - a party subscribes to the released channel, then arrives with
//!   `barrier_arrive.lua` (`parties ttl PUBLISH channel token keep`, `keep`
//!   the library's for a wait without a deadline: a year); `{g, 1, id}`: it
//!   released generation `g` and passes; `{g, 0, id}`: it waits, and keeps
//!   `id`, the barrier's identity;
//! - a waiter that hears the message naming its generation, or rechecks (a
//!   missed message, the timer), reads `HMGET gen id` and judges it as the
//!   library's `judge` does: another `id` is a barrier made again (gone:
//!   `NotFound`); else a message heard passes, and a recheck passes when
//!   the generation is past its own, waits when it is its own, and is gone
//!   when the key is, or the generation is below its own;
//! - a waiter may give up at any time (a timeout, a cancellation) and takes
//!   its arrival back with `barrier_leave.lua` (`token id gen`): 1
//!   withdrawn, 0 released meanwhile (it passes), −1 the barrier is gone or
//!   made again;
//! - an arrival whose reply is lost is taken back by the library's armed
//!   guard (`barrier_leave.lua` with its token alone: no reply, no id),
//!   and the call fails.
//!
//! The invariants, with the model's own record of who arrived: a
//! generation is released by the arrival that makes `parties` arrivals not
//! taken back; a party passes only a generation released with its arrival
//! counted; the hash's `arrived` is the arrivals not taken back, its
//! `a:` fields are theirs, `parties` is there exactly while someone waits,
//! `gen` counts the releases, and `id` is there. A restart may forget
//! arrivals (a limit of Redis without persistence), never make a party
//! pass. Pauses are not modelled: a party's wait
//! has no deadline here (giving up is allowed at any time instead).

use std::collections::BTreeSet;

use latchkey::protocol::{primitive_key, BARRIER_RELEASED_SUFFIX, BARRIER_SUFFIX};

use crate::model::common::{field, get, load, mutate, script, take_fault, token, Keys, Stored};
use crate::model::common::{Fault, FaultTarget, FaultWindow, Faults};
use crate::model::explore::Model;
use crate::model::trace::Record;
use crate::server::Server;

/// A deliberate bug, to show the checker catches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// `barrier_arrive.lua` releases a generation one arrival early.
    TripsEarly,
    /// `barrier_leave.lua` drops the party's field without counting it out.
    LeaveNotCounted,
    /// `barrier_leave.lua` as in 0.3: a barrier that exists without the
    /// party's field was "released meanwhile", whatever its `id`.
    LeaveIgnoresId,
    /// The waiter judges what it reads by the generation alone, as 0.3 did.
    WaiterIgnoresId,
}

/// A bounded configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// The barrier's parties, N.
    pub parties: u8,
    /// How many clients.
    pub clients: usize,
    /// How many times each client arrives.
    pub rounds: u8,
    /// The barrier's TTL, in ms.
    pub ttl: i64,
    /// One tick of the clock, in ms.
    pub tick: i64,
    /// Time stops here (ms).
    pub max_time: i64,
    /// Faults allowed in one run.
    pub max_faults: u8,
    /// Which faults may happen (`pause` is ignored).
    pub faults: Faults,
    /// A deliberate bug, or none.
    pub mutant: Option<Mutant>,
}

/// Where a party is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// About to arrive.
    Idle,
    /// Arrived in `gen` with `attempt`'s token, waiting.
    Waiting {
        /// The generation it arrived in.
        gen: i64,
        /// The arrival's token.
        attempt: u32,
        /// The barrier's `id` its arrival answered: the token of that
        /// (client, attempt).
        id: (usize, u32),
        /// The barrier's incarnation it arrived in.
        epoch: u8,
        /// The message naming its generation arrived.
        woken: bool,
    },
    /// An arrival's reply was lost: take it back.
    Cleanup {
        /// The arrival's token.
        attempt: u32,
    },
}

/// A party.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Party {
    /// Where it is.
    pub phase: Phase,
    /// Arrivals made (each has its own token).
    pub attempts: u32,
    /// Calls finished (passed or failed).
    pub rounds: u8,
    /// Generations passed.
    pub passed: u8,
}

/// A whole state of the model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The server's clock, ms since the model's start.
    pub now: i64,
    /// The live keys.
    pub keys: Keys,
    /// The parties.
    pub parties: Vec<Party>,
    /// The barrier's incarnation (a new one after its TTL or a restart).
    pub epoch: u8,
    /// The current generation, as the model counts releases.
    pub gen: i64,
    /// The arrivals of the current generation not taken back.
    pub live: BTreeSet<(usize, u32)>,
    /// Every arrival a release counted: (epoch, generation, party, attempt).
    pub counted: BTreeSet<(u8, i64, usize, u32)>,
    /// What only a step sees broken, kept to report.
    pub broken: Option<String>,
    /// Faults so far.
    pub faults: u8,
}

/// What a party does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `barrier_arrive.lua`.
    Arrive,
    /// The released message names its generation: `HMGET gen id`.
    Hear,
    /// `HMGET gen id`, after a missed message or on the timer.
    Recheck,
    /// Gives up: `barrier_leave.lua`.
    GiveUp,
    /// Takes back an arrival whose reply was lost: `barrier_leave.lua`.
    Cleanup,
}

/// A transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The clock moves one tick.
    Tick,
    /// A fault.
    Fault(Fault),
    /// A party steps; `true`: the reply is lost.
    Step(usize, Op, bool),
}

crate::model::common::fault_action!(Action);

impl FaultTarget for State {
    const MESSAGE: &'static str = "message";

    fn count_fault(&mut self) {
        self.faults += 1;
    }

    fn lose_message(&mut self, c: usize) {
        if let Phase::Waiting { woken, .. } = &mut self.parties[c].phase {
            *woken = false;
        }
    }

    fn restart(&mut self, _tick: i64) {
        self.keys.clear();
    }
}

/// What the library passes as `keep` for a wait without a deadline: its
/// `KEEP_AT_MOST`, a year, in ms.
pub(crate) const KEEP_MS: i64 = 365 * 24 * 3600 * 1000;

/// The barrier model under one configuration.
pub struct BarrierModel {
    /// The configuration.
    pub config: Config,
    pub(crate) arrive: String,
    pub(crate) leave: String,
}

crate::model::common::explorable!(BarrierModel, Config, Mutant, State);

pub(crate) fn key() -> Vec<u8> {
    primitive_key(b"", b"model", BARRIER_SUFFIX)
}

pub(crate) fn channel() -> String {
    String::from_utf8_lossy(&primitive_key(b"", b"model", BARRIER_RELEASED_SUFFIX)).into_owned()
}

impl BarrierModel {
    /// The model of `config`, its scripts mutated as `config.mutant` says.
    pub fn new(config: Config) -> Result<BarrierModel, String> {
        let (mut arrive, mut leave) = (script("barrier_arrive.lua")?, script("barrier_leave.lua")?);
        match config.mutant {
            Some(Mutant::TripsEarly) => {
                arrive = mutate(
                    &arrive,
                    "if arrived >= parties then",
                    "if arrived + 1 >= parties then",
                )?;
            }
            Some(Mutant::LeaveNotCounted) => {
                leave = mutate(
                    &leave,
                    "redis.call('HINCRBY', KEYS[1], 'arrived', -1) <= 0",
                    "false",
                )?;
            }
            Some(Mutant::LeaveIgnoresId) => {
                leave = mutate(
                    &leave,
                    "if not ARGV[2] then return 0 end",
                    "do return 0 end",
                )?;
            }
            Some(Mutant::WaiterIgnoresId) | None => {}
        }
        Ok(BarrierModel {
            config,
            arrive,
            leave,
        })
    }
}

impl Model for BarrierModel {
    type State = State;
    type Action = Action;

    fn initial(&self) -> State {
        let party = Party {
            phase: Phase::Idle,
            attempts: 0,
            rounds: 0,
            passed: 0,
        };
        State {
            now: 0,
            keys: Keys::new(),
            parties: vec![party; self.config.clients],
            epoch: 0,
            gen: 0,
            live: BTreeSet::new(),
            counted: BTreeSet::new(),
            broken: None,
            faults: 0,
        }
    }

    fn actions(&self, s: &State) -> Vec<Action> {
        let cfg = &self.config;
        let mut out = Vec::new();
        if s.now + cfg.tick <= cfg.max_time {
            out.push(Action::Tick);
        }
        // A restart here takes no time: it may come when time has run out.
        let faults = FaultWindow::new(cfg.faults, s.faults, cfg.max_faults, true);
        for (i, p) in s.parties.iter().enumerate() {
            let ops: &[Op] = match p.phase {
                Phase::Idle if p.rounds < cfg.rounds => &[Op::Arrive],
                Phase::Idle => &[],
                Phase::Waiting { woken: true, .. } => &[Op::Hear, Op::Recheck, Op::GiveUp],
                Phase::Waiting { .. } => &[Op::Recheck, Op::GiveUp],
                Phase::Cleanup { .. } => &[Op::Cleanup],
            };
            for &op in ops {
                faults.step(&mut out, op != Op::Hear, |lost| Action::Step(i, op, lost));
            }
            let message = matches!(p.phase, Phase::Waiting { woken: true, .. });
            faults.client(&mut out, i, false, false, message);
        }
        faults.restart(&mut out, s.keys.is_empty());
        out
    }

    fn step(&self, server: &mut Server, s: &State, action: &Action) -> (State, Record) {
        let mut n = s.clone();
        let record = match *action {
            Action::Tick => {
                n.now += self.config.tick;
                Record::world(s.now, "tick", format!("+{} ms", self.config.tick))
            }
            Action::Fault(fault) => take_fault(&mut n, s.now, 0, fault),
            Action::Step(c, op, lost) => {
                n.faults += u8::from(lost);
                load(server, s.now, &s.keys);
                return {
                    let record = self.client_step(server, &mut n, c, op, lost);
                    self.settle(server, &mut n);
                    (n, record)
                };
            }
        };
        load(server, n.now, &n.keys);
        self.settle(server, &mut n);
        (n, record)
    }

    fn check(&self, s: &State) -> Result<(), String> {
        if let Some(why) = &s.broken {
            return Err(why.clone());
        }
        let k = key();
        let Some(Stored::Hash(h)) = get(&s.keys, &k) else {
            return Ok(());
        };
        let arrived = field(&s.keys, &k, b"arrived").unwrap_or(-1);
        let fields: BTreeSet<&[u8]> = h
            .iter()
            .filter_map(|(f, _)| f.strip_prefix(b"a:"))
            .collect();
        let tokens: BTreeSet<String> = s.live.iter().map(|&(c, a)| token(c, a)).collect();
        let has_parties = h.iter().any(|(f, _)| f == b"parties");
        if usize::try_from(arrived).ok() != Some(s.live.len()) {
            return Err(format!(
                "the barrier counts {arrived} arrived, but {} arrivals were not taken back",
                s.live.len()
            ));
        }
        if fields.len() != tokens.len() || tokens.iter().any(|t| !fields.contains(t.as_bytes())) {
            return Err(format!(
                "the barrier's a: fields are not the {} arrivals waiting",
                tokens.len()
            ));
        }
        if has_parties != (arrived > 0) {
            return Err(format!("the barrier keeps parties with {arrived} arrived"));
        }
        if !h.iter().any(|(f, _)| f == b"id") {
            return Err("the barrier has no id".into());
        }
        if field(&s.keys, &k, b"gen") != Some(s.gen) {
            return Err(format!(
                "the barrier's gen is not {}, the releases counted",
                s.gen
            ));
        }
        Ok(())
    }
}
