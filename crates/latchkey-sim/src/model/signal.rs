//! Signals, both sides, as state machines over the simulated server's
//! pub/sub, sending what the library sends (`primitives/signal/`), with
//! the channel names of `docs/protocol.md`, "Signals" (the library's own
//! builders are private to it; the layout is the protocol):
//!
//! - a waiter on a name subscribes to the name's broadcast channel
//!   `P + "signal:" + name` and to a waiter channel of its own, `P +
//!   "signal-one:" + len + ":" + name + ":" + 32 hex digits`; it then takes
//!   the first message that arrives and unsubscribes (a wait), or gives up
//!   (a timeout) and unsubscribes;
//! - a signaller broadcasts (`PUBLISH` on the broadcast channel, an
//!   envelope `lksig1:<16 hex>:<payload>`) or sends to one waiter with
//!   `signal_one.lua` (the glob of the name's waiter channels, escaped, a
//!   number from the client, the envelope).
//!
//! Waiters wait on `job` and on `jo*` (a name whose waiter channels an
//! unescaped glob of `jo*` would confuse with `job`'s), and the signaller
//! signals both.
//!
//! What `signal_one.lua` promises, and is checked at every send: it
//! publishes to at most one waiter channel, of a waiter of that name, and
//! so the signal reaches at most one waiter; it answers 0 exactly when
//! nobody waits on the name (then nothing is published), and otherwise the
//! chosen channel's subscribers (1 here), the signal then reaching exactly
//! that waiter. A broadcast reaches every waiter of the name and answers
//! their number. A waiter receives only what was sent after it subscribed.
//! Signals keep no keys: time, pauses and restarts play no part.

use crate::model::common::{mutate, script, take_fault, Fault, FaultTarget, FaultWindow, Faults};
use crate::model::explore::Model;
use crate::model::lock_request::send;
use crate::model::signal_request::{request, Sends};
use crate::model::trace::{show_reply, Record};
use crate::reply::Reply;
use crate::server::Server;

/// A deliberate bug, to show the checker catches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// `signal_one.lua` publishes to the first and the last waiter channel.
    WakesTwo,
    /// The client sends the glob of the waiter channels unescaped.
    GlobUnescaped,
}

/// The names waited on and signalled.
pub const NAMES: [&[u8]; 2] = [b"job", b"jo*"];

/// A bounded configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// How many waiters on each name (`NAMES`), in order.
    pub waiters: [usize; 2],
    /// How many waits each waiter makes.
    pub rounds: u8,
    /// How many signals the signaller sends in all.
    pub sends: u8,
    /// Faults allowed in one run.
    pub max_faults: u8,
    /// Which faults may happen (`lost_reply`, `lost_message`).
    pub faults: Faults,
    /// A deliberate bug, or none.
    pub mutant: Option<Mutant>,
}

/// A waiter.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Waiter {
    /// Which of `NAMES` it waits on.
    pub name: usize,
    /// Subscribed (a wait under way) since send number `since`.
    pub listening: Option<u8>,
    /// Waits made (each with its own waiter id).
    pub waits: u8,
    /// Signals received while listening, by send number, not taken yet.
    pub inbox: Vec<u8>,
    /// Signals taken.
    pub taken: u8,
}

/// A whole state of the model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The waiters.
    pub waiters: Vec<Waiter>,
    /// Signals sent so far.
    pub sent: u8,
    /// What a step found broken, kept to report.
    pub broken: Option<String>,
    /// Faults so far.
    pub faults: u8,
}

/// A transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// A waiter subscribes (a wait starts).
    Listen(usize),
    /// A waiter takes its first signal and unsubscribes.
    Take(usize),
    /// A waiter times out and unsubscribes.
    GiveUp(usize),
    /// `signal_one.lua` on a name, with a number from the client; `true`:
    /// the reply is lost.
    One(usize, u8, bool),
    /// A broadcast on a name.
    Broadcast(usize),
    /// A fault: a waiter's first pending signal is lost.
    Fault(Fault),
}

crate::model::common::fault_action!(Action);

impl FaultTarget for State {
    const MESSAGE: &'static str = "first signal";

    fn count_fault(&mut self) {
        self.faults += 1;
    }

    fn lose_message(&mut self, c: usize) {
        self.waiters[c].inbox.remove(0);
    }

    fn restart(&mut self, _tick: i64) {
        unreachable!("signals keep no keyspace to wipe");
    }
}

/// The signals model under one configuration.
pub struct SignalModel {
    /// The configuration.
    pub config: Config,
    pub(crate) signal_one: String,
}

crate::model::common::explorable!(SignalModel, Config, Mutant, State);

pub(crate) fn broadcast_channel(name: usize) -> Vec<u8> {
    [b"signal:", NAMES[name]].concat()
}

fn waiter_prefix(name: usize) -> Vec<u8> {
    let n = NAMES[name];
    [
        b"signal-one:",
        n.len().to_string().as_bytes(),
        b":",
        n,
        b":",
    ]
    .concat()
}

/// A waiter's channel: its id is 16 hex digits for its connection (the
/// waiter's number) and 16 for the wait.
fn waiter_channel(name: usize, w: usize, wait: u8) -> Vec<u8> {
    let id = format!("{w:016x}{wait:016x}");
    [waiter_prefix(name), id.into_bytes()].concat()
}

impl SignalModel {
    /// The model of `config`, its script mutated as `config.mutant` says.
    pub fn new(config: Config) -> Result<SignalModel, String> {
        let mut signal_one = script("signal_one.lua")?;
        if config.mutant == Some(Mutant::WakesTwo) {
            signal_one = mutate(
                &signal_one,
                "return redis.call('PUBLISH', channels[pick], ARGV[3])",
                "redis.call('PUBLISH', channels[#channels], ARGV[3])\nreturn redis.call('PUBLISH', channels[1], ARGV[3])",
            )?;
        }
        Ok(SignalModel { config, signal_one })
    }

    /// A waiter's channel for its current wait (its name's prefix).
    fn channel_of(&self, w: usize, waiter: &Waiter) -> Vec<u8> {
        waiter_channel(waiter.name, w, waiter.waits)
    }

    /// The glob of a name's waiter channels, as `wire::waiters_pattern`.
    pub(crate) fn pattern(&self, name: usize) -> Vec<u8> {
        let prefix = waiter_prefix(name);
        let mut glob = match self.config.mutant {
            Some(Mutant::GlobUnescaped) => prefix,
            _ => prefix
                .iter()
                .flat_map(|&b| match b {
                    b'*' | b'?' | b'[' | b']' | b'\\' => vec![b'\\', b],
                    _ => vec![b],
                })
                .collect(),
        };
        for _ in 0..32 {
            glob.extend_from_slice(b"[0-9a-f]");
        }
        glob
    }

    /// Sends on `name` (`pick`: `signal_one`; `None`: a broadcast) and
    /// checks what reached whom.
    fn send(&self, server: &mut Server, n: &mut State, name: usize, pick: Option<u8>) -> Record {
        n.sent += 1;
        let id = n.sent;
        let message = format!("lksig1:{:016x}:go", u64::from(id));
        let subscribed: Vec<(usize, Vec<u8>)> = n
            .waiters
            .iter()
            .enumerate()
            .filter(|(_, w)| w.listening.is_some())
            .flat_map(|(i, w)| [(i, broadcast_channel(w.name)), (i, self.channel_of(i, w))])
            .collect();
        for (_, ch) in &subscribed {
            server.subscribe(ch, false, 1);
        }
        let sends = match pick {
            Some(pick) => Sends::One {
                name,
                pick,
                message,
            },
            None => Sends::Broadcast { name, message },
        };
        let r = request(self, sends);
        let reply = send(server, &r);
        let (script, args) = (r.name.to_string(), r.args);
        for (_, ch) in &subscribed {
            server.subscribe(ch, false, -1);
        }
        let mut reached = Vec::new();
        for p in server.take_published() {
            for (i, ch) in &subscribed {
                if *ch == p.channel {
                    n.waiters[*i].inbox.push(id);
                    reached.push(*i);
                }
            }
        }
        let of_name: Vec<usize> = (0..n.waiters.len())
            .filter(|&i| n.waiters[i].listening.is_some() && n.waiters[i].name == name)
            .collect();
        let heard = match reply {
            Reply::Int(h) => h,
            _ => -1,
        };
        let why = if let Some(&i) = reached.iter().find(|&&i| n.waiters[i].name != name) {
            Some(format!(
                "a signal on {:?} reached c{i}, a waiter on another name",
                show(name)
            ))
        } else if pick.is_some() && reached.len() > 1 {
            Some(format!(
                "signal_one delivered {} times (to waiters {reached:?})",
                reached.len()
            ))
        } else if pick.is_some() && (heard == 0) != of_name.is_empty() {
            Some(format!(
                "signal_one answered {heard} with {} waiters on the name",
                of_name.len()
            ))
        } else if pick.is_some() && heard > 0 && reached.len() != 1 {
            Some(format!(
                "signal_one answered {heard} but reached {reached:?}"
            ))
        } else if pick.is_none() && (reached != of_name || heard != of_name.len() as i64) {
            Some(format!(
                "a broadcast to {of_name:?} reached {reached:?} and answered {heard}"
            ))
        } else {
            None
        };
        if n.broken.is_none() {
            n.broken = why;
        }
        Record {
            at: 0,
            client: None,
            script,
            args,
            reply: show_reply(&reply),
        }
    }
}

fn show(name: usize) -> String {
    String::from_utf8_lossy(NAMES[name]).into_owned()
}

impl Model for SignalModel {
    type State = State;
    type Action = Action;

    fn initial(&self) -> State {
        let [a, b] = self.config.waiters;
        let waiter = |name| Waiter {
            name,
            listening: None,
            waits: 0,
            inbox: Vec::new(),
            taken: 0,
        };
        State {
            waiters: (0..a)
                .map(|_| waiter(0))
                .chain((0..b).map(|_| waiter(1)))
                .collect(),
            sent: 0,
            broken: None,
            faults: 0,
        }
    }

    fn actions(&self, s: &State) -> Vec<Action> {
        let cfg = &self.config;
        // Signals keep no time.
        let faults = FaultWindow::new(cfg.faults, s.faults, cfg.max_faults, true);
        let mut out = Vec::new();
        for (i, w) in s.waiters.iter().enumerate() {
            match w.listening {
                None if w.waits < cfg.rounds => out.push(Action::Listen(i)),
                None => {}
                Some(_) => {
                    if !w.inbox.is_empty() {
                        out.push(Action::Take(i));
                        faults.client(&mut out, i, false, false, true);
                    }
                    out.push(Action::GiveUp(i));
                }
            }
        }
        if s.sent < cfg.sends {
            // Enough numbers from the client to pick any waiter's channel.
            let picks = cfg.waiters.into_iter().max().unwrap_or(0).max(2) as u8;
            for name in 0..NAMES.len() {
                for pick in 0..picks {
                    faults.step(&mut out, true, |lost| Action::One(name, pick, lost));
                }
                out.push(Action::Broadcast(name));
            }
        }
        out
    }

    fn step(&self, server: &mut Server, s: &State, action: &Action) -> (State, Record) {
        let mut n = s.clone();
        let record = match *action {
            Action::Listen(i) => {
                let w = &mut n.waiters[i];
                w.listening = Some(s.sent);
                w.waits += 1;
                w.inbox.clear();
                let what = String::from_utf8_lossy(&self.channel_of(i, w)).into_owned();
                Record {
                    client: Some(i),
                    ..Record::world(0, "subscribe", what)
                }
            }
            Action::Take(i) | Action::GiveUp(i) => {
                let w = &mut n.waiters[i];
                let first = w.inbox.first().copied();
                if let (Action::Take(_), Some(id), Some(since)) = (action, first, w.listening) {
                    w.taken += 1;
                    if id <= since && n.broken.is_none() {
                        n.broken = Some(format!(
                            "c{i} received signal {id}, sent before it subscribed"
                        ));
                    }
                }
                // The wait returns one signal and drops the rest (documented).
                w.listening = None;
                w.inbox.clear();
                let what = match action {
                    Action::Take(_) => format!("took signal {}", first.unwrap_or(0)),
                    _ => "timed out".into(),
                };
                Record {
                    client: Some(i),
                    ..Record::world(0, "unsubscribe", what)
                }
            }
            Action::One(name, pick, lost) => {
                n.faults += u8::from(lost);
                let mut r = self.send(server, &mut n, name, Some(pick));
                if lost {
                    r.reply.push_str(" (lost)");
                }
                r
            }
            Action::Broadcast(name) => self.send(server, &mut n, name, None),
            Action::Fault(fault) => take_fault(&mut n, 0, 0, fault),
        };
        (n, record)
    }

    fn check(&self, s: &State) -> Result<(), String> {
        match &s.broken {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }
}
