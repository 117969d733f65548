//! Several locks at once (`Client::lock_all`) beside plain locks and holds
//! kept while idle (`Lock::with_caching`), client side, as state machines
//! that call the real scripts with the arguments the library sends
//! (`primitives/multi/spec.rs`, `backend/single.rs`,
//! `primitives/lock/cached/`), following `docs/protocol.md`:
//!
//! - a **multi** client ([`Kind::Multi`]) takes its names in one script:
//!   `multi_acquire.lua` with the keys sorted (each lock key, then its
//!   counter) and `token ttl issue waiting PUBLISH channel…`, `waiting`
//!   `0` on the first try and `1` for a waiter (which marks the first busy
//!   holder, registers as `*` among its waiting processes, so that its
//!   release wakes everyone, and tells one kept idle that it is wanted;
//!   a waiter's try sends each name's waiting processes as more keys);
//!   busy, it sleeps until that holder's TTL has run (`pttl + 1 ms`) or a
//!   release is published on *any* of its names' channels; its watchdog
//!   renews every name with `multi_extend.lua`, and `multi_release.lua`
//!   releases all;
//! - a **plain** client ([`Kind::Plain`]) on one name, as
//!   [`lock`](super::lock) models it (first try `SET … NX PX … GET`, or the
//!   fenced `acquire.lua`; a waiter's eight-argument `acquire.lua`, which
//!   registers its process, woken alone on its wake channel);
//! - a **keeper** ([`Kind::Keeper`]), a `CachedLock`: its Redis hold is a
//!   plain lock's with a caching token (`…:c`), renewed by its watchdog;
//!   local holds take the kept hold with no round trip while nobody wants
//!   it; a local release keeps it idle for `idle` ms. `wanted` (published
//!   by the waiter's script that marks its token) sets the cache's wanted
//!   flag and gives an idle hold back at once (`release.lua`), one in use
//!   at its local release; so does the idle timer. Each local hold of a
//!   fenced configuration may ask `issue_fence.lua` for its own token;
//! - an operator's `request_release` ([`Action::Ask`]): `release-requested`
//!   published on a held name's channel; plain and `lock_all` holders let
//!   go, a keeper takes it as `wanted`, waiters ignore it.
//!
//! Time is *urgent*: the clock ticks only when no running client has a
//! step due (a waiter woken or at its recheck time, a renewal due, a
//! clean-up, a message for the keeper, its idle timer), so client steps
//! take no time and every interleaving within a tick is explored; a
//! choice (a first try, a release, a keeper's local acquire or release)
//! may wait any number of ticks. Late steps come from the pause fault.
//! This makes a liveness bound checkable: see [`MultiModel`]'s `check`.

use crate::model::common::{time_left, Fault, FaultWindow, Faults, Keys, Stored};
use crate::model::explore::Model;
use crate::model::trace::Record;
use crate::server::Server;

pub use crate::model::common::harness::replay;

/// What a client is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A plain lock of one name (its index).
    Plain(u8),
    /// `lock_all` over the names in the mask (bit i: name i).
    Multi(u8),
    /// A `CachedLock` of one name: keeps its hold while idle.
    Keeper(u8),
}

impl Kind {
    /// Whether this client wants name `i`.
    pub fn wants(self, i: usize) -> bool {
        match self {
            Kind::Plain(n) | Kind::Keeper(n) => usize::from(n) == i,
            Kind::Multi(mask) => mask & (1 << i) != 0,
        }
    }
}

/// A deliberate bug, to show the checker catches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// `multi_acquire.lua` takes each free name as it goes (`SET NX`), so a
    /// busy one later leaves the earlier ones taken: partial acquisition.
    PartialAcquire,
    /// `multi_release.lua` releases every name but the last.
    ReleaseLeavesOne,
    /// `multi_acquire.lua` marks a busy holder kept idle but does not tell
    /// it that it is wanted (the bug the issue names: a `lock_all` waiter
    /// that never tells a holder kept while idle that it is wanted).
    MultiWaiterTellsNoKeeper,
    /// The keeper ignores `wanted`: it gives back only at its idle time.
    KeeperIgnoresWanted,
    /// A holder asked to let go (`release-requested`) does not.
    HolderIgnoresRequest,
    /// `acquire.lua`: a registered process that takes the lock does not
    /// mark it for the processes still registered, which sleep through
    /// its release (nobody else would mark it).
    TakerMarksNothing,
}

/// A bounded configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// How many names (at most 8).
    pub names: usize,
    /// The clients.
    pub clients: Vec<Kind>,
    /// How many holds (a keeper: local holds) each client takes.
    pub holds: u8,
    /// Every lock's TTL, in ms.
    pub ttl: i64,
    /// One tick of the clock, in ms.
    pub tick: i64,
    /// How long a keeper keeps an idle hold, in ms.
    pub idle: i64,
    /// Time stops here (ms); `None`: it never stops (random walks).
    pub max_time: Option<i64>,
    /// Faults allowed in one run.
    pub max_faults: u8,
    /// Plain and multi clients made `with_fencing` (their acquire scripts
    /// issue the tokens); else a plain first try is the bare `SET`.
    pub fenced: bool,
    /// Plain and multi clients renew (keepers always do).
    pub watchdog: bool,
    /// Which faults may happen.
    pub faults: Faults,
    /// Requests to release (`Client::request_release`) that may come in
    /// one run, each to a name that has a holder.
    pub asks: u8,
    /// A deliberate bug, or none.
    pub mutant: Option<Mutant>,
}

/// Where a client is.
pub type Phase = crate::model::common::Phase<Hold>;

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
    /// Restarts the server had had when this hold was taken.
    pub epoch: u8,
    /// A keeper's hold: a local holder uses it (else it is kept idle).
    pub in_use: bool,
    /// A keeper's idle hold is given back at this time (ms).
    pub idle_until: i64,
    /// The fencing token of each name it holds, in name order (empty
    /// until issued); a keeper's: its current local hold's, which that
    /// hold asks of `issue_fence.lua` (`CachedGuard::fencing_token`).
    pub fences: Vec<u64>,
}

/// One client.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// Where it is.
    pub phase: Phase,
    /// Paused: takes no step while time runs.
    pub paused: bool,
    /// Attempts made (each has its own token).
    pub attempts: u32,
    /// Holds taken.
    pub holds: u8,
    /// A release was published on a channel it waits on, not acted on yet.
    pub woken: bool,
    /// A keeper: `wanted` (or `release-requested`) arrived, not heard yet.
    pub told: bool,
    /// A keeper: the cache's wanted flag.
    pub wanted: bool,
    /// Since when (ms) it has waited while every name it wants was free or
    /// held only by a hold kept idle: the liveness bound's clock.
    pub blocked_since: Option<i64>,
    /// A holder (plain or `lock_all`) asked to let go (`release-requested`
    /// heard), since when (ms): it releases as its guard's
    /// `release_requested()` tells it (as `latchkey run` does).
    pub asked_at: Option<i64>,
}

/// A whole state of the model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The server's clock, ms since the model's start.
    pub now: i64,
    /// The live keys: each name's lock and fencing counter (strings) and
    /// waiting processes (a sorted set), with their expiry (server ms).
    pub keys: Keys,
    /// The clients.
    pub clients: Vec<Client>,
    /// The highest fencing token issued per name (0: none).
    pub last_fence: Vec<u64>,
    /// A token not above the one before: (name, before, issued).
    pub token_went_back: Option<(usize, u64, u64)>,
    /// A script that answered an error, or a key not a string.
    pub odd_reply: Option<String>,
    /// Restarts so far.
    pub restarts: u8,
    /// Faults so far.
    pub faults: u8,
    /// Requests to release so far.
    pub asks: u8,
}

/// What a client can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// The first try (a keeper: a local acquire that goes to Redis).
    Try,
    /// A waiter's try.
    Retry,
    /// The watchdog's renewal.
    Renew,
    /// Release the hold (a keeper: the local release).
    Release,
    /// Release a hold an acquire may have taken unseen.
    Cleanup,
    /// A keeper's local acquire of its idle kept hold.
    Use,
    /// A keeper hears `wanted`.
    Hear,
    /// A keeper's idle time ran out.
    Expire,
    /// A holder asked to let go releases.
    Yield,
    /// A keeper's local hold asks for its own fencing token.
    Issue,
}

impl Op {
    /// A step that is due (time waits for it) rather than chosen.
    pub fn urgent(self) -> bool {
        matches!(
            self,
            Op::Retry | Op::Renew | Op::Cleanup | Op::Hear | Op::Expire | Op::Yield
        )
    }
}

/// A transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The clock moves one tick.
    Tick,
    /// A fault, or a paused client's resume.
    Fault(Fault),
    /// A client steps; `true`: the reply is lost.
    Step(usize, Op, bool),
    /// Someone asks the holders of a name to let go
    /// (`Client::request_release`: `release-requested` on its channel).
    Ask(usize),
}

crate::model::common::fault_action!(Action);

/// The model of several names under one configuration.
pub struct MultiModel {
    /// The configuration.
    pub config: Config,
    pub(crate) scripts: super::multi_scripts::Scripts,
}

crate::model::common::explorable!(MultiModel, Config, Mutant, State);

impl MultiModel {
    /// The model of `config`, its scripts mutated as `config.mutant` says.
    pub fn new(config: Config) -> Result<MultiModel, String> {
        if config.names == 0 || config.names > 8 {
            return Err(format!("{} names: 1 to 8", config.names));
        }
        let scripts = super::multi_scripts::Scripts::load(config.mutant)?;
        Ok(MultiModel { config, scripts })
    }

    /// Name `i`'s lock key.
    pub fn key(&self, i: usize) -> Vec<u8> {
        format!("lk:m{i}").into_bytes()
    }

    /// Whether a client believes its hold is valid at `now` (a keeper's,
    /// idle or in use: `LockGuard::is_held`).
    pub fn believes(&self, hold: &Hold, now: i64) -> bool {
        !hold.lost && now < hold.deadline - self.config.ttl / 5
    }

    fn client_ops(&self, kind: Kind, c: &Client, now: i64) -> Vec<Op> {
        if c.paused {
            return Vec::new();
        }
        let keeper = matches!(kind, Kind::Keeper(_));
        let mut ops = Vec::new();
        if keeper && c.told {
            ops.push(Op::Hear);
        }
        match &c.phase {
            Phase::Idle => ops.push(Op::Try),
            Phase::Waiting { recheck_at } if c.woken || now >= *recheck_at => ops.push(Op::Retry),
            Phase::Waiting { .. } | Phase::Done => {}
            Phase::Cleanup { .. } => ops.push(Op::Cleanup),
            Phase::Held(h) => {
                let live = self.believes(h, now);
                if (self.config.watchdog || keeper) && now >= h.next_renew && live {
                    ops.push(Op::Renew);
                }
                let heeds = self.config.mutant != Some(Mutant::HolderIgnoresRequest);
                if c.asked_at.is_some() && !keeper && heeds {
                    ops.push(Op::Yield);
                }
                match (keeper, h.in_use) {
                    (false, _) => ops.push(Op::Release),
                    (true, true) => {
                        ops.push(Op::Release);
                        if self.config.fenced && live && h.fences.is_empty() {
                            ops.push(Op::Issue);
                        }
                    }
                    (true, false) => {
                        if c.holds < self.config.holds {
                            ops.push(Op::Use);
                        }
                        if now >= h.idle_until {
                            ops.push(Op::Expire);
                        }
                    }
                }
            }
        }
        ops
    }

    /// Who holds name `i` by the keyspace: (client, attempt), if a model
    /// client's token is there.
    pub fn owner(&self, s: &State, i: usize) -> Option<(usize, u32)> {
        match s.keys.get(&self.key(i)) {
            Some((Stored::Str(value), _)) => super::multi_scripts::token_owner(value),
            _ => None,
        }
    }
}

impl Model for MultiModel {
    type State = State;
    type Action = Action;

    fn initial(&self) -> State {
        let client = Client {
            phase: Phase::Idle,
            paused: false,
            attempts: 0,
            holds: 0,
            woken: false,
            told: false,
            wanted: false,
            blocked_since: None,
            asked_at: None,
        };
        State {
            now: 0,
            keys: Keys::new(),
            clients: vec![client; self.config.clients.len()],
            last_fence: vec![0; self.config.names],
            token_went_back: None,
            odd_reply: None,
            restarts: 0,
            faults: 0,
            asks: 0,
        }
    }

    fn actions(&self, s: &State) -> Vec<Action> {
        let cfg = &self.config;
        let mut out = Vec::new();
        let mut due = false;
        let within = time_left(cfg.max_time, s.now, cfg.tick);
        let faults = FaultWindow::new(cfg.faults, s.faults, cfg.max_faults, within);
        for (i, c) in s.clients.iter().enumerate() {
            for op in self.client_ops(cfg.clients[i], c, s.now) {
                due |= op.urgent();
                // A lost reply needs a reply: not a keeper's local steps.
                let remote = !matches!(op, Op::Use | Op::Hear);
                faults.step(&mut out, remote, |lost| Action::Step(i, op, lost));
            }
            let message = c.woken || c.told;
            faults.client(&mut out, i, c.paused, c.phase != Phase::Done, message);
        }
        if within && !due {
            out.push(Action::Tick);
        }
        if s.asks < cfg.asks {
            let held = |i: usize| s.keys.contains_key(&self.key(i));
            out.extend((0..cfg.names).filter(|&i| held(i)).map(Action::Ask));
        }
        faults.restart(&mut out, s.keys.is_empty());
        out
    }

    fn step(&self, server: &mut Server, s: &State, action: &Action) -> (State, Record) {
        super::multi_step::step(self, server, s, action)
    }

    fn check(&self, s: &State) -> Result<(), String> {
        if let Some(odd) = &s.odd_reply {
            return Err(format!("the model's step went wrong: {odd}"));
        }
        if let Some((i, before, issued)) = s.token_went_back {
            return Err(format!(
                "fencing tokens of name {i} must strictly increase: {issued} issued after {before}"
            ));
        }
        super::multi_check::exclusion(self, s)?;
        super::multi_check::all_or_none(self, s)?;
        super::multi_check::liveness(self, s)
    }
}
