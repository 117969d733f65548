//! The semaphore model's transitions: each sets the server to the state's
//! keyspace and clock, sends what the library sends
//! (`primitives/semaphore/mod.rs` and `permit.rs`), and folds the reply
//! into the client's beliefs.

use crate::model::common::{
    drift, ints, live_members, live_scores, mutate, script, server_ms, token, KeyedModel,
};
use crate::model::lock_request::send;
use crate::model::sem_request::{names, request};
use crate::model::semaphore::{Hold, Mutant, Op, Phase, SemaphoreModel, State};
use crate::reply::Reply;
use crate::server::Server;

/// The scripts' texts as the library sends them, a mutant's change applied.
pub(crate) struct Scripts {
    pub(crate) acquire: String,
    pub(crate) extend: String,
    pub(crate) release: String,
    pub(crate) fence: String,
}

impl Scripts {
    pub(crate) fn load(mutant: Option<Mutant>) -> Result<Scripts, String> {
        let mut s = Scripts {
            acquire: script("sem_acquire.lua")?,
            extend: script("sem_extend.lua")?,
            release: script("sem_release.lua")?,
            fence: script("sem_fence.lua")?,
        };
        match mutant {
            Some(Mutant::TakeIgnoresK) => s.acquire = mutate(&s.acquire,
                "if held + k > tonumber(ARGV[2]) then",
                "if held + 1 > tonumber(ARGV[2]) then",
            )?,
            Some(Mutant::CountsExpired) => s.acquire = mutate(&s.acquire,
                "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)",
                "",
            )?,
            Some(Mutant::ExtendOneMember) => s.extend = mutate(&s.extend,
                "for i = 2, k do redis.call('ZADD', KEYS[1], 'XX', expiry, ARGV[1] .. '#' .. i) end",
                "",
            )?,
            None => {}
        }
        Ok(s)
    }
}

impl KeyedModel for SemaphoreModel {
    type Phase = Phase;
    type Op = Op;

    fn tick(&self) -> i64 {
        self.config.tick
    }

    fn client_step(
        &self,
        server: &mut Server,
        _: &State,
        n: &mut State,
        c: usize,
        op: Op,
        lost: bool,
    ) -> (&'static str, Vec<String>, Reply) {
        client_step(self, server, n, c, op, lost)
    }
}

fn client_step(
    m: &SemaphoreModel,
    server: &mut Server,
    n: &mut State,
    c: usize,
    op: Op,
    lost: bool,
) -> (&'static str, Vec<String>, Reply) {
    let cfg = &m.config;
    let keys = names();
    let k = m.take(c);
    let (now, epoch) = (n.now, n.restarts);
    let mut fence_issued = None;
    let client = &mut n.clients[c];
    let out = match op {
        Op::Try | Op::Retry => {
            client.attempts += 1;
            let attempt = client.attempts;
            let req = request(m, op, token(c, attempt), k);
            let scores = live_scores(&n.keys, &keys.permits, server_ms(now));
            let live = scores.len();
            let reply = send(server, &req);
            let words = ints(&reply);
            let acquired = words.first() == Some(&1);
            client.woken = false;
            if acquired {
                let fence = match cfg.fenced {
                    true => words.get(1).and_then(|&f| u64::try_from(f).ok()),
                    false => None,
                };
                fence_issued = fence;
                client.phase = match lost {
                    true => Phase::Cleanup { attempt },
                    false => Phase::Held(Hold {
                        attempt,
                        deadline: now + cfg.ttl - drift(m.config.ttl),
                        next_renew: now + cfg.ttl / 3,
                        lost: false,
                        fence,
                        epoch,
                    }),
                };
            } else {
                // Refused: a first try starts the wait (which tries at
                // once); a waiter sleeps until room is due, plus 1 ms.
                let recheck_at = match (op, words.get(1)) {
                    (Op::Retry, Some(&wait)) if !lost && wait > 0 => now + wait + 1,
                    _ => now,
                };
                client.phase = Phase::Waiting { recheck_at };
            }
            // The documented rule, on the permits live before the step.
            let fits = live + k as usize <= cfg.permits as usize;
            if matches!(reply, Reply::Array(_)) && acquired != fits && n.broken.is_none() {
                n.broken = Some(format!(
                    "acquire: c{c} asked for {k} with {live} of N = {} live and was {} at {now} ms",
                    cfg.permits,
                    if acquired { "granted" } else { "refused" }
                ));
            }
            // A refusal's wait: until the (live + k − N)-th soonest expiry,
            // which makes room for k (at least 1 ms).
            let need = (live + k as usize).saturating_sub(cfg.permits as usize);
            if let (false, Some(&wait), Some(&at)) =
                (acquired, words.get(1), scores.get(need.max(1) - 1))
            {
                let due = (at - server_ms(now)).max(1);
                if wait != due && n.broken.is_none() {
                    n.broken = Some(format!(
                        "acquire: c{c}'s refusal at {now} ms said {wait} ms; room for {k} comes in {due}"
                    ));
                }
            }
            (req.name, req.args, reply)
        }
        Op::Renew => {
            let Phase::Held(h) = &mut client.phase else {
                return ("renew", Vec::new(), Reply::nil());
            };
            let req = request(m, op, token(c, h.attempt), k);
            let reply = send(server, &req);
            match (lost, &reply) {
                (true, _) => h.next_renew = now + cfg.tick,
                (false, Reply::Int(1)) => {
                    h.deadline = now + cfg.ttl - drift(m.config.ttl);
                    h.next_renew = now + cfg.ttl / 3;
                }
                (false, _) => h.lost = true,
            }
            (req.name, req.args, reply)
        }
        Op::Issue => {
            let Phase::Held(h) = &mut client.phase else {
                return ("issue", Vec::new(), Reply::nil());
            };
            let req = request(m, op, token(c, h.attempt), k);
            let reply = send(server, &req);
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
            (req.name, req.args, reply)
        }
        Op::Release | Op::Cleanup => {
            let attempt = match &client.phase {
                Phase::Held(h) => h.attempt,
                Phase::Cleanup { attempt } => *attempt,
                _ => return ("release", Vec::new(), Reply::nil()),
            };
            let req = request(m, op, token(c, attempt), k);
            let reply = send(server, &req);
            if op == Op::Release {
                client.holds += 1;
            }
            client.phase = match client.holds >= cfg.holds {
                true => Phase::Done,
                false => Phase::Idle,
            };
            (req.name, req.args, reply)
        }
    };
    if let Some(f) = fence_issued {
        n.issued(f);
    }
    out
}

/// Liveness without faults: a waiter whose k permits fit among those live
/// now is woken, or due to try again within 1 ms (its sleep ends 1 ms after
/// the expiry its refusal named). `None` when it holds, or a fault or a
/// pause leaves it out.
pub(crate) fn unwoken_waiter(m: &SemaphoreModel, s: &State) -> Option<String> {
    if s.faults > 0 {
        return None;
    }
    let live = live_members(&s.keys, &names().permits, server_ms(s.now)).len();
    s.clients.iter().enumerate().find_map(|(i, c)| {
        let Phase::Waiting { recheck_at } = c.phase else {
            return None;
        };
        let fits = live + m.take(i) as usize <= m.config.permits as usize;
        (fits && !c.paused && !c.woken && recheck_at > s.now + 1).then(|| {
            format!(
                "liveness: c{i} sleeps until {recheck_at} ms, unwoken, while its {} of N = {} fit at {} ms",
                m.take(i),
                m.config.permits,
                s.now
            )
        })
    })
}
