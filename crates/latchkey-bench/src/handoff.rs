//! Scenario `handoff`: how fast a released lock reaches the next waiter.
//!
//! W+1 tasks in one process contend for one lock; each holds it ~0.5 ms and
//! releases it. The *gap* is the time from the start of a release to the
//! moment the next holder has the lock. Compared in the same run, rounds
//! interleaved: latchkey (pub/sub wake-ups, local queue) against a plain
//! polling lock (`SET NX PX`, retry every 10 ms ± 50 %, compare-and-delete
//! release) — what most hand-written Redis locks do.
//!
//! Targets (issue 3): p99 gap ≤ 5× the median PING round trip measured in
//! the same run, and ≤ 4 Redis commands per handoff at every waiter count.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use latchkey_testkit::RedisServer;

use crate::stats::{median, quantile, table, us};
use crate::Report;

const HOLD: Duration = Duration::from_micros(500);

pub fn run(quick: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Report>>> {
    Box::pin(scenario(quick))
}

async fn scenario(quick: bool) -> Report {
    let server = RedisServer::start();
    let url = server.url();
    let rounds = if quick { 2 } else { 5 };
    let handoffs = if quick { 200 } else { 1000 };
    let ping = ping_rtt(&url).await;
    let mut rows = Vec::new();
    let mut missed = Vec::new();
    for waiters in [1usize, 8, 64] {
        let mut ours = Sample::default();
        let mut polling = Sample::default();
        for round in 0..rounds {
            let name = format!("handoff-{waiters}-{round}");
            ours.add(run_latchkey(&server, &name, waiters + 1, handoffs).await);
            polling.add(run_polling(&server, &name, waiters + 1, handoffs).await);
        }
        let (op50, op99, ocmd, orate) = ours.summary();
        let (pp50, pp99, pcmd, prate) = polling.summary();
        rows.push(vec![
            waiters.to_string(),
            us(op50),
            us(op99),
            format!("{ocmd:.2}"),
            format!("{orate:.0}"),
            us(pp50),
            us(pp99),
            format!("{pcmd:.2}"),
            format!("{prate:.0}"),
            format!("{:.1}×", op99.as_secs_f64() / ping.as_secs_f64()),
        ]);
        if op99 > ping * 5 {
            missed.push(format!(
                "handoff p99 gap with {waiters} waiters is {} µs > 5× PING ({} µs)",
                us(op99),
                us(ping)
            ));
        }
        if ocmd > 4.0 {
            missed.push(format!("{ocmd:.2} Redis commands per handoff with {waiters} waiters (> 4)"));
        }
    }
    let body = format!(
        "{}\nPING round trip (median of 2000, same run): {} µs. Gap = release start → next holder. Commands = what clients sent (a script call counts once). \
         {rounds} interleaved rounds of {handoffs} handoffs per library and waiter count; \
         gaps pooled for p50/p99, medians of rounds for commands and handoffs/s.\n",
        table(
            &[
                "waiters",
                "latchkey gap p50 µs",
                "p99 µs",
                "cmds/handoff",
                "handoffs/s",
                "polling gap p50 µs",
                "p99 µs",
                "cmds/handoff",
                "handoffs/s",
                "latchkey p99 / PING",
            ],
            &rows
        ),
        us(ping)
    );
    Report {
        title: "Handoff: release → next holder (one process)".into(),
        body,
        missed,
    }
}

#[derive(Default)]
struct Sample {
    gaps: Vec<Duration>,
    commands: Vec<f64>,
    rates: Vec<f64>,
}

struct RoundResult {
    gaps: Vec<Duration>,
    commands_per_handoff: f64,
    handoffs_per_sec: f64,
}

impl Sample {
    fn add(&mut self, r: RoundResult) {
        self.gaps.extend(r.gaps);
        self.commands.push(r.commands_per_handoff);
        self.rates.push(r.handoffs_per_sec);
    }

    fn summary(&mut self) -> (Duration, Duration, f64, f64) {
        (
            quantile(&mut self.gaps, 0.5),
            quantile(&mut self.gaps, 0.99),
            median(&mut self.commands),
            median(&mut self.rates),
        )
    }
}

async fn ping_rtt(url: &str) -> Duration {
    let mut conn = connect(url).await;
    let mut samples = Vec::with_capacity(2000);
    for _ in 0..2000 {
        let t = Instant::now();
        let _: String = redis::cmd("PING").query_async(&mut conn).await.expect("PING");
        samples.push(t.elapsed());
    }
    quantile(&mut samples, 0.5)
}

async fn connect(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

/// Calls per command name, from `INFO commandstats`.
pub fn command_calls(server: &RedisServer) -> std::collections::HashMap<String, u64> {
    let info = server.command(&["INFO", "commandstats"]).unwrap_or_default();
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(":calls=")?;
            Some((name.to_owned(), rest.split(',').next()?.parse().ok()?))
        })
        .collect()
}

/// Commands clients sent between two `command_calls` readings, counting only
/// the names in `top_level`: commandstats also counts the commands a script
/// runs inside the server, which are not round trips.
pub fn sent_between(
    before: &std::collections::HashMap<String, u64>,
    after: &std::collections::HashMap<String, u64>,
    top_level: &[&str],
) -> u64 {
    top_level
        .iter()
        .map(|name| {
            let a = after.get(*name).copied().unwrap_or(0);
            a.saturating_sub(before.get(*name).copied().unwrap_or(0))
        })
        .sum()
}

/// What latchkey sends: scripts and subscriber traffic.
const LATCHKEY_COMMANDS: &[&str] = &["evalsha", "eval", "script|load", "subscribe", "unsubscribe", "ping"];
/// What the polling lock sends: `SET NX PX` and its release script.
const POLLING_COMMANDS: &[&str] = &["set", "evalsha", "eval", "script|load"];

/// Shared bookkeeping of one round: when the last release started, the gaps.
struct Clock {
    origin: Instant,
    released_at_ns: AtomicU64,
    remaining: AtomicUsize,
    gaps: std::sync::Mutex<Vec<Duration>>,
}

impl Clock {
    fn new(handoffs: usize) -> Arc<Clock> {
        Arc::new(Clock {
            origin: Instant::now(),
            released_at_ns: AtomicU64::new(0),
            remaining: AtomicUsize::new(handoffs),
            gaps: std::sync::Mutex::new(Vec::with_capacity(handoffs)),
        })
    }

    /// Called by a new holder. Returns false when the round is over.
    fn acquired(&self) -> bool {
        let now = self.origin.elapsed().as_nanos() as u64;
        let released = self.released_at_ns.swap(0, Ordering::SeqCst);
        if released != 0 {
            if let Ok(mut gaps) = self.gaps.lock() {
                gaps.push(Duration::from_nanos(now.saturating_sub(released)));
            }
        }
        self.remaining
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    fn releasing(&self) {
        let now = self.origin.elapsed().as_nanos().max(1) as u64;
        self.released_at_ns.store(now, Ordering::SeqCst);
    }

    fn finish(
        &self,
        server: &RedisServer,
        before: &std::collections::HashMap<String, u64>,
        commands: &[&str],
        started: Instant,
    ) -> RoundResult {
        let sent = sent_between(before, &command_calls(server), commands);
        let gaps = self.gaps.lock().map(|g| g.clone()).unwrap_or_default();
        let n = gaps.len().max(1) as f64;
        RoundResult {
            commands_per_handoff: sent as f64 / n,
            handoffs_per_sec: n / started.elapsed().as_secs_f64(),
            gaps,
        }
    }
}

async fn run_latchkey(server: &RedisServer, name: &str, tasks: usize, handoffs: usize) -> RoundResult {
    let client = latchkey::Client::connect(&server.url()).await.expect("connect");
    let lock = client.lock(name, Duration::from_secs(10)).expect("lock");
    // Warm up: script cache and subscriber connection.
    let g = lock.acquire().await.expect("warm-up");
    let _ = g.release().await;
    let clock = Clock::new(handoffs);
    let before = command_calls(server);
    let started = Instant::now();
    let mut joins = Vec::new();
    for _ in 0..tasks {
        let (lock, clock) = (lock.clone(), clock.clone());
        joins.push(tokio::spawn(async move {
            loop {
                let guard = lock.acquire().await.expect("acquire");
                let more = clock.acquired();
                if more {
                    tokio::time::sleep(HOLD).await;
                    clock.releasing();
                }
                let _ = guard.release().await;
                if !more {
                    return;
                }
            }
        }));
    }
    for j in joins {
        let _ = j.await;
    }
    clock.finish(server, &before, LATCHKEY_COMMANDS, started)
}

const POLL_RELEASE: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

async fn run_polling(server: &RedisServer, name: &str, tasks: usize, handoffs: usize) -> RoundResult {
    let conn = connect(&server.url()).await;
    let key = format!("poll:{name}");
    let release = redis::Script::new(POLL_RELEASE);
    let clock = Clock::new(handoffs);
    let before = command_calls(server);
    let started = Instant::now();
    let mut joins = Vec::new();
    for i in 0..tasks {
        let (mut conn, clock, key, release) = (conn.clone(), clock.clone(), key.clone(), release.clone());
        joins.push(tokio::spawn(async move {
            let token = format!("task-{i}");
            let mut n = 0u32;
            loop {
                let ok: Option<String> = redis::cmd("SET")
                    .arg(&key)
                    .arg(&token)
                    .arg("NX")
                    .arg("PX")
                    .arg(10_000)
                    .query_async(&mut conn)
                    .await
                    .expect("SET");
                if ok.is_none() {
                    n = n.wrapping_add(0x9E37_79B9);
                    let jitter = 5 + (n >> 24) % 11; // 5..=15 ms
                    tokio::time::sleep(Duration::from_millis(u64::from(jitter))).await;
                    continue;
                }
                let more = clock.acquired();
                if more {
                    tokio::time::sleep(HOLD).await;
                    clock.releasing();
                }
                let _: i64 = release.key(&key).arg(&token).invoke_async(&mut conn).await.expect("release");
                if !more {
                    return;
                }
            }
        }));
    }
    for j in joins {
        let _ = j.await;
    }
    clock.finish(server, &before, POLLING_COMMANDS, started)
}
