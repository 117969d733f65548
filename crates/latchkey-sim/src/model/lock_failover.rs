//! Two faults of the plain lock model that lose data without wiping it all
//! (`LockModel::with_failover`, `LockModel::with_clock_step`):
//!
//! - **a failover to a replica that misses the last writes.** The state
//!   keeps the replica's copy of the keyspace: the keyspace as of the last
//!   `Replicate` transition, which happens on its own between steps (not a
//!   fault). A failover (a fault) replaces the keyspace with that copy, the
//!   fencing counter included; it takes a tick, as a restart does, and the
//!   old primary comes back as a replica of the new one. A hold whose key
//!   the replica did not have as the primary had it (the acquisition or a
//!   renewal not replicated) is lost by the failover: the documented case
//!   where two may believe they hold, their tokens still ordered.
//! - **a restart whose server clock is behind or ahead**: a restart without
//!   persistence that also moves the server's µs clock (`TIME`, and so the
//!   tokens and the keys' expiry) by −δ or +δ ticks; the clients' monotonic
//!   clocks are unaffected.
//!
//! - **a long idle** (`LockModel::with_idle`; not a fault): once, while
//!   nobody holds or waits, the server's clock moves on by
//!   `FENCE_KEEP_MS` and a tick, so every key with an expiry goes, the
//!   fencing counter included (it expires that long after the instant its
//!   token names); the next token must still be above every one before.
//!
//! docs/fencing.md ("Guarantee") promises strictly increasing tokens after
//! a lost counter only while the server's clock reads later, at the first
//! token after the loss, than at the last token before it. A token that is
//! not above the last one, issued after a data loss with the clock reading
//! no later than at the last token, is that documented exception: tokens
//! must increase again from it, and a hold from before the loss may then
//! hold a token above a newer hold's. Any other is a violation.

use crate::model::common::{token, Keys, Stored};
use crate::model::lock::{Action, LockModel, Phase, State, START_MICROS};
use crate::model::trace::Record;

/// The state these faults add.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct More {
    /// The replica's copy: the keyspace at the last `Replicate`.
    pub replica: Keys,
    /// The server's clock minus the clients', ms.
    pub offset: i64,
    /// The server's clock (model ms) when the last token was issued.
    pub token_at: i64,
    /// Data losses (restarts, failovers) before the last token.
    pub token_epoch: u8,
    /// The data losses counted when a token went back as documented.
    pub clock_back: Option<u8>,
    /// The long idle happened.
    pub idled: bool,
}

/// How long a fencing counter outlives the instant its token names
/// (`scripts/shared/fence.lua`), ms.
pub const FENCE_KEEP_MS: i64 = 3_600_000;

impl LockModel {
    /// Adds replication (on its own) and failovers (a fault) to the model.
    pub fn with_failover(mut self) -> LockModel {
        self.failover = true;
        self
    }

    /// Adds one long idle between holds (see the module's docs).
    pub fn with_idle(mut self) -> LockModel {
        self.idle = true;
        self
    }

    /// Adds restarts without persistence that move the server's clock by
    /// −`ticks` or +`ticks` ticks (a fault each).
    pub fn with_clock_step(mut self, ticks: i64) -> LockModel {
        self.clock_step = Some(ticks);
        self
    }

    /// The transitions of these faults, where `fault`: a fault may happen.
    pub(crate) fn more_actions(&self, s: &State, fault: bool, out: &mut Vec<Action>) {
        if self.failover && s.more.replica != s.keys {
            out.push(Action::Replicate);
            if fault {
                out.push(Action::Failover);
            }
        }
        if let Some(d) = self.clock_step.filter(|_| fault && !s.keys.is_empty()) {
            out.extend([Action::RestartClock(-d), Action::RestartClock(d)]);
        }
        let quiet = s
            .clients
            .iter()
            .all(|c| !c.paused && matches!(c.phase, Phase::Idle | Phase::Done) && !c.woken);
        if self.idle && !s.more.idled && quiet && !s.keys.is_empty() {
            out.push(Action::Idle);
        }
    }

    /// The stale hold `ha` or `hb` (of the older epoch) must hold a token
    /// below the newer one's, unless a token went back as documented
    /// between them.
    pub(crate) fn check_order(
        &self,
        s: &State,
        ha: &crate::model::lock::Hold,
        hb: &crate::model::lock::Hold,
    ) -> Result<(), String> {
        let (old, new) = if ha.epoch < hb.epoch {
            (ha, hb)
        } else {
            (hb, ha)
        };
        if s.more
            .clock_back
            .is_some_and(|e| old.epoch < e && e <= new.epoch)
        {
            return Ok(());
        }
        match (old.fence, new.fence) {
            (Some(o), Some(n)) if o >= n => Err(format!(
                "after a restart or failover the stale hold's token {o} is not below the new one's {n}"
            )),
            _ => Ok(()),
        }
    }
}

/// The server's clock now, in server ms.
fn server_ms(s: &State) -> i64 {
    START_MICROS / 1000 + s.now + s.more.offset
}

/// Drops from the replica's copy what expired (as the server's keys are
/// dropped at each tick), so that equal states hash equal.
pub(crate) fn prune(s: &mut State) {
    let now = server_ms(s);
    s.more
        .replica
        .retain(|_, (_, at)| at.is_none_or(|a| now <= a));
}

/// Notes a fencing token issued: above every one before it, or the
/// documented exception (see the module's docs).
/// (The last token's issue is kept only where the clock can move back, so
/// that the other searches' states stay as many as before.)
pub(crate) fn issued(m: &LockModel, s: &mut State, fence: u64) {
    let at = s.now + s.more.offset;
    let moved = m.clock_step.is_some();
    if fence <= s.last_token && s.token_went_back.is_none() {
        if moved && s.restarts > s.more.token_epoch && at <= s.more.token_at {
            s.more.clock_back = Some(s.restarts);
            s.last_token = fence;
        } else {
            s.token_went_back = Some((s.last_token, fence));
        }
    }
    s.last_token = s.last_token.max(fence);
    if moved {
        s.more.token_at = at;
        s.more.token_epoch = s.restarts;
    }
}

pub(crate) fn step(m: &LockModel, s: &State, action: &Action) -> (State, Record) {
    let mut n = s.clone();
    let tick = m.config.tick;
    match *action {
        Action::Replicate => {
            n.more.replica = n.keys.clone();
            let what = format!("{} keys copied", n.keys.len());
            (n, Record::world(s.now, "replicate", what))
        }
        Action::Failover => {
            n.faults += 1;
            n.restarts += 1;
            n.now += tick;
            prune(&mut n);
            // A hold whose key the replica had as the primary had it
            // survives the failover; any other was lost by it.
            for (c, client) in n.clients.iter_mut().enumerate() {
                if let Phase::Held(h) = &mut client.phase {
                    let mine = token(c, h.attempt).into_bytes();
                    // (A waiter may have marked the value: it starts with the token.)
                    let entry = s
                        .keys
                        .iter()
                        .find(|(_, (v, _))| matches!(v, Stored::Str(v) if v.starts_with(&mine)));
                    if entry.is_none_or(|(k, e)| n.more.replica.get(k) == Some(e)) {
                        h.epoch = n.restarts;
                    }
                }
            }
            n.keys = n.more.replica.clone();
            let what = format!("to a replica of {} keys", n.keys.len());
            (n, Record::world(s.now, "failover", what))
        }
        Action::RestartClock(d) => {
            n.keys.clear();
            n.more.replica.clear();
            n.restarts += 1;
            n.faults += 1;
            n.now += tick;
            n.more.offset += d * tick;
            let what = format!("keyspace wiped, server clock {:+} ms", d * tick);
            (n, Record::world(s.now, "restart", what))
        }
        Action::Idle => {
            n.more.idled = true;
            n.more.offset += FENCE_KEEP_MS + tick;
            let now = server_ms(&n);
            n.keys.retain(|_, (_, at)| at.is_none_or(|a| now <= a));
            prune(&mut n);
            let what = format!(
                "server clock +{} ms, {} of {} keys left",
                FENCE_KEEP_MS + tick,
                n.keys.len(),
                s.keys.len()
            );
            (n, Record::world(s.now, "idle", what))
        }
        _ => unreachable!("not a failover's action"),
    }
}
