//! Signals, model-checked: every interleaving of waits, `signal_one.lua`
//! and broadcasts on two names for small configurations, seeded random
//! walks of larger ones, and the mutants each run must catch.
//!
//! The figures (states, depth, time) print with `--nocapture`; they are in
//! docs/reliability.md, "Model checking the protocol".

use latchkey_sim::model::common::Faults;
use latchkey_sim::model::common::{caught, search, walk_all};
use latchkey_sim::model::signal::{Config, Mutant};
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
    let taken = walk_all("signals taken", [walks::signal()], 1..=8, 2000, |last| {
        last.waiters.iter().map(|w| usize::from(w.taken)).sum()
    });
    // Walks in which no signal reached anyone would check little.
    assert!(taken > 100, "{taken} signals taken");
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
