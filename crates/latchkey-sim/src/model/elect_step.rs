//! The election model's transitions: each sets the server to the state's
//! keyspace and clock, sends what the library sends, and folds the reply
//! into the candidate's beliefs.

use latchkey::protocol::{
    primitive_key, ELECTION_CHANGES_SUFFIX, ELECTION_LEASE_SUFFIX, ELECTION_STATE_SUFFIX,
};

use crate::model::common::{drift, ints, load, mutate, script, store, take_fault, token};
use crate::model::elect::{Action, ElectionModel, Lead, Mutant, Op, Phase, State};
use crate::model::elect_request::{call, Sends};
use crate::model::trace::{show_reply, Record};
use crate::reply::Reply;
use crate::server::Server;

/// The scripts' texts as the library sends them, a mutant's change applied.
pub(crate) struct Scripts {
    pub(crate) campaign: String,
    pub(crate) proclaim: String,
    pub(crate) resign: String,
    pub(crate) extend: String,
    pub(crate) leader: String,
}

impl Scripts {
    pub(crate) fn load(mutant: Option<Mutant>) -> Result<Scripts, String> {
        let mut s = Scripts {
            campaign: script("elect_campaign.lua")?,
            proclaim: script("elect_proclaim.lua")?,
            resign: script("elect_resign.lua")?,
            extend: script("extend.lua")?,
            leader: script("elect_leader.lua")?,
        };
        match mutant {
            Some(Mutant::CampaignIgnoresLeader) => {
                s.campaign = mutate(&s.campaign, "if holder then", "if false then")?;
            }
            Some(Mutant::TermNotRaised) => {
                s.campaign = mutate(
                    &s.campaign,
                    "local term = math.max(last + 1, now_us)",
                    "local term = math.max(last, 1)",
                )?;
            }
            None => {}
        }
        Ok(s)
    }
}

/// The election's name in the model (no prefix).
pub(crate) const NAME: &[u8] = b"model";

/// The lease key, `{name}:leader`.
pub(crate) fn lease_key() -> Vec<u8> {
    primitive_key(b"", NAME, ELECTION_LEASE_SUFFIX)
}

/// The state hash, `{name}:election`.
pub(crate) fn state_key() -> Vec<u8> {
    primitive_key(b"", NAME, ELECTION_STATE_SUFFIX)
}

pub(crate) fn channel() -> String {
    String::from_utf8_lossy(&primitive_key(b"", NAME, ELECTION_CHANGES_SUFFIX)).into_owned()
}

/// Reads the keys back into `n` and wakes the waiting candidates when
/// something was published (they all subscribed to the changes channel).
fn settle(server: &mut Server, n: &mut State) {
    match store(server) {
        Ok(keys) => n.keys = keys,
        Err(why) => n.broken = Some(format!("the model's step went wrong: {why}")),
    }
    let published = server.take_published();
    for p in &published {
        // "<change> <term> <since> <lease> <value>", "<change> -".
        let change = String::from_utf8_lossy(&p.payload)
            .split(' ')
            .next()
            .and_then(|w| w.parse::<i64>().ok());
        match change {
            Some(c) if c == n.last_change + 1 => n.last_change = c,
            _ if n.broken.is_some() => {}
            _ => {
                n.broken = Some(format!(
                    "change message {:?} after change {}: observers need one more each",
                    String::from_utf8_lossy(&p.payload),
                    n.last_change
                ))
            }
        }
    }
    if !published.is_empty() {
        for c in &mut n.clients {
            if matches!(c.phase, Phase::Waiting { .. }) {
                c.woken = true;
            }
        }
    }
}

pub(crate) fn step(
    m: &ElectionModel,
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
            load(server, n.now, &n.keys);
            settle(server, &mut n);
            (n, Record::world(s.now, "tick", format!("+{} ms", cfg.tick)))
        }
        Action::Fault(fault) => {
            let record = take_fault(&mut n, s.now, cfg.tick, fault);
            (n, record)
        }
        Action::Observe => {
            load(server, s.now, &s.keys);
            let (_, reply) = call(m, server, Sends::Leader);
            if let Some(why) = misread(s, &reply) {
                n.broken.get_or_insert(why);
            }
            let record = Record {
                at: s.now,
                client: None,
                script: "elect_leader.lua".into(),
                args: Vec::new(),
                reply: show_reply(&reply),
            };
            (n, record)
        }
        Action::Step(c, op, lost) => {
            if lost {
                n.faults += 1;
            }
            load(server, s.now, &s.keys);
            let (script, args, reply) = client_step(m, server, &mut n, c, op, lost);
            if reply.starts_with("(error)") && n.broken.is_none() {
                n.broken = Some(format!("c{c}'s {script} answered {reply}"));
            }
            settle(server, &mut n);
            let record = Record::client(s.now, c, script, args, reply, lost);
            (n, record)
        }
    }
}

/// What is wrong with an observer's reading of `s`, if anything: a leader
/// (`{1, change, term, since, pttl, value}`) must be the lease's holder
/// (its value is the one that holder campaigned or proclaimed with), with
/// the last term issued and the last change published; nobody (`{0,
/// change}`) only while nobody holds the lease.
fn misread(s: &State, reply: &Reply) -> Option<String> {
    let Reply::Array(Some(items)) = reply else {
        return Some(format!("elect_leader.lua answered {}", show_reply(reply)));
    };
    let words = ints(reply);
    let holder = match crate::model::common::get(&s.keys, &lease_key()) {
        Some(crate::model::common::Stored::Str(t)) => Some(String::from_utf8_lossy(t).into_owned()),
        _ => None,
    };
    // The token is `lk2:c<client>a<attempt>:…`; the value `c<client>`, or
    // `c<client>'` once proclaimed.
    let holder_value = holder.as_deref().and_then(|t| {
        t.strip_prefix("lk2:")?
            .split('a')
            .next()
            .map(str::to_string)
    });
    match words.first() {
        Some(1) => {
            let value = match items.get(5) {
                Some(Reply::Bulk(Some(v))) => String::from_utf8_lossy(v).into_owned(),
                _ => String::new(),
            };
            let ours = holder_value.is_some_and(|h| value.trim_end_matches('\'') == h);
            let term = u64::try_from(words[2]).unwrap_or(0);
            (!ours || term != s.last_term || words[1] != s.last_change).then(|| {
                format!(
                    "an observer read leader {value:?} (term {term}, change {}) with the lease held by {holder:?}, the last term {} and change {}",
                    words[1], s.last_term, s.last_change
                )
            })
        }
        Some(0) if holder.is_none() => None,
        // −1 (a lease whose token the hash does not record) or nobody
        // while a lease is held: the model writes neither.
        _ => Some(format!(
            "an observer read {} with the lease held by {holder:?}",
            show_reply(reply)
        )),
    }
}

fn client_step(
    m: &ElectionModel,
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
    let mut term_issued = None;
    let out = match op {
        Op::Campaign => {
            client.attempts += 1;
            let attempt = client.attempts;
            let sends = Sends::Campaign {
                token: token(c, attempt),
                value: format!("c{c}"),
            };
            let (args, reply) = call(m, server, sends);
            let words = ints(&reply);
            client.woken = false;
            match words[..] {
                [1, term, _since, _change] => {
                    let term = u64::try_from(term).unwrap_or(0);
                    term_issued = Some(term);
                    client.phase = match lost {
                        true => Phase::Cleanup { attempt },
                        false => Phase::Leading(Lead {
                            attempt,
                            term,
                            deadline: now + cfg.ttl - drift(m.config.ttl),
                            next_renew: now + cfg.ttl / 3,
                            lost: false,
                            proclaimed: false,
                            epoch,
                        }),
                    };
                }
                // Busy: sleep until a change message or the lease's end.
                [0, pttl] if !lost && pttl >= 0 => {
                    client.phase = Phase::Waiting {
                        recheck_at: now + pttl + 1,
                    }
                }
                // A lost reply is a transient error: the wait tries again.
                _ => client.phase = Phase::Waiting { recheck_at: now },
            }
            ("elect_campaign.lua".to_string(), args, show_reply(&reply))
        }
        Op::Renew => {
            let Phase::Leading(l) = &mut client.phase else {
                return ("renew".into(), Vec::new(), "not leading".into());
            };
            let (args, reply) = call(m, server, Sends::Renew(token(c, l.attempt)));
            match (lost, &reply) {
                (true, _) => l.next_renew = now + cfg.tick,
                (false, Reply::Int(1)) => {
                    l.deadline = now + cfg.ttl - drift(m.config.ttl);
                    l.next_renew = now + cfg.ttl / 3;
                }
                (false, _) => l.lost = true,
            }
            ("extend.lua".into(), args, show_reply(&reply))
        }
        Op::Proclaim => {
            let Phase::Leading(l) = &mut client.phase else {
                return ("proclaim".into(), Vec::new(), "not leading".into());
            };
            let sends = Sends::Proclaim {
                token: token(c, l.attempt),
                value: format!("c{c}'"),
            };
            let (args, reply) = call(m, server, sends);
            l.proclaimed = true;
            // Lost: the value may or may not have changed; nothing else is.
            if !lost && ints(&reply).first() != Some(&1) {
                l.lost = true;
            }
            ("elect_proclaim.lua".into(), args, show_reply(&reply))
        }
        Op::Resign | Op::Cleanup => {
            let attempt = match &client.phase {
                Phase::Leading(l) => l.attempt,
                Phase::Cleanup { attempt } => *attempt,
                _ => return ("resign".into(), Vec::new(), "nothing to resign".into()),
            };
            let (args, reply) = call(m, server, Sends::Resign(token(c, attempt)));
            if op == Op::Resign {
                client.leads += 1;
            }
            client.phase = match client.leads >= cfg.leads {
                true => Phase::Done,
                false => Phase::Idle,
            };
            ("elect_resign.lua".into(), args, show_reply(&reply))
        }
    };
    if let Some(term) = term_issued {
        if term <= n.last_term && n.broken.is_none() {
            n.broken = Some(format!(
                "terms must strictly increase: {term} issued after {}",
                n.last_term
            ));
        }
        n.last_term = n.last_term.max(term);
    }
    out
}
