//! Scenario `cached`: held while idle, `Lock::with_caching`.
//!
//! 1. **Cycles/s.** One task, one lock after the other: a `CachedLock`'s
//!    re-acquire + release (the hold kept in Redis, no round trip) beside a
//!    plain `Lock`'s acquire + release (two round trips), same options (TTL
//!    10 s, watchdog on), same client. Chunks interleaved, plain, cached,
//!    plain, cached, …, plain: each cached chunk's rate is divided by the
//!    rate of the two plain chunks around it; reported are the median
//!    rates and the median of those ratios. Target: ≥ 50×.
//! 2. **Hand-off from an idle cached holder.** A holder process (see
//!    [`crate::cached_holder`]) and a waiter in this process (a plain
//!    `Lock`, the same for both kinds), samples interleaved one by one:
//!    * *barging* (today's hand-off): the holder holds a plain lock, the
//!      waiter waits for it (its attempt has marked the holder's token, so
//!      the release publishes the wake-up), the holder releases. The gap
//!      is measured as [`crate::handoff`] measures it: from the start of
//!      the release (stamped in the holder's process) to the moment the
//!      waiter has the lock (stamped in this one), on `CLOCK_MONOTONIC`;
//!    * *from idle*: the holder took its cached lock and released it (the
//!      hold kept, idle, its token unmarked); the waiter asks. Here nothing
//!      stands between the waiter and the lock but the protocol from the
//!      moment it asks, so the gap runs from its acquire call to the moment
//!      it has the lock: its attempt marks the kept token and publishes
//!      `wanted`, the holder's keeper gives the hold back, the release
//!      wakes the waiter, which takes the lock.
//!
//!    p50 and p99 per round, median over rounds (as `handoff`). Target:
//!    the idle gap's p99 ≤ 2× the barging gap's p99. Reported beside it,
//!    not gated: the issue's "within one round trip + a PING's p99 of
//!    asking", as the idle p99 minus the barging p99 against the p99 of
//!    the loopback PINGs measured between the rounds. This half lives in
//!    [`crate::cached_handoff`].

use std::time::{Duration, Instant};

use latchkey_testkit::RedisServer;

use crate::cached_handoff::gap_figures;
use crate::cached_holder::{err, IDLE, WAIT};
use crate::stats::{median, table};
use crate::worker::TTL;
use crate::Report;

const TITLE: &str = "Held while idle";
/// Target: cached cycles/s at least this many times plain ones.
const CYCLE_RATIO: f64 = 50.0;

pub fn run(quick: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Report>>> {
    crate::on_worker(TITLE, Some("cached"), scenario(quick))
}

async fn scenario(quick: bool) -> Report {
    let server = RedisServer::start();
    let mut missed = Vec::new();
    let client = match latchkey::Client::connect(&server.url()).await {
        Ok(c) => c,
        Err(e) => {
            return Report {
                title: TITLE.into(),
                body: format!("Cannot connect: {e}\n"),
                missed: vec![format!("cached: cannot connect: {e}")],
            }
        }
    };
    let cycles = match cycle_figures(&client, quick).await {
        Ok(f) => f.section(&mut missed),
        Err(e) => {
            missed.push(format!("cached: the cycles failed: {e}"));
            format!("Cycles: failed: {e}\n")
        }
    };
    let gaps = match gap_figures(&server, &client, quick).await {
        Ok(f) => f.section(&mut missed),
        Err(e) => {
            missed.push(format!("cached: the hand-offs failed: {e}"));
            format!("Hand-offs: failed: {e}\n")
        }
    };
    client.flush(Duration::from_secs(2)).await;
    Report {
        title: TITLE.into(),
        body: format!("{cycles}\n{gaps}"),
        missed,
    }
}

struct CycleFigures {
    plain: f64,
    cached: f64,
    ratio: f64,
    /// The 25th and 75th percentiles of the ratios.
    spread: (f64, f64),
    /// Measured cached cycles whose acquire went to Redis (0 expected).
    from_redis: u64,
    cached_cycles: u64,
    rounds: usize,
    n_plain: u64,
    n_cached: u64,
}

async fn cycle_figures(client: &latchkey::Client, quick: bool) -> Result<CycleFigures, String> {
    let plain = client
        .lock("cycle-plain", TTL)
        .map_err(err)?
        .with_watchdog();
    let cached = client
        .lock("cycle-cached", TTL)
        .map_err(err)?
        .with_watchdog()
        .with_caching(IDLE)
        .map_err(err)?;
    let rounds = if quick { 6 } else { 20 };
    // Chunks of a few milliseconds each, whichever the lock.
    let (n_plain, n_cached) = if quick { (150, 5_000) } else { (200, 20_000) };
    plain_cycles(&plain, n_plain / 4).await?;
    cached_cycles(&cached, n_cached / 4).await?;
    let rate = |n: u64, t: Duration| n as f64 / t.as_secs_f64().max(1e-9);
    let mut before = plain_cycles(&plain, n_plain).await?;
    let (mut plains, mut cacheds, mut ratios) = (vec![rate(n_plain, before)], vec![], vec![]);
    let mut from_redis = 0;
    for _ in 0..rounds {
        let (t, went) = cached_cycles(&cached, n_cached).await?;
        from_redis += went;
        let after = plain_cycles(&plain, n_plain).await?;
        let around = rate(2 * n_plain, before + after);
        cacheds.push(rate(n_cached, t));
        plains.push(rate(n_plain, after));
        ratios.push(rate(n_cached, t) / around);
        before = after;
    }
    let _ = cached.give_back().await;
    let ratio = median(&mut ratios);
    let n = ratios.len();
    Ok(CycleFigures {
        plain: median(&mut plains),
        cached: median(&mut cacheds),
        ratio,
        spread: (ratios[n / 4], ratios[(3 * n) / 4]),
        from_redis,
        cached_cycles: rounds as u64 * n_cached,
        rounds,
        n_plain,
        n_cached,
    })
}

async fn plain_cycles(lock: &latchkey::Lock, n: u64) -> Result<Duration, String> {
    let started = Instant::now();
    for _ in 0..n {
        let guard = lock.acquire_until(WAIT).await.map_err(err)?;
        let released = guard.release().await.map_err(err)?;
        if released != latchkey::Ownership::Owned {
            return Err(format!("plain lock: release found {released:?}"));
        }
    }
    Ok(started.elapsed())
}

/// `n` cycles; their time, and how many of them took the lock from Redis.
async fn cached_cycles(lock: &latchkey::CachedLock, n: u64) -> Result<(Duration, u64), String> {
    let started = Instant::now();
    let mut from_redis = 0;
    for _ in 0..n {
        let guard = lock.acquire_until(WAIT).await.map_err(err)?;
        from_redis += u64::from(guard.took_from_redis());
        let released = guard.release().await.map_err(err)?;
        if released != latchkey::Ownership::Owned {
            return Err(format!("cached lock: release found {released:?}"));
        }
    }
    Ok((started.elapsed(), from_redis))
}

impl CycleFigures {
    fn section(&self, missed: &mut Vec<String>) -> String {
        let ok = self.ratio >= CYCLE_RATIO;
        if !ok {
            missed.push(format!(
                "cached: a kept hold's re-acquire + release runs {:.1}× the cycles/s of a plain lock's (target ≥ {CYCLE_RATIO:.0}×)",
                self.ratio
            ));
        }
        let rows = vec![
            vec![
                "`Lock` acquire + release (watchdog on)".into(),
                format!("{:.0}", self.plain),
                format!("{:.2}", 1e6 / self.plain),
                "1 (reference)".into(),
                String::new(),
                String::new(),
            ],
            vec![
                "`CachedLock` re-acquire + release (the hold kept)".into(),
                format!("{:.0}", self.cached),
                format!("{:.2}", 1e6 / self.cached),
                format!("{:.1}×", self.ratio),
                format!("{:.1}–{:.1}", self.spread.0, self.spread.1),
                format!("≥ {CYCLE_RATIO:.0}× {}", if ok { "✓" } else { "✗" }),
            ],
        ];
        format!(
            "Cycles, one task, one lock (TTL 10 s, watchdog on; the cached lock keeps its hold up to {} s idle): \
             chunks interleaved, {} plain cycles, {} cached cycles, {} plain, … ({} cached chunks); \
             ratio = a cached chunk's rate ÷ the rate of the two plain chunks around it, median \
             (the 25th–75th percentiles beside it); cycles/s = median over chunks. \
             Cached acquires that went to Redis while measured: {} of {}.\n\n{}",
            IDLE.as_secs(),
            self.n_plain,
            self.n_cached,
            self.n_plain,
            self.rounds,
            self.from_redis,
            self.cached_cycles,
            table(
                &[
                    "cycle",
                    "cycles/s",
                    "µs/cycle",
                    "cycles/s ÷ plain",
                    "middle half of the ratios",
                    "target",
                ],
                &rows
            )
        )
    }
}
