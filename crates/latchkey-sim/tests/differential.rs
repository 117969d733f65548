//! The simulator against a real `redis-server` (the test kit's, on a free
//! port): seeded random sequences of latchkey's scripts and of plain
//! commands run on both, and after every step the replies and then the
//! whole keyspace (type, value, TTL) must match, and so must the messages
//! the step published (a second connection listens with `PSUBSCRIBE *`; a
//! marker published after each step says it has them all). A mismatch
//! prints the seed, the step, both sides and the steps before it.
//!
//! Time. The real server's clock runs on its own and cannot be set (a
//! preloaded fake clock, libfaketime, makes Redis's jemalloc recurse at
//! start), so the simulator's clock follows the server's:
//!
//! * each step is sent in one pipeline as `TIME`, the step, then a dump
//!   script that reads every key and its own `TIME`; the simulator runs
//!   the step at the first `TIME` and dumps at the second, so both sides
//!   act within a fraction of a millisecond of each other; the dump gives
//!   each key's expiry as an instant (`PEXPIRETIME`), not a span, so a
//!   dump that runs late still reads the same expiries;
//! * a step is only sent while no expiry and no deadline (a sorted-set
//!   score that is a server time: a permit, a lease, an intent) lies
//!   within `GUARD_MS` of the server's clock: the test waits past it
//!   first. So every comparison of a deadline with "now" comes out the
//!   same on both sides, and every time span a script reports is at least
//!   `GUARD_MS` minus the pipeline's delay;
//! * what is left is the few hundred µs between the two clocks, seen in
//!   times the scripts write or return (fencing tokens and terms are
//!   server µs, scores, expiries and records server ms, PTTLs and waits
//!   spans): instants are compared within `compare::TOLERANCE_MS` (µs
//!   within 1000 times that), and so are the numbers of a reply or a
//!   message from `compare::SMALL` up (a span); smaller ones, every other
//!   number stored, errors and all other text exactly; a sorted set's
//!   members are compared in member order, each with its score, since two
//!   scores a millisecond apart on one side may be equal on the other and
//!   so stand in the other order.
//!
//! If the real server stalls within a step (on a loaded machine) so long
//! that its times may be off by more than the tolerance, or a deadline
//! falls within `GUARD_MS` of the step after all (the pipeline went out
//! late), a difference there is not a mismatch: the simulator takes the
//! real server's keyspace and the run goes on, with a note; the summary
//! counts these.

#[path = "differential/commands.rs"]
mod commands;
#[path = "differential/compare.rs"]
mod compare;
#[path = "differential/dump.rs"]
mod dump;
#[path = "differential/gen.rs"]
mod gen;
#[path = "differential/keys.rs"]
mod keys;
#[path = "differential/locks.rs"]
mod locks;
#[path = "differential/resp.rs"]
mod resp;

use std::thread;
use std::time::{Duration, Instant};

use latchkey::protocol::script_text;
use latchkey_sim::{Reply, Server};
use latchkey_testkit::RedisServer;

use compare::{replies_close, text_close, Place, TOLERANCE_MS};
use dump::{deadlines, from_real, normalize, DUMP};
use gen::{Rng, Step};
use resp::Connection;

const SEEDS: &[u64] = &[1, 2, 3, 4, 5, 6, 7, 8];
const STEPS: usize = 400;
/// No step runs within this many ms of an expiry or a deadline.
const GUARD_MS: i64 = 15;

#[derive(Default)]
struct Stats {
    /// Per script or command: steps, and of those error replies.
    by_name: std::collections::BTreeMap<String, (usize, usize)>,
    steps: usize,
    messages: usize,
    /// Messages on one process's wake channel (`release.lua` waking one).
    wake_ups: usize,
    waited_ms: u64,
    cut: usize,
}

#[test]
fn the_simulator_answers_and_stores_as_redis_does() {
    let server = RedisServer::start();
    let mut conn = Connection::open(server.addr()).expect("connect to the test's redis-server");
    let mut listener = Connection::open(server.addr()).expect("connect to the test's redis-server");
    // Shard channels first (a RESP2 subscriber may add them after, but
    // this asks the least of each server's version), one reply each.
    for channel in keys::shard_channels() {
        listener
            .command(&[b"SSUBSCRIBE", &channel])
            .expect("SSUBSCRIBE");
    }
    listener
        .command(&[b"PSUBSCRIBE", b"*"])
        .expect("PSUBSCRIBE");
    let started = Instant::now();
    let mut stats = Stats::default();
    for &seed in SEEDS {
        run(&mut conn, &mut listener, seed, &mut stats);
    }
    eprintln!(
        "differential: {} seeds, {} steps and {} messages ({} wake-ups of one process) compared in {:.1} s ({} ms waiting out deadlines, {} times the simulator took the server's keyspace after a stall)",
        SEEDS.len(),
        stats.steps,
        stats.messages,
        stats.wake_ups,
        started.elapsed().as_secs_f64(),
        stats.waited_ms,
        stats.cut
    );
    let tallies: Vec<String> = stats
        .by_name
        .iter()
        .map(|(name, (n, errors))| format!("{name} {n} ({errors} errors)"))
        .collect();
    eprintln!("differential: steps: {}", tallies.join(", "));
}

/// A plain command's name.
fn line_name(step: &Step) -> String {
    match step.words() {
        Some(words) => words
            .first()
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .unwrap_or_default(),
        None => String::new(),
    }
}

fn words(args: &[&str]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

fn micros(seconds: &Reply, micros: &Reply) -> i64 {
    let number = |r: &Reply| match r {
        Reply::Bulk(Some(b)) => std::str::from_utf8(b)
            .ok()
            .and_then(|t| t.parse::<i64>().ok()),
        _ => None,
    };
    match (number(seconds), number(micros)) {
        (Some(s), Some(u)) => s * 1_000_000 + u,
        _ => panic!("TIME replied {seconds} {micros}"),
    }
}

fn real_micros(conn: &mut Connection) -> i64 {
    match conn.command(&[b"TIME"]) {
        Ok(Reply::Array(Some(t))) if t.len() == 2 => micros(&t[0], &t[1]),
        other => panic!("TIME replied {other:?}"),
    }
}

/// Waits until no deadline of the simulator's state lies within
/// `GUARD_MS` of the real server's clock.
fn wait_clear(conn: &mut Connection, sim: &Server, stats: &mut Stats) {
    let marks = deadlines(sim);
    loop {
        let now = real_micros(conn) / 1000;
        let Some(next) = marks.iter().filter(|c| (**c - now).abs() <= GUARD_MS).max() else {
            return;
        };
        let wait = u64::try_from(next + GUARD_MS + 1 - now).unwrap_or(1);
        stats.waited_ms += wait;
        thread::sleep(Duration::from_millis(wait));
    }
}

/// The channel of the marker published after each step.
const MARKER: &[u8] = b"differential-marker";

/// The messages the listener got before the marker: (channel, payload),
/// from its pattern (`pmessage pattern channel payload`) or a shard
/// channel (`smessage channel payload`).
fn messages(listener: &mut Connection) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    loop {
        let message = listener.receive().expect("a published message");
        let Reply::Array(Some(parts)) = &message else {
            panic!("the listener got {message}")
        };
        let sharded = matches!(parts.first(), Some(Reply::Bulk(Some(kind))) if kind == b"smessage");
        let at = if sharded { 1 } else { 2 };
        let (Some(Reply::Bulk(Some(channel))), Some(Reply::Bulk(Some(payload)))) =
            (parts.get(at), parts.get(at + 1))
        else {
            panic!("the listener got {message}")
        };
        if channel == MARKER {
            return out;
        }
        out.push((channel.clone(), payload.clone()));
    }
}

fn run(conn: &mut Connection, listener: &mut Connection, seed: u64, stats: &mut Stats) {
    conn.command(&[b"FLUSHALL"]).expect("FLUSHALL");
    let mut rng = Rng::new(seed);
    let mut sim = from_real(&[], real_micros(conn));
    let mut history: Vec<String> = Vec::new();
    for i in 0..STEPS {
        let step = gen::step(&mut rng);
        let Some(line) = step.words() else {
            if let Step::Pause(ms) = step {
                thread::sleep(Duration::from_millis(ms));
            }
            history.push(format!("{i:4} {}", step.describe()));
            continue;
        };
        wait_clear(conn, &sim, stats);
        let replies = conn
            .pipeline(&[
                words(&["TIME"]),
                line,
                words(&["EVAL", DUMP, "0"]),
                vec![b"PUBLISH".to_vec(), MARKER.to_vec(), b"-".to_vec()],
            ])
            .expect("the step's pipeline");
        let real_published = messages(listener);
        let (real_reply, dump) = (&replies[1], &replies[2]);
        let Reply::Array(Some(t)) = &replies[0] else {
            panic!("TIME replied {}", replies[0])
        };
        let t = micros(&t[0], &t[1]);
        let Reply::Array(Some(dump)) = dump else {
            panic!("the dump script replied {dump}")
        };
        let t_dump = micros(&dump[0], &dump[1]);
        let t_end = micros(&dump[2], &dump[3]);
        let real_keys = normalize(&dump[4..]);

        sim.set_micros(t);
        let before = deadlines(&sim);
        let sim_reply = match &step {
            Step::Script { file, keys, args } => {
                let text = script_text(file).expect("a script of the library");
                sim.eval(text, keys, args)
            }
            Step::Command(w) => sim.command(w),
            Step::Pause(_) => unreachable!("a pause has no command line"),
        };
        sim.set_micros(t_dump.max(t));
        let sim_keys = normalize(&sim.dump());
        // What the listener can hear: every message but one on a shard
        // channel it does not listen on (nobody heard it).
        let shard_channels = keys::shard_channels();
        let sim_published: Vec<(Vec<u8>, Vec<u8>)> = sim
            .take_published()
            .into_iter()
            .filter(|m| !m.sharded || shard_channels.contains(&m.channel))
            .map(|m| (m.channel, m.payload))
            .collect();
        let near = before
            .iter()
            .chain(&deadlines(&sim))
            .any(|c| *c >= t / 1000 - GUARD_MS && *c <= t_end / 1000 + GUARD_MS);
        let stalled = t_end - t > (TOLERANCE_MS - 1) * 1000;
        history.push(format!("{i:4} {} -> {sim_reply}", step.describe()));
        stats.steps += 1;
        stats.messages += real_published.len();
        stats.wake_ups += real_published
            .iter()
            .filter(|(channel, _)| channel.windows(6).any(|w| w == b":wake:"))
            .count();
        let name = match &step {
            Step::Script { file, .. } => (*file).to_owned(),
            _ => line_name(&step),
        };
        let tally = stats.by_name.entry(name).or_default();
        tally.0 += 1;
        tally.1 += usize::from(real_reply.is_error());

        let reply_ok = replies_close(&sim_reply, real_reply, Place::Reply);
        let keys_ok = sim_keys.len() == real_keys.len()
            && sim_keys
                .iter()
                .zip(&real_keys)
                .all(|(a, b)| replies_close(a, b, Place::Stored));
        let published_ok = sim_published.len() == real_published.len()
            && sim_published
                .iter()
                .zip(&real_published)
                .all(|(a, b)| a.0 == b.0 && text_close(&a.1, &b.1, Place::Reply));
        if reply_ok && keys_ok && published_ok {
            continue;
        }
        if near || stalled {
            stats.cut += 1;
            eprintln!(
                "differential: seed {seed}, step {i}: the server took {} µs over the step{}; a difference here is no mismatch: the simulator takes the server's keyspace",
                t_end - t,
                if near { " and a deadline fell near it" } else { "" }
            );
            sim = from_real(&real_keys, t_end);
            continue;
        }
        let recent = history[history.len().saturating_sub(12)..].join("\n");
        let mut report = format!(
            "seed {seed}: the simulator differs from redis-server at step {i}:\n  {}\nsteps up to it (sim replies):\n{recent}\n",
            step.describe()
        );
        if !reply_ok {
            report += &format!("reply:\n  sim:  {sim_reply}\n  real: {real_reply}\n");
        }
        if !published_ok {
            let show = |list: &[(Vec<u8>, Vec<u8>)]| {
                list.iter()
                    .map(|(c, p)| {
                        format!(
                            "{} <- {}",
                            String::from_utf8_lossy(c),
                            String::from_utf8_lossy(p)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            report += &format!(
                "published:\n  sim:  {}\n  real: {}\n",
                show(&sim_published),
                show(&real_published)
            );
        }
        if !keys_ok {
            report += "keyspace (key, type, value, expiry):\n";
            let n = sim_keys.len().max(real_keys.len());
            for k in 0..n {
                let (a, b) = (sim_keys.get(k), real_keys.get(k));
                let same =
                    matches!((a, b), (Some(a), Some(b)) if replies_close(a, b, Place::Stored));
                let show = |r: Option<&Reply>| r.map_or("-".to_owned(), |r| r.to_string());
                let mark = if same { " " } else { "!" };
                report += &format!("{mark} sim:  {}\n{mark} real: {}\n", show(a), show(b));
            }
        }
        panic!("{report}");
    }
}
