//! Several locks at once (`Client::lock_all`) beside plain locks of the
//! same names, model-checked: bounded exhaustive searches, seeded random
//! walks of larger configurations (holds kept while idle among them), and
//! the mutants each must catch (so that a checker that checks nothing
//! cannot pass).
//!
//! The figures (states, depth, time) print with `--nocapture`; they are in
//! docs/reliability.md, "Model checking the protocol".

use latchkey_sim::model::common::Faults;
use latchkey_sim::model::common::{caught, search, walk_all, walk_catches};
use latchkey_sim::model::multi::{Config, Kind, MultiModel, Mutant};
use latchkey_sim::model::walks;

/// Two names, fenced, with watchdogs; a TTL of 10 ms in ticks of 2 ms
/// (a hold is believed for 6 ms, its keys live 10), 16 ms of time, one
/// hold each, at most `max_faults` faults of any kind.
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
        asks: 0,
        mutant: None,
    }
}

#[test]
fn every_state_of_lock_all_beside_a_plain_lock_with_one_fault_keeps_the_invariants() {
    // A `lock_all` of both names and a plain lock of the first: every
    // interleaving of their tries, waits, renewals and releases, expiry,
    // and one fault (a pause, a lost reply or wake-up, a restart).
    let config = small(vec![Kind::Multi(0b11), Kind::Plain(0)], 1);
    let stats = search("lock_all + plain, 1 fault", config).unwrap_or_else(|e| panic!("{e}"));
    // A search that stopped early would count far fewer.
    assert!(stats.states > 20_000, "{stats:?}");
}

#[test]
fn two_lock_all_callers_and_a_plain_lock_neither_deadlock_nor_break_exclusion() {
    // No fault, so the liveness bound is checked in every state: no waiter
    // waits more than a tick while its names are free.
    let config = small(
        vec![Kind::Multi(0b11), Kind::Multi(0b11), Kind::Plain(1)],
        0,
    );
    let stats = search("2 × lock_all + plain, no fault", config).unwrap_or_else(|e| panic!("{e}"));
    assert!(stats.states > 20_000, "{stats:?}");
}

#[test]
fn a_taker_that_leaves_the_other_waiting_processes_asleep_is_caught() {
    // Three plain clients of one name, no fault: c0's release wakes one
    // registered waiter alone; the other sleeps until a release of a
    // marked token, and only the taker's own mark makes the next one so.
    // (The control: the same search without the mutant.)
    let config = small(vec![Kind::Plain(0), Kind::Plain(0), Kind::Plain(0)], 0);
    let why = caught("taker marking nothing", config, Mutant::TakerMarksNothing);
    assert!(why.contains("liveness"), "{why}");
}

#[test]
fn overlapping_lock_all_callers_neither_deadlock_nor_break_exclusion() {
    // Three names: {0, 1} and {1, 2} overlap in name 1, which a plain lock
    // also takes; whatever order the callers gave, the keys are sorted.
    let config = Config {
        names: 3,
        ..small(
            vec![Kind::Multi(0b011), Kind::Multi(0b110), Kind::Plain(1)],
            0,
        )
    };
    let stats = search("lock_all {0,1} + {1,2} + plain 1, no fault", config)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(stats.states > 20_000, "{stats:?}");
}

#[test]
fn holders_asked_to_let_go_do_so_within_a_tick() {
    // `Client::request_release` on either name at any point (once), its
    // `release-requested` heard by the `lock_all` holder and the plain
    // one, which let go within a tick (no fault; with one, exclusion and
    // all or none still hold).
    for faults in [0, 1] {
        let config = Config {
            asks: 1,
            ..small(vec![Kind::Multi(0b11), Kind::Plain(0)], faults)
        };
        let what = format!("lock_all + plain, a request to release, {faults} fault(s)");
        let stats = search(&what, config).unwrap_or_else(|e| panic!("{e}"));
        assert!(stats.states > 5_000, "{stats:?}");
    }
}

/// Seeds kept fixed: a failure names its seed, and the same seed replays it.
const SEEDS: std::ops::RangeInclusive<u64> = 1..=16;

#[test]
fn random_walks_of_six_clients_over_three_names_keep_the_invariants() {
    // Three `lock_all`s over overlapping sets, two plain locks and a
    // keeper, every fault, thousands of steps.
    // (The configurations `./dev sim --seconds N` walks too.)
    let configs = [true, false].map(walks::multi);
    let multi_holds = walk_all("lock_all holds released", configs, SEEDS, 3000, |last| {
        last.clients[..3].iter().map(|c| usize::from(c.holds)).sum()
    });
    // Walks in which lock_all never got its names would check little.
    assert!(multi_holds > 5 * 2 * SEEDS.count(), "{multi_holds} holds");
}

#[test]
fn a_multi_acquire_that_takes_the_free_names_of_a_busy_set_is_caught() {
    let config = small(vec![Kind::Multi(0b11), Kind::Plain(1)], 0);
    let why = caught("partial acquisition", config, Mutant::PartialAcquire);
    assert!(why.contains("all or none"), "{why}");
}

#[test]
fn a_multi_release_that_leaves_one_name_is_caught() {
    let config = small(vec![Kind::Multi(0b11), Kind::Plain(0)], 0);
    let why = caught("release leaving one", config, Mutant::ReleaseLeavesOne);
    assert!(why.contains("all or none"), "{why}");
}

#[test]
fn a_holder_that_ignores_a_request_to_release_is_caught() {
    let config = Config {
        asks: 1,
        ..small(vec![Kind::Multi(0b11), Kind::Plain(0)], 0)
    };
    let why = caught(
        "holder ignoring a request",
        config,
        Mutant::HolderIgnoresRequest,
    );
    assert!(why.contains("asked to let go"), "{why}");
}

#[test]
fn a_walk_of_lock_all_with_partial_acquisition_is_shrunk_to_a_short_trace() {
    let model = MultiModel::new(Config {
        names: 3,
        holds: u8::MAX,
        max_time: None,
        max_faults: 4,
        mutant: Some(Mutant::PartialAcquire),
        ..small(
            vec![Kind::Multi(0b111), Kind::Multi(0b110), Kind::Plain(2)],
            0,
        )
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let v = walk_catches(&model, 1..=8, 3000);
    assert!(v.trace.len() <= 12, "{v}");
    assert!(v.seed.is_some());
}

#[test]
fn a_lock_all_waiter_wakes_when_the_plain_holder_releases() {
    use latchkey_sim::model::multi::{replay, Action, Op};
    // The wake-up a `lock_all` waiter depends on, replayed: its attempt
    // marks the plain holder of name 0, whose release then publishes.
    let model = MultiModel::new(small(vec![Kind::Multi(0b11), Kind::Plain(0)], 0))
        .unwrap_or_else(|e| panic!("{e}"));
    let steps = [
        Action::Step(1, Op::Try, false),
        Action::Step(0, Op::Try, false),
        Action::Step(0, Op::Retry, false),
        Action::Step(1, Op::Release, false),
        Action::Step(0, Op::Retry, false),
    ];
    let (trace, verdict) = replay(&model, &steps);
    let table = latchkey_sim::model::trace::table(&trace);
    assert_eq!(verdict, Ok(()), "{table}");
    assert_eq!(trace.len(), steps.len(), "{table}");
    assert!(
        trace[2].args[3] == "1" && trace[4].reply.starts_with("[1,"),
        "{table}"
    );
}
