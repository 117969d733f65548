//! A fair lock client's steps: what it sends (the library's arguments) and
//! what it makes of the reply, as `primitives/lock/fair/` does.

use crate::model::common::{drift, ints, margin, process_id, token};
use crate::model::fair::{FairModel, Hold, Mode, Op, Phase, State, Wait, Wake};
use crate::model::fair_check::{fifo, issued};
use crate::model::fair_request::{call, Sends};
use crate::model::fair_step::entry;
use crate::model::trace::show_reply;
use crate::reply::Reply;
use crate::server::Server;

/// A fencing token as `backend/fair.rs` reads it from a reply.
fn fence_of(fenced: bool, value: i64) -> Option<u64> {
    match fenced {
        true => u64::try_from(value).ok().filter(|&v| v > 0),
        false => None,
    }
}

/// Client `c` takes `op` (`lost`: its reply is lost) on `server`, set to
/// `before`; `n` is the state after. Returns the script, its arguments and
/// the reply, printable.
pub(crate) fn client_step(
    m: &FairModel,
    server: &mut Server,
    before: &State,
    n: &mut State,
    c: usize,
    op: Op,
    lost: bool,
) -> (String, Vec<String>, String) {
    let cfg = &m.config;
    let now = n.now;
    // When and in which epoch a hold is granted by this step.
    let at = (now, n.epoch());
    let round_done = |n: &mut State| {
        let client = &mut n.clients[c];
        client.holds += 1;
        client.phase = match client.holds >= cfg.holds {
            true => Phase::Done,
            false => Phase::Idle,
        };
    };
    match op {
        Op::Try => {
            let client = &mut n.clients[c];
            client.tokens += 1;
            let t = client.tokens;
            let (args, reply) = call(m, server, Sends::Try(token(c, t)));
            let words = ints(&reply);
            taken(m, before, n, c, None, &words);
            let client = &mut n.clients[c];
            // Busy (or a timeout): queue under a new token and entry.
            let wait = |client: &mut crate::model::fair::Client| {
                client.tokens += 1;
                client.ids += 1;
                Phase::Waiting(Wait {
                    token: client.tokens,
                    id: client.ids,
                    mode: Mode::Queue,
                    recheck_at: now,
                    retry: false,
                    not_ours_since: now,
                })
            };
            client.phase = match (lost, words.first()) {
                (true, _) => {
                    // The armed `Leaving` releases the try's token behind.
                    client.cleanup = Some(t);
                    wait(client)
                }
                (false, Some(1 | 2)) => {
                    let value = words.get(1).copied().unwrap_or(0);
                    Phase::Held(hold(
                        m,
                        at,
                        t,
                        now + cfg.ttl - drift(cfg.ttl),
                        fence_of(cfg.fenced, value),
                        false,
                    ))
                }
                _ => wait(client),
            };
            ("fair_acquire.lua".into(), args, show_reply(&reply))
        }
        Op::Attempt => {
            let client = &mut n.clients[c];
            let Phase::Waiting(w) = client.phase.clone() else {
                return ("attempt".into(), Vec::new(), "not waiting".into());
            };
            let wake = std::mem::replace(&mut client.wake, Wake::None);
            if let Wake::Handed { fence, epoch, .. } = wake {
                let valid_until = handed_deadline(w.not_ours_since, m.handoff_ttl());
                // Heard in time: ours, with no request (`still_valid`).
                if now < valid_until {
                    let mut h = hold(m, at, w.token, valid_until, fence, true);
                    h.epoch = epoch;
                    n.clients[c].phase = Phase::Held(h);
                    let what = format!("held until {valid_until} ms");
                    return ("hand-off(msg)".into(), Vec::new(), what);
                }
            }
            // Queued and told nothing: the renewal task of the waiter's
            // process renews its lease and looks at the lock; the waiter
            // sleeps until it, a message or its deadline wakes it.
            if wake == Wake::None && w.mode == Mode::Renew && !w.retry {
                return renew_lease(m, server, n, c, &w, lost);
            }
            let me = entry(m, c, &w);
            let sends = Sends::Attempt {
                entry: me.clone(),
                token: token(c, w.token),
                mode: w.mode,
            };
            let (args, reply) = call(m, server, sends);
            let words = ints(&reply);
            taken(m, before, n, c, Some(me.as_bytes()), &words);
            if lost {
                // Retried after the failure policy's pause, in mode `renew`:
                // the attempt may have queued the entry unseen, and an entry
                // gone since (handed on, or dropped) must be queued again
                // under a new id, never under one a late hand-off names.
                let old = cfg.mutant == Some(crate::model::fair::Mutant::RetryRequeuesSameEntry);
                if let Phase::Waiting(w) = &mut n.clients[c].phase {
                    w.recheck_at = now + cfg.tick;
                    w.retry = true;
                    if !old {
                        w.mode = Mode::Renew;
                    }
                }
                return ("fair_acquire.lua".into(), args, show_reply(&reply));
            }
            let value = words.get(1).copied().unwrap_or(0);
            let client = &mut n.clients[c];
            client.phase = match words[..] {
                [1, ..] => Phase::Held(hold(
                    m,
                    at,
                    w.token,
                    now + cfg.ttl - drift(cfg.ttl),
                    fence_of(cfg.fenced, value),
                    false,
                )),
                [2, _, pttl, ..] => {
                    let deadline = handed_deadline(now, pttl.max(0));
                    Phase::Held(hold(
                        m,
                        at,
                        w.token,
                        deadline,
                        fence_of(cfg.fenced, value),
                        true,
                    ))
                }
                // Our entry is gone: queue again under a new id.
                [0, _, 0, ..] if w.mode == Mode::Renew => {
                    client.ids += 1;
                    Phase::Waiting(Wait {
                        id: client.ids,
                        mode: Mode::Queue,
                        recheck_at: now,
                        retry: false,
                        ..w
                    })
                }
                [0, wait_ms, queued, ..] => {
                    let mut recheck_at = now + cfg.lease / 3;
                    if wait_ms >= 0 {
                        recheck_at = recheck_at.min(now + wait_ms + 1);
                    }
                    Phase::Waiting(Wait {
                        mode: if queued == 1 { Mode::Renew } else { w.mode },
                        recheck_at,
                        retry: false,
                        not_ours_since: now,
                        ..w
                    })
                }
                _ => Phase::Waiting(Wait { retry: false, ..w }),
            };
            ("fair_acquire.lua".into(), args, show_reply(&reply))
        }
        Op::Renew => {
            let Phase::Held(h) = &mut n.clients[c].phase else {
                return ("renew".into(), Vec::new(), "not held".into());
            };
            let (args, reply) = call(m, server, Sends::Extend(token(c, h.token)));
            match (lost, ints(&reply).first()) {
                (true, _) => h.next_renew = now + cfg.tick,
                (false, Some(1)) => {
                    let until = now + cfg.ttl - drift(cfg.ttl);
                    if until > h.deadline {
                        h.deadline = until;
                        h.margin = margin(m.config.ttl);
                    }
                    h.next_renew = match cfg.watchdog {
                        true => now + cfg.ttl / 3,
                        false => i64::MAX,
                    };
                }
                (false, _) => h.lost = true,
            }
            ("extend.lua".into(), args, show_reply(&reply))
        }
        Op::Release => {
            let Phase::Held(h) = &n.clients[c].phase else {
                return ("release".into(), Vec::new(), "not held".into());
            };
            let (args, reply) = call(m, server, Sends::Release(token(c, h.token)));
            round_done(n);
            ("fair_release.lua".into(), args, show_reply(&reply))
        }
        Op::Leave => {
            let Phase::Waiting(w) = &n.clients[c].phase else {
                return ("leave".into(), Vec::new(), "not waiting".into());
            };
            let sends = Sends::Leave {
                token: token(c, w.token),
                entry: entry(m, c, w),
            };
            let (args, reply) = call(m, server, sends);
            n.clients[c].wake = Wake::None;
            round_done(n);
            ("fair_leave.lua".into(), args, show_reply(&reply))
        }
        Op::Cleanup => {
            let Some(t) = n.clients[c].cleanup.take() else {
                return ("cleanup".into(), Vec::new(), "nothing to release".into());
            };
            let (args, reply) = call(m, server, Sends::Release(token(c, t)));
            ("fair_release.lua".into(), args, show_reply(&reply))
        }
    }
}

/// The renewal task's run for waiter `c` (`primitives/lock/fair/renewer.rs`;
/// a client is one process with one waiter, among the first members, which
/// every run sends): `fair_renew.lua` with the process's id and its entry,
/// renewing the process's record for the waiter lease and the entry's own
/// lease for [`ENTRY_LEASES`](crate::model::fair::ENTRY_LEASES) of them.
/// The reply is `{wait_ms, head, holder, lapsed, gone...}`. An entry gone,
/// the lock held by its token (a hand-off whose message was missed), or the
/// lock free with it at the head, wakes the waiter (an attempt in mode
/// `renew`); an entry still queued proves the lock was not handed to it
/// before now; the next run is a third of a lease later, or at the
/// holder's TTL (when free, when the head stops being live) if sooner, or
/// at once after a reply that says the record had lapsed (the library then
/// sends all its entries: here the same one).
fn renew_lease(
    m: &FairModel,
    server: &mut Server,
    n: &mut State,
    c: usize,
    w: &Wait,
    lost: bool,
) -> (String, Vec<String>, String) {
    let (cfg, now) = (&m.config, n.now);
    let me = entry(m, c, w);
    let mine = token(c, w.token);
    let sends = Sends::RenewLeases {
        process: process_id(c),
        entries: vec![me.clone()],
    };
    let (args, reply) = call(m, server, sends);
    let client = &mut n.clients[c];
    let Phase::Waiting(w) = &mut client.phase else {
        return ("fair_renew.lua".into(), args, show_reply(&reply));
    };
    let words = ints(&reply);
    let text = |at: usize| match &reply {
        Reply::Array(Some(items)) => match items.get(at) {
            Some(Reply::Bulk(Some(text))) => text.clone(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    };
    let (head, holder) = (text(1), text(2));
    match (lost, words.first()) {
        // Tried again soon.
        (true, _) | (false, None) => w.recheck_at = now + cfg.tick,
        (false, Some(&wait_ms)) => {
            let gone = words.len() > 4;
            let lapsed = words.get(3) == Some(&1);
            if !gone || cfg.mutant == Some(crate::model::fair::Mutant::RenewalProvesGoneEntries) {
                w.not_ours_since = now;
            }
            if gone || head == me.as_bytes() || holder == mine.as_bytes() {
                client.wake = Wake::Look;
            } else {
                w.recheck_at = now + cfg.lease / 3;
                if wait_ms >= 0 {
                    w.recheck_at = w.recheck_at.min(now + wait_ms + 1);
                }
                if lapsed {
                    w.recheck_at = now;
                }
            }
        }
    }
    ("fair_renew.lua".into(), args, show_reply(&reply))
}

/// An attempt's reply `{1, fence}` took the lock: FIFO (no live waiter
/// skipped) and the token issued, whether or not the reply reaches the
/// client.
fn taken(m: &FairModel, before: &State, n: &mut State, c: usize, me: Option<&[u8]>, words: &[i64]) {
    if words.first() != Some(&1) {
        return;
    }
    if let Err(why) = fifo(m, before, me, c, &[c]) {
        n.breaks(why);
    }
    if let Some(f) = words
        .get(1)
        .and_then(|&f| u64::try_from(f).ok())
        .filter(|&f| f > 0)
    {
        issued(n, f);
    }
}

/// A hold granted now (`sent` = now) until `deadline`.
pub(crate) fn hold(
    m: &FairModel,
    (now, epoch): (i64, u8),
    token: u32,
    deadline: i64,
    fence: Option<u64>,
    handed: bool,
) -> Hold {
    let cfg = &m.config;
    let watchdog = match cfg.watchdog {
        true => now + cfg.ttl / 3,
        false => i64::MAX,
    };
    // A deadline that came with less than twice the stop margin left (a
    // hand-off's short TTL) stops half the time left before it, until a
    // renewal sets the next (`lease::State::new`).
    let margin = margin(m.config.ttl).min((deadline - now).max(0) / 2);
    // A handed hold is extended a sixth of a lease before its stop time.
    let next_renew = match handed {
        true => watchdog.min(deadline - margin - cfg.lease / 6),
        false => watchdog,
    };
    Hold {
        token,
        deadline,
        margin,
        next_renew,
        lost: false,
        fence,
        epoch,
    }
}

/// A hold handed over for `left` ms, as the library computes its deadline.
pub(crate) fn handed_deadline(sent: i64, left: i64) -> i64 {
    sent + left - drift(left)
}
