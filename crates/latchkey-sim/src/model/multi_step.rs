//! [`MultiModel`]'s transitions: each sets the server to the state's
//! keyspace and clock, sends what the library sends, and folds the reply
//! into the client's beliefs. A keeper's own steps are in `cached.rs`.

use latchkey::protocol::{release_channel, RELEASE_REQUESTED, WANTED};

use crate::model::common::snapshot::{self, Stored};
use crate::model::common::{drift, ints, process_id, take_fault};
use crate::model::lock_request::{wake_channel, wake_set};
use crate::model::multi::{Action, Hold, Kind, MultiModel, Op, Phase, State};
use crate::model::multi_request::{call, Sends};
use crate::model::multi_scripts::token;
use crate::model::trace::{show_reply, Record};
use crate::reply::Reply;
use crate::server::Server;

/// Sets `server` to the state's clock and keys, and declares the
/// subscribers the scripts count: each waiting plain client and keeper
/// listens on its process's wake channel of its name (a `lock_all`
/// waiter on the release channels only, whose counts no script reads).
fn load(m: &MultiModel, server: &mut Server, s: &State) {
    snapshot::load(server, s.now, &s.keys);
    server.unsubscribe_all();
    for (c, client) in s.clients.iter().enumerate() {
        let (Kind::Plain(i) | Kind::Keeper(i)) = m.config.clients[c] else {
            continue;
        };
        if matches!(client.phase, Phase::Waiting { .. }) {
            let channel = wake_channel(&m.key(usize::from(i)), &process_id(c));
            server.subscribe(&channel, false, 1);
        }
    }
}

/// Reads the keys back into `s` and delivers what was published: a
/// release wakes the waiters of that name (a `lock_all` waiter listens on
/// every name's channel), or one process alone on its wake channel;
/// `wanted` and `release-requested` reach the name's keepers (waiters
/// ignore them).
fn store(m: &MultiModel, server: &mut Server, s: &mut State) {
    match snapshot::store(server) {
        Ok(keys) => s.keys = keys,
        Err(why) => s.odd_reply = Some(why),
    }
    // The locks write strings, and their waiting processes.
    for (k, (v, _)) in &s.keys {
        let written = match v {
            Stored::Str(_) => true,
            Stored::ZSet(_) => (0..m.config.names).any(|i| *k == wake_set(&m.key(i))),
            _ => false,
        };
        if !written {
            let key = String::from_utf8_lossy(k).into_owned();
            s.odd_reply = Some(format!("{key} holds a {v:?}"));
        }
    }
    for p in server.take_published() {
        let woken = (0..s.clients.len()).find(|&c| match m.config.clients[c] {
            Kind::Plain(i) | Kind::Keeper(i) => {
                p.channel == wake_channel(&m.key(usize::from(i)), &process_id(c))
            }
            Kind::Multi(_) => false,
        });
        if let Some(c) = woken {
            let client = &mut s.clients[c];
            if matches!(client.phase, Phase::Waiting { .. }) {
                client.woken = true;
            }
            continue;
        }
        let Some(i) = (0..m.config.names).find(|&i| release_channel(&m.key(i)) == p.channel) else {
            continue;
        };
        let to_holder = p.payload == WANTED || p.payload == RELEASE_REQUESTED;
        for (c, client) in s.clients.iter_mut().enumerate() {
            let kind = m.config.clients[c];
            if !kind.wants(i) {
                continue;
            }
            let asked = p.payload == RELEASE_REQUESTED;
            if to_holder && matches!(kind, Kind::Keeper(_)) {
                client.told = true;
            } else if asked && matches!(client.phase, Phase::Held(_)) {
                client.asked_at = client.asked_at.or(Some(s.now));
            } else if !to_holder && matches!(client.phase, Phase::Waiting { .. }) {
                client.woken = true;
            }
        }
    }
}

/// Notes a fencing token issued for name `i`: above every one before it.
pub(crate) fn issued(s: &mut State, i: usize, fence: u64) {
    if fence <= s.last_fence[i] && s.token_went_back.is_none() {
        s.token_went_back = Some((i, s.last_fence[i], fence));
    }
    s.last_fence[i] = s.last_fence[i].max(fence);
}

crate::model::common::fault_target!(State, "message", |client| {
    client.woken = false;
    client.told = false;
});

pub(crate) fn step(
    m: &MultiModel,
    server: &mut Server,
    s: &State,
    action: &Action,
) -> (State, Record) {
    let mut n = s.clone();
    let tick = m.config.tick;
    let record = match *action {
        Action::Tick => {
            n.now += tick;
            // Drop what expired, so that equal states hash equal.
            load(m, server, &n);
            store(m, server, &mut n);
            Record::world(s.now, "tick", format!("+{tick} ms"))
        }
        Action::Fault(fault) => take_fault(&mut n, s.now, tick, fault),
        Action::Ask(i) => {
            n.asks += 1;
            load(m, server, s);
            let (script, shown, reply) = call(m, server, Sends::Ask(i));
            store(m, server, &mut n);
            Record {
                at: s.now,
                client: None,
                script,
                args: shown,
                reply: show_reply(&reply),
            }
        }
        Action::Step(c, op, lost) => {
            if lost {
                n.faults += 1;
            }
            load(m, server, s);
            let (script, args, reply) = match m.config.clients[c] {
                Kind::Multi(mask) => multi_step(m, server, &mut n, c, mask, op, lost),
                Kind::Plain(i) => plain_step(m, server, &mut n, c, usize::from(i), op, lost),
                Kind::Keeper(i) => {
                    super::cached::keeper_step(m, server, &mut n, c, usize::from(i), op, lost)
                }
            };
            if reply.starts_with("(error)") {
                n.odd_reply = Some(format!("c{c}'s {script} answered {reply}"));
            }
            store(m, server, &mut n);
            Record::client(s.now, c, script, args, reply, lost)
        }
    };
    super::multi_check::observe(m, &mut n);
    (n, record)
}

/// A new hold taken at `now` by `attempt`.
pub(crate) fn hold(m: &MultiModel, n: &State, attempt: u32, fences: Vec<u64>) -> Hold {
    Hold {
        attempt,
        deadline: n.now + m.config.ttl - drift(m.config.ttl),
        next_renew: n.now + m.config.ttl / 3,
        lost: false,
        epoch: n.restarts,
        in_use: true,
        idle_until: 0,
        fences,
    }
}

/// What a step sent and got: the script, its arguments, the reply shown.
pub(crate) type Sent = (String, Vec<String>, String);

/// After a busy try: a first try starts the wait (which tries at once); a
/// waiter sleeps for the busy holder's TTL, plus 1 ms.
fn wait_after(now: i64, first: bool, pttl: Option<i64>, lost: bool) -> Phase {
    let recheck_at = match (first || lost, pttl) {
        (false, Some(p)) if p >= 0 => now + p + 1,
        _ => now,
    };
    Phase::Waiting { recheck_at }
}

/// A plain lock's step on name `i` (a keeper's Redis steps too, with
/// its caching token): as [`lock`](super::lock) models it.
pub(crate) fn plain_step(
    m: &MultiModel,
    server: &mut Server,
    n: &mut State,
    c: usize,
    i: usize,
    op: Op,
    lost: bool,
) -> Sent {
    let cfg = &m.config;
    let caching = matches!(cfg.clients[c], Kind::Keeper(_));
    let fenced = cfg.fenced && !caching;
    match op {
        Op::Try | Op::Retry => {
            n.clients[c].attempts += 1;
            let attempt = n.clients[c].attempts;
            let t = token(c, attempt, caching);
            let first = op == Op::Try;
            let sends = Sends::Try {
                c,
                i,
                token: t,
                first,
                fenced,
            };
            let (script, args, reply) = call(m, server, sends);
            let words = ints(&reply);
            let acquired = match script.as_str() {
                "SET" => reply == Reply::nil(),
                _ => words.first() == Some(&1),
            };
            n.clients[c].woken = false;
            let fences = match (acquired, fenced) {
                (true, true) => words.get(1).and_then(|&f| u64::try_from(f).ok()),
                _ => None,
            };
            if let Some(f) = fences {
                issued(n, i, f);
            }
            n.clients[c].phase = match (acquired, lost) {
                (true, true) => Phase::Cleanup { attempt },
                (true, false) => Phase::Held(hold(m, n, attempt, fences.into_iter().collect())),
                (false, _) => wait_after(n.now, first, words.get(1).copied(), lost),
            };
            (script, args, show_reply(&reply))
        }
        Op::Renew => {
            let Phase::Held(h) = &mut n.clients[c].phase else {
                return ("renew".into(), Vec::new(), "not held".into());
            };
            let token = token(c, h.attempt, caching);
            let (script, args, reply) = call(m, server, Sends::Renew { i, token });
            renewed(m, h, n.now, lost, reply == Reply::Int(1));
            (script, args, show_reply(&reply))
        }
        Op::Release | Op::Cleanup | Op::Yield => {
            let attempt = match &n.clients[c].phase {
                Phase::Held(h) => h.attempt,
                Phase::Cleanup { attempt } => *attempt,
                _ => return ("release".into(), Vec::new(), "nothing to release".into()),
            };
            let token = token(c, attempt, caching);
            let (script, args, reply) = call(m, server, Sends::Release { i, token });
            released(m, n, c, op != Op::Cleanup);
            (script, args, show_reply(&reply))
        }
        Op::Use | Op::Hear | Op::Expire | Op::Issue => {
            ("-".into(), Vec::new(), "not a plain step".into())
        }
    }
}

/// A renewal's outcome folded into the hold: renewed, lost, or (reply
/// lost) tried again a tick later with the deadline kept.
fn renewed(m: &MultiModel, h: &mut Hold, now: i64, lost: bool, ok: bool) {
    match (lost, ok) {
        (true, _) => h.next_renew = now + m.config.tick,
        (false, true) => {
            h.deadline = now + m.config.ttl - drift(m.config.ttl);
            h.next_renew = now + m.config.ttl / 3;
        }
        (false, false) => h.lost = true,
    }
}

/// A hold released (`counted`: a hold, not a clean-up): the next try, or done.
pub(crate) fn released(m: &MultiModel, n: &mut State, c: usize, counted: bool) {
    let client = &mut n.clients[c];
    client.asked_at = None;
    if counted {
        client.holds += 1;
    }
    client.phase = match client.holds >= m.config.holds {
        true => Phase::Done,
        false => Phase::Idle,
    };
}

/// A `lock_all` client's step over the names in `mask`.
fn multi_step(
    m: &MultiModel,
    server: &mut Server,
    n: &mut State,
    c: usize,
    mask: u8,
    op: Op,
    lost: bool,
) -> Sent {
    let cfg = &m.config;
    // The names in key order, as `request` sends them.
    let names: Vec<usize> = (0..cfg.names).filter(|i| mask & (1 << i) != 0).collect();
    match op {
        Op::Try | Op::Retry => {
            n.clients[c].attempts += 1;
            let attempt = n.clients[c].attempts;
            let first = op == Op::Try;
            let token = token(c, attempt, false);
            let (_, args, reply) = call(m, server, Sends::MultiTry { mask, token, first });
            let words = ints(&reply);
            n.clients[c].woken = false;
            let acquired = words.first() == Some(&1);
            let mut fences = Vec::new();
            if acquired && cfg.fenced {
                for (&i, &f) in names.iter().zip(&words[1..]) {
                    fences.push(u64::try_from(f).unwrap_or(0));
                    issued(n, i, u64::try_from(f).unwrap_or(0));
                }
            }
            n.clients[c].phase = match (acquired, lost) {
                (true, true) => Phase::Cleanup { attempt },
                (true, false) => Phase::Held(hold(m, n, attempt, fences)),
                (false, _) => wait_after(n.now, first, words.get(2).copied(), lost),
            };
            ("multi_acquire.lua".into(), args, show_reply(&reply))
        }
        Op::Renew => {
            let Phase::Held(h) = &mut n.clients[c].phase else {
                return ("renew".into(), Vec::new(), "not held".into());
            };
            let token = token(c, h.attempt, false);
            let (_, args, reply) = call(m, server, Sends::MultiRenew { mask, token });
            renewed(m, h, n.now, lost, ints(&reply).first() == Some(&1));
            ("multi_extend.lua".into(), args, show_reply(&reply))
        }
        Op::Release | Op::Cleanup | Op::Yield => {
            let attempt = match &n.clients[c].phase {
                Phase::Held(h) => h.attempt,
                Phase::Cleanup { attempt } => *attempt,
                _ => return ("release".into(), Vec::new(), "nothing to release".into()),
            };
            let token = token(c, attempt, false);
            let (_, args, reply) = call(m, server, Sends::MultiRelease { mask, token });
            released(m, n, c, op != Op::Cleanup);
            ("multi_release.lua".into(), args, show_reply(&reply))
        }
        Op::Use | Op::Hear | Op::Expire | Op::Issue => {
            ("-".into(), Vec::new(), "not a multi step".into())
        }
    }
}
