//! The fair lock model's invariants: those judged on a whole state
//! (exclusion, the bound on a hand-off nobody took up), and those judged
//! at the step that grants the lock (FIFO, leases), from the keyspace the
//! script ran on.

use crate::model::fair::{FairModel, Hold, Phase, State, Val, START_MICROS};

/// The server's clock in ms at the model's time `now`.
pub(crate) fn server_ms(now: i64) -> i64 {
    START_MICROS / 1000 + now
}

/// The queue's entries in order, each with its lease deadline (server ms;
/// `None`: no lease), as `keys` holds them.
pub(crate) fn queue(
    m: &FairModel,
    keys: &[(Vec<u8>, Val, Option<i64>)],
) -> Vec<(Vec<u8>, Option<i64>)> {
    let stem = latchkey::protocol::tag_stem(m.key());
    let find = |suffix: &[u8]| {
        let name = [&stem[..], suffix].concat();
        keys.iter().find(|(k, _, _)| *k == name).map(|(_, v, _)| v)
    };
    let leases = match find(latchkey::protocol::LEASES_SUFFIX) {
        Some(Val::ZSet(z)) => z.clone(),
        _ => Vec::new(),
    };
    match find(latchkey::protocol::QUEUE_SUFFIX) {
        Some(Val::List(entries)) => entries
            .iter()
            .map(|e| {
                let lease = leases.iter().find(|(m, _)| m == e).map(|(_, s)| *s);
                (e.clone(), lease)
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// FIFO among waiters that kept their leases: the lock is granted (handed
/// to `granted`, or taken by client `who` whose entry is `granted`, or who
/// is not queued: `None`) only when no entry ahead of it in the queue the
/// script saw, of a client not in `mine`, still had a live lease (its deadline not
/// past at the script's time). `Err` names the waiter skipped.
pub(crate) fn fifo(
    m: &FairModel,
    before: &State,
    granted: Option<&[u8]>,
    who: usize,
    mine: &[usize],
) -> Result<(), String> {
    let now = server_ms(before.now);
    for (entry, lease) in queue(m, &before.keys) {
        if Some(entry.as_slice()) == granted {
            return Ok(());
        }
        let live = lease.is_some_and(|l| l >= now);
        let theirs =
            crate::model::fair_step::owner(&entry).is_some_and(|(c, _)| !mine.contains(&c));
        if live && theirs {
            return Err(format!(
                "FIFO: c{who} was granted the lock at {} ms ahead of the live waiter {} (lease until {} ms)",
                before.now,
                String::from_utf8_lossy(&entry),
                lease.unwrap_or_default() - START_MICROS / 1000
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
            if !queued.iter().any(|(e, _)| e == entry) {
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
    // lock only while its lease runs (checked at the hand-off), and a key
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
