//! The plain lock model's transitions: each sets the server to the state's
//! keyspace and clock, sends what the library sends, and folds the reply
//! into the client's beliefs.

use latchkey::protocol::release_channel;

use crate::model::common::snapshot::{self, Stored};
use crate::model::common::{drift, ints, mutate, process_id, script, take_fault, token};
use crate::model::lock::{Action, Hold, LockModel, Mutant, Op, Phase, State};
use crate::model::lock_request::{call, call_ttl, wake_channel, wake_set, Request};
use crate::model::trace::{show_reply, Record};
use crate::reply::Reply;
use crate::server::Server;

/// The scripts' texts as the library sends them, a mutant's change applied.
pub(crate) struct Scripts {
    pub(crate) acquire: String,
    pub(crate) extend: String,
    pub(crate) release: String,
    pub(crate) issue_fence: String,
}

impl Scripts {
    pub(crate) fn load(mutant: Option<Mutant>) -> Result<Scripts, String> {
        let mut scripts = Scripts {
            acquire: script("acquire.lua")?,
            extend: script("extend.lua")?,
            release: script("release.lua")?,
            issue_fence: script("issue_fence.lua")?,
        };
        match mutant {
            Some(Mutant::ReleaseWithoutOwnerCheck) => {
                scripts.release = mutate(
                    &scripts.release,
                    "if holder == ARGV[1] then",
                    "if holder then",
                )?;
            }
            Some(Mutant::FenceWithoutBump) => {
                scripts.issue_fence = mutate(
                    &scripts.issue_fence,
                    "local fence = fence_next(last, redis.call('TIME'))\nfence_store(KEYS[2], fence)",
                    "local fence = last",
                )?;
            }
            Some(Mutant::FenceFromCounterOnly) => {
                let next =
                    "return math.max(last + 1, tonumber(time[1]) * 1000000 + tonumber(time[2]))";
                scripts.acquire = mutate(&scripts.acquire, next, "return last + 1")?;
                scripts.issue_fence = mutate(&scripts.issue_fence, next, "return last + 1")?;
            }
            Some(Mutant::RenewPastDeadline | Mutant::RenewPastCap) | None => {}
        }
        Ok(scripts)
    }
}

/// Sets `server` to the state's clock and keys, and declares the
/// subscribers the scripts count: each waiting client listens on its
/// process's wake channel (and on the release channel, as the library's
/// waiter does from before its first marking try until its wait ends),
/// so that a release that wakes one process finds it listening, or not.
fn load(m: &LockModel, server: &mut Server, s: &State) {
    snapshot::load(server, s.now + s.more.offset, &s.keys);
    server.unsubscribe_all();
    let everyone = release_channel(m.key());
    for (c, client) in s.clients.iter().enumerate() {
        if matches!(client.phase, Phase::Waiting { .. }) {
            server.subscribe(&everyone, false, 1);
            server.subscribe(&wake_channel(m.key(), &process_id(c)), false, 1);
        }
    }
}

/// Reads the server's keys back into `s`, and hands what was published to
/// the clients waiting: a release broadcast on the release channel wakes
/// every one, a wake-up on a process's wake channel that process alone.
fn store(m: &LockModel, server: &mut Server, s: &mut State) {
    match snapshot::store(server) {
        Ok(keys) => s.keys = keys,
        Err(why) => s.odd_reply = Some(why),
    }
    // The plain lock writes strings, and its waiting processes.
    let waiting = wake_set(m.key());
    for (k, (v, _)) in &s.keys {
        let written = match v {
            Stored::Str(_) => true,
            Stored::ZSet(_) => *k == waiting,
            _ => false,
        };
        if !written {
            let key = String::from_utf8_lossy(k).into_owned();
            s.odd_reply = Some(format!("{key} holds a {v:?}"));
        }
    }
    let everyone = release_channel(m.key());
    for message in server.take_published() {
        for (c, client) in s.clients.iter_mut().enumerate() {
            let heard = message.channel == everyone
                || message.channel == wake_channel(m.key(), &process_id(c));
            if heard && matches!(client.phase, Phase::Waiting { .. }) {
                client.woken = true;
            }
        }
    }
}

crate::model::common::fault_target!(State, "wake-up", |client| client.woken = false);

pub(crate) fn step(
    m: &LockModel,
    server: &mut Server,
    s: &State,
    action: &Action,
) -> (State, Record) {
    let mut n = s.clone();
    let cfg = &m.config;
    match *action {
        Action::Tick => {
            n.now += cfg.tick;
            // Drop what expired, so that equal states hash equal.
            load(m, server, &n);
            store(m, server, &mut n);
            super::lock_failover::prune(&mut n);
            (n, Record::world(s.now, "tick", format!("+{} ms", cfg.tick)))
        }
        Action::Fault(fault) => {
            let record = take_fault(&mut n, s.now, cfg.tick, fault);
            (n, record)
        }
        Action::Replicate | Action::Failover | Action::RestartClock(_) | Action::Idle => {
            super::lock_failover::step(m, s, action)
        }
        Action::Step(c, op, lost) => {
            if lost {
                n.faults += 1;
            }
            load(m, server, s);
            let (script, args, reply) = client_step(m, server, &mut n, c, op, lost);
            if reply.starts_with("(error)") {
                n.odd_reply = Some(format!("c{c}'s {script} answered {reply}"));
            }
            store(m, server, &mut n);
            let record = Record::client(s.now, c, script, args, reply, lost);
            (n, record)
        }
    }
}

fn client_step(
    m: &LockModel,
    server: &mut Server,
    n: &mut State,
    c: usize,
    op: Op,
    lost: bool,
) -> (String, Vec<String>, String) {
    let cfg = &m.config;
    let now = n.now;
    let epoch = n.restarts;
    let client = &mut n.clients[c];
    let hold = |attempt, fence| Hold {
        attempt,
        deadline: now + cfg.ttl - drift(m.config.ttl),
        next_renew: now + cfg.ttl / 3,
        lost: false,
        fence,
        pending_write: None,
        wrote: false,
        epoch,
        // The library's cap starts when the acquire's reply arrives.
        cap: m.max_hold.map(|d| now + d),
    };
    let mut fence_issued = None;
    let out = match op {
        Op::Try | Op::Retry => {
            client.attempts += 1;
            let attempt = client.attempts;
            let t = token(c, attempt);
            let first = op == Op::Try;
            let (reply, request) = call(m, server, op, c, t);
            let (script, args) = (request.name.to_string(), request.args);
            let words = ints(&reply);
            let acquired = match request.text {
                None => reply == Reply::nil(),
                _ => words.first() == Some(&1),
            };
            client.woken = false;
            if acquired {
                let fence = match cfg.fenced {
                    true => words.get(1).and_then(|&f| u64::try_from(f).ok()),
                    false => None,
                };
                fence_issued = fence;
                client.phase = match lost {
                    true => Phase::Cleanup { attempt },
                    false => Phase::Held(hold(attempt, fence)),
                };
            } else if !lost {
                // Busy: a first try starts the wait (which tries at once);
                // a waiter sleeps for the holder's TTL, plus 1 ms.
                let recheck_at = match (first, words.get(1)) {
                    (false, Some(&pttl)) if pttl >= 0 => now + pttl + 1,
                    _ => now,
                };
                client.phase = Phase::Waiting { recheck_at };
            } else {
                client.phase = Phase::Waiting { recheck_at: now };
            }
            (script, args, show_reply(&reply))
        }
        Op::Renew => {
            let Phase::Held(h) = &mut client.phase else {
                return ("renew".into(), Vec::new(), "not held".into());
            };
            // Shortened to end by the cap; client_ops offers no renewal
            // once the cap leaves none.
            let ttl = m.renewal_ttl(h, now).unwrap_or(cfg.ttl);
            let (reply, Request { args, .. }) =
                call_ttl(m, server, op, c, token(c, h.attempt), ttl);
            match (lost, &reply) {
                (true, _) => h.next_renew = now + cfg.tick,
                (false, Reply::Int(1)) => {
                    h.deadline = now + ttl - drift(m.config.ttl);
                    h.next_renew = now + cfg.ttl / 3;
                }
                (false, _) => h.lost = true,
            }
            ("extend.lua".into(), args, show_reply(&reply))
        }
        Op::Issue => {
            let Phase::Held(h) = &mut client.phase else {
                return ("issue".into(), Vec::new(), "not held".into());
            };
            let (reply, Request { args, .. }) = call(m, server, op, c, token(c, h.attempt));
            let words = ints(&reply);
            if words.first() == Some(&1) {
                let fence = words.get(1).and_then(|&f| u64::try_from(f).ok());
                fence_issued = fence;
                if !lost {
                    h.fence = fence;
                }
            } else if !lost {
                h.lost = true;
            }
            ("issue_fence.lua".into(), args, show_reply(&reply))
        }
        Op::Write => {
            let Phase::Held(h) = &mut client.phase else {
                return ("write".into(), Vec::new(), "not held".into());
            };
            h.pending_write = h.fence;
            h.wrote = true;
            let token = h.fence.map_or("-".into(), |f| f.to_string());
            ("write(send)".into(), vec![token], "sent".into())
        }
        Op::Land => {
            let Phase::Held(h) = &mut client.phase else {
                return ("write(land)".into(), Vec::new(), "not held".into());
            };
            let Some(fence) = h.pending_write.take() else {
                return ("write(land)".into(), Vec::new(), "nothing sent".into());
            };
            let writer = (c, h.attempt);
            let r = &mut n.resource;
            let verdict = if fence < r.highest {
                format!("refused: {} seen", r.highest)
            } else {
                // After a token went back as documented, two holds may share one.
                let documented = n.more.clock_back.is_some();
                if fence == r.highest && r.writer.is_some_and(|w| w != writer) && !documented {
                    n.shared_token_write = Some(fence);
                }
                r.highest = fence;
                r.writer = Some(writer);
                "accepted".into()
            };
            ("write(land)".into(), vec![fence.to_string()], verdict)
        }
        Op::Release | Op::Cleanup => {
            let attempt = match &client.phase {
                Phase::Held(h) => h.attempt,
                Phase::Cleanup { attempt } => *attempt,
                _ => return ("release".into(), Vec::new(), "nothing to release".into()),
            };
            let (reply, Request { args, .. }) = call(m, server, op, c, token(c, attempt));
            if op == Op::Release {
                client.holds += 1;
            }
            client.phase = match client.holds >= cfg.holds {
                true => Phase::Done,
                false => Phase::Idle,
            };
            ("release.lua".into(), args, show_reply(&reply))
        }
    };
    if let Some(f) = fence_issued {
        super::lock_failover::issued(m, n, f);
    }
    out
}
