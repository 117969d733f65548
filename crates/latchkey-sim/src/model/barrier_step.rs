//! The barrier model's client steps: each sends what the library sends
//! and folds the reply into the party's state and the model's record of
//! who arrived, checking the barrier's promises as it goes.

use crate::model::barrier::{key, BarrierModel, Mutant, Op, Phase, State};
use crate::model::common::{get, ints, store, token};
use crate::model::count_request::{barrier, call, BarrierSends};
use crate::model::trace::{show_reply, Record};
use crate::reply::Reply;
use crate::server::Server;

impl BarrierModel {
    pub(crate) fn client_step(
        &self,
        server: &mut Server,
        n: &mut State,
        c: usize,
        op: Op,
        lost: bool,
    ) -> Record {
        let party = n.parties[c];
        let (script, args, reply) = match (op, party.phase) {
            (Op::Arrive, _) => {
                n.parties[c].attempts += 1;
                let attempt = n.parties[c].attempts;
                let sends = BarrierSends::Arrive(token(c, attempt));
                let (args, reply) = call(server, barrier(self, sends));
                let id = arrival_id(&reply);
                self.arrived(n, c, (attempt, id), &ints(&reply), lost);
                ("barrier_arrive.lua", args, reply)
            }
            (
                Op::Hear | Op::Recheck,
                Phase::Waiting {
                    gen,
                    attempt,
                    id,
                    epoch,
                    ..
                },
            ) => {
                let (args, reply) = call(server, barrier(self, BarrierSends::Recheck));
                if let (false, Reply::Array(Some(items))) = (lost, &reply) {
                    let ignore_id = self.config.mutant == Some(Mutant::WaiterIgnoresId);
                    match judge(items, &token(id.0, id.1), gen, op == Op::Hear, ignore_id) {
                        Judged::Released => {
                            let how = match op {
                                Op::Hear => "heard its generation",
                                _ => "read the generation moved on",
                            };
                            self.pass(n, c, (epoch, gen, attempt), how);
                        }
                        Judged::Waiting => {
                            if let Phase::Waiting { woken, .. } = &mut n.parties[c].phase {
                                *woken = false;
                            }
                        }
                        // `NotFound`, the arrival not taken back.
                        Judged::Gone => self.finish(n, c),
                    }
                }
                ("HMGET", args, reply)
            }
            (
                Op::GiveUp,
                Phase::Waiting {
                    attempt, id, gen, ..
                },
            ) => {
                let of = Some((token(id.0, id.1), gen));
                self.leave(
                    server,
                    n,
                    c,
                    BarrierSends::Leave(token(c, attempt), of),
                    lost,
                )
            }
            (Op::Cleanup, Phase::Cleanup { attempt }) => {
                // The arrival's reply never came: its token alone.
                self.leave(
                    server,
                    n,
                    c,
                    BarrierSends::Leave(token(c, attempt), None),
                    lost,
                )
            }
            _ => return Record::world(n.now, "nothing", format!("c{c} cannot {op:?}")),
        };
        if matches!(reply, Reply::Error(_)) && n.broken.is_none() {
            n.broken = Some(format!("c{c}'s {script} answered {}", show_reply(&reply)));
        }
        let mut shown = show_reply(&reply);
        if lost {
            shown.push_str(" (lost)");
        }
        Record {
            at: n.now,
            client: Some(c),
            script: script.into(),
            args,
            reply: shown,
        }
    }

    /// `barrier_leave.lua` as `sends` says; a `GiveUp` answered 0 passes.
    fn leave(
        &self,
        server: &mut Server,
        n: &mut State,
        c: usize,
        sends: BarrierSends,
        lost: bool,
    ) -> (&'static str, Vec<String>, Reply) {
        let phase = n.parties[c].phase;
        let (args, reply) = call(server, barrier(self, sends));
        let attempt = match phase {
            Phase::Waiting { attempt, .. } | Phase::Cleanup { attempt } => attempt,
            Phase::Idle => 0,
        };
        if reply == Reply::Int(1) && !n.live.remove(&(c, attempt)) && n.broken.is_none() {
            n.broken = Some(format!(
                "c{c}'s leave took back an arrival that was not counting"
            ));
        }
        match (&reply, phase) {
            // Released meanwhile: the timed-out wait returns Ok(gen).
            (Reply::Int(0), Phase::Waiting { gen, epoch, .. }) if !lost => {
                self.pass(n, c, (epoch, gen, attempt), "left after its release");
            }
            _ => self.finish(n, c),
        }
        ("barrier_leave.lua", args, reply)
    }

    /// Folds an arrival's reply `{gen, last, id}` into the record of
    /// arrivals.
    fn arrived(
        &self,
        n: &mut State,
        c: usize,
        (attempt, id): (u32, Option<(usize, u32)>),
        words: &[i64],
        lost: bool,
    ) {
        let [gen, last, _] = words[..] else { return };
        let Some(id) = id else {
            if n.broken.is_none() {
                n.broken = Some(format!("c{c}'s arrival answered no id of a token"));
            }
            return;
        };
        if gen != n.gen && n.broken.is_none() {
            n.broken = Some(format!(
                "c{c} arrived in generation {gen}, not the current {}",
                n.gen
            ));
        }
        if last == 1 {
            let count = n.live.len() + 1;
            if count != usize::from(self.config.parties) && n.broken.is_none() {
                n.broken = Some(format!(
                    "generation {gen} released with {count} of {} parties arrived",
                    self.config.parties
                ));
            }
            let epoch = n.epoch;
            let members: Vec<_> = n.live.iter().copied().chain([(c, attempt)]).collect();
            n.counted
                .extend(members.into_iter().map(|(p, a)| (epoch, gen, p, a)));
            n.live.clear();
            n.gen = gen + 1;
        } else {
            n.live.insert((c, attempt));
        }
        n.parties[c].phase = match (lost, last) {
            (true, _) => Phase::Cleanup { attempt },
            (false, 1) => return self.pass(n, c, (n.epoch, gen, attempt), "released it"),
            (false, _) => Phase::Waiting {
                gen,
                attempt,
                id,
                epoch: n.epoch,
                woken: false,
            },
        };
    }

    /// A party passes generation `gen`: only if a release counted it.
    fn pass(&self, n: &mut State, c: usize, (epoch, gen, attempt): (u8, i64, u32), how: &str) {
        if !n.counted.contains(&(epoch, gen, c, attempt)) && n.broken.is_none() {
            n.broken = Some(format!(
                "c{c} passed generation {gen} ({how}) but no release counted its arrival"
            ));
        }
        n.parties[c].passed += 1;
        self.finish(n, c);
    }

    fn finish(&self, n: &mut State, c: usize) {
        n.parties[c].rounds += 1;
        n.parties[c].phase = Phase::Idle;
    }

    pub(crate) fn settle(&self, server: &mut Server, n: &mut State) {
        match store(server) {
            Ok(keys) => n.keys = keys,
            Err(why) => n.broken = Some(format!("the model's step went wrong: {why}")),
        }
        if get(&n.keys, &key()).is_none() && (n.gen > 0 || !n.live.is_empty()) {
            // Gone (its TTL, a restart): the next arrival starts a new one.
            n.epoch += 1;
            n.gen = 0;
            n.live.clear();
        }
        for p in server.take_published() {
            for party in &mut n.parties {
                if let Phase::Waiting { gen, woken, .. } = &mut party.phase {
                    *woken |= p.payload[..] == *gen.to_string().as_bytes();
                }
            }
        }
    }
}

/// The `id` of an arrival's reply `{gen, last, id}`, as the (client,
/// attempt) whose token it is (`common::token`'s `lk2:c{c}a{a}:0:sim`).
fn arrival_id(reply: &Reply) -> Option<(usize, u32)> {
    let Reply::Array(Some(items)) = reply else {
        return None;
    };
    let Some(Reply::Bulk(Some(id))) = items.get(2) else {
        return None;
    };
    let rest = std::str::from_utf8(id).ok()?.strip_prefix("lk2:c")?;
    let (c, rest) = rest.split_once('a')?;
    let (a, _) = rest.split_once(':')?;
    Some((c.parse().ok()?, a.parse().ok()?))
}

/// What a waiter makes of `HMGET gen id`: the library's `judge`
/// (`primitives/barrier.rs`).
#[derive(Debug, PartialEq, Eq)]
enum Judged {
    Released,
    Waiting,
    Gone,
}

fn judge(items: &[Reply], id: &str, mine: i64, heard: bool, ignore_id: bool) -> Judged {
    let text = |i: usize| match items.get(i) {
        Some(Reply::Bulk(Some(v))) => Some(v.clone()),
        _ => None,
    };
    let gen = text(0).and_then(|g| String::from_utf8_lossy(&g).parse::<i64>().ok());
    let stored = text(1).filter(|_| !ignore_id);
    match gen {
        None if heard => Judged::Released,
        None => Judged::Gone,
        Some(_) if stored.as_ref().is_some_and(|s| s[..] != *id.as_bytes()) => Judged::Gone,
        Some(_) if heard => Judged::Released,
        Some(g) if g > mine => Judged::Released,
        Some(g) if g == mine => Judged::Waiting,
        Some(_) if ignore_id => Judged::Released,
        Some(_) => Judged::Gone,
    }
}
