//! The count-down latch, client side, as state machines that call the real
//! scripts with the arguments the library sends (`primitives/latch.rs`),
//! following `docs/protocol.md`, "Latches and barriers":
//!
//! - a creator sends `latch_create.lua` (`count ttl`); a lost reply is
//!   tried again (creating is idempotent);
//! - each worker counts down once with `latch_count_down.lua` (`PUBLISH
//!   channel`); a latch not created yet (−1) is tried again; a lost reply
//!   is not (counting down is not idempotent: the docs say counting again
//!   may count twice);
//! - a waiter subscribes to the opened channel, then reads the count
//!   (`GET`): 0 releases it; else it waits for the message (which releases
//!   it without a read: only the count-down that reaches 0 publishes) or
//!   rechecks (a reconnection, the 5 s timer) with another `GET`.
//!
//! The invariants: a waiter is released only once a count-down took the
//! count to 0; each count-down takes exactly one off (the key holds the
//! count minus the count-downs applied, never below 0); `opened` is
//! published once per latch. Pauses are not modelled: nothing here is
//! bounded by time on the client's side.

use latchkey::protocol::{primitive_key, LATCH_OPENED_SUFFIX, LATCH_SUFFIX};

use crate::model::common::{get, load, mutate, script, store, take_fault, Keys, Stored};
use crate::model::common::{Fault, FaultTarget, FaultWindow, Faults};
use crate::model::count_request::{call, latch, LatchSends};
use crate::model::explore::Model;
use crate::model::trace::{show_reply, Record};
use crate::reply::Reply;
use crate::server::Server;

/// A deliberate bug, to show the checker catches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// `latch_count_down.lua` publishes the opening at a count of 1.
    OpensAtOne,
    /// `latch_count_down.lua` counts an open latch down below zero.
    CountsBelowZero,
}

/// A bounded configuration: client 0 creates, the next `workers` count
/// down, the rest wait.
#[derive(Clone, Debug)]
pub struct Config {
    /// The latch's count.
    pub count: u8,
    /// How many workers count down (once each).
    pub workers: usize,
    /// How many waiters.
    pub waiters: usize,
    /// The latch's TTL, in ms.
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

/// Where a client is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// About to create, count down, or subscribe and read.
    Idle,
    /// A waiter, subscribed, the latch closed when it read.
    Waiting,
    /// Finished (created, counted down, released, or refused).
    Done,
}

/// A whole state of the model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The server's clock, ms since the model's start.
    pub now: i64,
    /// The live keys.
    pub keys: Keys,
    /// Each client's phase.
    pub phases: Vec<Phase>,
    /// Each waiter's pending `opened` message (by client index).
    pub woken: Vec<bool>,
    /// Count-downs applied to the latch that exists now.
    pub downs: u8,
    /// `opened` messages published for the latch that exists now.
    pub openings: u8,
    /// A count-down took some latch to 0.
    pub opened: bool,
    /// Waiters released.
    pub released: u8,
    /// What only a step sees broken, kept to report.
    pub broken: Option<String>,
    /// Faults so far.
    pub faults: u8,
}

/// What a client does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// The creator's `latch_create.lua`.
    Create,
    /// A worker's `latch_count_down.lua`.
    CountDown,
    /// A waiter's `GET` (after subscribing, or on a recheck).
    Read,
    /// A waiter's `opened` message releases it.
    Hear,
}

/// A transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The clock moves one tick.
    Tick,
    /// A fault.
    Fault(Fault),
    /// A client steps; `true`: the reply is lost.
    Step(usize, Op, bool),
}

crate::model::common::fault_action!(Action);

impl FaultTarget for State {
    const MESSAGE: &'static str = "message";

    fn count_fault(&mut self) {
        self.faults += 1;
    }

    fn lose_message(&mut self, c: usize) {
        self.woken[c] = false;
    }

    fn restart(&mut self, _tick: i64) {
        self.keys.clear();
    }
}

/// The latch model under one configuration.
pub struct LatchModel {
    /// The configuration.
    pub config: Config,
    pub(crate) create: String,
    pub(crate) count_down: String,
}

crate::model::common::explorable!(LatchModel, Config, Mutant, State);

pub(crate) fn key() -> Vec<u8> {
    primitive_key(b"", b"model", LATCH_SUFFIX)
}

pub(crate) fn channel() -> String {
    String::from_utf8_lossy(&primitive_key(b"", b"model", LATCH_OPENED_SUFFIX)).into_owned()
}

impl LatchModel {
    /// The model of `config`, its scripts mutated as `config.mutant` says.
    pub fn new(config: Config) -> Result<LatchModel, String> {
        let mut count_down = script("latch_count_down.lua")?;
        match config.mutant {
            Some(Mutant::OpensAtOne) => {
                count_down = mutate(
                    &count_down,
                    "if n == 0 then\n  -- pcall",
                    "if n == 1 then\n  -- pcall",
                )?;
            }
            Some(Mutant::CountsBelowZero) => {
                count_down = mutate(&count_down, "if n == 0 then return -2 end", "")?;
            }
            None => {}
        }
        Ok(LatchModel {
            create: script("latch_create.lua")?,
            count_down,
            config,
        })
    }

    fn op(&self, i: usize) -> Op {
        match i {
            0 => Op::Create,
            i if i <= self.config.workers => Op::CountDown,
            _ => Op::Read,
        }
    }

    fn clients(&self) -> usize {
        1 + self.config.workers + self.config.waiters
    }

    fn client_step(
        &self,
        server: &mut Server,
        n: &mut State,
        c: usize,
        op: Op,
        lost: bool,
    ) -> Record {
        let cfg = &self.config;
        let (script, args, reply) = match op {
            Op::Create => {
                let (args, reply) = call(server, latch(self, LatchSends::Create));
                if !lost {
                    // Created, existed, or open (`LatchOpen`): done.
                    n.phases[c] = Phase::Done;
                }
                ("latch_create.lua", args, reply)
            }
            Op::CountDown => {
                let (args, reply) = call(server, latch(self, LatchSends::CountDown));
                if let Reply::Int(left) = reply {
                    if left >= 0 {
                        n.downs += 1;
                        let expected = i64::from(cfg.count) - i64::from(n.downs);
                        if left != expected && n.broken.is_none() {
                            n.broken = Some(format!(
                                "count-down {} of a latch of {} left {left}, not {expected}",
                                n.downs, cfg.count
                            ));
                        }
                        n.opened |= left == 0;
                    }
                    // Not created yet: the worker tries again; else it is done.
                    if lost || left != -1 {
                        n.phases[c] = Phase::Done;
                    }
                }
                ("latch_count_down.lua", args, reply)
            }
            Op::Read => {
                let (args, reply) = call(server, latch(self, LatchSends::Read));
                if !lost {
                    n.woken[c] = false;
                    n.phases[c] = match &reply {
                        Reply::Bulk(Some(v)) if v[..] == b"0"[..] => self.release(n, c, "read 0"),
                        _ => Phase::Waiting,
                    };
                }
                ("GET", args, reply)
            }
            Op::Hear => {
                n.woken[c] = false;
                n.phases[c] = self.release(n, c, "heard opened");
                let record = Record::world(n.now, "opened", "released".into());
                return Record {
                    client: Some(c),
                    ..record
                };
            }
        };
        if matches!(reply, Reply::Error(_)) && n.broken.is_none() {
            n.broken = Some(format!("c{c}'s {script} answered {}", show_reply(&reply)));
        }
        let mut shown = show_reply(&reply);
        if lost {
            shown.push_str(" (lost)");
        }
        Record {
            at: n.now,
            client: Some(c),
            script: script.into(),
            args,
            reply: shown,
        }
    }

    /// A waiter released: only once some count-down took the count to 0.
    fn release(&self, n: &mut State, c: usize, how: &str) -> Phase {
        if !n.opened && n.broken.is_none() {
            n.broken = Some(format!(
                "waiter c{c} released ({how}) before the count reached zero ({} of {} counted down)",
                n.downs, self.config.count
            ));
        }
        n.released += 1;
        Phase::Done
    }

    /// Reads the keys back; a latch that is gone (its TTL, a restart)
    /// takes its count-downs with it.
    fn settle(&self, server: &mut Server, n: &mut State) {
        match store(server) {
            Ok(keys) => n.keys = keys,
            Err(why) => n.broken = Some(format!("the model's step went wrong: {why}")),
        }
        if get(&n.keys, &key()).is_none() {
            n.downs = 0;
            n.openings = 0;
        }
        for p in server.take_published() {
            n.openings += 1;
            if p.payload != b"opened" && n.broken.is_none() {
                n.broken = Some(format!(
                    "published {:?}",
                    String::from_utf8_lossy(&p.payload)
                ));
            }
            for c in 0..n.phases.len() {
                n.woken[c] |= n.phases[c] == Phase::Waiting;
            }
        }
    }
}

impl Model for LatchModel {
    type State = State;
    type Action = Action;

    fn initial(&self) -> State {
        State {
            now: 0,
            keys: Keys::new(),
            phases: vec![Phase::Idle; self.clients()],
            woken: vec![false; self.clients()],
            downs: 0,
            openings: 0,
            opened: false,
            released: 0,
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
        for (i, phase) in s.phases.iter().enumerate() {
            let op = match phase {
                Phase::Done => continue,
                Phase::Waiting if s.woken[i] => Op::Hear,
                _ => self.op(i),
            };
            faults.step(&mut out, op != Op::Hear, |lost| Action::Step(i, op, lost));
            faults.client(&mut out, i, false, false, op == Op::Hear);
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
                self.client_step(server, &mut n, c, op, lost)
            }
        };
        if !matches!(action, Action::Step(..)) {
            load(server, n.now, &n.keys);
        }
        self.settle(server, &mut n);
        (n, record)
    }

    fn check(&self, s: &State) -> Result<(), String> {
        if let Some(why) = &s.broken {
            return Err(why.clone());
        }
        if s.openings > 1 {
            return Err(format!("the latch published opened {} times", s.openings));
        }
        if let Some(Stored::Str(v)) = get(&s.keys, &key()) {
            let left: i64 = std::str::from_utf8(v)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(-1);
            let expected = i64::from(self.config.count) - i64::from(s.downs);
            if left < 0 || left != expected {
                return Err(format!(
                    "the latch holds {left}: not the count {} minus the {} count-downs applied (never below 0)",
                    self.config.count, s.downs
                ));
            }
        }
        Ok(())
    }
}
