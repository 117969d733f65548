//! The long-walk runner (`./dev sim --seconds N`, `model::runner`): a short
//! run walks every model with no violation, and a mutant's violation comes
//! back with its trace and a replay that walks the same walk again.

use std::time::Duration;

use latchkey_sim::model::lock::{self, LockModel, Mutant};
use latchkey_sim::model::runner::{self, walk_seed, Options};
use latchkey_sim::model::walks;

fn options(seconds: u64) -> Options {
    Options {
        duration: Duration::from_secs(seconds),
        seed: 7,
        only: None,
        walk: None,
        steps: None,
        progress: Duration::from_secs(1),
    }
}

#[test]
fn a_short_run_walks_every_model_and_breaks_no_invariant() {
    let targets = runner::select(None).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    let summary = runner::run(&targets, &options(1), &mut out).unwrap_or_else(|e| panic!("{e}"));
    let out = String::from_utf8_lossy(&out);
    eprintln!("{out}");
    assert!(summary.failure.is_none(), "{out}");
    // Every model of the rotation, fenced and not, walked at least once.
    for name in [
        "lock",
        "fair",
        "semaphore",
        "rwlock",
        "multi",
        "cached",
        "election",
        "latch",
        "barrier",
        "signal",
    ] {
        let tally = summary.tallies.iter().find(|t| t.name == name);
        assert!(
            tally.is_some_and(|t| t.walks > 0 && t.steps > 0),
            "{name}: {out}"
        );
        assert!(
            out.contains(&format!("\n{name} ")),
            "{name} not in the summary: {out}"
        );
    }
    assert_eq!(summary.tallies.len(), targets.len());
    assert!(out.contains("steps/s") && out.contains("walks/s"), "{out}");
    assert!(out.contains("invariants checked"), "{out}");
    assert!(out.contains("FIFO among waiters"), "{out}");
}

#[test]
fn walk_seeds_depend_on_the_run_seed_the_model_and_the_index_only() {
    assert_eq!(walk_seed(1, "lock", 3), walk_seed(1, "lock", 3));
    assert_ne!(walk_seed(1, "lock", 3), walk_seed(2, "lock", 3));
    assert_ne!(walk_seed(1, "lock", 3), walk_seed(1, "fair", 3));
    assert_ne!(walk_seed(1, "lock", 3), walk_seed(1, "lock", 4));
}

#[test]
fn a_violation_prints_its_trace_and_a_replay_that_finds_it_again() {
    // The watchdog that renews past the deadline, walked as the long run
    // walks a model: the run stops at it and says how to replay it.
    let mutant = || {
        walks::target(
            "lock-mutant",
            LockModel::new(lock::Config {
                mutant: Some(Mutant::RenewPastDeadline),
                ..walks::lock(true)
            }),
            &["exclusion"],
            3000,
            "LockModel::new(..)?.walk(SEED, 3000)",
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    // Short walks: shrinking a walk of thousands of steps takes seconds.
    let short = Options {
        steps: Some(300),
        ..options(30)
    };
    let started = std::time::Instant::now();
    let mut out = Vec::new();
    let summary = runner::run(&[mutant()], &short, &mut out).unwrap_or_else(|e| panic!("{e}"));
    let out = String::from_utf8_lossy(&out);
    let Some(failure) = &summary.failure else {
        panic!("the mutant was not caught: {out}");
    };
    assert!(failure.violation.message.contains("exclusion"), "{out}");
    let replay = format!("--seed 7 --model lock-mutant --walk {}", failure.walk);
    assert!(out.contains(&replay), "{out}");
    assert!(out.contains("VIOLATION"), "{out}");
    eprintln!("caught in {:.2?}:\n{out}", started.elapsed());
    // Replaying that one walk finds the same violation.
    let again = runner::run(
        &[mutant()],
        &Options {
            only: Some("lock-mutant".into()),
            walk: Some(failure.walk),
            ..short
        },
        &mut Vec::new(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let again = again.failure.unwrap_or_else(|| panic!("the replay passed"));
    assert_eq!(again.walk, failure.walk);
    assert_eq!(again.violation.message, failure.violation.message);
    assert_eq!(again.violation.seed, failure.violation.seed);
}
