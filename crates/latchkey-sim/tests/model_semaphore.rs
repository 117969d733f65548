//! The semaphore (N permits, holds of k at once), model-checked: bounded
//! exhaustive searches, seeded random walks of larger configurations, and
//! the mutants each run must catch (so that a checker that checks nothing
//! cannot pass).
//!
//! The figures (states, depth, time) print with `--nocapture`; they are in
//! docs/reliability.md, "Model checking the protocol".

use latchkey_sim::model::common::Faults;
use latchkey_sim::model::common::{caught, search, walk_all, walk_catches};
use latchkey_sim::model::semaphore::{Config, Mutant, SemaphoreModel};
use latchkey_sim::model::walks;

/// N = 2, one client taking both permits at once and one taking one; a TTL
/// of 10 ms in ticks of 2 ms (a hold is believed for 6 ms, its members
/// live 10), 16 ms of time, at most one fault of any kind.
fn small(fenced: bool, max_faults: u8) -> Config {
    Config {
        permits: 2,
        takes: vec![2, 1],
        holds: 1,
        ttl: 10,
        tick: 2,
        max_time: Some(16),
        max_faults,
        fenced,
        watchdog: true,
        faults: Faults::ALL,
        mutant: None,
    }
}

#[test]
fn every_state_of_a_fenced_semaphore_with_a_two_permit_hold_and_one_fault_keeps_the_invariants() {
    let stats = search("N=2, k=2+1, fenced, watchdog, 1 fault", small(true, 1))
        .unwrap_or_else(|e| panic!("{e}"));
    // A search that stopped early would count far fewer.
    assert!(stats.states > 10_000, "{stats:?}");
}

#[test]
fn every_state_of_a_semaphore_fenced_on_demand_keeps_the_invariants() {
    // The token comes from sem_fence.lua, asked while the hold is held.
    let config = Config {
        max_time: Some(12),
        ..small(false, 1)
    };
    let stats = search("N=2, k=2+1, sem_fence, watchdog, 1 fault, 12 ms", config)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(stats.states > 10_000, "{stats:?}");
}

#[test]
fn every_state_of_three_single_permit_clients_keeps_the_invariants() {
    // Three clients for two permits: one always waits, woken by releases.
    let config = Config {
        takes: vec![1, 1, 1],
        max_time: Some(12),
        ..small(true, 0)
    };
    let stats = search("N=2, k=1+1+1, fenced, watchdog, no fault, 12 ms", config)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(stats.states > 10_000, "{stats:?}");
}

#[test]
fn every_state_with_two_faults_keeps_the_invariants() {
    let config = Config {
        max_time: Some(10),
        ..small(true, 2)
    };
    let stats = search("N=2, k=2+1, fenced, watchdog, 2 faults, 10 ms", config)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(stats.states > 10_000, "{stats:?}");
}

/// Seeds kept fixed: a failure names its seed, and the same seed replays it.
const SEEDS: std::ops::RangeInclusive<u64> = 1..=8;

#[test]
fn random_walks_of_six_clients_keep_the_invariants() {
    // N = 3; holds of 1, 2 and 3 permits mixed; every fault, four a walk.
    // (The configurations `./dev sim --seconds N` walks too.)
    let configs = [true, false].map(walks::semaphore);
    let holds = walk_all("holds released", configs, SEEDS, 3000, |last| {
        last.clients.iter().map(|c| usize::from(c.holds)).sum()
    });
    // Walks that never took a permit would check nothing.
    assert!(holds > 10 * 2 * SEEDS.count(), "{holds} holds");
}

#[test]
fn an_acquire_that_ignores_k_in_the_permit_limit_is_caught() {
    let config = Config {
        max_time: Some(8),
        ..small(true, 0)
    };
    let why = caught("acquire checks room for one", config, Mutant::TakeIgnoresK);
    assert!(why.contains("granted"), "{why}");
}

#[test]
fn a_semaphore_that_counts_expired_permits_is_caught() {
    // No watchdog: a permit expires under its holder, unpruned, and the
    // next acquire must not count it.
    let config = Config {
        permits: 1,
        takes: vec![1, 1],
        watchdog: false,
        max_time: Some(12),
        ..small(true, 0)
    };
    let why = caught("acquire counts expired", config, Mutant::CountsExpired);
    assert!(why.contains("refused"), "{why}");
}

#[test]
fn a_renewal_of_one_member_of_a_multi_permit_hold_is_caught() {
    // The k-hold's `#2` expires while its holder renews the token's own
    // member only: a third permit is granted and believed.
    let config = Config {
        max_time: Some(12),
        ..small(true, 0)
    };
    let why = caught("extend renews one member", config, Mutant::ExtendOneMember);
    assert!(why.contains("believed held"), "{why}");
}

#[test]
fn a_walk_that_breaks_an_invariant_is_shrunk_to_a_short_replayable_trace() {
    let model = SemaphoreModel::new(Config {
        takes: vec![2, 1],
        holds: u8::MAX,
        max_time: None,
        max_faults: 0,
        mutant: Some(Mutant::ExtendOneMember),
        ..small(true, 0)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let v = walk_catches(&model, 1..=8, 1000);
    assert!(v.message.contains("believed held"), "{v}");
    assert!(v.trace.len() <= 16, "{v}");
    assert!(v.seed.is_some());
}
