//! The fair lock model's transitions: each sets the server to the state's
//! keyspace and clock, sends what the library sends, and folds the reply
//! (and the messages published) into the clients' beliefs.

use latchkey::protocol::{
    fence_key, release_channel, tag_stem, ACQUIRED_SUFFIX, ALIVE_SUFFIX, HANDOFF_SUFFIX,
    LEASES_SUFFIX, QUEUE_SUFFIX,
};

use crate::keyspace::{Value, ZSet};
use crate::model::common::{ints, mutate, process_id, script, take_fault, token};
use crate::model::fair::{
    Action, FairModel, Mutant, Phase, State, Unseen, Val, Wait, Wake, START_MICROS,
};
use crate::model::fair_check::{fifo, issued, queue, server_ms};
use crate::model::trace::{show_reply, Record};
use crate::server::Server;

/// The scripts' texts as the library sends them, a mutant's change applied.
pub(crate) struct Scripts {
    pub(crate) acquire: String,
    pub(crate) release: String,
    pub(crate) leave: String,
    pub(crate) revoke: String,
    pub(crate) extend: String,
    pub(crate) renew: String,
}

impl Scripts {
    pub(crate) fn load(mutant: Option<Mutant>) -> Result<Scripts, String> {
        let mut s = Scripts {
            acquire: script("fair_acquire.lua")?,
            release: script("fair_release.lua")?,
            leave: script("fair_leave.lua")?,
            revoke: script("fair_revoke.lua")?,
            extend: script("extend.lua")?,
            renew: script("fair_renew.lua")?,
        };
        match mutant {
            // hand_on.lua is prepended to the three scripts that hand on.
            Some(Mutant::HandOffIgnoresLeases) => {
                let from = "if live and live >= now and id";
                s.release = mutate(&s.release, from, "if id")?;
                s.leave = mutate(&s.leave, from, "if id")?;
                s.revoke = mutate(&s.revoke, from, "if id")?;
            }
            // The hand-on reads the entry's own lease only.
            Some(Mutant::HandOffIgnoresRecords) => {
                let from = "local live = live_until(KEYS[3], KEYS[6], entry)";
                let to = "local live = tonumber(redis.call('ZSCORE', KEYS[3], entry))";
                s.release = mutate(&s.release, from, to)?;
                s.leave = mutate(&s.leave, from, to)?;
                s.revoke = mutate(&s.revoke, from, to)?;
            }
            Some(Mutant::LeaveTrimsLiveEntries) => {
                s.leave = mutate(
                    &s.leave,
                    "if not edge or redis.call('ZSCORE', KEYS[3], edge) then break end",
                    "if not edge then break end",
                )?;
            }
            // A client step's change (`fair_client.rs`), not a script's.
            Some(Mutant::RetryRequeuesSameEntry | Mutant::RenewalProvesGoneEntries) => {}
            Some(Mutant::RevokeWithoutRaise) => {
                s.revoke = mutate(
                    &s.revoke,
                    "local fence, bad = fence_issue(KEYS[4], t)",
                    "local fence, bad = fence_next(fence_read(KEYS[4]) or 0, t), nil",
                )?;
            }
            None => {}
        }
        Ok(s)
    }
}

/// The client and attempt of a token or of an entry ending in one.
pub(crate) fn owner(text: &[u8]) -> Option<(usize, u32)> {
    let text = std::str::from_utf8(text).ok()?;
    let at = text.find("lk2:c")?;
    let rest = &text[at + 5..];
    let (c, rest) = rest.split_once('a')?;
    let (a, _) = rest.split_once(':')?;
    Some((c.parse().ok()?, a.parse().ok()?))
}

/// A waiter's entry id: its process's id, then 16 hex digits of its
/// sequence number.
fn entry_id(client: usize, id: u32) -> String {
    format!("{}{:016x}", process_id(client), id)
}

pub(crate) fn entry(m: &FairModel, client: usize, w: &Wait) -> String {
    let fenced = if m.config.fenced { 1 } else { 0 };
    format!(
        "{}:{}:{fenced}:{}",
        entry_id(client, w.id),
        m.handoff_ttl(),
        token(client, w.token)
    )
}

/// Sets `server` to the state's clock and keys.
fn load(server: &mut Server, s: &State) {
    server.flush();
    server.set_micros(START_MICROS + s.now * 1000);
    for (k, v, at) in &s.keys {
        let value = match v {
            Val::Str(b) => Value::Str(b.clone()),
            Val::List(l) => Value::List(l.iter().cloned().collect()),
            Val::ZSet(z) => {
                let mut set = ZSet::default();
                for (member, score) in z {
                    set.insert(member.clone(), *score as f64);
                }
                Value::ZSet(set)
            }
        };
        server.put(k, value, *at);
    }
}

/// Reads the server's keys back into `n`, and delivers what was published:
/// `released`/`revoked` wake the waiters; a hand-off is checked against
/// the keyspace the script ran on (`before`) and told to its waiter.
fn store(m: &FairModel, server: &mut Server, before: &State, n: &mut State, actor: Option<usize>) {
    let acquired = [&tag_stem(m.key())[..], ACQUIRED_SUFFIX].concat();
    n.keys.clear();
    for (k, e) in server.entries() {
        let v = match e.value {
            Value::Str(_) if k == acquired => continue,
            Value::Str(b) => Val::Str(b),
            Value::List(l) => Val::List(l.into_iter().collect()),
            Value::ZSet(z) => Val::ZSet(
                z.ordered()
                    .into_iter()
                    .map(|(member, score)| (member.to_vec(), score as i64))
                    .collect(),
            ),
            other => {
                n.breaks(format!(
                    "the model's step went wrong: {} holds a {}",
                    String::from_utf8_lossy(&k),
                    other.type_name()
                ));
                continue;
            }
        };
        n.keys.push((k, v, e.expires_at));
    }
    let handoff = [&tag_stem(m.key())[..], HANDOFF_SUFFIX].concat();
    for message in server.take_published() {
        if message.channel.starts_with(&handoff) {
            handed(m, before, n, &message.payload, actor);
        } else {
            for c in &mut n.clients {
                if matches!(c.phase, Phase::Waiting(_)) && c.wake == Wake::None {
                    c.wake = Wake::Look;
                }
            }
        }
    }
    // A hand-off stops being unseen once its waiter holds, or its key is gone.
    let holder = lock_holder(m, n);
    for (i, c) in n.clients.iter_mut().enumerate() {
        let Some(u) = c.unseen else { continue };
        let taken = matches!(&c.phase, Phase::Held(h) if h.token == u.token);
        if taken || holder != Some((i, u.token)) {
            c.unseen = None;
        }
    }
}

/// The client and attempt whose token the lock key holds.
fn lock_holder(m: &FairModel, s: &State) -> Option<(usize, u32)> {
    s.keys.iter().find_map(|(k, v, _)| match v {
        Val::Str(b) if k == m.key() => owner(b),
        _ => None,
    })
}

/// A hand-off message `<id>:<fence>`: the entry it went to must have been
/// live (its own lease and its process's record not run out) with no live
/// entry ahead of it; its token is issued; its waiter hears it if it still
/// waits under that id.
fn handed(m: &FairModel, before: &State, n: &mut State, payload: &[u8], actor: Option<usize>) {
    let text = String::from_utf8_lossy(payload).into_owned();
    let Some((id, fence)) = text.split_once(':') else {
        return n.breaks(format!(
            "a hand-off message {text:?} the waiter cannot read"
        ));
    };
    let fence: i64 = fence.parse().unwrap_or(-1);
    let now = server_ms(before.now);
    let prefix = format!("{id}:");
    let Some(q) = queue(m, &before.keys)
        .into_iter()
        .find(|q| q.entry.starts_with(prefix.as_bytes()))
    else {
        return n.breaks(format!("a hand-off to {id}, which was not queued"));
    };
    let granted = q.entry.clone();
    let Some((c, attempt)) = owner(&granted) else {
        return n.breaks(format!("a hand-off to an entry of no client: {text}"));
    };
    // Model ms of a server deadline.
    let at = |l: Option<i64>| l.map_or("-".into(), |l| (l - now + before.now).to_string());
    if q.own.is_none_or(|l| l < now) {
        n.breaks(format!(
            "a dead waiter's lease was ignored: the lock was handed to c{c} at {} ms, its lease \
             having run out at {} ms",
            before.now,
            at(q.own)
        ));
    } else if !q.live(now) {
        n.breaks(format!(
            "a dead process's record was ignored: the lock was handed to c{c} at {} ms, its \
             process's record having run out at {} ms (its entry's own lease until {} ms)",
            before.now,
            at(q.record),
            at(q.own)
        ));
    }
    // The releasing or leaving client's own entry is not one skipped.
    let mine: Vec<usize> = [Some(c), actor].into_iter().flatten().collect();
    if let Err(why) = fifo(m, before, Some(&granted), c, &mine) {
        n.breaks(why);
    }
    if fence > 0 {
        issued(n, fence as u64);
    }
    let epoch = n.epoch();
    let client = &mut n.clients[c];
    client.unseen = Some(Unseen {
        token: attempt,
        at: before.now,
        lease_until: q.live_until().map_or(i64::MIN, |l| l - now + before.now),
    });
    if let Phase::Waiting(w) = &client.phase {
        if entry_id(c, w.id) == id {
            client.wake = Wake::Handed {
                id: w.id,
                fence: (m.config.fenced && fence > 0).then_some(fence as u64),
                epoch,
            };
        }
    }
}

pub(crate) fn step(
    m: &FairModel,
    server: &mut Server,
    s: &State,
    action: &Action,
) -> (State, Record) {
    let mut n = s.clone();
    let tick = m.config.tick;
    match *action {
        Action::Tick => {
            n.now += tick;
            // Drop what expired, so that equal states hash equal.
            load(server, &n);
            store(m, server, s, &mut n, None);
            (n, Record::world(s.now, "tick", format!("+{tick} ms")))
        }
        Action::Fault(fault) => {
            let record = take_fault(&mut n, s.now, tick, fault);
            (n, record)
        }
        Action::DelayMessage(c) => {
            let client = &mut n.clients[c];
            client.late = Some(std::mem::replace(&mut client.wake, Wake::None));
            let what = format!("c{c}'s hand-off message held up");
            (n, Record::world(s.now, "delay-message", what))
        }
        Action::Deliver(c) => {
            let client = &mut n.clients[c];
            let late = client.late.take();
            // Read by the entry it names only (`classify`): another
            // entry's hand-off is not ours.
            let what = match (late, &client.phase) {
                (Some(Wake::Handed { id, .. }), Phase::Waiting(w)) if w.id == id => {
                    client.wake = late.unwrap_or(Wake::None);
                    "read"
                }
                _ => "not ours: skipped",
            };
            let what = format!("c{c}'s late hand-off message {what}");
            (n, Record::world(s.now, "deliver", what))
        }
        Action::Revoke => {
            load(server, s);
            let (args, reply) =
                super::fair_request::call(m, server, super::fair_request::Sends::Revoke);
            let words = ints(&reply);
            if let [1, fence, _] = words[..] {
                let fence = fence.max(0) as u64;
                if fence <= s.last_token {
                    n.breaks(format!(
                        "a revoke's fence {fence} is not above the token {} issued before it",
                        s.last_token
                    ));
                }
                issued(&mut n, fence);
                n.revoke_fence = n.revoke_fence.max(fence);
                n.revokes += 1;
            } else if words.first() != Some(&0) {
                n.breaks(format!("fair_revoke.lua answered {}", show_reply(&reply)));
            }
            store(m, server, s, &mut n, None);
            let record = Record {
                at: s.now,
                client: None,
                script: "fair_revoke.lua".into(),
                args,
                reply: show_reply(&reply),
            };
            (n, record)
        }
        Action::Step(c, op, lost) => {
            if lost {
                n.faults += 1;
            }
            load(server, s);
            let (script, args, reply) =
                super::fair_client::client_step(m, server, s, &mut n, c, op, lost);
            if reply.starts_with("(error)") {
                n.breaks(format!(
                    "the model's step went wrong: c{c}'s {script} answered {reply}"
                ));
            }
            store(m, server, s, &mut n, Some(c));
            let record = Record::client(s.now, c, script, args, reply, lost);
            (n, record)
        }
    }
}

/// The six script keys (lock, queue, leases, counter, acquired record,
/// process records), the hand-off channel stem and the release channel.
pub(crate) fn names(m: &FairModel) -> (Vec<Vec<u8>>, String, String) {
    let key = m.key().to_vec();
    // Under the lock's tag stem, as `LockKeys::with_fair` names them.
    let stem = tag_stem(&key);
    let under = |suffix: &[u8]| [&stem[..], suffix].concat();
    let keys = vec![
        key.clone(),
        under(QUEUE_SUFFIX),
        under(LEASES_SUFFIX),
        fence_key(&key),
        under(ACQUIRED_SUFFIX),
        under(ALIVE_SUFFIX),
    ];
    let stem = String::from_utf8_lossy(&under(HANDOFF_SUFFIX)).into_owned();
    let channel = String::from_utf8_lossy(&release_channel(&key)).into_owned();
    (keys, stem, channel)
}
