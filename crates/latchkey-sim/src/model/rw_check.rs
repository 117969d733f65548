//! The read-write lock model's checks of a step against the documented
//! policy (`docs/protocol.md`, "Read-write locks"), on the keys live before
//! it: an attempt's verdict, a writer's batch, and the waiters' liveness.

use crate::model::common::{self, live_members, server_ms, set_members, token};
use crate::model::rw_request::names;
use crate::model::rwlock::{Access, Phase, RwLockModel, State};
use crate::server::Server;

/// Whether the documented policy lets client `t`'s attempt in, on the keys
/// live at `now` (model ms) before it ran. A token that holds already (an
/// earlier attempt of the same wait, its reply lost) is let in again (a
/// reader's, unless a writer holds).
pub(crate) fn admits(s: &State, keys: &[Vec<u8>; 7], access: Access, t: &str) -> bool {
    let ours = owns(s, keys, access, t);
    if ours && access == Access::Write {
        return true;
    }
    let now = server_ms(s.now);
    let writer = s.keys.contains_key(&keys[0]);
    let next = set_members(&s.keys, &keys[4]);
    match access {
        Access::Read => {
            !writer
                && (ours
                    || live_members(&s.keys, &keys[2], now).is_empty()
                    || next.contains(t.as_bytes()))
        }
        Access::Write => {
            !writer && live_members(&s.keys, &keys[1], now).is_empty() && next.is_empty()
        }
    }
}

/// Whether token `t` holds its side already in the keys before a step.
pub(crate) fn owns(s: &State, keys: &[Vec<u8>; 7], access: Access, t: &str) -> bool {
    match access {
        Access::Read => live_members(&s.keys, &keys[1], server_ms(s.now))
            .iter()
            .any(|m| m == t.as_bytes()),
        Access::Write => matches!(
            s.keys.get(&keys[0]),
            Some((common::Stored::Str(v), _)) if v == t.as_bytes()
        ),
    }
}

/// After writer `c`'s release: every reader waiting then (a live intent in
/// the keys before) must be in the readers let in next.
pub(crate) fn check_batch(
    before: &State,
    server: &Server,
    n: &mut State,
    c: usize,
    keys: &[Vec<u8>; 7],
) {
    let waiting = live_members(&before.keys, &keys[3], server_ms(before.now));
    let after = match common::store(server) {
        Ok(k) => set_members(&k, &keys[4]),
        Err(_) => return,
    };
    if let Some(left) = waiting.iter().find(|t| !after.contains(*t)) {
        n.broken.get_or_insert(format!(
            "phase-fair batch: reader {} waited at c{c}'s release at {} ms and is not let in next",
            String::from_utf8_lossy(left),
            before.now
        ));
    }
}

/// Liveness without faults: a waiter the policy lets in now is woken, or
/// due to try again within 1 ms (a withdrawn intent or batch member wakes
/// those it held back: `rw_forget.lua` publishes). `None` when it holds, or
/// a fault or a pause leaves it out.
pub(crate) fn unwoken_waiter(m: &RwLockModel, s: &State) -> Option<String> {
    if s.faults > 0 {
        return None;
    }
    let (keys, _) = names();
    s.clients.iter().enumerate().find_map(|(i, c)| {
        let Phase::Waiting {
            attempt,
            recheck_at,
        } = c.phase
        else {
            return None;
        };
        let access = m.role(i);
        let due = c.paused || c.woken || recheck_at <= s.now + 1;
        (!due && admits(s, &keys, access, &token(i, attempt))).then(|| {
            format!(
                "liveness: c{i} ({access:?}) sleeps until {recheck_at} ms, unwoken, while the policy lets it in at {} ms",
                s.now
            )
        })
    })
}
