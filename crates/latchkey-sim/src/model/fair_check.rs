//! The fair lock model's invariants: those judged on a whole state
//! (exclusion, the bound on a hand-off nobody took up), and those judged
//! at the step that grants the lock (FIFO, leases), from the keyspace the
//! script ran on.

use crate::model::fair::{FairModel, Hold, Phase, State, Val, START_MICROS};

/// The server's clock in ms at the model's time `now`.
pub(crate) fn server_ms(now: i64) -> i64 {
    START_MICROS / 1000 + now
}

/// A queued entry as the scripts judge it: its own lease's deadline and
/// its process's record's (server ms; `None`: none).
pub(crate) struct Queued {
    /// The entry.
    pub(crate) entry: Vec<u8>,
    /// Its own lease's deadline (`None`: gone, or taken out by a leave).
    pub(crate) own: Option<i64>,
    /// Its process's record's deadline (`None`: no record).
    pub(crate) record: Option<i64>,
}

impl Queued {
    /// Until when it is live (`docs/protocol.md`, "Fair locks": while its
    /// own lease runs and its process's record, if it has one, has not run
    /// out): the sooner of the two deadlines; `None`: it has no lease.
    pub(crate) fn live_until(&self) -> Option<i64> {
        self.own.map(|own| self.record.map_or(own, |r| r.min(own)))
    }

    /// Whether it is live at `now` (server ms).
    pub(crate) fn live(&self, now: i64) -> bool {
        self.live_until().is_some_and(|l| l >= now)
    }
}

/// The queue's entries in order, each with its own lease's and its
/// process's record's deadlines, as `keys` holds them.
pub(crate) fn queue(m: &FairModel, keys: &[(Vec<u8>, Val, Option<i64>)]) -> Vec<Queued> {
    let stem = latchkey::protocol::tag_stem(m.key());
    let find = |suffix: &[u8]| {
        let name = [&stem[..], suffix].concat();
        keys.iter().find(|(k, _, _)| *k == name).map(|(_, v, _)| v)
    };
    let zset = |suffix: &[u8]| match find(suffix) {
        Some(Val::ZSet(z)) => z.clone(),
        _ => Vec::new(),
    };
    let leases = zset(latchkey::protocol::LEASES_SUFFIX);
    let records = zset(latchkey::protocol::ALIVE_SUFFIX);
    let score = |set: &[(Vec<u8>, i64)], member: &[u8]| {
        set.iter().find(|(m, _)| m == member).map(|(_, s)| *s)
    };
    match find(latchkey::protocol::QUEUE_SUFFIX) {
        Some(Val::List(entries)) => entries
            .iter()
            .map(|e| Queued {
                entry: e.clone(),
                own: score(&leases, e),
                // As `live_until` reads it: the record under the entry's
                // first 16 hex digits. The member 'horizon' (the records'
                // drop horizon, `shared/live.lua`) is no process's record:
                // no entry's first 16 digits name it.
                record: score(&records, &e[..e.len().min(16)]),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// FIFO among waiters that kept their leases: the lock is granted (handed
/// to `granted`, or taken by client `who` whose entry is `granted`, or who
/// is not queued: `None`) only when no entry ahead of it in the queue the
/// script saw, of a client not in `mine`, was still live (its own lease
/// and its process's record, if any, not past at the script's time).
/// `Err` names the waiter skipped.
pub(crate) fn fifo(
    m: &FairModel,
    before: &State,
    granted: Option<&[u8]>,
    who: usize,
    mine: &[usize],
) -> Result<(), String> {
    let now = server_ms(before.now);
    for q in queue(m, &before.keys) {
        if Some(q.entry.as_slice()) == granted {
            return Ok(());
        }
        let theirs =
            crate::model::fair_step::owner(&q.entry).is_some_and(|(c, _)| !mine.contains(&c));
        if q.live(now) && theirs {
            return Err(format!(
                "FIFO: c{who} was granted the lock at {} ms ahead of the live waiter {} (live until {} ms)",
                before.now,
                String::from_utf8_lossy(&q.entry),
                q.live_until().unwrap_or_default() - START_MICROS / 1000
            ));
        }
    }
    Ok(())
}

/// Every entry with a lease is queued: a waiter's place is taken away
/// only with its lease (a leave that trims the queue's tail stops at the
/// first entry that has one).
fn leased_are_queued(m: &FairModel, s: &State) -> Result<(), String> {
    let stem = latchkey::protocol::tag_stem(m.key());
    let leases = [&stem[..], latchkey::protocol::LEASES_SUFFIX].concat();
    let queued = queue(m, &s.keys);
    for (key, value, _) in &s.keys {
        let Val::ZSet(members) = value else { continue };
        if *key != leases {
            continue;
        }
        for (entry, _) in members {
            if !queued.iter().any(|q| q.entry == *entry) {
                return Err(format!(
                    "a leased entry is not queued at {} ms: {} (its waiter lost its place)",
                    s.now,
                    String::from_utf8_lossy(entry)
                ));
            }
        }
    }
    Ok(())
}

/// The invariants judged on a state.
pub(crate) fn check(m: &FairModel, s: &State) -> Result<(), String> {
    exclusion(m, s)?;
    leased_are_queued(m, s)?;
    // A dead waiter delays the queue by at most its lease: it is handed the
    // lock only while it is live (checked at the hand-off): its process's
    // record, renewed every third of the waiter lease, runs out a lease
    // after its last renewal, however long its entry's own lease; and a key
    // handed to it that it never takes up expires within the hand-off TTL;
    // so nothing of it is left `lease + handoff_ttl` after its last
    // renewal (in ticks: (lease + min(ttl, lease)) / tick).
    for (i, c) in s.clients.iter().enumerate() {
        let Some(u) = c.unseen else { continue };
        let bound = u.lease_until.saturating_add(m.handoff_ttl());
        if s.now > bound || s.now > u.at + m.handoff_ttl() {
            return Err(format!(
                "a dead waiter delays the queue past its bound: the lock handed to c{i} at {} ms \
                 (its lease until {} ms) still holds its token at {} ms",
                u.at, u.lease_until, s.now
            ));
        }
    }
    Ok(())
}

/// No two clients believe they hold the lock, unless a restart or a
/// revocation came between their grants (the documented cases), and then
/// the older hold's fencing token is below the newer one's.
fn exclusion(m: &FairModel, s: &State) -> Result<(), String> {
    let believers: Vec<(usize, &Hold)> = s
        .clients
        .iter()
        .enumerate()
        .filter_map(|(i, c)| match &c.phase {
            Phase::Held(h) if m.believes(h, s.now) => Some((i, h)),
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
            let (old, new) = match ha.epoch < hb.epoch {
                true => (ha, hb),
                false => (hb, ha),
            };
            if let (Some(o), Some(n)) = (old.fence, new.fence) {
                if o >= n {
                    return Err(format!(
                        "the hold ended by a restart or a revocation has token {o}, not below the newer hold's {n}"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Notes a fencing token issued: above every one before it, and above
/// every fence a revocation returned.
pub(crate) fn issued(s: &mut State, fence: u64) {
    if fence <= s.revoke_fence {
        s.breaks(format!(
            "after a revoke every later fencing token must be above its fence: {fence} issued after the fence {}",
            s.revoke_fence
        ));
    }
    if fence <= s.last_token {
        s.breaks(format!(
            "fencing tokens must strictly increase: {fence} issued after {}",
            s.last_token
        ));
    }
    s.last_token = s.last_token.max(fence);
}
