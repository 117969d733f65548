//! Signals, model-checked: every interleaving of waits, `signal_one.lua`
//! and broadcasts on two names for small configurations, seeded random
//! walks of larger ones, and the mutants each run must catch.
//!
//! The figures (states, depth, time) print with `--nocapture`; they are in
//! docs/reliability.md, "Model checking the protocol".

use std::time::Instant;

use latchkey_sim::model::explore::Stats;
use latchkey_sim::model::lock::Faults;
use latchkey_sim::model::signal::{Config, Mutant, SignalModel};
use latchkey_sim::model::walks;

/// Two waiters on `job` and one on `jo*`, two waits each, three signals
/// of either kind on either name, at most `max_faults` lost replies or
/// messages.
fn small(max_faults: u8) -> Config {
    Config {
        waiters: [2, 1],
        rounds: 2,
        sends: 3,
        max_faults,
        faults: Faults::ALL,
        mutant: None,
    }
}

fn search(what: &str, config: Config) -> Result<Stats, String> {
    let model = SignalModel::new(config).map_err(|e| format!("{what}: {e}"))?;
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
fn every_state_of_signals_with_one_fault_keeps_the_promises() {
    let stats = search("signals, 2+1 waiters, 3 sends, 1 fault", small(1))
        .unwrap_or_else(|e| panic!("{e}"));
    // A search that stopped early would count far fewer.
    assert!(stats.states > 10_000, "{stats:?}");
}

#[test]
fn random_walks_of_many_waiters_keep_the_promises() {
    // Six waiters on `job`, three on `jo*`, 200 signals, eight faults (the
    // configuration `./dev sim --seconds N` walks too).
    let model = SignalModel::new(walks::signal()).unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    let (mut steps, mut taken) = (0, 0);
    for seed in 1..=8 {
        let (n, last) = model.walk(seed, 2000).unwrap_or_else(|v| panic!("{v}"));
        steps += n;
        taken += last
            .waiters
            .iter()
            .map(|w| usize::from(w.taken))
            .sum::<usize>();
    }
    eprintln!(
        "random walks: 8 walks, {steps} steps, {taken} signals taken, {:.2?}",
        started.elapsed()
    );
    // Walks in which no signal reached anyone would check little.
    assert!(taken > 100, "{taken} signals taken");
}

/// A mutant's configuration passes without it and fails with it.
fn caught(what: &str, config: Config, mutant: Mutant) -> String {
    if let Err(e) = search(&format!("{what} (unmutated)"), config.clone()) {
        panic!("the control's configuration fails without the mutant: {e}");
    }
    let model = SignalModel::new(Config {
        mutant: Some(mutant),
        ..config
    })
    .unwrap_or_else(|e| panic!("{e}"));
    match model.search(2_000_000) {
        Ok(stats) => panic!("{what}: the mutant {mutant:?} was not caught ({stats:?})"),
        Err(v) => {
            eprintln!("{what}: caught\n{v}");
            v.message.clone()
        }
    }
}

#[test]
fn a_signal_one_that_wakes_two_is_caught() {
    let why = caught("signal_one waking two", small(0), Mutant::WakesTwo);
    assert!(why.contains("delivered 2 times"), "{why}");
}

#[test]
fn an_unescaped_waiters_glob_is_caught() {
    let why = caught("unescaped glob", small(0), Mutant::GlobUnescaped);
    assert!(why.contains("another name"), "{why}");
}
