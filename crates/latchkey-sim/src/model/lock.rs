//! The plain lock with fencing, client side, as a state machine that calls
//! the real scripts with the arguments the library sends
//! (`backend/single.rs`), following `docs/protocol.md`:
//!
//! - a first try: `acquire.lua` with four arguments (`token ttl 1 0`) for a
//!   lock made `with_fencing`, else the bare `SET key token NX PX ttl GET`;
//!   busy, the client waits and tries again at once (the wait's start);
//! - a waiter's try: `acquire.lua` with eight arguments (`… 1 0 channel
//!   PUBLISH process`) and the lock's waiting processes as a third key,
//!   which marks the holder's token and registers the client's process
//!   (its fixed id, `common::process_id`); busy, it sleeps until the
//!   holder's TTL has run (`pttl + 1 ms`) or a wake-up arrives. A waiting
//!   client listens on the release channel and on its process's wake
//!   channel: a marked release wakes the first registered process that
//!   listens, alone, or, none listening, every waiter (`lock_step.rs`);
//! - a hold's beliefs as the library computes them: valid until
//!   `sent + ttl − drift` (drift `ttl/100 + 2 ms`), held while not lost and
//!   before that deadline minus the stop margin (`ttl/5`);
//! - the watchdog renews (`extend.lua`) every `ttl/3` until the stop margin;
//!   a renewal answered 0 or −1 loses the hold; one unanswered is tried
//!   again, the deadline kept;
//! - a fencing token: from the fenced acquire, or `issue_fence.lua`;
//! - a write to a fenced resource, in two steps (the token checked and the
//!   write sent; the write landing), so a pause can fall between them; the
//!   resource is a value of the model that accepts a token at least the
//!   highest it has seen, as `FencedResource` does;
//! - a release (`release.lua`, with the waiting processes, the fair queue,
//!   the wake channels' stem and the client's process), also of a hold
//!   found lost (the guard's drop).
//!
//! A lost reply: the script ran, the client saw a timeout. An acquire's is
//! cleaned up as the library's armed guard does (`release.lua` with the
//! attempt's token) before trying again with a new token; a renewal's is
//! tried again; an issue's leaves the hold without a token; a release's
//! ends the hold as far as the client knows.
//!
//! Time moves in ticks of the server's clock; the clients' monotonic clocks
//! move with it (no skew is modelled yet). A restart takes a tick: the
//! server's microsecond clock, which fencing tokens follow, moves on.

use crate::model::common::{margin, time_left, Fault, FaultWindow, Faults, Keys};
use crate::model::explore::Model;
use crate::model::trace::Record;
use crate::server::Server;

/// The server's clock at the model's time 0, in µs (2026).
pub const START_MICROS: i64 = 1_796_000_000_000_000;

/// A deliberate bug, to show the checker catches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// `release.lua` deletes the key without comparing the owner token.
    ReleaseWithoutOwnerCheck,
    /// The watchdog renews past the deadline, and the holder trusts it: a
    /// hold is lost only when a renewal says so, never at the stop margin.
    RenewPastDeadline,
    /// `issue_fence.lua` hands out the counter without raising it.
    FenceWithoutBump,
    /// The watchdog of a hold made `with_max_hold` renews for the whole
    /// TTL, past the cap (the holder still stops believing at the cap).
    RenewPastCap,
    /// A fencing token is the counter plus one, without the server's TIME.
    FenceFromCounterOnly,
}

/// A bounded configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// How many clients.
    pub clients: usize,
    /// How many holds each client takes before it stops.
    pub holds: u8,
    /// The lock's TTL, in ms (the library's minimum is 10).
    pub ttl: i64,
    /// One tick of the clock, in ms.
    pub tick: i64,
    /// Time stops here (ms); `None`: it never stops (random walks).
    pub max_time: Option<i64>,
    /// Faults allowed in one run (pauses, lost replies and messages, restarts).
    pub max_faults: u8,
    /// Made `with_fencing`: the token comes with the acquire; else the first
    /// try is the bare `SET … NX PX … GET` and the token is issued later.
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
    /// A write sent with this token, not landed yet.
    pub pending_write: Option<u64>,
    /// Wrote once already (one write per hold keeps the space small).
    pub wrote: bool,
    /// Restarts the server had had when this hold was taken.
    pub epoch: u8,
    /// The cap (ms): acquired + max hold ([`LockModel::with_max_hold`]).
    pub cap: Option<i64>,
}

/// The fenced resource: the highest token seen and which hold wrote it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Resource {
    /// The highest token accepted.
    pub highest: u64,
    /// (client, attempt) of the hold that wrote it.
    pub writer: Option<(usize, u32)>,
}

/// A whole state of the model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The server's clock, ms since the model's start.
    pub now: i64,
    /// The live keys: the lock, its fencing counter (strings) and its
    /// waiting processes (a sorted set), with their expiry (server ms).
    pub keys: Keys,
    /// The clients.
    pub clients: Vec<Client>,
    /// The fenced resource.
    pub resource: Resource,
    /// The highest fencing token issued (0: none).
    pub last_token: u64,
    /// A token issued that was not above the one before (kept to report).
    pub token_went_back: Option<(u64, u64)>,
    /// A write accepted with the token of another hold's write.
    pub shared_token_write: Option<u64>,
    /// A script or command that answered an error, or left a key that is
    /// neither a string nor the waiting processes' sorted set: the model
    /// sent what the library does not (kept to report, as a violation).
    pub odd_reply: Option<String>,
    /// Restarts so far.
    pub restarts: u8,
    /// Faults so far.
    pub faults: u8,
    /// The replica, the server's clock offset, the last token's issue
    /// (`lock_failover.rs`).
    pub more: super::lock_failover::More,
}

/// What a client can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// The first try.
    Try,
    /// A waiter's try.
    Retry,
    /// The watchdog's renewal.
    Renew,
    /// Issue the fencing token.
    Issue,
    /// Check the hold and send a write with its token.
    Write,
    /// The write reaches the resource.
    Land,
    /// Release the hold.
    Release,
    /// Release a hold an acquire may have taken unseen.
    Cleanup,
}

/// A transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The clock moves one tick.
    Tick,
    /// A fault, or a paused client's resume.
    Fault(Fault),
    /// The replica copies the keyspace; a failover to it; a restart whose
    /// clock moves by this many ticks (`lock_failover.rs`).
    Replicate,
    Failover,
    RestartClock(i64),
    /// Nobody holds or waits, and the server's clock moves on by the
    /// fencing counter's keep and a tick (`lock_failover.rs`).
    Idle,
    /// A client steps; `true`: the reply is lost.
    Step(usize, Op, bool),
}

crate::model::common::fault_action!(Action);

/// The plain lock model under one configuration.
pub struct LockModel {
    /// The configuration.
    pub config: Config,
    pub(crate) scripts: super::lock_step::Scripts,
    /// Holds made `with_max_hold` of this many ms (`lock_cap.rs`).
    pub(crate) max_hold: Option<i64>,
    /// Failovers and clock steps at restarts (`lock_failover.rs`).
    pub(crate) failover: bool,
    pub(crate) clock_step: Option<i64>,
    /// A long idle between holds, once (`lock_failover.rs`).
    pub(crate) idle: bool,
}

crate::model::common::explorable!(LockModel, Config, Mutant, State);

impl LockModel {
    /// The model of `config`, its scripts mutated as `config.mutant` says.
    pub fn new(config: Config) -> Result<LockModel, String> {
        let scripts = super::lock_step::Scripts::load(config.mutant)?;
        Ok(LockModel {
            config,
            scripts,
            max_hold: None,
            failover: false,
            clock_step: None,
            idle: false,
        })
    }

    /// The lock key's name.
    pub fn key(&self) -> &'static [u8] {
        b"lk:model"
    }

    /// Whether a client believes it holds the lock at `now`.
    pub fn believes(&self, hold: &Hold, now: i64) -> bool {
        if hold.lost {
            return false;
        }
        // Held until the stop margin before the deadline, or the cap if
        // that comes first (the library's `State::held`).
        let end = hold.cap.map_or(hold.deadline, |cap| cap.min(hold.deadline));
        self.config.mutant == Some(Mutant::RenewPastDeadline) || now < end - margin(self.config.ttl)
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
                if h.pending_write.is_some() {
                    return vec![Op::Land];
                }
                let mut ops = vec![Op::Release];
                let live = self.believes(h, now);
                let renewable = self.renewal_ttl(h, now).is_some();
                if self.config.watchdog && now >= h.next_renew && live && renewable {
                    ops.push(Op::Renew);
                }
                if live && h.fence.is_none() {
                    ops.push(Op::Issue);
                }
                if live && !h.wrote && h.fence.is_some() {
                    ops.push(Op::Write);
                }
                ops
            }
        }
    }
}

impl Model for LockModel {
    type State = State;
    type Action = Action;

    fn initial(&self) -> State {
        let client = Client::starting(Phase::Idle);
        State {
            now: 0,
            keys: Keys::new(),
            clients: vec![client; self.config.clients],
            resource: Resource::default(),
            last_token: 0,
            token_went_back: None,
            shared_token_write: None,
            odd_reply: None,
            restarts: 0,
            faults: 0,
            more: Default::default(),
        }
    }

    fn actions(&self, s: &State) -> Vec<Action> {
        let cfg = &self.config;
        let mut out = Vec::new();
        let can_tick = time_left(cfg.max_time, s.now, cfg.tick);
        if can_tick {
            out.push(Action::Tick);
        }
        let fault = s.faults < cfg.max_faults;
        // A pause matters only while time can still run past it.
        let faults = FaultWindow::new(cfg.faults, s.faults, cfg.max_faults, can_tick);
        for (i, c) in s.clients.iter().enumerate() {
            for op in self.client_ops(c, s.now) {
                let remote = !matches!(op, Op::Write | Op::Land);
                faults.step(&mut out, remote, |lost| Action::Step(i, op, lost));
            }
            faults.client(&mut out, i, c.paused, c.phase != Phase::Done, c.woken);
        }
        faults.restart(&mut out, s.keys.is_empty());
        self.more_actions(s, fault && can_tick, &mut out);
        out
    }

    fn step(&self, server: &mut Server, s: &State, action: &Action) -> (State, Record) {
        super::lock_step::step(self, server, s, action)
    }

    fn check(&self, s: &State) -> Result<(), String> {
        if let Some(odd) = &s.odd_reply {
            return Err(format!("the model's step went wrong: {odd}"));
        }
        self.check_cap(s)?;
        if let Some((before, issued)) = s.token_went_back {
            return Err(format!(
                "fencing tokens must strictly increase: {issued} issued after {before}"
            ));
        }
        if let Some(token) = s.shared_token_write {
            return Err(format!(
                "two holds' writes were accepted with the same fencing token {token}"
            ));
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
                if ha.epoch == hb.epoch {
                    return Err(format!(
                        "exclusion: c{a} and c{b} both believe they hold the lock at {} ms",
                        s.now
                    ));
                }
                // A restart or failover lost the older hold: the documented
                // case, where fencing must still order them.
                self.check_order(s, ha, hb)?;
            }
        }
        Ok(())
    }
}
