//! Scenario `redlock`: what a Redlock over N instances costs against the
//! single-instance lock, uncontended, one task, one cycle after the other.
//!
//! ```text
//! round k:  single  R3  R5  rslock-5  single+f  R5+f  R5+f-time-floor  single …   (one cycle each, order rotating)
//! ```
//!
//! Compared in the same run, on 5 private servers (the single-instance lock
//! and Redlock(3) use the first ones):
//!
//! * **single**: `Client::lock` — acquire (`SET NX PX GET`, 1 round trip)
//!   + release (1);
//! * **Redlock(3)**, **Redlock(5)**: `Redlock::lock` — acquire fans out the
//!   same `SET` to every instance at once and stops at a majority, release
//!   fans out once more;
//! * **rslock 0.10, 5 instances**: the Rust peer (`LockManager::lock` +
//!   `unlock`), which waits for every instance in each round;
//! * **with_fencing** rows: the same locks issuing a fencing token with
//!   every acquisition — single; Redlock(5) with the default strict fencing
//!   (a second fan-out round raises the majority's counters); Redlock(5)
//!   with time-floor fencing (no second round). Their ratios are to the
//!   single lock `with_fencing`, the same guarantee on one instance.
//!
//! One cycle per contender per round, interleaved, so load swings on the
//! shared VM hit all alike. Reported: median and p99 of the acquire alone
//! and of the whole cycle, and each median's ratio to the single lock's in
//! the same run. Target: Redlock(5) *acquire* latency
//! ≤ 1.5× the single-instance lock's.

use std::time::{Duration, Instant};

use latchkey::{Client, Fencing, Redlock};
use latchkey_testkit::RedisServer;

use crate::stats::{quantile, table, us};
use crate::Report;

const TTL: Duration = Duration::from_secs(10);
/// The target: Redlock(5)'s median acquire at most rslock's over the
/// same 5 instances, in the same run (it replaced "≤ 1.5× the single
/// instance's", a figure that says more about the machine than the code),
/// and its client instructions per acquire + release at most rslock's
/// (callgrind, the `redlock5` and `rslock5` workloads of `profile.rs`).
const RSLOCK_ROW: usize = 3;

pub fn run(quick: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Report>>> {
    crate::on_worker(
        "Redlock: N instances versus one",
        Some("redlock"),
        scenario(quick),
    )
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
                if released != latchkey::Ownership::Owned {
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
    // (label, contender, index of the row its ratios are taken against)
    let contenders: Vec<(&str, Contender, usize)> = vec![
        (
            "single instance",
            Contender::Latchkey(single.lock("single", TTL).expect("lock")),
            0,
        ),
        (
            "Redlock(3)",
            Contender::Latchkey(r3.lock("r3", TTL).expect("lock")),
            0,
        ),
        (
            "Redlock(5)",
            Contender::Latchkey(r5.lock("r5", TTL).expect("lock")),
            0,
        ),
        (
            "rslock 0.10, 5 instances",
            Contender::Rslock(rslock::LockManager::new(urls.clone())),
            0,
        ),
        (
            "single instance, with_fencing",
            Contender::Latchkey(single.lock("single-f", TTL).expect("lock").with_fencing()),
            4,
        ),
        (
            "Redlock(5), with_fencing (strict)",
            Contender::Latchkey(r5.lock("r5f", TTL).expect("lock").with_fencing()),
            4,
        ),
        (
            "Redlock(5), with_fencing, time-floor",
            Contender::Latchkey(
                r5.clone()
                    .with_fencing_mode(Fencing::TimeFloor)
                    .lock("r5tf", TTL)
                    .expect("lock")
                    .with_fencing(),
            ),
            4,
        ),
    ];

    let mut notes = Vec::new();
    let mut failed = vec![false; contenders.len()];
    // Warm-up: connections, subscribers, script caches.
    for (i, (label, c, _)) in contenders.iter().enumerate() {
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
            let (label, c, _) = &contenders[i];
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

    let medians: Vec<(Duration, Duration)> = (0..contenders.len())
        .map(|i| {
            (
                quantile(&mut acquires[i], 0.5),
                quantile(&mut cycles[i], 0.5),
            )
        })
        .collect();
    let ratio =
        |d: Duration, reference: Duration| d.as_secs_f64() / reference.as_secs_f64().max(1e-9);
    let mut rows = Vec::new();
    let mut missed = Vec::new();
    let mut rslock_acquire = acquires[RSLOCK_ROW].clone();
    let rslock_acquire = (!rslock_acquire.is_empty()).then(|| quantile(&mut rslock_acquire, 0.5));
    for (i, (label, _, reference)) in contenders.iter().enumerate() {
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
        let (single_acquire, single_cycle) = medians[*reference];
        let acquire_ratio = ratio(a50, single_acquire);
        let cycle_ratio = ratio(c50, single_cycle);
        let target = match (*label == "Redlock(5)", rslock_acquire) {
            (true, Some(theirs)) => {
                let vs = ratio(a50, theirs);
                if vs <= 1.0 {
                    format!("acquire ≤ rslock's ✓ ({vs:.2}×)")
                } else {
                    missed.push(format!(
                        "redlock: Redlock(5) acquire is {vs:.2}× rslock's over the same 5 instances (target ≤ 1.00×)"
                    ));
                    format!("acquire ≤ rslock's ✗ ({vs:.2}×)")
                }
            }
            _ => String::new(),
        };
        rows.push(vec![
            (*label).to_owned(),
            us(a50),
            us(a99),
            format!("{acquire_ratio:.2}×"),
            us(c50),
            us(c99),
            format!("{cycle_ratio:.2}×"),
            target,
        ]);
    }
    // Client instructions per acquire + release (callgrind, a process of
    // its own for each): counts do not swing with the machine's load.
    let ports: Vec<String> = servers.iter().map(|s| s.port().to_string()).collect();
    let ports = ports.join(",");
    let probe = if quick { 200 } else { 1000 };
    let mut counts = Vec::new();
    for workload in ["redlock5", "rslock5"] {
        let count =
            crate::uncontended::counted_instructions(&["--profile", workload, &ports], probe).await;
        counts.push(count);
    }
    let instructions = match (&counts[0], &counts[1]) {
        (Ok(ours), Ok(theirs)) => {
            let vs = ours / theirs;
            let verdict = if vs <= 1.0 { "✓" } else { "✗" };
            if vs > 1.0 {
                missed.push(format!(
                    "redlock: Redlock(5) client instructions per acquire + release are {vs:.3}× rslock's (target ≤ 1.00×)"
                ));
            }
            format!(
                "Client instructions per acquire + release over 5 instances (callgrind, {probe} and {} cycles in a \
                 process of its own, the difference; redis-rs and tokio included): Redlock(5) {ours:.0}, \
                 rslock {theirs:.0}: {vs:.3}× (target ≤ 1.00× {verdict}).\n",
                3 * probe
            )
        }
        (ours, theirs) => format!(
            "Client instructions not counted: {}\n",
            [ours, theirs]
                .iter()
                .filter_map(|c| c.as_ref().err().cloned())
                .collect::<Vec<_>>()
                .join("; ")
        ),
    };
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
         Ratios are of medians measured in the same run: to the single instance's, for the `with_fencing` rows \
         to the single instance `with_fencing`. No fencing token is asked for in the other rows.\n"
    ));
    body.push('\n');
    body.push_str(&instructions);
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
