//! Scenario `redlock`: what a Redlock over N instances costs against the
//! single-instance lock, uncontended, one task, one cycle after the other.
//!
//! ```text
//! round k:  single  R3  R5  R5-time-floor  rslock-5  single  R3  R5 …   (one cycle each, order rotating)
//! ```
//!
//! Compared in the same run, on 5 private servers (the single-instance lock
//! and Redlock(3) use the first ones):
//!
//! * **single**: `Client::lock` — acquire (1 round trip) + release (1);
//! * **Redlock(3)**, **Redlock(5)**: `Redlock::lock` with the default strict
//!   fencing — acquire fans out to every instance at once and stops at a
//!   majority, then raises the majority's fencing counters (a second fan-out
//!   round trip), release fans out once more;
//! * **Redlock(5), time-floor fencing**: the same without the raise, to show
//!   what strict fencing costs;
//! * **rslock 0.10, 5 instances**: the Rust peer (`LockManager::lock` +
//!   `unlock`), which waits for every instance in each round.
//!
//! One cycle per contender per round, interleaved, so load swings on the
//! shared VM hit all alike. Reported: median and p99 of the acquire alone
//! and of the whole cycle, and each median's ratio to the single lock's in
//! the same run. Target (issue 5): Redlock(5) acquire + release ≤ 1.5× the
//! single-instance lock's.

use std::time::{Duration, Instant};

use latchkey::{Client, Fencing, Redlock};
use latchkey_testkit::RedisServer;

use crate::stats::{quantile, table, us};
use crate::Report;

const TTL: Duration = Duration::from_secs(10);
const TARGET: f64 = 1.5;

pub fn run(quick: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Report>>> {
    // On a runtime worker, as application tasks run (see `uncontended`).
    Box::pin(async move {
        match tokio::spawn(scenario(quick)).await {
            Ok(report) => report,
            Err(e) => Report {
                title: "Redlock: N instances versus one".into(),
                body: format!("The scenario failed: {e}\n"),
                missed: vec![format!("redlock: the scenario failed: {e}")],
            },
        }
    })
}

enum Contender {
    Latchkey(latchkey::Lock),
    Rslock(rslock::LockManager),
}

impl Contender {
    /// One acquire + release: the acquire's time and the whole cycle's.
    async fn cycle(&self) -> Result<(Duration, Duration), String> {
        let started = Instant::now();
        match self {
            Contender::Latchkey(lock) => {
                let guard = lock.try_acquire().await.map_err(|e| e.to_string())?;
                let guard = guard.ok_or("uncontended lock was busy")?;
                let acquired = started.elapsed();
                let released = guard.release().await.map_err(|e| e.to_string())?;
                if released != latchkey::Release::Released {
                    return Err(format!("release found {released:?}"));
                }
                Ok((acquired, started.elapsed()))
            }
            Contender::Rslock(manager) => {
                let lock = manager
                    .lock(&b"bench:redlock:rslock"[..], TTL)
                    .await
                    .map_err(|e| format!("rslock: {e}"))?;
                let acquired = started.elapsed();
                manager.unlock(&lock).await;
                Ok((acquired, started.elapsed()))
            }
        }
    }
}

async fn scenario(quick: bool) -> Report {
    let servers = RedisServer::start_many(5);
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let url_refs: Vec<&str> = urls.iter().map(String::as_str).collect();
    let rounds = if quick { 300 } else { 3000 };

    let single = Client::connect(&urls[0]).await.expect("connect");
    let r3 = Redlock::connect(&url_refs[..3])
        .await
        .expect("connect Redlock(3)");
    let r5 = Redlock::connect(&url_refs)
        .await
        .expect("connect Redlock(5)");
    let contenders: Vec<(&str, Contender)> = vec![
        (
            "single instance",
            Contender::Latchkey(single.lock("single", TTL).expect("lock")),
        ),
        (
            "Redlock(3)",
            Contender::Latchkey(r3.lock("r3", TTL).expect("lock")),
        ),
        (
            "Redlock(5)",
            Contender::Latchkey(r5.lock("r5", TTL).expect("lock")),
        ),
        (
            "Redlock(5), time-floor fencing",
            Contender::Latchkey(
                r5.clone()
                    .fencing(Fencing::TimeFloor)
                    .lock("r5tf", TTL)
                    .expect("lock"),
            ),
        ),
        (
            "rslock 0.10, 5 instances",
            Contender::Rslock(rslock::LockManager::new(urls.clone())),
        ),
    ];

    let mut notes = Vec::new();
    let mut failed = vec![false; contenders.len()];
    // Warm-up: connections, subscribers, script caches.
    for (i, (label, c)) in contenders.iter().enumerate() {
        for _ in 0..50 {
            if let Err(e) = c.cycle().await {
                notes.push(format!("- {label}: failed: {e}"));
                failed[i] = true;
                break;
            }
        }
    }
    let mut acquires: Vec<Vec<Duration>> = vec![Vec::with_capacity(rounds); contenders.len()];
    let mut cycles: Vec<Vec<Duration>> = vec![Vec::with_capacity(rounds); contenders.len()];
    for round in 0..rounds {
        for k in 0..contenders.len() {
            let i = (k + round) % contenders.len();
            if failed[i] {
                continue;
            }
            let (label, c) = &contenders[i];
            match c.cycle().await {
                Ok((acquire, cycle)) => {
                    acquires[i].push(acquire);
                    cycles[i].push(cycle);
                }
                Err(e) => {
                    notes.push(format!("- {label}: failed: {e}"));
                    failed[i] = true;
                }
            }
        }
    }

    let single_acquire = quantile(&mut acquires[0], 0.5);
    let single_cycle = quantile(&mut cycles[0], 0.5);
    let ratio =
        |d: Duration, reference: Duration| d.as_secs_f64() / reference.as_secs_f64().max(1e-9);
    let mut rows = Vec::new();
    let mut missed = Vec::new();
    for (i, (label, _)) in contenders.iter().enumerate() {
        if cycles[i].is_empty() {
            continue;
        }
        let (a50, a99) = (
            quantile(&mut acquires[i], 0.5),
            quantile(&mut acquires[i], 0.99),
        );
        let (c50, c99) = (
            quantile(&mut cycles[i], 0.5),
            quantile(&mut cycles[i], 0.99),
        );
        let cycle_ratio = ratio(c50, single_cycle);
        let target = if *label == "Redlock(5)" {
            if cycle_ratio <= TARGET {
                format!("≤ {TARGET}× ✓")
            } else {
                missed.push(format!(
                    "redlock: Redlock(5) acquire + release is {cycle_ratio:.2}× the single-instance lock (target ≤ {TARGET}×)"
                ));
                format!("≤ {TARGET}× ✗")
            }
        } else {
            String::new()
        };
        rows.push(vec![
            (*label).to_owned(),
            us(a50),
            us(a99),
            format!("{:.2}×", ratio(a50, single_acquire)),
            us(c50),
            us(c99),
            format!("{cycle_ratio:.2}×"),
            target,
        ]);
    }
    let mut body = table(
        &[
            "lock",
            "acquire median µs",
            "acquire p99 µs",
            "acquire ÷ single",
            "acquire+release median µs",
            "acquire+release p99 µs",
            "cycle ÷ single",
            "target",
        ],
        &rows,
    );
    body.push_str(&format!(
        "\n{rounds} cycles per lock, interleaved one cycle at a time; 5 redis-servers on this machine's loopback. \
         Ratios are of medians measured in the same run.\n"
    ));
    if !notes.is_empty() {
        body.push('\n');
        body.push_str(&notes.join("\n"));
        body.push('\n');
    }
    drop(servers);
    Report {
        title: "Redlock: N instances versus one".into(),
        body,
        missed,
    }
}
