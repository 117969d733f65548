//! Curve 3, holds per process: N locks held at once by one client, each
//! with the watchdog, TTL 3 s (so a renewal every second: several during
//! the measurement).
//!
//! 64 tasks take the N locks (distinct names); once all are held, for a
//! fixed window: renewals per second (the `EVALSHA` calls Redis counted:
//! the extend script is the only script a held lock runs), this process's
//! CPU per held lease per second (`/proc/self/task/*/schedstat`), Redis's
//! CPU per second, and this process's RSS growth per held lease since
//! before the first acquisition (RSS, not heap). At the end every guard is
//! checked (`is_held`, `lost_reason`) and released (`release` must find it
//! `Owned`): a lapse is a guard lost or found not ours. Target: 0 lapses.

use std::sync::Arc;
use std::time::{Duration, Instant};

use latchkey_testkit::RedisServer;

use super::probe::{self, Snapshot};

const TASKS: usize = 64;
/// Short, so that the watchdog renews every second.
pub const TTL: Duration = Duration::from_secs(3);

pub struct Row {
    pub n: usize,
    pub acquire_secs: f64,
    pub window: Duration,
    pub renewals_per_sec: f64,
    pub client_us_per_lease_sec: f64,
    pub client_cpu_share: f64,
    pub redis_ms_per_sec: f64,
    pub rss_per_lease: f64,
    pub lapses: usize,
    pub why: String,
}

pub async fn row(server: &RedisServer, n: usize, window: Duration) -> Result<Row, String> {
    probe::flush(server)?;
    let client = latchkey::Client::connect(&server.url())
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let rss0 = probe::rss();
    let started = Instant::now();
    let joins: Vec<_> = (0..TASKS)
        .map(|t| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut guards = Vec::with_capacity(n / TASKS + 1);
                for i in (t..n).step_by(TASKS) {
                    let lock = client
                        .lock(format!("scale:held:{i}"), TTL)
                        .map_err(|e| e.to_string())?
                        .with_watchdog();
                    let guard = lock
                        .try_acquire()
                        .await
                        .map_err(|e| format!("acquire: {e}"))?
                        .ok_or("a fresh name was busy")?;
                    guards.push(guard);
                }
                Ok::<_, String>(guards)
            })
        })
        .collect();
    let mut guards = Vec::with_capacity(n);
    for j in joins {
        guards.extend(j.await.map_err(|e| e.to_string())??);
    }
    let acquire_secs = started.elapsed().as_secs_f64();
    let a = Snapshot::take(server);
    tokio::time::sleep(window).await;
    let b = Snapshot::take(server);
    let rss1 = probe::rss();
    let secs = b.secs_since(&a);

    // Lapses: a guard lost, or a release that found the lock not ours.
    let mut reasons = std::collections::BTreeMap::<String, usize>::new();
    let mut lost = 0;
    for g in &guards {
        if !g.is_held() {
            lost += 1;
            let why = g.lost_reason().map_or("not held".into(), |r| r.to_string());
            *reasons.entry(why).or_default() += 1;
        }
    }
    let guards = Arc::new(std::sync::Mutex::new(guards));
    let joins: Vec<_> = (0..TASKS)
        .map(|_| {
            let guards = guards.clone();
            tokio::spawn(async move {
                let mut not_owned = 0usize;
                loop {
                    let next = guards.lock().unwrap_or_else(|p| p.into_inner()).pop();
                    let Some(g) = next else { break };
                    if !matches!(g.release().await, Ok(latchkey::Ownership::Owned)) {
                        not_owned += 1;
                    }
                }
                not_owned
            })
        })
        .collect();
    let mut not_owned = 0;
    for j in joins {
        not_owned += j.await.map_err(|e| e.to_string())?;
    }
    client.flush(Duration::from_secs(5)).await;
    if not_owned > lost {
        reasons.insert("release found it not ours".into(), not_owned - lost);
    }
    let why = reasons
        .iter()
        .map(|(r, k)| format!("{k}× {r}"))
        .collect::<Vec<_>>()
        .join("; ");
    let client_cpu = b.client_cpu_since(&a).as_secs_f64();
    Ok(Row {
        n,
        acquire_secs,
        window,
        renewals_per_sec: b.calls_since(&a, "evalsha") as f64 / secs,
        client_us_per_lease_sec: client_cpu * 1e6 / secs / n as f64,
        client_cpu_share: client_cpu / secs,
        redis_ms_per_sec: b.redis_cpu_since(&a).as_secs_f64() * 1e3 / secs,
        rss_per_lease: (rss1 as f64 - rss0 as f64) / n as f64,
        lapses: lost.max(not_owned),
        why,
    })
}

pub fn table(rows: &[Row]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.n.to_string(),
                format!("{:.1}", r.acquire_secs),
                format!("{:.0}", r.window.as_secs_f64()),
                format!("{:.0}", r.renewals_per_sec),
                format!("{:.0}", r.n as f64 / (TTL / 3).as_secs_f64()),
                format!("{:.2}", r.client_us_per_lease_sec),
                format!("{:.0} %", r.client_cpu_share * 100.0),
                format!("{:.0}", r.redis_ms_per_sec),
                format!("{:.0}", r.rss_per_lease),
                if r.why.is_empty() {
                    r.lapses.to_string()
                } else {
                    format!("{} ({})", r.lapses, r.why)
                },
            ]
        })
        .collect();
    crate::stats::table(
        &[
            "leases held",
            "took to acquire s",
            "window s",
            "renewals/s (EVALSHA)",
            "expected (N / 1 s)",
            "client CPU µs per lease-second",
            "client CPU (of one core)",
            "redis CPU ms/s",
            "client RSS bytes/lease",
            "lapses",
        ],
        &cells,
    )
}
