//! Scenario `uncontended`: acquire + release with nobody else around, one
//! task, one cycle after the other: cycles per second.
//!
//! Compared in the same run, rounds interleaved (the order rotates every
//! round), on one server:
//!
//! * **latchkey**: `lock.try_acquire()` then `guard.release()` — two
//!   `EVALSHA` round trips (the acquire script also issues the fencing token;
//!   the release script also publishes the wake-up);
//! * **raw redis-rs, same scripts**: a bare `MultiplexedConnection` sending
//!   the same two `EVALSHA`s with the same scripts, keys and token shape —
//!   the client's limit, what latchkey costs over redis-rs itself;
//! * **raw redis-rs, SET NX PX + CAD**: the minimal lock, `SET key token NX
//!   PX ttl` and an `EVALSHA` compare-and-delete — what a lock without
//!   fencing and wake-ups costs;
//! * **rslock** (`LockManager::lock` + `unlock` on one instance);
//! * the Python and Node peers, in their driver processes.
//!
//! Reported: the median of each library's per-round rate, and the median of
//! the per-round ratios latchkey ÷ library. Targets (issue 9): ≥ 0.95× the
//! raw client sending the same two commands, ≥ 1.0× rslock.

use std::time::{Duration, Instant};

use latchkey_testkit::RedisServer;

use crate::driver::Driver;
use crate::peers;
use crate::stats::{median, table};
use crate::worker::{COMPARE_AND_DELETE, TTL};
use crate::Report;

const ACQUIRE_LUA: &str = include_str!("../../latchkey/src/scripts/acquire.lua");
const RELEASE_LUA: &str = include_str!("../../latchkey/src/scripts/release.lua");

pub fn run(quick: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Report>>> {
    Box::pin(scenario(quick))
}

/// One contender of this scenario.
enum Cycler {
    Latchkey(latchkey::Lock),
    RawScripts(Raw),
    RawSetNx(Raw),
    Rslock(rslock::LockManager),
    /// A driver process and the key it uses.
    Peer(Driver, String),
}

struct Raw {
    conn: redis::aio::MultiplexedConnection,
    acquire: redis::Script,
    release: redis::Script,
    key: String,
    fence_key: String,
    channel: String,
    host: String,
    counter: u128,
}

const KEY: &str = "uncontended";

impl Cycler {
    /// Runs `n` cycles; returns their total time.
    async fn cycles(&mut self, n: u64) -> Result<Duration, String> {
        let started = Instant::now();
        match self {
            Cycler::Latchkey(lock) => {
                for _ in 0..n {
                    let guard = lock.try_acquire().await.map_err(|e| e.to_string())?;
                    let guard = guard.ok_or("latchkey: uncontended lock was busy")?;
                    let released = guard.release().await.map_err(|e| e.to_string())?;
                    if released != latchkey::Release::Released {
                        return Err(format!("latchkey: release found {released:?}"));
                    }
                }
            }
            Cycler::RawScripts(raw) => {
                let ttl = TTL.as_millis().to_string();
                for _ in 0..n {
                    let token = raw.token();
                    let (ok, _fence): (i64, i64) = raw
                        .acquire
                        .key(&raw.key)
                        .key(&raw.fence_key)
                        .arg(&token)
                        .arg(&ttl)
                        .invoke_async(&mut raw.conn)
                        .await
                        .map_err(|e| e.to_string())?;
                    if ok != 1 {
                        return Err("raw: uncontended lock was busy".into());
                    }
                    let _: i64 = raw
                        .release
                        .key(&raw.key)
                        .arg(&token)
                        .arg(&raw.channel)
                        .invoke_async(&mut raw.conn)
                        .await
                        .map_err(|e| e.to_string())?;
                }
            }
            Cycler::RawSetNx(raw) => {
                let ttl = TTL.as_millis() as u64;
                for _ in 0..n {
                    let token = raw.token();
                    let ok: Option<String> = redis::cmd("SET")
                        .arg(&raw.key)
                        .arg(&token)
                        .arg("NX")
                        .arg("PX")
                        .arg(ttl)
                        .query_async(&mut raw.conn)
                        .await
                        .map_err(|e| e.to_string())?;
                    if ok.is_none() {
                        return Err("raw: uncontended lock was busy".into());
                    }
                    let _: i64 = raw
                        .release
                        .key(&raw.key)
                        .arg(&token)
                        .invoke_async(&mut raw.conn)
                        .await
                        .map_err(|e| e.to_string())?;
                }
            }
            Cycler::Rslock(manager) => {
                for _ in 0..n {
                    let lock = manager
                        .lock(&b"rslock:uncontended"[..], TTL)
                        .await
                        .map_err(|e| format!("rslock: {e}"))?;
                    manager.unlock(&lock).await;
                }
            }
            Cycler::Peer(driver, key) => {
                let (_, seconds) = driver.uncontended(key, n).await?;
                return Ok(Duration::from_secs_f64(seconds));
            }
        }
        Ok(started.elapsed())
    }
}

impl Raw {
    async fn new(url: &str, prefix: &str, acquire: &str, release: &str) -> Raw {
        Raw {
            conn: crate::handoff::connect(url).await,
            acquire: redis::Script::new(acquire),
            release: redis::Script::new(release),
            key: format!("{prefix}{KEY}"),
            fence_key: format!("{prefix}{KEY}:fence"),
            channel: format!("{prefix}{KEY}:released"),
            host: "bench-host".into(),
            counter: 0,
        }
    }

    /// A token of latchkey's shape and length (`lk1:<32 hex>:<ms>:<pid>:<host>`),
    /// so both send the same bytes; a counter stands in for the random part.
    fn token(&mut self) -> String {
        self.counter += 1;
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        format!("lk1:{:032x}:{ms}:{}:{}", self.counter, std::process::id(), self.host)
    }
}

async fn scenario(quick: bool) -> Report {
    let server = RedisServer::start();
    let url = server.url();
    // Short rounds, many of them: the per-round ratio compares runs a
    // fraction of a second apart, before the machine's load can change much.
    let rounds = if quick { 8 } else { 25 };
    let per_round: u64 = if quick { 200 } else { 300 };

    let client = latchkey::Client::connect(&url).await.expect("latchkey connect");
    let mut contenders: Vec<(String, Cycler)> = vec![
        ("latchkey".into(), Cycler::Latchkey(client.lock(KEY, TTL).expect("lock"))),
        (
            "raw redis-rs, same scripts".into(),
            Cycler::RawScripts(Raw::new(&url, "raw:", ACQUIRE_LUA, RELEASE_LUA).await),
        ),
        (
            "raw redis-rs, SET NX PX + CAD".into(),
            Cycler::RawSetNx(Raw::new(&url, "rawset:", ACQUIRE_LUA, COMPARE_AND_DELETE).await),
        ),
        (
            "rslock 0.10".into(),
            Cycler::Rslock(rslock::LockManager::new(vec![url.clone()])),
        ),
    ];
    let mut notes = Vec::new();
    for lib in peers::FOREIGN {
        match peers::driver(lib, server.port()).await {
            Ok(d) => {
                let label = format!("{} {}", lib.label, d.version);
                contenders.push((label, Cycler::Peer(d, format!("{}:{KEY}", lib.id))));
            }
            Err(e) => notes.push(format!("- {}: {e}", lib.label)),
        }
    }
    // The raw client's token has latchkey's length: same host field.
    let probe = client.lock("probe", TTL).expect("lock").acquire().await.expect("probe");
    let host = latchkey::Holder::from_token(probe.token().as_bytes()).map_or_else(|| "bench-host".into(), |h| h.host);
    let _ = probe.release().await;
    for (_, c) in contenders.iter_mut() {
        if let Cycler::RawScripts(raw) | Cycler::RawSetNx(raw) = c {
            raw.host = host.clone();
        }
    }

    // Warm-up: connections, script caches, JITs.
    let mut failed = vec![false; contenders.len()];
    for (i, (label, c)) in contenders.iter_mut().enumerate() {
        if let Err(e) = c.cycles(per_round / 4).await {
            notes.push(format!("- {label}: failed: {e}"));
            failed[i] = true;
        }
    }
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
    for round in 0..rounds {
        let mut this_round = vec![None; contenders.len()];
        for k in 0..contenders.len() {
            let i = (k + round) % contenders.len();
            if failed[i] {
                continue;
            }
            let (label, c) = &mut contenders[i];
            match c.cycles(per_round).await {
                Ok(t) => this_round[i] = Some(per_round as f64 / t.as_secs_f64()),
                Err(e) => {
                    notes.push(format!("- {label}: failed: {e}"));
                    failed[i] = true;
                }
            }
        }
        if let Some(ours) = this_round[0] {
            for (i, r) in this_round.iter().enumerate() {
                if let Some(r) = r {
                    rates[i].push(*r);
                    ratios[i].push(ours / r);
                }
            }
        }
    }

    let mut missed = Vec::new();
    let mut rows = Vec::new();
    for (i, (label, _)) in contenders.iter().enumerate() {
        if rates[i].is_empty() {
            continue;
        }
        let rate = median(&mut rates[i]);
        let ratio = median(&mut ratios[i]);
        let target = match i {
            1 => Some(0.95),
            3 => Some(1.0),
            _ => None,
        };
        let verdict = match target {
            Some(t) if ratio >= t => format!("≥ {t:.2}× ✓"),
            Some(t) => {
                missed.push(format!(
                    "uncontended: latchkey is {ratio:.3}× {label} (target ≥ {t:.2}×)"
                ));
                format!("≥ {t:.2}× ✗")
            }
            None => String::new(),
        };
        rows.push(vec![
            label.clone(),
            format!("{rate:.0}"),
            format!("{:.1}", 1e6 / rate),
            if i == 0 { "1 (reference)".into() } else { format!("{ratio:.3}×") },
            verdict,
        ]);
    }
    let body = format!(
        "{}\n{rounds} interleaved rounds of {per_round} cycles per library (order rotated every round), one task, \
         TTL 10 s; medians of per-round rates and of per-round ratios (latchkey ÷ library, > 1: latchkey faster).\n{}",
        table(
            &["library", "cycles/s", "µs/cycle", "latchkey ÷ library", "target"],
            &rows
        ),
        if notes.is_empty() {
            String::new()
        } else {
            format!("\nSkipped or incomplete:\n{}\n", notes.join("\n"))
        }
    );
    Report {
        title: "Uncontended acquire + release (one task)".into(),
        body,
        missed,
    }
}
