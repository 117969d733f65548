//! Several locks at once (`lock_all`) beside a plain lock of one of the
//! same names, model-checked: bounded exhaustive searches, seeded random
//! walks of larger configurations, and the mutants each must catch.
//!
//! The figures (states, depth, time) print with `--nocapture`; they are in
//! docs/reliability.md, "Model checking the protocol".

use std::time::Instant;

use latchkey_sim::model::explore::Stats;
use latchkey_sim::model::lock::Faults;
use latchkey_sim::model::multi::{Config, Kind, MultiModel, Mutant};

/// Two names; a `lock_all` of both and a plain lock of the first; a TTL of
/// 10 ms in ticks of 2 ms, 16 ms of time, at most `max_faults` faults.
fn small(clients: Vec<Kind>, max_faults: u8) -> Config {
    Config {
        names: 2,
        clients,
        holds: 1,
        ttl: 10,
        tick: 2,
        idle: 6,
        max_time: Some(16),
        max_faults,
        fenced: true,
        watchdog: true,
        faults: Faults::ALL,
        mutant: None,
    }
}

fn search(what: &str, config: Config) -> Result<Stats, String> {
    let model = MultiModel::new(config).map_err(|e| format!("{what}: {e}"))?;
    let started = Instant::now();
    let stats = model
        .search(3_000_000)
        .map_err(|v| format!("{what}: {v}"))?;
    eprintln!(
        "{what}: {} states, {} transitions, depth {}, {:.2?}",
        stats.states,
        stats.transitions,
        stats.depth,
        started.elapsed()
    );
    Ok(stats)
}

#[test]
fn probe() {
    for (what, cfg) in [
        ("multi+plain 0f", small(vec![Kind::Multi(3), Kind::Plain(0)], 0)),
        ("multi+multi+plain 0f", small(vec![Kind::Multi(3), Kind::Multi(3), Kind::Plain(1)], 0)),
        ("multi+plain 1f", small(vec![Kind::Multi(3), Kind::Plain(0)], 1)),
        ("keeper+plain 1f", small(vec![Kind::Keeper(0), Kind::Plain(0)], 1)),
        ("keeper+multi 1f", small(vec![Kind::Keeper(0), Kind::Multi(3)], 1)),
    ] {
        if let Err(e) = search(what, cfg) { eprintln!("{e}"); }
    }
}
