//! Scenario `primitives`: the semaphore and the latch (latchkey, its Node
//! package `peers/node/latchkey_semaphore.cjs`, and redis-semaphore).
//!
//! * **Semaphore, uncontended acquire + release** (one task, 10 permits, TTL
//!   10 s): latchkey's `Semaphore` (`try_acquire` + `release`, two script
//!   calls) beside npm `redis-semaphore`'s `Semaphore` with its defaults
//!   (`peers/node/semaphore.cjs`; two script calls too). Rounds interleaved:
//!   a latchkey chunk, then a redis-semaphore chunk (a process of its own,
//!   timed inside, after a warm-up), per round; cycles/s = median of chunks.
//! * **Semaphore hand-off gap** (1 permit, 4 contenders, hold 0.5 ms): from
//!   a release's start to the next acquisition by another contender.
//!   latchkey: 4 tasks with a client each (separate connections), woken by
//!   the release's message; redis-semaphore: 4 loops in one Node process,
//!   which retry every `retryInterval` (10 ms, its default).
//! * **Latch wake-up of 1,000 waiters** (one process, one client): from just
//!   before the count-down that opens the latch to the moment the last
//!   waiter returned; p50 and p99 over the repeats.
//!
//! No targets: the figures are for the table.

use std::process::Stdio;
use std::time::{Duration, Instant};

use latchkey::Client;
use latchkey_testkit::RedisServer;
use serde_json::Value;

use crate::stats::{median, quantile, table};
use crate::Report;

const TTL: Duration = Duration::from_secs(10);
const PERMITS: u64 = 10;
const WAITERS: usize = 1000;
const CONTENDERS: usize = 4;
const HOLD: Duration = Duration::from_micros(500);

pub fn run(quick: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Report>>> {
    Box::pin(run_async(quick))
}

async fn run_async(quick: bool) -> Report {
    let redis = RedisServer::start();
    let client = match Client::builder(&redis.url())
        .prefix("bench:")
        .connect()
        .await
    {
        Ok(c) => c,
        Err(e) => {
            return Report {
                title: "Primitives: semaphore and latch".into(),
                body: format!("could not connect: {e}\n"),
                missed: vec![],
            }
        }
    };
    let (rounds, cycles, repeats, seconds) = if quick {
        (3, 200, 3, 1)
    } else {
        (10, 500, 10, 2)
    };
    let node = node_peer();
    // latchkey's own Node package, beside redis-semaphore (same interface).
    let ours_node = node.clone().and_then(|path| {
        let root = crate::peers::repo_root();
        match root
            .join("bench/peers/node/node_modules/latchkey-redis")
            .exists()
        {
            true => Ok(path.with_file_name("latchkey_semaphore.cjs")),
            false => Err(
                "not installed (bench/peers/install.sh could not build crates/latchkey-node)"
                    .into(),
            ),
        }
    });
    let (mut node_rates, mut node_version) = (Vec::new(), None);
    let mut ours_node_error = ours_node.clone().err();

    // Uncontended.
    let semaphore = client
        .semaphore("uncontended", PERMITS, TTL)
        .expect("valid semaphore");
    for _ in 0..20 {
        let permit = semaphore.try_acquire().await.ok().flatten();
        if let Some(p) = permit {
            let _ = p.release().await;
        }
    }
    let (mut ours, mut theirs, mut version) = (Vec::new(), Vec::new(), None);
    let mut node_error = node.clone().err();
    for _ in 0..rounds {
        let started = Instant::now();
        for _ in 0..cycles {
            if let Ok(Some(p)) = semaphore.try_acquire().await {
                let _ = p.release().await;
            }
        }
        ours.push(cycles as f64 / started.elapsed().as_secs_f64());
        if let Ok(path) = &node {
            let args = ["uncontended", &cycles.to_string(), &PERMITS.to_string()];
            match node_run(path, redis.port(), &args).await {
                Ok(v) => {
                    let s = v["seconds"].as_f64().unwrap_or(f64::NAN);
                    theirs.push(cycles as f64 / s);
                    version = v["version"].as_str().map(str::to_owned);
                }
                Err(e) => node_error = Some(e),
            }
        }
        if let Ok(path) = &ours_node {
            let args = ["uncontended", &cycles.to_string(), &PERMITS.to_string()];
            match node_run(path, redis.port(), &args).await {
                Ok(v) => {
                    let s = v["seconds"].as_f64().unwrap_or(f64::NAN);
                    node_rates.push(cycles as f64 / s);
                    node_version = v["version"].as_str().map(str::to_owned);
                }
                Err(e) => ours_node_error = Some(e),
            }
        }
    }
    let peer = format!("redis-semaphore {}", version.clone().unwrap_or_default());
    let mut rows = vec![row_rate("latchkey Semaphore", median(&mut ours), None)];
    let ratio = |t: f64| median(&mut ours.clone()) / t;
    match (&node_error, theirs.is_empty()) {
        (None, false) => {
            let t = median(&mut theirs);
            rows.push(row_rate(
                &format!("npm {peer} (Semaphore, defaults)"),
                t,
                Some(ratio(t)),
            ));
        }
        (why, _) => rows.push(vec![
            "npm redis-semaphore".into(),
            why.clone().unwrap_or_else(|| "no result".into()),
            "–".into(),
            "–".into(),
        ]),
    }
    let node_label = format!(
        "latchkey-node {} (Semaphore)",
        node_version.clone().unwrap_or_default()
    );
    match (&ours_node_error, node_rates.is_empty()) {
        (None, false) => {
            let t = median(&mut node_rates);
            rows.push(row_rate(&node_label, t, Some(ratio(t))));
        }
        (why, _) => rows.push(vec![
            "latchkey-node".into(),
            why.clone().unwrap_or_else(|| "no result".into()),
            "–".into(),
            "–".into(),
        ]),
    }
    let mut body = table(
        &["library", "cycles/s", "µs/cycle", "latchkey ÷ library"],
        &rows,
    );
    body.push_str(&format!(
        "\nOne task, {PERMITS} permits, TTL 10 s; {rounds} rounds of {cycles} cycles per library, interleaved; median of the rounds. latchkey: `try_acquire` + `release` (server-time expiry, pruning, a release message); redis-semaphore: `new Semaphore(client, key, {PERMITS})`, `acquire()` + `release()` over ioredis (client-time expiry).\n\n"
    ));

    // Hand-off.
    let mut gap_rows = Vec::new();
    let mut ours_gaps = latchkey_handoff(&redis, seconds).await;
    let n = ours_gaps.len();
    gap_rows.push(gap_row("latchkey Semaphore", &mut ours_gaps, n));
    if let Ok(path) = &node {
        let args = [
            "handoff",
            &CONTENDERS.to_string(),
            &seconds.to_string(),
            &HOLD.as_micros().to_string(),
        ];
        match node_run(path, redis.port(), &args).await {
            Ok(v) => {
                let mut gaps: Vec<Duration> = v["gaps_us"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_f64)
                            .map(|us| Duration::from_secs_f64(us / 1e6))
                            .collect()
                    })
                    .unwrap_or_default();
                let n = gaps.len();
                gap_rows.push(gap_row(
                    &format!("npm {peer} (Semaphore, defaults)"),
                    &mut gaps,
                    n,
                ));
            }
            Err(e) => gap_rows.push(vec![
                "npm redis-semaphore".into(),
                e,
                "–".into(),
                "–".into(),
            ]),
        }
    }
    if let Ok(path) = &ours_node {
        let args = [
            "handoff",
            &CONTENDERS.to_string(),
            &seconds.to_string(),
            &HOLD.as_micros().to_string(),
        ];
        match node_run(path, redis.port(), &args).await {
            Ok(v) => {
                let mut gaps: Vec<Duration> = v["gaps_us"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_f64)
                            .map(|us| Duration::from_secs_f64(us / 1e6))
                            .collect()
                    })
                    .unwrap_or_default();
                let n = gaps.len();
                gap_rows.push(gap_row(&node_label, &mut gaps, n));
            }
            Err(e) => gap_rows.push(vec!["latchkey-node".into(), e, "–".into(), "–".into()]),
        }
    }
    body.push_str("### Semaphore hand-off gap (1 permit, 4 contenders)\n\n");
    body.push_str(&table(
        &["library", "gap p50 µs", "gap p99 µs", "gaps"],
        &gap_rows,
    ));
    body.push_str(&format!(
        "\nHold 0.5 ms; {seconds} s; a gap = a release's start → the next acquisition by another contender. latchkey's contenders have a client each (woken by the release's message; latchkey-node's: 4 clients in one Node process); redis-semaphore's 4 loops share one Node process and client (they poll every 10 ms, its default `retryInterval`).\n\n"
    ));

    // Latch wake-up.
    let mut wakeups = Vec::new();
    for r in 0..repeats {
        if let Some(took) = latch_wakeup(&client, r).await {
            wakeups.push(took);
        }
    }
    let (p50, p99) = (quantile(&mut wakeups, 0.5), quantile(&mut wakeups, 0.99));
    body.push_str("### Latch wake-up of 1,000 waiters\n\n");
    body.push_str(&table(
        &["waiters", "wake-up p50 ms", "wake-up p99 ms", "repeats"],
        &[vec![
            WAITERS.to_string(),
            format!("{:.2}", p50.as_secs_f64() * 1e3),
            format!("{:.2}", p99.as_secs_f64() * 1e3),
            wakeups.len().to_string(),
        ]],
    ));
    body.push_str(
        "\nOne process, one client: 1,000 tasks in `latch.wait`, then one `count_down` opens the latch; from just before the count-down to the last waiter's return (one `SUBSCRIBE` shared by all, one `PUBLISH`).\n",
    );
    Report {
        title: "Primitives: semaphore and latch".into(),
        body,
        missed: vec![],
    }
}

fn row_rate(label: &str, rate: f64, ratio: Option<f64>) -> Vec<String> {
    vec![
        label.into(),
        format!("{rate:.0}"),
        format!("{:.1}", 1e6 / rate),
        ratio.map_or("1 (reference)".into(), |r| format!("{r:.3}×")),
    ]
}

fn gap_row(label: &str, gaps: &mut [Duration], n: usize) -> Vec<String> {
    vec![
        label.into(),
        format!("{:.1}", quantile(gaps, 0.5).as_secs_f64() * 1e6),
        format!("{:.1}", quantile(gaps, 0.99).as_secs_f64() * 1e6),
        n.to_string(),
    ]
}

/// 4 contenders, a client each, on a semaphore of 1 permit.
async fn latchkey_handoff(redis: &RedisServer, seconds: u64) -> Vec<Duration> {
    let until = Instant::now() + Duration::from_secs(seconds);
    let last: std::sync::Arc<std::sync::Mutex<(Option<Instant>, usize)>> = Default::default();
    let mut tasks = Vec::new();
    for id in 0..CONTENDERS {
        let client = match Client::builder(&redis.url())
            .prefix("bench:")
            .connect()
            .await
        {
            Ok(c) => c,
            Err(_) => return Vec::new(),
        };
        let last = last.clone();
        tasks.push(tokio::spawn(async move {
            let semaphore = client.semaphore("handoff", 1, TTL).expect("valid");
            let mut gaps = Vec::new();
            while Instant::now() < until {
                let Ok(permit) = semaphore.acquire_until(Duration::from_secs(5)).await else {
                    continue;
                };
                let at = Instant::now();
                {
                    let last = last.lock().unwrap_or_else(|p| p.into_inner());
                    if let (Some(released), holder) = *last {
                        if holder != id {
                            gaps.push(at - released);
                        }
                    }
                }
                let hold_until = Instant::now() + HOLD;
                while Instant::now() < hold_until {
                    std::hint::spin_loop();
                }
                *last.lock().unwrap_or_else(|p| p.into_inner()) = (Some(Instant::now()), id);
                let _ = permit.release().await;
            }
            gaps
        }));
    }
    let mut gaps = Vec::new();
    for t in tasks {
        gaps.extend(t.await.unwrap_or_default());
    }
    gaps
}

/// One repeat: 1,000 waiters, one count-down; `None` if something failed.
async fn latch_wakeup(client: &Client, repeat: usize) -> Option<Duration> {
    let latch = client.latch(format!("wake-{repeat}"), TTL).ok()?;
    latch.create(1).await.ok()?;
    let ready = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let waiters: Vec<_> = (0..WAITERS)
        .map(|_| {
            let (latch, ready) = (latch.clone(), ready.clone());
            tokio::spawn(async move {
                ready.add_permits(1);
                let opened = latch.wait_until(Duration::from_secs(30)).await;
                (opened, Instant::now())
            })
        })
        .collect();
    let _ = ready.acquire_many(WAITERS as u32).await.ok()?;
    // Every waiter subscribes and reads the count before it sleeps; give
    // them the time to (they cannot say when they sleep).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    latch.count_down().await.ok()?;
    let mut last = started;
    for w in waiters {
        let (opened, at) = w.await.ok()?;
        if opened.is_err() {
            return None;
        }
        last = last.max(at);
    }
    Some(last - started)
}

/// The Node driver, or why it cannot run.
fn node_peer() -> Result<std::path::PathBuf, String> {
    if std::env::args().any(|a| a == "--no-peers") {
        return Err("skipped (--no-peers)".into());
    }
    let root = crate::peers::repo_root();
    let modules = root.join("bench/peers/node/node_modules");
    if !modules.join("redis-semaphore").exists() {
        let _ = std::process::Command::new("bash")
            .arg(root.join("bench/peers/install.sh"))
            .stdout(Stdio::null())
            .status();
    }
    if !modules.join("redis-semaphore").exists() {
        return Err(
            "not installed (bench/peers/install.sh could not install redis-semaphore)".into(),
        );
    }
    Ok(root.join("crates/latchkey-bench/peers/node/semaphore.cjs"))
}

/// Runs the Node driver once and parses its one line of JSON.
async fn node_run(driver: &std::path::Path, port: u16, args: &[&str]) -> Result<Value, String> {
    let modules = crate::peers::repo_root().join("bench/peers/node/node_modules");
    let out = tokio::process::Command::new("node")
        .env("NODE_PATH", modules)
        .arg(driver)
        .arg(port.to_string())
        .args(args)
        .stderr(Stdio::null())
        .output()
        .await
        .map_err(|e| format!("cannot run node: {e}"))?;
    let v: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("bad output from the Node driver: {e}"))?;
    match v.get("error") {
        Some(e) => Err(format!("Node driver: {e}")),
        None => Ok(v),
    }
}
