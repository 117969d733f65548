//! The steps of a run, drawn from a seed: latchkey's scripts with the
//! argument shapes the library sends, drawn from small domains (two names,
//! a few owner tokens and a foreign value, TTLs of a few tens of ms),
//! plain commands that make odd states (a key of the wrong type, a foreign
//! value, a TTL removed or cut short), and pauses.

use latchkey::protocol::script_text;

use crate::keys::Keys;

/// SplitMix64: small, seeded, the same on every machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// One step of a run.
#[derive(Clone, Debug)]
pub enum Step {
    Script {
        file: &'static str,
        keys: Vec<Vec<u8>>,
        args: Vec<Vec<u8>>,
    },
    Command(Vec<Vec<u8>>),
    Pause(u64),
}

impl Step {
    /// The command line that runs it on a server (`EVAL` for a script).
    pub fn words(&self) -> Option<Vec<Vec<u8>>> {
        match self {
            Step::Script { file, keys, args } => {
                let text = script_text(file)?;
                let mut words = vec![
                    b"EVAL".to_vec(),
                    text.as_bytes().to_vec(),
                    keys.len().to_string().into_bytes(),
                ];
                words.extend(keys.iter().cloned());
                words.extend(args.iter().cloned());
                Some(words)
            }
            Step::Command(words) => Some(words.clone()),
            Step::Pause(_) => None,
        }
    }

    pub fn describe(&self) -> String {
        let text = |w: &[Vec<u8>]| {
            w.iter()
                .map(|x| String::from_utf8_lossy(x).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        match self {
            Step::Script { file, keys, args } => {
                format!("{file} KEYS [{}] ARGV [{}]", text(keys), text(args))
            }
            Step::Command(words) => text(words),
            Step::Pause(ms) => format!("pause {ms} ms"),
        }
    }
}

use crate::keys::NAMES;
const TOKENS: &[&str] = &[
    "lk2:0001:aa:h1",
    "lk2:0002:bb:h2:c",
    "lk2:0003:cc:h3",
    "foreign-value",
];
const TTLS: &[&str] = &["40", "100", "250", "700"];
const PAUSES: &[u64] = &[5, 20, 50, 120];
const PUBLISH: &[u8] = b"PUBLISH";

pub fn b(text: &str) -> Vec<u8> {
    text.as_bytes().to_vec()
}

/// The entries' own leases (ms) a fair script is sent.
const ENTRY_LEASES: &[i64] = &[60, 200];
/// The process records' leases (ms) a fair script is sent: mostly shorter
/// than an entry's own, so that a record runs out first.
const PROCESS_LEASES: &[&str] = &["40", "60"];

/// The process (subscriber) id of the token at `index`: tokens 0 and 2
/// share one process, 1 and 3 another, so that their entries share a record.
fn process(index: usize) -> String {
    format!("{:016x}", 1 + index % 2)
}

/// A fair waiter's entry for the token at `index`: `<16 hex process id><16
/// hex sequence>:<hand-off ttl>:<fenced>:<token>`, or now and then a
/// malformed one.
fn entry(rng: &mut Rng, index: usize, fenced: &str) -> Vec<u8> {
    if rng.chance(5) {
        return b("not-an-entry");
    }
    let px = rng.pick(&["50", "300"]);
    b(&format!(
        "{}{:016x}:{px}:{fenced}:{}",
        process(index),
        0xabc0 + index,
        TOKENS[index]
    ))
}

/// An entry's own lease and a process's lease, as a fair script's
/// arguments.
fn leases(rng: &mut Rng) -> (Vec<u8>, Vec<u8>) {
    let own = rng.pick(ENTRY_LEASES).to_string();
    (b(&own), b(rng.pick(PROCESS_LEASES)))
}

pub fn step(rng: &mut Rng) -> Step {
    if rng.chance(20) {
        return crate::locks::step(rng);
    }
    if rng.chance(25) {
        return more(rng);
    }
    let keys = Keys::of(rng.pick(NAMES));
    let index = rng.below(TOKENS.len());
    let token = b(TOKENS[index]);
    let ttl = b(rng.pick(TTLS));
    let bit = |rng: &mut Rng| b(rng.pick(&["0", "1"]));
    let script = |file, keys: Vec<Vec<u8>>, args: Vec<Vec<u8>>| Step::Script { file, keys, args };
    match rng.below(100) {
        0..=9 => crate::locks::acquire(rng, &keys, token, ttl),
        10..=15 => crate::locks::release(rng, &keys, token),
        16..=19 => script("extend.lua", vec![keys.lock], vec![token, ttl]),
        20..=22 => script("issue_fence.lua", vec![keys.lock, keys.fence], vec![token]),
        23..=29 => {
            let n = rng.below(3) + 1;
            let k = if rng.chance(5) {
                n + 1
            } else {
                rng.below(n) + 1
            };
            script(
                "sem_acquire.lua",
                vec![keys.permits, keys.permits_fence],
                vec![token, b(&n.to_string()), ttl, bit(rng), b(&k.to_string())],
            )
        }
        30..=33 => {
            let k = b(&(rng.below(2) + 1).to_string());
            script(
                "sem_release.lua",
                vec![keys.permits],
                vec![token, PUBLISH.to_vec(), keys.permits_channel, k],
            )
        }
        34..=36 => {
            let k = b(&(rng.below(2) + 1).to_string());
            script("sem_extend.lua", vec![keys.permits], vec![token, ttl, k])
        }
        37..=44 => {
            let write = rng.chance(50);
            let mut ks = keys.rw[..6].to_vec();
            if write && rng.chance(70) {
                ks.push(keys.rw_acquired);
            }
            let mode = b(if write { "w" } else { "r" });
            let fenced = b(if write { rng.pick(&["0", "1"]) } else { "0" });
            script(
                "rw_acquire.lua",
                ks,
                vec![mode, token, ttl, fenced, bit(rng)],
            )
        }
        45..=48 => script(
            "rw_release_write.lua",
            vec![keys.rw[0].clone(), keys.rw[3].clone(), keys.rw[4].clone()],
            vec![token, ttl, PUBLISH.to_vec(), keys.rw[6].clone()],
        ),
        49..=51 => script(
            "latch_create.lua",
            vec![keys.latch],
            vec![b(rng.pick(&["1", "2", "3"])), ttl],
        ),
        52..=55 => script(
            "latch_count_down.lua",
            vec![keys.latch],
            vec![PUBLISH.to_vec(), keys.latch_channel],
        ),
        56..=60 => script(
            "elect_campaign.lua",
            vec![keys.leader, keys.election],
            vec![
                token,
                ttl,
                b(rng.pick(&["v1", "v 2"])),
                keys.changes,
                PUBLISH.to_vec(),
            ],
        ),
        61..=69 => {
            let fenced = rng.pick(&["0", "1"]).to_owned();
            let (lease, process_lease) = leases(rng);
            let mode = b(rng.pick(&["try", "wait", "wait", "renew"]));
            let me = entry(rng, index, &fenced);
            script(
                "fair_acquire.lua",
                vec![
                    keys.lock,
                    keys.queue,
                    keys.leases,
                    keys.fence,
                    keys.acquired,
                    keys.alive,
                ],
                vec![me, token, ttl, b(&fenced), mode, lease, process_lease],
            )
        }
        70..=74 => script(
            "fair_release.lua",
            vec![
                keys.lock,
                keys.queue,
                keys.leases,
                keys.fence,
                keys.acquired,
                keys.alive,
            ],
            vec![token, PUBLISH.to_vec(), keys.handoff, keys.channel],
        ),
        75..=89 => Step::Command(crate::commands::command(rng, &keys, token, ttl)),
        _ => Step::Pause(rng.pick(PAUSES)),
    }
}

/// The other scripts: fair leaves, revocations and lease renewals, the rest of elections,
/// barriers, several locks at once, fenced writes, revocation of
/// semaphores and read-write locks, inspection and signals.
fn more(rng: &mut Rng) -> Step {
    let keys = Keys::of(rng.pick(NAMES));
    let index = rng.below(TOKENS.len());
    let token = b(TOKENS[index]);
    let ttl = b(rng.pick(TTLS));
    let publish = PUBLISH.to_vec();
    let script = |file, keys: Vec<Vec<u8>>, args: Vec<Vec<u8>>| Step::Script { file, keys, args };
    let fair = || {
        vec![
            keys.lock.clone(),
            keys.queue.clone(),
            keys.leases.clone(),
            keys.fence.clone(),
            keys.acquired.clone(),
            keys.alive.clone(),
        ]
    };
    let election = || vec![keys.leader.clone(), keys.election.clone()];
    let fence_value =
        |rng: &mut Rng| b(rng.pick(&["100", "200", "5", "007", "9007199254740991", "x"]));
    match rng.below(23) {
        0 => {
            let fenced = rng.pick(&["0", "1"]).to_owned();
            let me = entry(rng, index, &fenced);
            script(
                "fair_leave.lua",
                fair(),
                vec![
                    token,
                    publish,
                    keys.handoff.clone(),
                    keys.channel.clone(),
                    me,
                ],
            )
        }
        1 => script(
            "fair_revoke.lua",
            fair(),
            vec![publish, keys.handoff.clone(), keys.channel.clone()],
        ),
        2 => {
            let mut args = vec![token, keys.changes.clone(), publish];
            if rng.chance(50) {
                args.push(b(rng.pick(&["revoked", ""])));
            }
            script("elect_resign.lua", election(), args)
        }
        3 => script(
            "elect_proclaim.lua",
            election(),
            vec![
                token,
                b(rng.pick(&["v3", "v 4"])),
                keys.changes.clone(),
                publish,
            ],
        ),
        4 => script("elect_leader.lua", election(), vec![]),
        5 | 6 => {
            let parties = b(rng.pick(&["1", "2", "3"]));
            let mut args = vec![parties, ttl, publish, keys.barrier_channel.clone(), token];
            if rng.chance(50) {
                args.push(b(rng.pick(&["300", "1000"])));
            }
            script("barrier_arrive.lua", vec![keys.barrier.clone()], args)
        }
        7 => {
            // As the library sends it: the token alone (an arrival whose
            // reply never came), or with the barrier's id (an arrival's
            // token, so that it matches sometimes) and the generation.
            let mut args = vec![token];
            if rng.chance(70) {
                args.push(b(rng.pick(TOKENS)));
                args.push(b(rng.pick(&["0", "1", "2"])));
            }
            script("barrier_leave.lua", vec![keys.barrier.clone()], args)
        }
        8 => script(
            "rw_forget.lua",
            vec![keys.rw[2].clone(), keys.rw[3].clone(), keys.rw[4].clone()],
            vec![token],
        ),
        9 => script(
            "sem_fence.lua",
            vec![keys.permits.clone(), keys.permits_fence.clone()],
            vec![token],
        ),
        10 => {
            let held = if rng.chance(50) {
                vec![keys.permits.clone(), keys.permits_fence.clone()]
            } else {
                vec![keys.rw[0].clone(), keys.rw[1].clone(), keys.rw[5].clone()]
            };
            let channel = if held.len() == 2 {
                keys.permits_channel.clone()
            } else {
                keys.rw[6].clone()
            };
            script("revoke.lua", held, vec![publish, channel])
        }
        11 => script(
            "raise_fence.lua",
            vec![keys.fence.clone()],
            vec![fence_value(rng)],
        ),
        12 | 13 => crate::locks::multi(rng, token, ttl),
        14 => script(
            "fenced_write.lua",
            vec![keys.resource.clone()],
            vec![fence_value(rng), b(rng.pick(&["w1", "w2"]))],
        ),
        15 => script(
            "fenced_raise.lua",
            vec![keys.resource.clone()],
            vec![fence_value(rng)],
        ),
        16 => {
            let mut all = vec![
                keys.lock.clone(),
                keys.fence.clone(),
                keys.queue.clone(),
                keys.leases.clone(),
                keys.permits.clone(),
                keys.permits_fence.clone(),
            ];
            all.extend(keys.rw[..6].iter().cloned());
            all.extend([
                keys.latch.clone(),
                keys.barrier.clone(),
                keys.leader.clone(),
                keys.election.clone(),
            ]);
            all.extend([
                keys.acquired.clone(),
                keys.rw_acquired.clone(),
                keys.alive.clone(),
            ]);
            script("inspect_any.lua", all, vec![b(rng.pick(&["1", "10"]))])
        }
        17 | 19..=22 => {
            // A process's renewal: its record, and none to three entries'
            // own leases, mostly its own, some perhaps not queued. Drawn
            // five times as often as the others here: a record is dropped
            // (more than the horizon past its deadline) only by a renewal
            // while another process's entry keeps the queue's keys.
            let fenced = rng.pick(&["0", "1"]).to_owned();
            let (lease, process_lease) = leases(rng);
            let mut args = vec![lease, process_lease, b(&process(index))];
            for _ in 0..rng.below(4) {
                let index = match rng.chance(75) {
                    true => index,
                    false => rng.below(TOKENS.len()),
                };
                args.push(entry(rng, index, &fenced));
            }
            let keys = vec![
                keys.lock.clone(),
                keys.queue.clone(),
                keys.leases.clone(),
                keys.alive.clone(),
            ];
            script("fair_renew.lua", keys, args)
        }
        _ => script(
            "signal_one.lua",
            vec![],
            vec![b("dt:*"), b(rng.pick(&["0", "7"])), b("hello")],
        ),
    }
}
