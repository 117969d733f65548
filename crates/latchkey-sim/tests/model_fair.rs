//! The fair lock (queue, waiter leases, direct hand-off, leaving, revoke),
//! model-checked: bounded exhaustive searches, seeded random walks of
//! larger configurations, and the mutants each run must catch (so that a
//! checker that checks nothing cannot pass).
//!
//! The figures (states, depth, time) print with `--nocapture`; they are in
//! docs/reliability.md, "Model checking the protocol".

use std::time::Instant;

use latchkey_sim::model::explore::Stats;
use latchkey_sim::model::fair::{Config, FairModel, Faults, Mutant};

/// Two clients, a TTL of 10 ms and a waiter lease of 6 ms in ticks of
/// 2 ms (a waiter renews every 2 ms; a hand-off's key lives 6 ms), 16 ms
/// of time, fenced, with the watchdog.
fn small(max_faults: u8) -> Config {
    Config {
        clients: 2,
        holds: 1,
        ttl: 10,
        lease: 6,
        tick: 2,
        max_time: Some(16),
        max_faults,
        fenced: true,
        watchdog: true,
        leave: false,
        revokes: 0,
        faults: Faults::ALL,
        mutant: None,
    }
}

fn search(what: &str, config: Config) -> Result<Stats, String> {
    let model = FairModel::new(config).map_err(|e| format!("{what}: {e}"))?;
    let started = Instant::now();
    let stats = model
        .search(2_000_000)
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
fn every_state_of_two_fair_clients_with_one_fault_keeps_the_invariants() {
    let stats = search("fair, 2 clients, 1 fault", small(1)).unwrap_or_else(|e| panic!("{e}"));
    assert!(stats.states > 10_000, "{stats:?}");
}
