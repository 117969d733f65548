//! Scenario `many_keys`: 64 tasks of one client cycle (acquire, release) over
//! 1,000 distinct locks, each cycle on a random one: total cycles per second,
//! against what `redis-benchmark` reaches for the same command mix on the
//! same server in the same run.
//!
//! A latchkey cycle is two `EVALSHA`s: the acquire script (`SET NX PX`,
//! fencing counter) and the release script (compare-and-delete, `PUBLISH`).
//! The fair equivalent in `redis-benchmark` (which sends one command shape
//! per run) is two runs, each with 64 connections and keys drawn from the
//! same 1,000 (`-c 64 -r 1000`), sending those same two scripts by SHA with
//! a token of latchkey's length:
//!
//! * `EVALSHA <acquire> 2 mk:__rand_int__ mk:__rand_int__:fence <token> 1`
//!   — a 1 ms TTL, so that nearly every call takes the success path (as
//!   latchkey's uncontended acquires do) instead of finding the key held;
//! * `EVALSHA <release> 1 mk:__rand_int__ <token> <channel>`.
//!
//! Its cycle rate is `1 / (1/acquire_rps + 1/release_rps)`: N of each in
//! the time both runs took. Its releases mostly find the key gone (the
//! cheaper path: one `GET`, no `DEL`/`PUBLISH`), which slightly favours the
//! reference. Also shown, as a diagnosis of client overhead: raw redis-rs
//! sending the same two scripts from 64 tasks over one multiplexed
//! connection (a busy key is skipped, not waited for).
//!
//! No target is set by the issue; the ratio is reported. Rounds interleave
//! latchkey, raw redis-rs and redis-benchmark; medians of rounds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use latchkey_testkit::RedisServer;

use crate::stats::{median, table};
use crate::worker::TTL;
use crate::Report;

const TASKS: usize = 64;
const LOCKS: usize = 1000;
const ACQUIRE_LUA: &str = include_str!("../../latchkey/src/scripts/acquire.lua");
const RELEASE_LUA: &str = include_str!("../../latchkey/src/scripts/release.lua");
/// The shape and length of a latchkey token.
const TOKEN: &str = "lk1:0123456789abcdef0123456789abcdef:1700000000000:12345:bench-host";

pub fn run(quick: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Report>>> {
    Box::pin(scenario(quick))
}

async fn scenario(quick: bool) -> Report {
    let server = RedisServer::start();
    let url = server.url();
    let rounds = if quick { 2 } else { 5 };
    let window = if quick {
        Duration::from_millis(700)
    } else {
        Duration::from_secs(2)
    };
    let bench_n: u64 = if quick { 20_000 } else { 60_000 };

    let client = latchkey::Client::connect(&url)
        .await
        .expect("latchkey connect");
    let locks: Arc<Vec<latchkey::Lock>> = Arc::new(
        (0..LOCKS)
            .map(|i| client.lock(format!("mk:{i}"), TTL).expect("lock"))
            .collect(),
    );
    let acquire_sha = server
        .command(&["SCRIPT", "LOAD", ACQUIRE_LUA])
        .unwrap_or_default();
    let release_sha = server
        .command(&["SCRIPT", "LOAD", RELEASE_LUA])
        .unwrap_or_default();

    let mut ours = Vec::new();
    let mut raw = Vec::new();
    let mut reference = Vec::new();
    let mut ratios = Vec::new();
    let mut raw_ratios = Vec::new();
    let mut notes = Vec::new();
    let _ = run_latchkey(&locks, window / 4).await; // warm-up
    for _ in 0..rounds {
        let l = run_latchkey(&locks, window).await;
        let r = run_raw(&url, window).await;
        let b = match redis_benchmark(&server, &acquire_sha, &release_sha, bench_n) {
            Ok(b) => Some(b),
            Err(e) => {
                if notes.is_empty() {
                    notes.push(format!("redis-benchmark: {e}"));
                }
                None
            }
        };
        ours.push(l);
        raw.push(r);
        raw_ratios.push(l / r);
        if let Some(b) = b {
            reference.push(b);
            ratios.push(l / b);
        }
    }
    let mut rows = vec![
        vec![
            format!("latchkey: {TASKS} tasks, one client, `acquire` + `release`"),
            format!("{:.0}", median(&mut ours)),
            "1 (reference)".into(),
        ],
        vec![
            format!("raw redis-rs: {TASKS} tasks, one multiplexed connection, same two scripts"),
            format!("{:.0}", median(&mut raw)),
            format!("{:.3}×", median(&mut raw_ratios)),
        ],
    ];
    if !reference.is_empty() {
        rows.push(vec![
            format!(
                "redis-benchmark: -c {TASKS} -r {LOCKS}, same two scripts (N = {bench_n} each)"
            ),
            format!("{:.0}", median(&mut reference)),
            format!("{:.3}×", median(&mut ratios)),
        ]);
    }
    let body = format!(
        "{}\n{rounds} interleaved rounds ({:.1} s windows for the Rust clients); medians of rounds; \
         ratio = latchkey ÷ row, per round, then the median. A cycle = acquire + release of one of {LOCKS} locks \
         (latchkey waits when another of its tasks holds the chosen lock). redis-benchmark cycle rate = \
         1 / (1/acquire rps + 1/release rps), see the module docs for why this mix is the fair equivalent.\n{}",
        table(&["client", "cycles/s", "latchkey ÷ row"], &rows),
        window.as_secs_f64(),
        notes.iter().map(|n| format!("\n- {n}\n")).collect::<String>()
    );
    Report {
        title: "Many keys: 64 tasks on 1,000 locks".into(),
        body,
        missed: Vec::new(),
    }
}

/// Cycles per second of 64 latchkey tasks during `window`.
async fn run_latchkey(locks: &Arc<Vec<latchkey::Lock>>, window: Duration) -> f64 {
    let count = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + window;
    let started = Instant::now();
    let joins: Vec<_> = (0..TASKS)
        .map(|t| {
            let (locks, count) = (locks.clone(), count.clone());
            tokio::spawn(async move {
                let mut rng = XorShift::new(t as u64);
                while Instant::now() < deadline {
                    let lock = &locks[rng.below(LOCKS)];
                    let Ok(guard) = lock.acquire().await else {
                        continue;
                    };
                    if guard.release().await.is_ok() {
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for j in joins {
        let _ = j.await;
    }
    count.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

/// Cycles per second of 64 tasks sending the two scripts over one
/// multiplexed redis-rs connection. A busy key is skipped.
async fn run_raw(url: &str, window: Duration) -> f64 {
    let conn = crate::handoff::connect(url).await;
    let acquire = redis::Script::new(ACQUIRE_LUA);
    let release = redis::Script::new(RELEASE_LUA);
    let count = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + window;
    let started = Instant::now();
    let ttl = TTL.as_millis().to_string();
    // Keys made once, as latchkey's `Lock`s are.
    let keys: Arc<Vec<[String; 3]>> = Arc::new(
        (0..LOCKS)
            .map(|i| {
                [
                    format!("raw:mk:{i}"),
                    format!("raw:mk:{i}:fence"),
                    format!("raw:mk:{i}:released"),
                ]
            })
            .collect(),
    );
    let joins: Vec<_> = (0..TASKS)
        .map(|t| {
            let (mut conn, count, acquire, release, ttl, keys) = (
                conn.clone(),
                count.clone(),
                acquire.clone(),
                release.clone(),
                ttl.clone(),
                keys.clone(),
            );
            tokio::spawn(async move {
                let mut rng = XorShift::new(t as u64 + 1000);
                let token = format!("{TOKEN}{t}");
                while Instant::now() < deadline {
                    let [key, fence, channel] = &keys[rng.below(LOCKS)];
                    let got: Result<(i64, i64), _> = acquire
                        .key(key)
                        .key(fence)
                        .arg(&token)
                        .arg(&ttl)
                        .invoke_async(&mut conn)
                        .await;
                    if !matches!(got, Ok((1, _))) {
                        continue;
                    }
                    let released: Result<i64, _> = release
                        .key(key)
                        .arg(&token)
                        .arg(channel)
                        .invoke_async(&mut conn)
                        .await;
                    if released.is_ok() {
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for j in joins {
        let _ = j.await;
    }
    count.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

/// redis-benchmark's cycle rate for the same two scripts (see module docs).
fn redis_benchmark(
    server: &RedisServer,
    acquire_sha: &str,
    release_sha: &str,
    n: u64,
) -> Result<f64, String> {
    if acquire_sha.len() != 40 || release_sha.len() != 40 {
        return Err("could not load the scripts".into());
    }
    let acquire = run_redis_benchmark(
        server.port(),
        n,
        &[
            "EVALSHA",
            acquire_sha,
            "2",
            "mk:__rand_int__",
            "mk:__rand_int__:fence",
            TOKEN,
            "1",
        ],
    )?;
    let release = run_redis_benchmark(
        server.port(),
        n,
        &[
            "EVALSHA",
            release_sha,
            "1",
            "mk:__rand_int__",
            TOKEN,
            "mk:released",
        ],
    )?;
    Ok(1.0 / (1.0 / acquire + 1.0 / release))
}

/// Requests per second of one `redis-benchmark --csv` run of `command`.
fn run_redis_benchmark(port: u16, n: u64, command: &[&str]) -> Result<f64, String> {
    let out = std::process::Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args([
            "-c",
            &TASKS.to_string(),
            "-r",
            &LOCKS.to_string(),
            "-n",
            &n.to_string(),
            "--csv",
        ])
        .args(command)
        .output()
        .map_err(|e| format!("cannot run redis-benchmark (apt-get install redis-tools): {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "test","rps",...  then  "EVALSHA …","40617.39",...
    text.lines()
        .nth(1)
        .and_then(|line| line.split("\",\"").nth(1))
        .and_then(|rps| rps.trim_matches('"').parse::<f64>().ok())
        .ok_or_else(|| format!("unexpected redis-benchmark output: {text:?}"))
}

/// A small per-task PRNG: spreads tasks over the locks without a shared RNG.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}
