//! Curve 2, waiters on one lock: W tasks of one process (one client) on one
//! lock, plain and fair.
//!
//! 1. **Waiting only.** A holder takes the lock; W tasks call `acquire` and
//!    wait. Once they have settled (1 s, plus 0.5 ms per waiter to join), for
//!    a few seconds: Redis CPU per second (`/proc/PID/task/*/schedstat` of
//!    redis-server), the commands the client sends per second (the fair
//!    queue renews every waiter's lease), and this process's RSS growth
//!    since before the waiters were spawned, per waiter (RSS, not heap).
//! 2. **Hand-offs.** The holder releases, and every task loops acquire →
//!    release (no work while held) for a fixed window. A task that released
//!    stands aside until another task has acquired (as in the handoff
//!    scenario, so every gap ends in a *waiter's* acquisition). Gap = the
//!    start of a release → the next holder has the lock (`CLOCK_MONOTONIC`
//!    stamps, [`crate::stats::gaps`]); p50, p99. Commands per hand-off: what
//!    the client sent (`INFO commandstats`, counted as in the handoff
//!    scenario, [`crate::peers::Lib::sent`]); Redis's and this process's
//!    CPU per hand-off.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use latchkey_testkit::RedisServer;
use tokio_util::sync::CancellationToken;

use super::probe::{self, Snapshot};
use crate::peers;
use crate::stats::{gaps, mono_ns, quantile};

pub struct Row {
    pub waiters: usize,
    pub fair: bool,
    pub p50: Duration,
    pub p99: Duration,
    /// The lowest and highest p99 of the rounds (see [`median_round`]).
    pub p99_range: (Duration, Duration),
    pub rounds: usize,
    pub handoffs: usize,
    pub handoffs_per_sec: f64,
    pub cmds_per_handoff: f64,
    pub redis_us_per_handoff: f64,
    pub client_us_per_handoff: f64,
    /// While the W tasks only wait.
    pub idle_redis_ms_per_sec: f64,
    pub idle_cmds_per_sec: f64,
    pub rss_per_waiter: f64,
}

/// One point: `waiters` tasks on one lock, `idle` of waiting only, then
/// `window` of hand-offs.
///
/// `url` is what the client connects to; `servers` are where its commands
/// and Redis CPU are counted: one server, or every node of a cluster
/// (summed).
pub async fn row(
    url: &str,
    servers: &[&RedisServer],
    waiters: usize,
    fair: bool,
    idle: Duration,
    window: Duration,
) -> Result<Row, String> {
    let lib = if fair {
        &peers::LATCHKEY_FAIR
    } else {
        &peers::LATCHKEY
    };
    let client = latchkey::Client::connect(url)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let mut lock = client
        .lock(
            format!("scale:waiters:{waiters}:{fair}"),
            crate::worker::TTL,
        )
        .map_err(|e| e.to_string())?;
    if fair {
        lock = lock.fair().map_err(|e| e.to_string())?;
    }
    let holder = lock.acquire().await.map_err(|e| format!("holder: {e}"))?;
    let rss0 = probe::rss();

    let stop = CancellationToken::new();
    let (turns, _) = tokio::sync::watch::channel(0u64);
    let turns = Arc::new(turns);
    let events = Arc::new(Mutex::new((Vec::new(), Vec::new())));
    let joins: Vec<_> = (0..waiters)
        .map(|_| {
            let (lock, stop, turns, events) =
                (lock.clone(), stop.clone(), turns.clone(), events.clone());
            tokio::spawn(async move { waiter(lock, stop, turns, events).await })
        })
        .collect();

    // 1. Waiting only.
    tokio::time::sleep(Duration::from_secs(1) + Duration::from_micros(500) * waiters as u32).await;
    let rss1 = probe::rss();
    let a = Snapshot::take_all(servers);
    tokio::time::sleep(idle).await;
    let b = Snapshot::take_all(servers);
    let idle_secs = b.secs_since(&a);
    let idle_sent = lib.sent(&a.calls, &b.calls, 0);

    // 2. Hand-offs.
    let released_first = mono_ns();
    let c = Snapshot::take_all(servers);
    let owned = holder
        .release()
        .await
        .map_err(|e| format!("holder release: {e}"))?;
    if owned != latchkey::Ownership::Owned {
        return Err(format!("the holder found the lock not ours ({owned:?})"));
    }
    tokio::time::sleep(window).await;
    stop.cancel();
    let mut errors = Vec::new();
    for j in joins {
        match j.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => errors.push(e),
            Err(e) => errors.push(e.to_string()),
        }
    }
    let d = Snapshot::take_all(servers);
    client.flush(Duration::from_secs(5)).await;
    if let Some(e) = errors.first() {
        return Err(format!("{} task(s) failed, the first: {e}", errors.len()));
    }
    let (acquired, mut released) =
        std::mem::take(&mut *events.lock().unwrap_or_else(|p| p.into_inner()));
    released.push(released_first);
    let acquisitions = acquired.len() as u64;
    let mut gaps = gaps(&acquired, &released);
    if gaps.is_empty() {
        return Err("no hand-off happened in the window".into());
    }
    let handoffs = gaps.len();
    let sent = lib.sent(&c.calls, &d.calls, acquisitions);
    Ok(Row {
        waiters,
        fair,
        p50: quantile(&mut gaps, 0.5),
        p99: quantile(&mut gaps, 0.99),
        p99_range: (Duration::ZERO, Duration::ZERO),
        rounds: 1,
        handoffs,
        handoffs_per_sec: handoffs as f64 / d.secs_since(&c),
        cmds_per_handoff: sent as f64 / handoffs as f64,
        redis_us_per_handoff: d.redis_cpu_since(&c).as_secs_f64() * 1e6 / handoffs as f64,
        client_us_per_handoff: d.client_cpu_since(&c).as_secs_f64() * 1e6 / handoffs as f64,
        idle_redis_ms_per_sec: b.redis_cpu_since(&a).as_secs_f64() * 1e3 / idle_secs,
        idle_cmds_per_sec: idle_sent as f64 / idle_secs,
        rss_per_waiter: (rss1 as f64 - rss0 as f64) / waiters as f64,
    })
}

/// The round whose p99 is the median of the rounds', with the range of
/// the rounds' p99 (a burst of load from elsewhere on a shared machine
/// spoils one round's tail, not the result).
pub fn median_round(mut rounds: Vec<Row>) -> Option<Row> {
    rounds.sort_by_key(|r| r.p99);
    let range = (rounds.first()?.p99, rounds.last()?.p99);
    let n = rounds.len();
    let mut row = rounds.swap_remove(n / 2);
    row.p99_range = range;
    row.rounds = n;
    Some(row)
}

type Events = Arc<Mutex<(Vec<u64>, Vec<u64>)>>;

/// One task: acquire, release at once, stand aside until someone else
/// acquired; until `stop`.
async fn waiter(
    lock: latchkey::Lock,
    stop: CancellationToken,
    turns: Arc<tokio::sync::watch::Sender<u64>>,
    events: Events,
) -> Result<(), String> {
    let mut seen = turns.subscribe();
    let (mut acquired, mut released) = (Vec::new(), Vec::new());
    loop {
        let guard = tokio::select! {
            g = lock.acquire() => g.map_err(|e| format!("acquire: {e}"))?,
            _ = stop.cancelled() => break,
        };
        acquired.push(mono_ns());
        let mut mine = 0;
        turns.send_modify(|t| {
            *t += 1;
            mine = *t;
        });
        released.push(mono_ns());
        let owned = guard.release().await.map_err(|e| format!("release: {e}"))?;
        if owned != latchkey::Ownership::Owned {
            return Err(format!("the lock was lost while held ({owned:?})"));
        }
        if stop.is_cancelled() {
            break;
        }
        tokio::select! {
            r = seen.wait_for(|t| *t > mine) => { r.map_err(|e| e.to_string())?; }
            _ = stop.cancelled() => break,
        }
    }
    let mut all = events.lock().unwrap_or_else(|p| p.into_inner());
    all.0.extend(acquired);
    all.1.extend(released);
    Ok(())
}

pub fn table(rows: &[Row]) -> String {
    let us = crate::stats::us;
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.waiters.to_string(),
                if r.fair { "fair" } else { "plain" }.to_owned(),
                us(r.p50),
                us(r.p99),
                format!("{}–{}", us(r.p99_range.0), us(r.p99_range.1)),
                r.handoffs.to_string(),
                format!("{:.0}", r.handoffs_per_sec),
                format!("{:.2}", r.cmds_per_handoff),
                format!("{:.1}", r.redis_us_per_handoff),
                format!("{:.1}", r.client_us_per_handoff),
                format!("{:.2}", r.idle_redis_ms_per_sec),
                format!("{:.1}", r.idle_cmds_per_sec),
                format!("{:.0}", r.rss_per_waiter),
            ]
        })
        .collect();
    crate::stats::table(
        &[
            "waiters",
            "lock",
            "gap p50 µs",
            "gap p99 µs",
            "p99 of rounds µs",
            "hand-offs",
            "hand-offs/s",
            "cmds/hand-off",
            "redis CPU µs/hand-off",
            "client CPU µs/hand-off",
            "waiting only: redis CPU ms/s",
            "waiting only: cmds/s",
            "client RSS bytes/waiter",
        ],
        &cells,
    )
}
