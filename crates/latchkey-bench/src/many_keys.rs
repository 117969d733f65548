//! Scenario `many_keys`: 64 tasks of one client cycle (acquire, release) over
//! 1,000 distinct locks, each cycle on a random one: total cycles per second,
//! against what `redis-benchmark` reaches for the same command mix on the
//! same server in the same run.
//!
//! A latchkey cycle is two commands: the acquire (`SET key token NX PX ttl
//! GET`; no fencing token is asked for) and the release script
//! (compare-and-delete, `PUBLISH`). The fair equivalent in
//! `redis-benchmark` (which sends one command shape per run) is two runs,
//! each with 64 connections and keys drawn from the same 1,000 (`-c 64 -r
//! 1000`), sending those same two commands with a token of latchkey's
//! length:
//!
//! * `SET mk:__rand_int__ <token> NX PX 1 GET` — a 1 ms TTL, so that nearly
//!   every call takes the success path (as latchkey's uncontended acquires
//!   do) instead of finding the key held;
//! * `EVALSHA <release> 1 mk:__rand_int__ <token> <channel>`.
//!
//! Its cycle rate is `1 / (1/acquire_rps + 1/release_rps)`: N of each in
//! the time both runs took. Its releases mostly find the key gone (the
//! cheaper path: one `GET`, no `DEL`/`PUBLISH`), which slightly favours the
//! reference. Also shown, as a diagnosis of client overhead: raw redis-rs
//! sending the same two commands from 64 tasks over one multiplexed
//! connection (a busy key is skipped, not waited for).
//!
//! Targets, against raw redis-rs in the same rounds: `try_acquire`
//! and release ≥ 0.95×, `acquire` and release ≥ 0.90×. Rounds interleave
//! latchkey, raw redis-rs and redis-benchmark; medians of rounds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use latchkey_testkit::RedisServer;

use crate::stats::{cpu_time, median, table};
use crate::worker::TTL;
use crate::Report;

const TASKS: usize = 64;
const LOCKS: usize = 1000;
/// The release script as the library sends it.
fn release_lua() -> &'static str {
    latchkey::protocol::script_text("release.lua").expect("the release script")
}
/// The shape and length of a latchkey token.
pub(crate) const TOKEN: &str =
    "lk2:0123456789abcdef0123456789abcdef:1700000000000:12345:bench-host";

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
    let release_sha = server
        .command(&["SCRIPT", "LOAD", release_lua()])
        .unwrap_or_default();

    // Per client: cycles/s of each round, its ratios to the references of
    // the same round, and CPU used (this process or redis-benchmark; redis).
    let labels = [
        format!("latchkey: {TASKS} tasks, one client, `acquire` (waits when busy) + `release`"),
        format!("latchkey: {TASKS} tasks, one client, `try_acquire` (skips a busy lock) + `release`"),
        format!("raw redis-rs: {TASKS} tasks, one multiplexed connection, same two commands (skips a busy lock)"),
        format!("redis-benchmark: -c {TASKS} -r {LOCKS}, same two commands (N = {bench_n} each)"),
    ];
    let mut rates: [Vec<f64>; 4] = Default::default();
    let mut vs_bench: [Vec<f64>; 4] = Default::default();
    let mut vs_raw: [Vec<f64>; 4] = Default::default();
    let mut client_cpu = [Duration::ZERO; 4];
    let mut server_cpu = [Duration::ZERO; 4];
    let mut cycles = [0f64; 4];
    let mut notes = Vec::new();
    let server_pid = server.pid().unwrap_or(0);
    let _ = run_latchkey(&locks, window / 4, false).await; // warm-up
    for round in 0..rounds {
        let mut this_round = [None; 4];
        for k in 0..4 {
            let i = (k + round) % 4;
            let (c0, s0) = (client_cpu_now(i == 3), cpu_time(server_pid));
            let started = Instant::now();
            let rate = match i {
                0 => Some(run_latchkey(&locks, window, false).await),
                1 => Some(run_latchkey(&locks, window, true).await),
                2 => Some(run_raw(&url, window).await),
                _ => match redis_benchmark(&server, &release_sha, bench_n) {
                    Ok(b) => Some(b),
                    Err(e) => {
                        if notes.is_empty() {
                            notes.push(format!("redis-benchmark: {e}"));
                        }
                        None
                    }
                },
            };
            let elapsed = started.elapsed().as_secs_f64();
            if let (Some(rate), Some(c0), Some(c1), Some(s0), Some(s1)) =
                (rate, c0, client_cpu_now(i == 3), s0, cpu_time(server_pid))
            {
                client_cpu[i] += c1.saturating_sub(c0);
                server_cpu[i] += s1.saturating_sub(s0);
                cycles[i] += rate * elapsed;
            }
            this_round[i] = rate;
        }
        for i in 0..4 {
            let Some(rate) = this_round[i] else { continue };
            rates[i].push(rate);
            if let Some(b) = this_round[3] {
                vs_bench[i].push(rate / b);
            }
            if let Some(r) = this_round[2] {
                vs_raw[i].push(rate / r);
            }
        }
    }
    let ratio = |v: &mut Vec<f64>| {
        if v.is_empty() {
            "–".to_owned()
        } else {
            format!("{:.3}×", median(v))
        }
    };
    let per_cycle = |cpu: Duration, n: f64| {
        if n < 1.0 {
            "–".to_owned()
        } else {
            format!("{:.1}", cpu.as_secs_f64() * 1e6 / n)
        }
    };
    let mut rows = Vec::new();
    let mut missed = Vec::new();
    for i in 0..4 {
        if rates[i].is_empty() {
            continue;
        }
        // Rows 0 (`acquire`) and 1 (`try_acquire`) against raw redis-rs.
        let target = match i {
            0 => Some(0.90),
            1 => Some(0.95),
            _ => None,
        };
        let verdict = match (target, vs_raw[i].is_empty()) {
            (Some(t), false) => {
                let r = median(&mut vs_raw[i].clone());
                if r >= t {
                    format!("≥ {t:.2}× ✓")
                } else {
                    missed.push(format!(
                        "many keys: {} is {r:.3}× raw redis-rs (target ≥ {t:.2}×)",
                        labels[i]
                    ));
                    format!("≥ {t:.2}× ✗")
                }
            }
            _ => String::new(),
        };
        rows.push(vec![
            labels[i].clone(),
            format!("{:.0}", median(&mut rates[i])),
            ratio(&mut vs_bench[i]),
            ratio(&mut vs_raw[i]),
            verdict,
            per_cycle(client_cpu[i], cycles[i]),
            per_cycle(server_cpu[i], cycles[i]),
        ]);
    }
    let body = format!(
        "{}\n{rounds} rounds, the order of the four rotating every round ({:.1} s windows for the Rust clients); \
         medians of rounds; ratios are taken within each round, then the median. A cycle = acquire + release \
         of one of {LOCKS} locks. redis-benchmark cycle rate = 1 / (1/acquire rps + 1/release rps): see the module \
         docs of `many_keys.rs` for why this mix is the fair equivalent. It opens {TASKS} connections and sends one \
         command at a time on each; latchkey and redis-rs multiplex all tasks over one connection, whose writes \
         carry many commands each. CPU per cycle: the client's process (this one, or redis-benchmark) and \
         redis-server, from /proc/PID/task/*/schedstat and getrusage.\n{}",
        table(
            &[
                "client",
                "cycles/s",
                "÷ redis-benchmark",
                "÷ raw redis-rs",
                "target",
                "client CPU µs/cycle",
                "redis CPU µs/cycle",
            ],
            &rows
        ),
        window.as_secs_f64(),
        notes.iter().map(|n| format!("\n- {n}\n")).collect::<String>(),
    );
    Report {
        title: "Many keys: 64 tasks on 1,000 locks".into(),
        body,
        missed,
    }
}

/// Cycles per second of [`TASKS`] tasks during `window`: task `t` is
/// `task(t, deadline)`, which runs cycles until the deadline and returns how
/// many it completed. Shared with the `scale` scenario's names in flight.
pub(crate) async fn cycles_per_second<F, Fut>(window: Duration, task: F) -> f64
where
    F: Fn(usize, Instant) -> Fut,
    Fut: std::future::Future<Output = u64> + Send + 'static,
{
    let deadline = Instant::now() + window;
    let started = Instant::now();
    let joins: Vec<_> = (0..TASKS)
        .map(|t| tokio::spawn(task(t, deadline)))
        .collect();
    let mut cycles = 0;
    for j in joins {
        cycles += j.await.unwrap_or(0);
    }
    cycles as f64 / started.elapsed().as_secs_f64()
}

/// Cycles per second of 64 latchkey tasks during `window`; with
/// `skip_busy`, `try_acquire` and a busy lock is skipped (as the raw client
/// does), otherwise `acquire` waits for it.
async fn run_latchkey(locks: &Arc<Vec<latchkey::Lock>>, window: Duration, skip_busy: bool) -> f64 {
    cycles_per_second(window, |t, deadline| {
        let locks = locks.clone();
        async move {
            let mut rng = XorShift::new(t as u64);
            let mut cycles = 0;
            while Instant::now() < deadline {
                let lock = &locks[rng.below(LOCKS)];
                let guard = if skip_busy {
                    match lock.try_acquire().await {
                        Ok(Some(guard)) => guard,
                        _ => continue,
                    }
                } else {
                    match lock.acquire().await {
                        Ok(guard) => guard,
                        Err(_) => continue,
                    }
                };
                if guard.release().await.is_ok() {
                    cycles += 1;
                }
            }
            cycles
        }
    })
    .await
}

/// Cycles per second of 64 tasks sending the two commands over one
/// multiplexed redis-rs connection. A busy key is skipped.
async fn run_raw(url: &str, window: Duration) -> f64 {
    let conn = crate::handoff::connect(url).await;
    let release = redis::Script::new(release_lua());
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
    cycles_per_second(window, |t, deadline| {
        let (mut conn, release, ttl, keys) =
            (conn.clone(), release.clone(), ttl.clone(), keys.clone());
        async move {
            let mut rng = XorShift::new(t as u64 + 1000);
            let token = format!("{TOKEN}{t}");
            let mut cycles = 0;
            while Instant::now() < deadline {
                let [key, _fence, channel] = &keys[rng.below(LOCKS)];
                if raw_cycle(&mut conn, &release, key, channel, &token, &ttl).await {
                    cycles += 1;
                }
            }
            cycles
        }
    })
    .await
}

/// redis-benchmark's cycle rate for the same two commands (see module docs).
fn redis_benchmark(server: &RedisServer, release_sha: &str, n: u64) -> Result<f64, String> {
    if release_sha.len() != 40 {
        return Err("could not load the release script".into());
    }
    let acquire = run_redis_benchmark(
        server.port(),
        n,
        &["SET", "mk:__rand_int__", TOKEN, "NX", "PX", "1", "GET"],
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

/// One cycle of the raw redis-rs reference: `SET NX PX GET`, and when that
/// took the lock, the release script. Whether a whole cycle ran (a busy key
/// is skipped). Shared with the `--profile` driver (`profile.rs`).
pub(crate) async fn raw_cycle<C: redis::aio::ConnectionLike + Send>(
    conn: &mut C,
    release: &redis::Script,
    key: &str,
    channel: &str,
    token: &str,
    ttl: &str,
) -> bool {
    let got: Result<Option<Vec<u8>>, _> = redis::cmd("SET")
        .arg(key)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(ttl)
        .arg("GET")
        .query_async(conn)
        .await;
    if !matches!(got, Ok(None)) {
        return false;
    }
    let released: Result<i64, _> = release
        .key(key)
        .arg(token)
        .arg(channel)
        .arg("PUBLISH")
        .invoke_async(conn)
        .await;
    released.is_ok()
}

/// A small per-task PRNG: spreads tasks over the locks without a shared RNG.
pub(crate) struct XorShift(u64);

impl XorShift {
    pub(crate) fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// CPU time of this process, or (`children`) of the children it has waited
/// for: redis-benchmark, run to completion with `output()`.
fn client_cpu_now(children: bool) -> Option<Duration> {
    if !children {
        return cpu_time(std::process::id());
    }
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) } != 0 {
        return None;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    Some(tv(usage.ru_utime) + tv(usage.ru_stime))
}
