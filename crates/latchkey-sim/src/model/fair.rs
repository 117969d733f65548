//! The fair lock (a FIFO queue of waiters with leases, direct hand-off),
//! client side, as a state machine that calls the real scripts with the
//! arguments the library sends (`backend/fair.rs`, `primitives/lock/fair/`),
//! following `docs/protocol.md`, "Fair locks":
//!
//! - a first try: `fair_acquire.lua` in mode `try` with an empty entry
//!   (`fair_try_once`); busy, the client waits under a new token and entry;
//! - a waiter's attempt: `fair_acquire.lua` in mode `wait` until a reply
//!   shows it queued, then `renew`; it runs again on a `released`/`revoked`
//!   message, after a restart (the subscriber reconnects), after a failed
//!   attempt (the retry) and when its process's renewal task wakes it. A
//!   `renew` that finds the entry gone queues again under a new id;
//! - two leases per waiter: the entry's own (a score in the leases sorted
//!   set, [`ENTRY_LEASES`] waiter leases long) and its process's record (a
//!   score in the records sorted set under the entry's first 16 hex digits,
//!   one waiter lease long); the entry is live while both run
//!   (`shared/live.lua`). Queueing and renewing (`fair_acquire.lua`) set the
//!   entry's own lease and raise the record;
//! - the renewal task (one per process per lock; a client is one process,
//!   with one waiter, which is among the first members the library always
//!   sends): `fair_renew.lua` with the process's id, its record's lease (the
//!   waiter lease), the entry's own lease and its entry, every third of the
//!   lease and at the holder's TTL (`wait_ms + 1`); it wakes the waiter when
//!   its entry is gone, the holder is its token or the lock is free with it
//!   at the head, renews again at once after a reply that says the record
//!   had lapsed, and a renewal that found the entry queued moves
//!   `not_ours_since` to its send time;
//! - a hand-off message `<id>:<fence>` for the waiter's current id: a hold
//!   valid until `not_ours_since + handoff_ttl − drift(handoff_ttl)` if that
//!   is still ahead, else the waiter asks again (`still_valid`);
//! - a hold: `{1, fence}` valid until `sent + ttl − drift`, `{2, fence,
//!   pttl}` (handed, its message missed) until `sent + pttl − drift(pttl)`;
//!   believed while not lost and before the deadline minus the stop margin
//!   (`ttl/5`, or half the time left at a grant that left less than twice
//!   that); the watchdog renews (`extend.lua`) every `ttl/3`; a handed
//!   hold is extended a sixth of a lease before its stop time
//!   (`extend_after_handoff`);
//! - a release (`fair_release.lua`), which hands on; a waiter that gives up
//!   (`fair_leave.lua`, with its entry); an operator's revocation
//!   (`fair_revoke.lua`) at any point.
//!
//! A lost reply: the script ran, the client saw a timeout. A first try's is
//! cleaned up in the background (`fair_release.lua` with that try's token,
//! the armed `Leaving`) while the client goes on to queue; a waiter's
//! attempt is retried as it was (same entry, token, mode); a renewal's is
//! tried again at the next tick; a release's, a leave's end the client's
//! round as far as it knows.
//!
//! Clients act on time: the clock does not move while a client that is not
//! paused has a step due (a recheck, a renewal, a message to act on, a
//! clean-up). A client slow to act is what a pause models (a fault), so a
//! waiter that is not paused keeps its lease, which makes "waiters that
//! kept their leases" and "a dead waiter" precise. A client paused past a
//! waiter lease is a process that died (or stopped): its record runs out
//! while its entry's own lease still runs.

use crate::model::common::Fault;
pub use crate::model::common::Faults;
pub use crate::model::lock::START_MICROS;

/// A deliberate bug, to show the checker catches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// `hand_on.lua` hands the lock to the head of the queue whether or not
    /// it is live (its own lease or its process's record ran out).
    HandOffIgnoresLeases,
    /// `hand_on.lua` judges an entry by its own lease alone, not by its
    /// process's record too: a waiter whose process died (its record ran
    /// out, its entry's long own lease still runs) is handed the lock.
    HandOffIgnoresRecords,
    /// `fair_revoke.lua` computes its fence but does not store it in the
    /// counter, so the token the hand-on issues next is not above it.
    RevokeWithoutRaise,
    /// A waiter whose `wait` attempt failed (its reply lost) retries in
    /// mode `wait` under the same entry, as the library did before 0.4.1:
    /// an entry handed the lock meanwhile and gone since is queued again
    /// under its old id, and a late hand-off message for that id is taken
    /// for a new hand-off.
    RetryRequeuesSameEntry,
    /// The renewal task takes every renewal as proof that the lock was not
    /// handed to the waiter before it was sent, also one that found the
    /// entry gone (handed on meanwhile): a hand-off message heard later
    /// then counts the hold from too late.
    RenewalProvesGoneEntries,
    /// A waiter leaving from the tail trims the entries before it whether
    /// or not they still have a lease: a live waiter loses its place.
    LeaveTrimsLiveEntries,
}

/// How many waiter leases an entry's own lease lasts, as the library sends
/// it (`backend/fair.rs`, `ENTRY_LEASES`): its process's record, one waiter
/// lease long, keeps it live.
pub const ENTRY_LEASES: i64 = 15;

/// A bounded configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// How many clients.
    pub clients: usize,
    /// How many rounds (a hold, or a wait given up) each client takes.
    pub holds: u8,
    /// The lock's TTL, in ms.
    pub ttl: i64,
    /// The waiter lease, in ms: a process's record's (an entry's own lease
    /// is [`ENTRY_LEASES`] times this).
    pub lease: i64,
    /// One tick of the clock, in ms.
    pub tick: i64,
    /// Time stops here (ms); `None`: it never stops (random walks).
    pub max_time: Option<i64>,
    /// Faults allowed in one run (pauses, lost replies and messages, restarts).
    pub max_faults: u8,
    /// Made `with_fencing`: entries ask for a token with the hand-off.
    pub fenced: bool,
    /// The watchdog renews holds.
    pub watchdog: bool,
    /// A waiter may give up (`fair_leave.lua`).
    pub leave: bool,
    /// Revocations an operator may make in one run.
    pub revokes: u8,
    /// A hand-off message may be read late, after the attempt the waiter
    /// makes first (the subscriber's connection is slower than the
    /// attempt's, or the process resumes from a stop and its timer runs
    /// before the subscriber's task): an ordering, not a fault, so not
    /// counted in `max_faults`.
    pub late_messages: bool,
    /// Which faults may happen.
    pub faults: Faults,
    /// A deliberate bug, or none.
    pub mutant: Option<Mutant>,
}

/// How a waiter's attempt asks (`FairMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// `wait`: queue, or renew the lease if queued.
    Queue,
    /// `renew`: renew only if still queued.
    Renew,
}

/// What a waiter heard and has not acted on yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Wake {
    /// Nothing.
    None,
    /// Look again (`released`, `revoked`, a reconnection).
    Look,
    /// A hand-off to its current entry, with the message's fencing token
    /// and the server epoch it was made in.
    Handed {
        /// The entry id the message names.
        id: u32,
        /// The token in the message (`None`: not fenced, or none issued).
        fence: Option<u64>,
        /// Restarts and revocations before the hand-off.
        epoch: u8,
    },
}

/// Where a client is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// About to make a first try.
    Idle,
    /// Waiting in the queue (or about to queue).
    Waiting(Wait),
    /// Holds the lock, as far as it knows.
    Held(Hold),
    /// Took all its rounds.
    Done,
}

/// A waiter's beliefs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Wait {
    /// The attempt whose token it waits with.
    pub token: u32,
    /// Its entry's id (a sequence number of this client).
    pub id: u32,
    /// How its next attempt asks.
    pub mode: Mode,
    /// When it attempts again without a message; queued, when its
    /// process's renewal task renews its lease next.
    pub recheck_at: i64,
    /// Its last attempt failed (a lost reply): the wait retries it at
    /// `recheck_at`, whatever the renewal task does.
    pub retry: bool,
    /// When a reply last proved the lock was not ours (a send time).
    pub not_ours_since: i64,
}

/// A hold's beliefs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Hold {
    /// The attempt whose token holds it.
    pub token: u32,
    /// Valid until (ms).
    pub deadline: i64,
    /// How long before the deadline it stops being believed: the stop
    /// margin, or half the time left at a grant that left less than twice
    /// that.
    pub margin: i64,
    /// When it is renewed next (`i64::MAX`: never).
    pub next_renew: i64,
    /// Found lost (a renewal said so).
    pub lost: bool,
    /// Its fencing token.
    pub fence: Option<u64>,
    /// Restarts and revocations the server had had when it was granted.
    pub epoch: u8,
}

/// A hand-off to a client that it has not taken up yet (its token in the
/// lock key): when it was made and when the entry stopped being live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Unseen {
    /// The token handed to.
    pub token: u32,
    /// When (ms).
    pub at: i64,
    /// When the entry stopped being live, as it was then (ms: the sooner
    /// of its own lease's deadline and its process's record's;
    /// `i64::MIN`: it had no lease).
    pub lease_until: i64,
}

/// One client.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// Where it is.
    pub phase: Phase,
    /// Paused: takes no step while time runs.
    pub paused: bool,
    /// Tokens made so far (each attempt's token is its number).
    pub tokens: u32,
    /// Entry ids made so far.
    pub ids: u32,
    /// Rounds done.
    pub holds: u8,
    /// What it heard.
    pub wake: Wake,
    /// A first try's token to release in the background (its reply was lost).
    pub cleanup: Option<u32>,
    /// A hand-off it has not taken up.
    pub unseen: Option<Unseen>,
    /// A hand-off message still on its way (in the subscriber's socket):
    /// read after the attempt the client makes first.
    pub late: Option<Wake>,
}

/// A value of the fair lock's keys, kept in a state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Val {
    /// A string (the lock key, the counter).
    Str(Vec<u8>),
    /// A list (the queue).
    List(Vec<Vec<u8>>),
    /// A sorted set (the leases, the process records): member, score
    /// (whole ms).
    ZSet(Vec<(Vec<u8>, i64)>),
}

/// A whole state of the model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The server's clock, ms since the model's start.
    pub now: i64,
    /// The live keys, in key order: key, value, expiry (server ms). The
    /// acquired record is left out: no script reads it (only inspection
    /// does), and its timestamps would split equal states.
    pub keys: Vec<(Vec<u8>, Val, Option<i64>)>,
    /// The clients.
    pub clients: Vec<Client>,
    /// The highest fencing token issued (0: none).
    pub last_token: u64,
    /// The highest fence a revocation returned (0: none).
    pub revoke_fence: u64,
    /// Restarts so far.
    pub restarts: u8,
    /// Revocations so far.
    pub revokes: u8,
    /// Faults so far.
    pub faults: u8,
    /// The first invariant a step broke (checked by [`Model::check`]).
    pub broken: Option<String>,
}

impl State {
    /// Restarts and revocations so far: holds granted in different epochs
    /// may both be believed (the documented cases), ordered by fencing.
    pub fn epoch(&self) -> u8 {
        self.restarts + self.revokes
    }

    /// Notes the first invariant broken.
    pub fn breaks(&mut self, why: String) {
        if self.broken.is_none() {
            self.broken = Some(why);
        }
    }
}

/// What a client can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// The first try (mode `try`).
    Try,
    /// A waiter acts: takes a hand-off it heard of, or attempts.
    Attempt,
    /// The watchdog's (or the hand-off's) extension.
    Renew,
    /// Release the hold (handing on).
    Release,
    /// Give up waiting (`fair_leave.lua`).
    Leave,
    /// Release a first try's token in the background.
    Cleanup,
}

/// A transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The clock moves one tick.
    Tick,
    /// A fault, or a paused client's resume.
    Fault(Fault),
    /// A client's pending hand-off message is held up: it attempts first.
    DelayMessage(usize),
    /// A held-up message is read (by the waiter's current entry, if it
    /// still names it).
    Deliver(usize),
    /// An operator revokes the lock (`Client::revoke`).
    Revoke,
    /// A client steps; `true`: the reply is lost.
    Step(usize, Op, bool),
}

/// The fair lock model under one configuration.
pub struct FairModel {
    /// The configuration.
    pub config: Config,
    pub(crate) scripts: super::fair_step::Scripts,
}

crate::model::common::explorable!(FairModel, Config, Mutant, State);

impl FairModel {
    /// The model of `config`, its scripts mutated as `config.mutant` says.
    pub fn new(config: Config) -> Result<FairModel, String> {
        let scripts = super::fair_step::Scripts::load(config.mutant)?;
        Ok(FairModel { config, scripts })
    }

    /// The lock key's name (its tag stem is the key itself).
    pub fn key(&self) -> &'static [u8] {
        b"lk:fair"
    }

    /// The hand-off TTL: the smaller of the lock's TTL and the lease.
    pub fn handoff_ttl(&self) -> i64 {
        self.config.ttl.min(self.config.lease)
    }

    /// An entry's own lease: [`ENTRY_LEASES`] waiter leases.
    pub fn entry_lease(&self) -> i64 {
        self.config.lease * ENTRY_LEASES
    }

    /// Whether a client believes it holds the lock at `now`.
    pub fn believes(&self, hold: &Hold, now: i64) -> bool {
        !hold.lost && now < hold.deadline - hold.margin
    }
}
