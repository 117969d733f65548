//! The barrier model's client steps: each sends what the library sends
//! and folds the reply into the party's state and the model's record of
//! who arrived, checking the barrier's promises as it goes.

use crate::model::barrier::{key, BarrierModel, Op, Phase, State};
use crate::model::count_request::{barrier, call, BarrierSends};
use crate::model::snap::{get, ints, store, token};
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
                self.arrived(n, c, attempt, &ints(&reply), lost);
                ("barrier_arrive.lua", args, reply)
            }
            (
                Op::Hear,
                Phase::Waiting {
                    gen,
                    attempt,
                    epoch,
                    ..
                },
            ) => {
                self.pass(n, c, (epoch, gen, attempt), "heard its generation");
                let record = Record::world(n.now, "released", format!("passes {gen}"));
                return Record {
                    client: Some(c),
                    ..record
                };
            }
            (
                Op::Recheck,
                Phase::Waiting {
                    gen,
                    attempt,
                    epoch,
                    ..
                },
            ) => {
                let (args, reply) = call(server, barrier(self, BarrierSends::Recheck));
                if let (false, Reply::Array(Some(items))) = (lost, &reply) {
                    match items.first() {
                        Some(Reply::Bulk(Some(g))) if g[..] != *gen.to_string().as_bytes() => {
                            self.pass(n, c, (epoch, gen, attempt), "read the generation moved on");
                        }
                        Some(Reply::Bulk(Some(_))) => {}
                        // Gone: `NotFound`, the arrival not taken back.
                        _ => self.finish(n, c),
                    }
                }
                ("HMGET", args, reply)
            }
            (
                Op::GiveUp | Op::Cleanup,
                Phase::Waiting { attempt, .. } | Phase::Cleanup { attempt },
            ) => {
                let sends = BarrierSends::Leave(token(c, attempt));
                let (args, reply) = call(server, barrier(self, sends));
                if reply == Reply::Int(1) && !n.live.remove(&(c, attempt)) && n.broken.is_none() {
                    n.broken = Some(format!(
                        "c{c}'s leave took back an arrival that was not counting"
                    ));
                }
                match (op, &reply, party.phase) {
                    // Released meanwhile: the timed-out wait returns Ok(gen).
                    (Op::GiveUp, Reply::Int(0), Phase::Waiting { gen, epoch, .. }) if !lost => {
                        self.pass(n, c, (epoch, gen, attempt), "left after its release");
                    }
                    _ => self.finish(n, c),
                }
                ("barrier_leave.lua", args, reply)
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

    /// Folds an arrival's reply `{gen, last}` into the record of arrivals.
    fn arrived(&self, n: &mut State, c: usize, attempt: u32, words: &[i64], lost: bool) {
        let [gen, last] = words[..] else { return };
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
