//! The invariants of [`MultiModel`]: exclusion per name, all or none, and
//! the liveness bound (no deadlock, a hold kept idle given back to a
//! waiter).

use crate::model::multi::{Hold, Kind, MultiModel, Phase, State};

/// Exclusion per name: no two clients believe they hold the same name
/// (a keeper's hold counts while a local holder uses it), except when a
/// restart without persistence lost the older hold: the documented case,
/// in which the older hold's fencing token for that name, if issued, must
/// be below the newer one's (a keeper's: its local hold's).
pub(crate) fn exclusion(m: &MultiModel, s: &State) -> Result<(), String> {
    for i in 0..m.config.names {
        let believers: Vec<(usize, &Hold)> = s
            .clients
            .iter()
            .enumerate()
            .filter(|&(c, _)| m.config.clients[c].wants(i))
            .filter_map(|(c, client)| match &client.phase {
                Phase::Held(h) if m.believes(h, s.now) => {
                    let using = h.in_use || !matches!(m.config.clients[c], Kind::Keeper(_));
                    using.then_some((c, h))
                }
                _ => None,
            })
            .collect();
        for (n, (a, ha)) in believers.iter().enumerate() {
            for (b, hb) in &believers[n + 1..] {
                if ha.epoch == hb.epoch {
                    return Err(format!(
                        "exclusion: c{a} and c{b} both believe they hold name {i} at {} ms",
                        s.now
                    ));
                }
                let (old, new) = match ha.epoch < hb.epoch {
                    true => ((*a, *ha), (*b, *hb)),
                    false => ((*b, *hb), (*a, *ha)),
                };
                if let (Some(o), Some(n)) = (fence(m, old, i), fence(m, new, i)) {
                    if o >= n {
                        return Err(format!(
                            "after a restart the stale hold's token {o} of name {i} is not below the new one's {n}"
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Client `c`'s fencing token for name `i` under `hold`, if issued.
fn fence(m: &MultiModel, (c, hold): (usize, &Hold), i: usize) -> Option<u64> {
    let place = match m.config.clients[c] {
        Kind::Multi(mask) => (0..i).filter(|j| mask & (1 << j) != 0).count(),
        Kind::Plain(_) | Kind::Keeper(_) => 0,
    };
    hold.fences.get(place).copied()
}

/// All or none, on both sides: a client that believes it holds (with no
/// restart since it took the hold) finds its token in the key of *every*
/// name it holds; and every lock key's token is of a hold its client has
/// (held, even if found lost, or an acquire whose reply was lost, about
/// to be cleaned up). A key left with the token of an attempt that was
/// told "busy", or of a hold released, is a name held without its holder
/// knowing: a strict subset taken, or one left behind.
pub(crate) fn all_or_none(m: &MultiModel, s: &State) -> Result<(), String> {
    for (c, client) in s.clients.iter().enumerate() {
        let Phase::Held(h) = &client.phase else {
            continue;
        };
        if !m.believes(h, s.now) || h.epoch != s.restarts {
            continue;
        }
        let kind = m.config.clients[c];
        for i in (0..m.config.names).filter(|&i| kind.wants(i)) {
            if m.owner(s, i) != Some((c, h.attempt)) {
                return Err(format!(
                    "all or none: c{c} believes it holds its names at {} ms, but name {i}'s key is not its own",
                    s.now
                ));
            }
        }
    }
    for i in 0..m.config.names {
        let Some((c, a)) = m.owner(s, i) else {
            continue;
        };
        let has = match &s.clients[c].phase {
            Phase::Held(h) => h.attempt == a,
            Phase::Cleanup { attempt } => *attempt == a,
            _ => false,
        };
        if !has {
            return Err(format!(
                "all or none: name {i}'s key holds c{c}'s token of attempt {a} at {} ms, a hold c{c} does not have",
                s.now
            ));
        }
    }
    Ok(())
}

/// Liveness, with no fault in the run: no waiter (plain, `lock_all`, or a
/// keeper taking its lock from Redis) waits longer than one tick while
/// every name it wants is free (no key) or held only by a hold kept idle.
/// Time is urgent (see [`MultiModel`]): a due step runs before the clock
/// moves, so this says that a release, an expiry or a kept hold's giving
/// back wakes the waiters that need it (no lost wake-up, no deadlock
/// between `lock_all` callers, no kept hold that ignores a waiter). And a
/// holder asked to let go (`release-requested`) that listens lets go
/// within a tick too.
///
/// With faults, the documented bounds remain: a waiter that is not itself
/// paused waits at most `ttl + idle` (and two ticks of rounding) while its
/// names are free or kept idle: a lost `wanted` leaves the kept hold to its
/// idle time, a paused keeper's hold expires at its TTL, and a lost
/// wake-up leaves the waiter to its recheck at the holder's TTL.
pub(crate) fn liveness(m: &MultiModel, s: &State) -> Result<(), String> {
    let cfg = &m.config;
    let bound = match s.faults {
        0 => cfg.tick,
        _ => cfg.ttl + cfg.idle + 2 * cfg.tick,
    };
    for (c, client) in s.clients.iter().enumerate() {
        if let Some(since) = client.blocked_since {
            if s.now - since > bound {
                return Err(format!(
                    "liveness: c{c} has waited since {since} ms (now {} ms) while every name it wants is free or kept idle",
                    s.now
                ));
            }
        }
        if let (Some(asked), 0) = (client.asked_at, s.faults) {
            if s.now - asked > cfg.tick {
                return Err(format!(
                    "liveness: c{c}, asked to let go at {asked} ms, still holds at {} ms",
                    s.now
                ));
            }
        }
    }
    Ok(())
}

/// Whether name `i` is free for a waiter: no key, or the key of a hold
/// kept idle by a keeper.
fn free(m: &MultiModel, s: &State, i: usize) -> bool {
    let key = m.key(i);
    if !s.keys.contains_key(&key) {
        return true;
    }
    let Some((c, a)) = m.owner(s, i) else {
        return false;
    };
    matches!(m.config.clients[c], Kind::Keeper(_))
        && matches!(&s.clients[c].phase, Phase::Held(h) if h.attempt == a && !h.in_use)
}

/// Updates each client's liveness clock after a step.
pub(crate) fn observe(m: &MultiModel, s: &mut State) {
    for c in 0..s.clients.len() {
        let kind = m.config.clients[c];
        // A paused waiter's wait does not count: it cannot act.
        let blocked = !s.clients[c].paused
            && matches!(s.clients[c].phase, Phase::Waiting { .. })
            && (0..m.config.names).all(|i| !kind.wants(i) || free(m, s, i));
        let since = s.clients[c].blocked_since;
        s.clients[c].blocked_since = blocked.then(|| since.unwrap_or(s.now));
    }
}
