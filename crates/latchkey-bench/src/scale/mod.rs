//! Scenario `scale`: how latchkey's costs grow with the number of names,
//! waiters and holds, on one private redis-server, every point measured in
//! the same run (the fifth curve on private Redis Clusters). Five curves,
//! each in its own file:
//!
//! 1. [`memory`]: distinct names over time: `used_memory` and keys left
//!    after N holds of N distinct names, for a lock, a fenced lock, a
//!    semaphore, an election and a latch; which keys stay for ever (no TTL)
//!    and which expire later (the longest TTL left), measured, not assumed.
//! 2. [`waiters`]: W waiting tasks on one lock, plain and fair: hand-off
//!    gap p50/p99, commands and Redis CPU per hand-off, Redis CPU per
//!    second while they only wait, client RSS per waiter.
//! 3. [`holds`]: N leases held at once by one process with the watchdog
//!    (TTL 3 s): renewals per second, client and Redis CPU, RSS per lease,
//!    lapses.
//! 4. [`names`]: 64 tasks cycling over N distinct lock names, against raw
//!    redis-rs sending the same commands.
//! 5. [`cluster`]: curves 4 and 2 (64 plain waiters) on a Redis Cluster of
//!    3 and 6 primaries beside the single server, each primary's share of
//!    the commands and its CPU, and a skewed name set's load on one shard.
//!    Information, no targets: the nodes share the client's two cores.
//!
//! Targets (same run): hand-off p99 at the most waiters ≤ 3× its value at
//! 8, plain and fair; Redis CPU a second of the most fair waiters only
//! waiting ≤ 2× that of 8 (waiting costs Redis per process, not per
//! waiter); names-in-flight cycles/s at the most names ≥ 0.90×
//! raw redis-rs; 0 lapses among the held leases (and no failed hold in
//! curve 1). A full (not `--quick`) run writes the plot `bench/scale.svg`
//! and this scenario's report to `bench/SCALE.md` (a run of every scenario
//! also puts it in `bench/RESULTS.md`).

mod cluster;
mod holds;
mod memory;
mod names;
mod plot;
mod probe;
mod waiters;

use std::time::{Duration, Instant};

use latchkey_testkit::RedisServer;

use crate::Report;

/// Where a full run writes this scenario's report.
pub const PATH: &str = "bench/SCALE.md";

struct Sizes {
    memory: &'static [u64],
    waiters: &'static [usize],
    waiter_rounds: usize,
    waiting: Duration,
    handoff_window: Duration,
    holds: &'static [usize],
    hold_window: Duration,
    names: &'static [usize],
    names_rounds: usize,
    names_window: Duration,
    cluster: cluster::Sizes,
}

const FULL: Sizes = Sizes {
    memory: &[10_000, 100_000, 1_000_000],
    waiters: &[8, 64, 512, 4096],
    waiter_rounds: 3,
    waiting: Duration::from_secs(3),
    handoff_window: Duration::from_secs(2),
    holds: &[1_000, 10_000, 100_000],
    hold_window: Duration::from_secs(10),
    names: &[1_000, 100_000, 1_000_000],
    names_rounds: 3,
    names_window: Duration::from_secs(2),
    cluster: cluster::Sizes {
        primaries: &[3, 6],
        names: 100_000,
        rounds: 3,
        window: Duration::from_secs(2),
        handoff_window: Duration::from_secs(2),
    },
};

const QUICK: Sizes = Sizes {
    memory: &[1_000, 10_000],
    waiters: &[8, 64, 512],
    waiter_rounds: 1,
    waiting: Duration::from_secs(1),
    handoff_window: Duration::from_millis(700),
    holds: &[1_000, 10_000],
    hold_window: Duration::from_secs(4),
    names: &[1_000, 10_000],
    names_rounds: 2,
    names_window: Duration::from_millis(700),
    cluster: cluster::Sizes {
        primaries: &[3],
        names: 1_000,
        rounds: 2,
        window: Duration::from_millis(700),
        handoff_window: Duration::from_millis(700),
    },
};

pub fn run(quick: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Report>>> {
    Box::pin(scenario(quick))
}

async fn scenario(quick: bool) -> Report {
    let sizes = if quick { &QUICK } else { &FULL };
    let server = RedisServer::start();
    let url = server.url();
    let started = Instant::now();
    let mut missed = Vec::new();
    let mut notes = Vec::new();
    let mut took = Vec::new();

    // 1. Distinct names over time.
    let t = Instant::now();
    let mut memory_rows = Vec::new();
    for kind in memory::KINDS {
        for &n in sizes.memory {
            match memory::row(&server, kind, n).await {
                Ok(row) => {
                    if row.failed > 0 {
                        missed.push(format!(
                            "scale: {} of {n} {} holds failed",
                            row.failed,
                            kind.label()
                        ));
                    }
                    memory_rows.push(row);
                }
                Err(e) => notes.push(format!("{} × {n}: {e}", kind.label())),
            }
        }
    }
    took.push(("names over time", t.elapsed()));

    // 2. Waiters on one lock.
    let t = Instant::now();
    let _ = probe::flush(&server);
    let mut by_point: std::collections::BTreeMap<(usize, bool), Vec<waiters::Row>> =
        Default::default();
    for round in 0..sizes.waiter_rounds {
        for (i, &w) in sizes.waiters.iter().enumerate() {
            for fair in [(i + round) % 2 == 1, (i + round) % 2 == 0] {
                match waiters::row(
                    &url,
                    &[&server],
                    w,
                    fair,
                    sizes.waiting,
                    sizes.handoff_window,
                )
                .await
                {
                    Ok(row) => by_point.entry((w, fair)).or_default().push(row),
                    Err(e) => notes.push(format!("{w} waiters (fair: {fair}), round {round}: {e}")),
                }
            }
        }
    }
    let waiter_rows: Vec<waiters::Row> = by_point
        .into_values()
        .filter_map(waiters::median_round)
        .collect();
    for fair in [false, true] {
        let mine: Vec<&waiters::Row> = waiter_rows.iter().filter(|r| r.fair == fair).collect();
        let (Some(first), Some(last)) = (mine.first(), mine.last()) else {
            continue;
        };
        if last.waiters > first.waiters && last.p99 > first.p99 * 3 {
            missed.push(format!(
                "scale: {} hand-off p99 with {} waiters is {} µs, {:.1}× its {} µs with {} (target ≤ 3×)",
                if fair { "fair" } else { "plain" },
                last.waiters,
                crate::stats::us(last.p99),
                last.p99.as_secs_f64() / first.p99.as_secs_f64().max(1e-9),
                crate::stats::us(first.p99),
                first.waiters
            ));
        }
    }
    let fair_rows: Vec<&waiters::Row> = waiter_rows.iter().filter(|r| r.fair).collect();
    if let (Some(first), Some(last)) = (fair_rows.first(), fair_rows.last()) {
        if last.waiters > first.waiters
            && last.idle_redis_ms_per_sec > first.idle_redis_ms_per_sec * 2.0
        {
            missed.push(format!(
                "scale: {} fair waiters only waiting cost Redis {:.2} ms of CPU a second, {:.1}× the {:.2} ms of {} (target ≤ 2×)",
                last.waiters,
                last.idle_redis_ms_per_sec,
                last.idle_redis_ms_per_sec / first.idle_redis_ms_per_sec.max(1e-9),
                first.idle_redis_ms_per_sec,
                first.waiters
            ));
        }
    }
    took.push(("waiters", t.elapsed()));

    // 3. Holds per process.
    let t = Instant::now();
    let mut hold_rows = Vec::new();
    for &n in sizes.holds {
        match holds::row(&server, n, sizes.hold_window).await {
            Ok(row) => {
                if row.lapses > 0 {
                    missed.push(format!(
                        "scale: {} of {n} watchdog-held leases lapsed ({}) (target 0)",
                        row.lapses, row.why
                    ));
                }
                hold_rows.push(row);
            }
            Err(e) => {
                missed.push(format!("scale: {n} held leases: {e}"));
                notes.push(format!("{n} held leases: {e}"));
            }
        }
    }
    took.push(("holds", t.elapsed()));

    // 4. Names in flight.
    let t = Instant::now();
    let _ = probe::flush(&server);
    let mut name_rows = Vec::new();
    for &n in sizes.names {
        match names::row(&url, n, sizes.names_rounds, sizes.names_window).await {
            Ok(row) => name_rows.push(row),
            Err(e) => notes.push(format!("{n} names in flight: {e}")),
        }
    }
    if let Some(last) = name_rows.last() {
        if last.ratio < 0.90 {
            missed.push(format!(
                "scale: with {} names in flight latchkey does {:.3}× raw redis-rs's cycles/s (target ≥ 0.90×)",
                last.names, last.ratio
            ));
        }
    }
    took.push(("names in flight", t.elapsed()));

    // 5. Redis Cluster.
    let t = Instant::now();
    let _ = probe::flush(&server);
    let clustered = cluster::curve(&server, &sizes.cluster).await;
    notes.extend(clustered.notes.iter().map(|n| format!("cluster: {n}")));
    took.push(("cluster", t.elapsed()));

    let plot_note = if quick || waiter_rows.is_empty() {
        String::new()
    } else {
        match plot::write(&waiter_rows) {
            Ok(path) => format!(" Plot: [{path}]({}).", path.trim_start_matches("bench/")),
            Err(e) => format!(" Plot not written: {e}."),
        }
    };
    let total = started.elapsed();
    let took_line = took
        .iter()
        .map(|(what, d)| format!("{what} {:.0} s", d.as_secs_f64()))
        .collect::<Vec<_>>()
        .join(", ");
    let body = format!(
        "One private redis-server (no persistence; and private Redis Clusters for the last curve), one client process (this one, tokio with 2 workers). \
         This scenario took {:.0} s ({took_line}); the Redis Cluster curve runs its own servers.\n\n\
         ### Distinct names over time (memory)\n\n\
         One warm-up hold (scripts loaded, connections open), `FLUSHALL`, then N holds of N distinct names by 64 tasks of one client, each begun and ended (a lock or semaphore: \
         `try_acquire` + `release`; an election: `try_campaign` + `resign`; a latch: `create(1)` + `count_down`); \
         TTL 1 h (nothing left expires before it is counted). Bytes per name: `used_memory` growth / N, read right after the \
         holds ended. Keys: `DBSIZE`; then `SCAN` + `PTTL` of every key: keys with no TTL stay for ever; \
         keys with a TTL leave later (the longest TTL left is shown). Key shapes: digits written `#`.\n\n{}\n\
         ### Waiters on one lock\n\n\
         W tasks of one client on one lock; {} rounds, the points interleaved (plain and fair alternating \
         first); each row is the round with the median p99 (the range of the rounds' p99 beside it). *Waiting only*: a holder holds while the W tasks wait in `acquire` \
         ({:.0} s measured after they settled): Redis CPU (schedstat of redis-server) per second, commands the \
         client sent per second, and this process's RSS growth per waiter (RSS, not heap). *Hand-offs*: then \
         every task loops acquire → release (no work held) for {:.1} s, a task that released standing aside until \
         another acquired; gap = start of a release → the next holder has the lock. Commands per hand-off: what \
         the client sent (`INFO commandstats`, as in the handoff scenario); Redis's and this process's CPU per hand-off likewise. \
         Target: p99 at the most waiters ≤ 3× p99 at 8.{plot_note}\n\n{}\n\
         ### Holds per process (watchdog)\n\n\
         N locks (distinct names) held at once by one client with `with_watchdog()`, TTL {:.0} s (a renewal \
         every {:.0} s); measured over the window once all are held. Renewals: `EVALSHA` calls in commandstats \
         (the extend script is the only script a held lock runs). Client CPU: this process \
         (`/proc/self/task/*/schedstat`) per held lease per second. RSS per lease: growth since before the first \
         acquisition (RSS, not heap). Lapses: guards not `is_held()` at the end, or whose `release` did not find \
         them `Owned`. Target: 0.\n\n{}\n\
         ### Names in flight\n\n\
         64 tasks, one client, each cycle on a random one of N names (the `Lock` made from its name every cycle), \
         `acquire` + `release`; raw redis-rs sends the same two commands from 64 tasks over one multiplexed \
         connection, formatting its key per cycle (the `many_keys` scenario's code); {:.1} s windows, rounds \
         alternating, ratio per round then the median. Target at the most names: ≥ 0.90× raw.\n\n{}\n\
         ### Redis Cluster\n\n\
         **Information, not throughput claims**: this is a 2-core machine, where every node of the cluster \
         (and the single server) and the client share the two cores, so a cluster of more primaries has no more \
         CPU here, only more processes; a cluster of separate machines would scale where this one cannot. \
         Private clusters of {} primaries (no replicas), one at a time, started by the test kit (which waits \
         for `cluster_state:ok` on every node).\n\n\
         *Names in flight*: the loop above (64 tasks, one client, `acquire` + `release` on a random one of N \
         names) on the cluster, and on the single server in the same rounds ({:.1} s windows, alternating); \
         then, on the cluster only, one window each of two skewed name sets: 90 % of the cycles on 1 % of the \
         names (the hot names hash to a few slots, so to a few primaries), and every name in the one hash tag \
         `{{hot}}` (one slot: one primary, the worst case, whatever the number of primaries). Per primary \
         (in the kit's order): its share of the commands the cluster ran (`INFO commandstats`, the snapshots' \
         `INFO` left out) and its Redis CPU per second (schedstat of its redis-server). The share of commands is the \
         measure of load: CPU here is not proportional to it, because a server woken for a few commands at a \
         time pays its system calls for each few, and one that is sent many at once pays them once for many \
         (a primary with a third of the commands of the hot one can use as much CPU). With few names the hot 1 % \
         is a handful of locks that the 64 tasks wait on each other for: that row's cycles/s then shows the contention, \
         not a shard's limit.\n\n{}\n\
         *Hand-off*: {} tasks of one client on one plain lock, as in the waiters curve ({:.1} s of hand-offs), \
         on each cluster and on the single server, rounds alternating (each row: the round with the median p99, the range of the rounds' p99 beside it); \
         commands and Redis CPU summed over the cluster's nodes. \
         The same 2-core caveat holds.\n\n{}{}",
        total.as_secs_f64(),
        memory::table(&memory_rows),
        sizes.waiter_rounds,
        sizes.waiting.as_secs_f64(),
        sizes.handoff_window.as_secs_f64(),
        waiters::table(&waiter_rows),
        holds::TTL.as_secs_f64(),
        (holds::TTL / 3).as_secs_f64(),
        holds::table(&hold_rows),
        sizes.names_window.as_secs_f64(),
        names::table(&name_rows),
        sizes
            .cluster
            .primaries
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(" and "),
        sizes.cluster.window.as_secs_f64(),
        cluster::names_table(&clustered.names),
        cluster::WAITERS,
        sizes.cluster.handoff_window.as_secs_f64(),
        cluster::handoff_table(&clustered.handoffs),
        if notes.is_empty() {
            String::new()
        } else {
            format!(
                "\nSkipped or incomplete:\n{}\n",
                notes.iter().map(|n| format!("- {n}\n")).collect::<String>()
            )
        },
    );
    let report = Report {
        title: "Scale: names, waiters, holds, cluster".into(),
        body,
        missed,
    };
    if !quick {
        if let Err(e) = write(&report) {
            eprintln!("latchkey-bench: {e}");
        }
    }
    report
}

/// Writes `bench/SCALE.md`: this scenario's report, with the machine.
fn write(report: &Report) -> Result<(), String> {
    let mut out = format!(
        "# latchkey scale benchmark\n\nWritten by `./dev bench -- scale` (`cargo run --release -p \
         latchkey-bench -- scale`; `--quick` writes nothing).\n\n- machine: {}\n- redis-server: {}\n- written: {}\n\n",
        crate::results::machine(),
        crate::results::redis_version(),
        crate::results::unix_time(),
    );
    if report.missed.is_empty() {
        out.push_str("All targets met.\n\n");
    } else {
        out.push_str("**Targets missed:**\n\n");
        for m in &report.missed {
            out.push_str(&format!("- {m}\n"));
        }
        out.push('\n');
    }
    out.push_str(&format!("## {}\n\n{}", report.title, report.body));
    let path = crate::peers::repo_root().join(PATH);
    std::fs::write(&path, out).map_err(|e| format!("cannot write {}: {e}", path.display()))
}
