//! The read-write lock model's transitions: each sets the server to the
//! state's keyspace and clock, sends what the library sends
//! (`primitives/rwlock/mod.rs` and `guard.rs`), and folds the reply into
//! the client's beliefs; an attempt's verdict and a writer's batch are
//! checked against the documented policy on the keys live before the step.

use crate::model::common::{drift, ints, mutate, script, token, KeyedModel};
use crate::model::lock_request::send;
use crate::model::rw_check::{admits, check_batch, owns};
use crate::model::rw_request::{names, request, Sends};
use crate::model::rwlock::{Access, Hold, Mutant, Op, Phase, RwLockModel, State};
use crate::model::trace::show_reply;
use crate::reply::Reply;
use crate::server::Server;

/// The scripts' texts as the library sends them, a mutant's change applied.
pub(crate) struct Scripts {
    pub(crate) acquire: String,
    pub(crate) release_write: String,
    pub(crate) forget: String,
    pub(crate) extend: String,
    pub(crate) issue_fence: String,
    pub(crate) sem_extend: String,
    pub(crate) sem_release: String,
}

impl Scripts {
    pub(crate) fn load(mutant: Option<Mutant>) -> Result<Scripts, String> {
        let mut s = Scripts {
            acquire: script("rw_acquire.lua")?,
            release_write: script("rw_release_write.lua")?,
            forget: script("rw_forget.lua")?,
            extend: script("extend.lua")?,
            issue_fence: script("issue_fence.lua")?,
            sem_extend: script("sem_extend.lua")?,
            sem_release: script("sem_release.lua")?,
        };
        match mutant {
            Some(Mutant::WriteIgnoresReaders) => s.acquire = mutate(&s.acquire,
                "if writer or redis.call('ZCARD', KEYS[2]) > 0 or redis.call('SCARD', KEYS[5]) > 0 then",
                "if writer or redis.call('SCARD', KEYS[5]) > 0 then",
            )?,
            Some(Mutant::ReadIgnoresWaitingWriters) => s.acquire = mutate(&s.acquire,
                "if writer or (not ours and redis.call('ZCARD', KEYS[3]) > 0 and not next_batch) then",
                "if writer then",
            )?,
            Some(Mutant::ReleaseFormsNoBatch) => {
                s.release_write = mutate(&s.release_write, "if #waiting > 0 then", "if false then")?
            }
            Some(Mutant::TrustPastDeadline) | None => {}
        }
        Ok(s)
    }
}

/// Builds and sends what a client of side `access` sends for `what`: the
/// script's name, the arguments and the reply.
fn call(
    m: &RwLockModel,
    server: &mut Server,
    access: Access,
    what: Sends,
    token: String,
) -> (&'static str, Vec<String>, Reply) {
    let req = request(m, access, what, token);
    let reply = send(server, &req);
    (req.name, req.args, reply)
}

impl KeyedModel for RwLockModel {
    type Phase = Phase;
    type Op = Op;

    fn tick(&self) -> i64 {
        self.config.tick
    }

    fn client_step(
        &self,
        server: &mut Server,
        s: &State,
        n: &mut State,
        c: usize,
        op: Op,
        lost: bool,
    ) -> (&'static str, Vec<String>, Reply) {
        client_step(self, server, s, n, c, op, lost)
    }
}

fn client_step(
    m: &RwLockModel,
    server: &mut Server,
    before: &State,
    n: &mut State,
    c: usize,
    op: Op,
    lost: bool,
) -> (&'static str, Vec<String>, Reply) {
    let cfg = &m.config;
    let (keys, _) = names();
    let access = m.role(c);
    let (now, epoch) = (n.now, n.restarts);
    let mut fence_issued = None;
    let client = &mut n.clients[c];
    let out = match op {
        Op::Try | Op::Retry => {
            let attempt = match client.phase {
                Phase::Waiting { attempt, .. } if op == Op::Retry => attempt,
                _ => {
                    client.attempts += 1;
                    client.attempts
                }
            };
            let t = token(c, attempt);
            let (script, args, reply) = call(m, server, access, Sends::Acquire, t.clone());
            let words = ints(&reply);
            let acquired = words.first() == Some(&1);
            client.woken = false;
            if acquired && !lost {
                let fence = match (cfg.fenced, access) {
                    (true, Access::Write) => words.get(1).and_then(|&f| u64::try_from(f).ok()),
                    _ => None,
                };
                fence_issued = fence;
                client.phase = Phase::Held(Hold {
                    attempt,
                    deadline: now + cfg.ttl - drift(m.config.ttl),
                    next_renew: now + cfg.ttl / 3,
                    lost: false,
                    fence,
                    epoch,
                });
            } else {
                if acquired && cfg.fenced && access == Access::Write {
                    fence_issued = words.get(1).and_then(|&f| u64::try_from(f).ok());
                }
                // Refused: sleep until wait_ms has run (+ 1 ms) or a wake-up;
                // unanswered: the wait's retry tries again.
                let recheck_at = match words.get(1) {
                    Some(&wait) if !lost && wait > 0 => now + wait + 1,
                    _ => now,
                };
                client.phase = Phase::Waiting {
                    attempt,
                    recheck_at,
                };
            }
            let rule = admits(before, &keys, access, &t);
            // Its own hold: an earlier attempt of this wait (the same
            // token) took it and its reply was lost. Refusing the caller
            // by it shuts everyone out for a TTL that nobody believes in.
            if !acquired
                && rule
                && matches!(reply, Reply::Array(_))
                && owns(before, &keys, access, &t)
            {
                n.broken.get_or_insert(format!(
                    "c{c}'s {access:?} attempt was refused at {now} ms by its own hold \
                     (an earlier attempt of the same wait took it; its reply was lost)"
                ));
            }
            if matches!(reply, Reply::Array(_)) && acquired != rule && n.broken.is_none() {
                n.broken = Some(format!(
                    "phase-fair policy: c{c}'s {access:?} attempt was {} at {now} ms; the policy {} it",
                    if acquired { "granted" } else { "refused" },
                    if rule { "admits" } else { "refuses" }
                ));
            }
            (script, args, reply)
        }
        Op::Renew => {
            let Phase::Held(h) = &mut client.phase else {
                return ("renew", Vec::new(), Reply::nil());
            };
            let t = token(c, h.attempt);
            let (script, args, reply) = call(m, server, access, Sends::Renew, t);
            match (lost, &reply) {
                (true, _) => h.next_renew = now + cfg.tick,
                (false, Reply::Int(1)) => {
                    h.deadline = now + cfg.ttl - drift(m.config.ttl);
                    h.next_renew = now + cfg.ttl / 3;
                }
                (false, _) => h.lost = true,
            }
            (script, args, reply)
        }
        Op::Issue => {
            let Phase::Held(h) = &mut client.phase else {
                return ("issue", Vec::new(), Reply::nil());
            };
            let (script, args, reply) = call(m, server, access, Sends::Issue, token(c, h.attempt));
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
            (script, args, reply)
        }
        Op::Release => {
            let Phase::Held(h) = &client.phase else {
                return ("release", Vec::new(), Reply::nil());
            };
            let t = token(c, h.attempt);
            client.holds += 1;
            client.phase = match client.holds >= cfg.holds {
                true => Phase::Done,
                false => Phase::Idle,
            };
            let out = call(m, server, access, Sends::Release, t);
            if out.0 == "rw_release_write.lua" && out.2 == Reply::Int(1) {
                check_batch(before, server, n, c, &keys);
            }
            out
        }
        Op::GiveUp => {
            let Phase::Waiting { attempt, .. } = client.phase else {
                return ("give up", Vec::new(), Reply::nil());
            };
            client.holds += 1;
            client.phase = match client.holds >= cfg.holds {
                true => Phase::Done,
                false => Phase::Idle,
            };
            // The armed undo: withdraw the intent, then release whatever an
            // unanswered attempt may have taken with the wait's token.
            let t = token(c, attempt);
            let (_, forget_args, forget) = call(m, server, access, Sends::Forget, t.clone());
            let (script, mut args, reply) = call(m, server, access, Sends::Release, t);
            args.insert(
                0,
                format!(
                    "[rw_forget.lua {} → {}] then {script}",
                    forget_args.join(" "),
                    show_reply(&forget)
                ),
            );
            if script == "rw_release_write.lua" && reply == Reply::Int(1) {
                check_batch(before, server, n, c, &keys);
            }
            ("give up", args, reply)
        }
    };
    if let Some(f) = fence_issued {
        n.issued(f);
    }
    out
}
