//! The election, model-checked: bounded exhaustive searches, seeded random
//! walks of larger configurations, and the mutants each run must catch.
//!
//! The figures (states, depth, time) print with `--nocapture`; they are in
//! docs/reliability.md, "Model checking the protocol".

use latchkey_sim::model::common::Faults;
use latchkey_sim::model::common::{caught, search, walk_all, Fault};
use latchkey_sim::model::elect::{Config, ElectionModel, Mutant};
use latchkey_sim::model::walks;

/// Two candidates, a lease of 10 ms in ticks of 2 ms (a leadership is
/// believed for 6 ms, the lease lives 10), 16 ms of time, at most
/// `max_faults` of any kind: every interleaving of campaigns, waits,
/// renewals, proclaims, resigns, expiry and the fault.
fn small(max_faults: u8) -> Config {
    Config {
        clients: 2,
        leads: 1,
        ttl: 10,
        tick: 2,
        max_time: Some(16),
        max_faults,
        faults: Faults::ALL,
        mutant: None,
    }
}

#[test]
fn every_state_of_an_election_with_one_fault_keeps_the_invariants() {
    let stats =
        search("election, 2 candidates, 1 fault", small(1)).unwrap_or_else(|e| panic!("{e}"));
    // A search that stopped early would count far fewer.
    assert!(stats.states > 10_000, "{stats:?}");
}

#[test]
fn every_state_of_three_candidates_keeps_the_invariants() {
    let config = Config {
        clients: 3,
        max_time: Some(8),
        ..small(0)
    };
    let stats =
        search("election, 3 candidates, no fault", config).unwrap_or_else(|e| panic!("{e}"));
    assert!(stats.states > 1_000, "{stats:?}");
}

/// Seeds kept fixed: a failure names its seed, and the same seed replays it.
const SEEDS: std::ops::RangeInclusive<u64> = 1..=8;

#[test]
fn random_walks_of_five_candidates_keep_the_invariants() {
    // (The configuration `./dev sim --seconds N` walks too.)
    let leads = walk_all(
        "leaderships resigned",
        [walks::election()],
        SEEDS,
        2000,
        |last| last.clients.iter().map(|c| usize::from(c.leads)).sum(),
    );
    // Walks in which nobody was elected would check nothing.
    assert!(leads > 10 * SEEDS.count(), "{leads} leaderships");
}

#[test]
fn a_campaign_that_ignores_the_leader_is_caught() {
    let why = caught(
        "campaign ignoring the leader",
        small(0),
        Mutant::CampaignIgnoresLeader,
    );
    assert!(why.contains("one leader"), "{why}");
}

#[test]
fn a_campaign_that_does_not_raise_the_term_is_caught() {
    let why = caught("term not raised", small(0), Mutant::TermNotRaised);
    assert!(why.contains("strictly increase"), "{why}");
}

#[test]
fn a_restart_without_persistence_lets_two_believe_with_ordered_terms() {
    use latchkey_sim::model::elect::{Action, Op};
    use latchkey_sim::model::explore::Model;
    // The documented case, replayed step by step: the restart lost c0's
    // lease; c1 is elected while c0 still believes it leads; the terms
    // still order them (the server's clock moved on across the restart).
    let model = ElectionModel::new(small(1)).unwrap_or_else(|e| panic!("{e}"));
    let mut server = latchkey_sim::Server::new(0);
    let mut state = model.initial();
    for action in [
        Action::Step(0, Op::Campaign, false),
        Action::Fault(Fault::Restart),
        Action::Step(1, Op::Campaign, false),
    ] {
        state = model.step(&mut server, &state, &action).0;
        model.check(&state).unwrap_or_else(|e| panic!("{e}"));
    }
    let terms: Vec<u64> = state
        .clients
        .iter()
        .filter_map(|c| match &c.phase {
            latchkey_sim::model::elect::Phase::Leading(l) if model.believes(l, state.now) => {
                Some(l.term)
            }
            _ => None,
        })
        .collect();
    assert_eq!(terms.len(), 2, "{state:?}");
    assert!(terms[0] < terms[1], "{terms:?}");
}
