//! A keeper's steps ([`Kind::Keeper`](super::multi::Kind::Keeper)): a
//! `CachedLock` (`primitives/lock/cached/`) that keeps its Redis hold
//! while idle. Its Redis steps (take, wait, renew, release) are a plain
//! lock's with a caching token (`…:c`); what is its own:
//!
//! - a local acquire (`Cache::take`): the kept hold, with no round trip,
//!   while it is held and nobody wants it; else the kept hold is given
//!   back (`release.lua`) and the next local acquire goes to Redis (the
//!   wanted flag cleared first, as `take` does after giving back);
//! - a local release (`CachedGuard::release`): kept idle, for `idle` ms,
//!   while held and not wanted; else given back;
//! - `wanted` heard (the keeper task, `keep`): the wanted flag set, and an
//!   idle hold given back at once; one in use keeps the flag for its
//!   local release;
//! - the idle time run out: an idle hold given back.

use crate::model::multi::{MultiModel, Mutant, Op, Phase, State};

use crate::model::common::ints;
use crate::model::multi_request::{call, Sends};
use crate::model::multi_scripts::token;
use crate::model::multi_step::{issued, plain_step, Sent};
use crate::model::trace::show_reply;
use crate::server::Server;

/// Keeper `c`'s step `op` on name `i`.
pub(crate) fn keeper_step(
    m: &MultiModel,
    server: &mut Server,
    n: &mut State,
    c: usize,
    i: usize,
    op: Op,
    lost: bool,
) -> Sent {
    let now = n.now;
    match op {
        Op::Try => {
            n.clients[c].wanted = false;
            plain_step(m, server, n, c, i, op, lost)
        }
        Op::Retry | Op::Renew | Op::Cleanup => plain_step(m, server, n, c, i, op, lost),
        Op::Use => {
            let client = &mut n.clients[c];
            let Phase::Held(h) = &mut client.phase else {
                return ("use".into(), Vec::new(), "nothing kept".into());
            };
            if m.believes(h, now) && !client.wanted {
                h.in_use = true;
                // A new local hold: its own fencing token, when asked.
                h.fences.clear();
                return ("use(kept)".into(), Vec::new(), "no round trip".into());
            }
            // Wanted elsewhere, or lost: given back; the next local
            // acquire (a first try) goes to Redis.
            let sent = plain_step(m, server, n, c, i, Op::Cleanup, lost);
            n.clients[c].phase = Phase::Idle;
            sent
        }
        Op::Release => {
            let client = &mut n.clients[c];
            let Phase::Held(h) = &mut client.phase else {
                return ("release".into(), Vec::new(), "not held".into());
            };
            if m.believes(h, now) && !client.wanted {
                h.in_use = false;
                h.idle_until = now + m.config.idle;
                h.fences.clear();
                client.holds += 1;
                return ("release(keep)".into(), Vec::new(), "kept idle".into());
            }
            client.wanted = false;
            plain_step(m, server, n, c, i, Op::Release, lost)
        }
        Op::Hear => {
            let client = &mut n.clients[c];
            client.told = false;
            if m.config.mutant == Some(Mutant::KeeperIgnoresWanted) {
                return ("hear".into(), vec!["wanted".into()], "ignored".into());
            }
            client.wanted = true;
            match &client.phase {
                Phase::Held(h) if !h.in_use => give_back(m, server, n, c, i, lost),
                _ => ("hear".into(), vec!["wanted".into()], "flag set".into()),
            }
        }
        Op::Expire => give_back(m, server, n, c, i, lost),
        Op::Issue => issue(m, server, n, c, i, lost),
        // A keeper takes a request as `wanted` (above), never as this.
        Op::Yield => ("-".into(), Vec::new(), "not a keeper's step".into()),
    }
}

/// An idle kept hold given back (`give_back_if_idle`): `release.lua`,
/// the wanted flag cleared.
fn give_back(
    m: &MultiModel,
    server: &mut Server,
    n: &mut State,
    c: usize,
    i: usize,
    lost: bool,
) -> Sent {
    n.clients[c].wanted = false;
    // As a clean-up: its local holds were counted at their releases.
    plain_step(m, server, n, c, i, Op::Cleanup, lost)
}

/// A local hold's `fencing_token()`: `issue_fence.lua` with the kept
/// hold's token; not ours any more, the hold is found lost.
fn issue(
    m: &MultiModel,
    server: &mut Server,
    n: &mut State,
    c: usize,
    i: usize,
    lost: bool,
) -> Sent {
    let Phase::Held(h) = &n.clients[c].phase else {
        return ("issue".into(), Vec::new(), "not held".into());
    };
    let token = token(c, h.attempt, true);
    let (_, args, reply) = call(m, server, Sends::Issue { i, token });
    let words = ints(&reply);
    let fence = (words.first() == Some(&1))
        .then(|| words.get(1).and_then(|&f| u64::try_from(f).ok()))
        .flatten();
    if let Some(f) = fence {
        issued(n, i, f);
    }
    if let Phase::Held(h) = &mut n.clients[c].phase {
        match (lost, fence) {
            (true, _) => {}
            (false, Some(f)) => h.fences = vec![f],
            (false, None) => h.lost = true,
        }
    }
    ("issue_fence.lua".into(), args, show_reply(&reply))
}
