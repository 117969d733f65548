//! Many watchdog holds of one process share their renewals' round trips
//! (`transport/batch.rs`): one pipeline per server for the renewals due
//! together, not one request per hold, and none of the holds lapses.
//!
//! The round trips are counted client-side by
//! `latchkey_renewal_round_trips_total`, on a current-thread runtime inside
//! `metrics::with_local_recorder` (as `cross/metrics.rs` does), so the
//! recorder sees the watchdogs' tasks and nothing another test does.

use crate::common;

use std::time::{Duration, Instant};

use common::recorded::{recorded, Recorded};
use common::*;
use latchkey::Ownership;
use metrics_util::debugging::Snapshotter;
use redis::AsyncCommands;

/// Written out, not `latchkey::metrics::…`: the same test measures a build
/// without batching (which counts one round trip per renewal).
const ROUND_TRIPS: &str = "latchkey_renewal_round_trips_total";
const RENEWALS_OK: &str = "latchkey_renewals_total{kind=lock,outcome=ok}";
const RENEWALS_FAILED: &str = "latchkey_renewals_total{kind=lock,outcome=failed}";
const LOST: &str = "latchkey_locks_lost_total";

#[test]
fn two_thousand_watchdog_holds_renew_in_a_few_round_trips_and_none_lapses() {
    const HOLDS: usize = 2_000;
    const TTL: Duration = Duration::from_millis(600);
    let server = RedisServer::start();
    recorded(|snapshotter| async move {
        let c = client(&server.url()).await;
        let mut guards = Vec::with_capacity(HOLDS);
        for i in 0..HOLDS {
            let lock = c.lock(format!("many-{i}"), TTL).unwrap().with_watchdog();
            guards.push(lock.try_acquire().await.unwrap().expect("a free lock"));
        }
        // Counted from here (a snapshot drains the counters): every hold
        // is out, acquisitions are done.
        snapshotter.snapshot();
        // Three TTLs (nine intervals): without renewals every hold would
        // be gone twice over.
        tokio::time::sleep(TTL * 3).await;
        let count = counters(&snapshotter);
        let (renewed, round_trips) = (count(RENEWALS_OK), count(ROUND_TRIPS));
        assert_eq!(count(RENEWALS_FAILED), 0);
        assert_eq!(count(LOST), 0, "holds lost");
        let lapsed = guards.iter().filter(|g| !g.is_held()).count();
        assert_eq!(lapsed, 0, "holds no longer held");
        // Each hold renewed at least a few times in nine intervals (a
        // loaded machine may run late, never skip them all).
        assert!(renewed >= (HOLDS * 4) as u64, "{renewed} renewals");
        // One round trip a renewal without batching; with it, a few
        // pipelines an interval (windows of a quarter interval, at most
        // 1,000 renewals a pipeline): some 20 to 60 here.
        println!("{HOLDS} holds: {renewed} renewals in {round_trips} round trips");
        assert!(round_trips >= 1, "no round trip counted");
        assert!(
            round_trips * 100 <= renewed,
            "{round_trips} round trips for {renewed} renewals"
        );
        // Still ours in Redis: each key holds its token, and each release
        // finds its hold.
        let mut raw = raw(&server.url()).await;
        let held: Vec<Option<String>> = raw
            .mget(
                (0..HOLDS)
                    .map(|i| format!("test:many-{i}"))
                    .collect::<Vec<_>>(),
            )
            .await
            .unwrap();
        for (guard, held) in guards.iter().zip(&held) {
            assert_eq!(held.as_deref(), Some(guard.token()));
        }
        for guard in guards {
            assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
        }
    });
}

/// Holds released while their renewals wait in a batch (releasing 1,000
/// holds one after the other spans several batch windows): each release
/// finds its hold, and no renewal queued or sent after it brings a key
/// back (the scripts compare the owner token).
#[test]
fn holds_released_while_their_renewals_wait_leave_nothing_behind() {
    const HOLDS: usize = 1_000;
    const TTL: Duration = Duration::from_millis(600);
    let server = RedisServer::start();
    recorded(|snapshotter| async move {
        let c = client(&server.url()).await;
        let mut guards = Vec::with_capacity(HOLDS);
        for i in 0..HOLDS {
            let lock = c.lock(format!("released-{i}"), TTL).unwrap();
            guards.push(lock.with_watchdog().try_acquire().await.unwrap().unwrap());
        }
        tokio::time::sleep(TTL / 2).await;
        snapshotter.snapshot();
        for guard in guards {
            assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
        }
        // Whatever renewal was on its way has landed by now.
        tokio::time::sleep(TTL / 2).await;
        let left: u64 = redis::cmd("DBSIZE")
            .query_async(&mut raw(&server.url()).await)
            .await
            .unwrap();
        assert_eq!(left, 0, "keys left after every release");
        let count = counters(&snapshotter);
        assert_eq!(count(LOST), 0);
        assert_eq!(count(RENEWALS_FAILED), 0);
    });
}

/// A flushed script cache (`SCRIPT FLUSH`) under batched renewals: the
/// batch loads the script and sends those renewals again, and no hold
/// lapses. Semaphore permits, read-write holds and locks share batches.
#[test]
fn batched_renewals_survive_a_flushed_script_cache_across_kinds() {
    const EACH: usize = 100;
    const TTL: Duration = Duration::from_millis(600);
    let server = RedisServer::start();
    recorded(|snapshotter| async move {
        let c = client(&server.url()).await;
        let mut locks = Vec::new();
        let mut permits = Vec::new();
        let mut readers = Vec::new();
        let semaphore = c.semaphore("flushed-sem", EACH as u64, TTL).unwrap();
        let semaphore = semaphore.with_watchdog();
        for i in 0..EACH {
            let lock = c.lock(format!("flushed-{i}"), TTL).unwrap();
            locks.push(lock.with_watchdog().try_acquire().await.unwrap().unwrap());
            permits.push(semaphore.try_acquire().await.unwrap().expect("a permit"));
            let rw = c.rwlock(format!("flushed-rw-{i}"), TTL).unwrap();
            readers.push(rw.with_watchdog().try_read().await.unwrap().unwrap());
        }
        snapshotter.snapshot();
        let until = Instant::now() + TTL * 2;
        while Instant::now() < until {
            server.command(&["SCRIPT", "FLUSH"]).unwrap();
            tokio::time::sleep(TTL / 6).await;
        }
        let count = counters(&snapshotter);
        assert_eq!(count(LOST), 0, "holds lost");
        let renewed = count("latchkey_renewals_total{kind=semaphore,outcome=ok}");
        assert!(renewed >= (EACH * 3) as u64, "{renewed} permit renewals");
        let round_trips = count(ROUND_TRIPS);
        let all = renewed * 3;
        println!(
            "{} holds: {all} renewals in {round_trips} round trips",
            EACH * 3
        );
        assert!(round_trips * 10 <= all, "{round_trips} round trips");
        for guard in locks {
            assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
        }
        for guard in permits {
            assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
        }
        for guard in readers {
            assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
        }
    });
}

/// What N watchdog holds cost while they are held: round trips, client and
/// server CPU. Not a check (speed targets live in the bench): run it by
/// hand, `cargo test -p latchkey-redis --test suite
/// lock::watchdog_batch::measure -- --ignored --nocapture`
/// (`LATCHKEY_MEASURE_HOLDS`, default 10,000; `LATCHKEY_MEASURE_TTL_MS`,
/// default 3,000).
#[test]
#[ignore = "a measurement, run by hand"]
fn measure_renewals_of_many_holds() {
    let holds: usize = std::env::var("LATCHKEY_MEASURE_HOLDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let ttl = std::env::var("LATCHKEY_MEASURE_TTL_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map_or(Duration::from_secs(3), Duration::from_millis);
    const HELD: Duration = Duration::from_secs(10);
    let server = RedisServer::start();
    recorded(|snapshotter| async move {
        let c = client(&server.url()).await;
        let mut guards = Vec::with_capacity(holds);
        let began = Instant::now();
        for i in 0..holds {
            let lock = c.lock(format!("m-{i}"), ttl).unwrap().with_watchdog();
            guards.push(lock.try_acquire().await.unwrap().unwrap());
        }
        let acquiring = began.elapsed();
        let mut raw = raw(&server.url()).await;
        snapshotter.snapshot();
        let (cpu_before, server_before) = (process_cpu(), server_cpu(&mut raw).await);
        tokio::time::sleep(HELD).await;
        let (cpu, server) = (
            process_cpu() - cpu_before,
            server_cpu(&mut raw).await - server_before,
        );
        let count = counters(&snapshotter);
        let (renewed, round_trips) = (count(RENEWALS_OK), count(ROUND_TRIPS));
        let lost = guards.iter().filter(|g| !g.is_held()).count();
        println!(
            "{holds} holds, TTL {ttl:?}, held {HELD:?} (acquired in {acquiring:.2?}): \
             {renewed} renewals, {round_trips} round trips ({:.1}/s, {:.3} % of renewals), \
             client CPU {cpu:.2} s, server CPU {server:.2} s, {lost} lost",
            round_trips as f64 / HELD.as_secs_f64(),
            round_trips as f64 * 100.0 / renewed.max(1) as f64,
        );
        for guard in guards {
            let _released = guard.release().await.unwrap();
        }
    });
}

/// This process's CPU time (user + system), in seconds.
fn process_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields 14 and 15 (utime, stime) after the command's parentheses.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// The server's CPU time (`used_cpu_sys` + `used_cpu_user`), in seconds.
async fn server_cpu(raw: &mut redis::aio::MultiplexedConnection) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(raw)
        .await
        .unwrap();
    info.lines()
        .filter(|l| l.starts_with("used_cpu_sys:") || l.starts_with("used_cpu_user:"))
        .filter_map(|l| l.split_once(':')?.1.trim().parse::<f64>().ok())
        .sum()
}

/// The counters recorded since the last call (a snapshot drains them), by
/// series or, for a bare name, summed over its series.
fn counters(snapshotter: &Snapshotter) -> impl Fn(&str) -> u64 {
    let mut recorded = Recorded::default();
    recorded.add(snapshotter);
    move |series: &str| recorded.sum(series)
}
