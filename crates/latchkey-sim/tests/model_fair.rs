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

/// A mutant's configuration passes without it and fails with it.
fn caught(what: &str, config: Config, mutant: Mutant) -> String {
    if let Err(e) = search(&format!("{what} (unmutated)"), config.clone()) {
        panic!("the control's configuration fails without the mutant: {e}");
    }
    let model = FairModel::new(Config {
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
fn a_hand_off_that_ignores_waiter_leases_is_caught() {
    // Three clients: one waiter's renewals keep the queue's keys alive
    // while the other's lease runs out paused at the head.
    let config = Config {
        clients: 3,
        max_time: Some(10),
        faults: Faults {
            pause: true,
            lost_reply: false,
            lost_message: false,
            restart: false,
        },
        ..small(1)
    };
    let why = caught(
        "hand-off ignoring leases",
        config,
        Mutant::HandOffIgnoresLeases,
    );
    assert!(why.contains("lease"), "{why}");
}

#[test]
fn a_revoke_that_does_not_raise_the_counter_is_caught() {
    let config = Config {
        revokes: 1,
        max_time: Some(8),
        ..small(0)
    };
    let why = caught("revoke without raise", config, Mutant::RevokeWithoutRaise);
    assert!(why.contains("fence"), "{why}");
}

#[test]
fn print_a_walk() {
    let model = FairModel::new(Config {
        clients: 3,
        holds: 3,
        max_time: None,
        max_faults: 3,
        leave: true,
        revokes: 1,
        ..small(0)
    })
    .unwrap();
    let mut server = latchkey_sim::Server::new(0);
    let _ = &mut server;
    let (n, s) = model.walk(7, 200).unwrap_or_else(|v| panic!("{v}"));
    eprintln!(
        "{n} steps; {:?}",
        s.clients.iter().map(|c| c.holds).collect::<Vec<_>>()
    );
}
