//! The plain lock with fencing, model-checked: bounded exhaustive searches,
//! seeded random walks of larger configurations, and the mutants each run
//! must catch (so that a checker that checks nothing cannot pass).
//!
//! The figures (states, depth, time) print with `--nocapture`; they are in
//! docs/reliability.md, "Model checking the protocol".

use latchkey_sim::model::common::Faults;
use latchkey_sim::model::common::{
    caught, search, search_model, walk_all, walk_catches, Fault, MAX_STATES,
};
use latchkey_sim::model::lock::{Config, LockModel, Mutant};
use latchkey_sim::model::walks;

/// Two clients, one name, a TTL of 10 ms in ticks of 2 ms (the hold is
/// believed for 6 ms, the key lives 10), 16 ms of time, at most one fault
/// of any kind: every interleaving of first tries, waiters' tries,
/// renewals, fencing, writes, releases, expiry and the fault.
fn small(fenced: bool, max_faults: u8) -> Config {
    Config {
        clients: 2,
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

/// Each client takes two holds, without a watchdog, so that one can
/// release a hold that expired under it while the other holds the lock.
/// (Its exhaustive run, unmutated, is the release mutant's control.)
fn two_holds() -> Config {
    Config {
        holds: 2,
        watchdog: false,
        max_time: Some(12),
        ..small(true, 0)
    }
}

#[test]
fn every_state_of_a_fenced_lock_with_one_fault_keeps_the_invariants() {
    let stats =
        search("fenced, watchdog, 1 fault", small(true, 1)).unwrap_or_else(|e| panic!("{e}"));
    // A search that stopped early would count far fewer.
    assert!(stats.states > 100_000, "{stats:?}");
}

#[test]
fn every_state_of_a_lock_fenced_later_keeps_the_invariants() {
    // The first try is the bare SET; the token comes from issue_fence.lua.
    let stats = search("SET + issue_fence, watchdog, 1 fault", small(false, 1))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(stats.states > 100_000, "{stats:?}");
}

/// Seeds kept fixed: a failure names its seed, and the same seed replays it.
const SEEDS: std::ops::RangeInclusive<u64> = 1..=24;

#[test]
fn random_walks_of_five_clients_keep_the_invariants() {
    // The configurations `./dev sim --seconds N` walks too.
    let configs = [true, false].map(walks::lock);
    let mut accepted = 0;
    let holds = walk_all("holds released", configs, SEEDS, 3000, |last| {
        accepted += usize::from(last.resource.writer.is_some());
        last.clients.iter().map(|c| usize::from(c.holds)).sum()
    });
    // Walks that never took the lock, or never wrote, would check nothing.
    assert!(holds > 10 * 2 * SEEDS.count(), "{holds} holds");
    assert_eq!(
        accepted,
        2 * SEEDS.count(),
        "every walk wrote to the resource"
    );
}

#[test]
fn a_release_without_the_owner_check_is_caught() {
    let why = caught(
        "release without owner check",
        two_holds(),
        Mutant::ReleaseWithoutOwnerCheck,
    );
    assert!(why.contains("exclusion"), "{why}");
}

#[test]
fn a_watchdog_renewing_past_the_deadline_is_caught() {
    let config = Config {
        faults: Faults {
            pause: true,
            lost_reply: false,
            lost_message: false,
            restart: false,
        },
        ..small(true, 1)
    };
    let why = caught(
        "renewal past the deadline",
        config,
        Mutant::RenewPastDeadline,
    );
    assert!(why.contains("exclusion"), "{why}");
}

#[test]
fn an_issue_fence_that_does_not_bump_the_counter_is_caught() {
    let config = Config {
        max_time: Some(12),
        ..small(false, 0)
    };
    let why = caught("issue_fence without bump", config, Mutant::FenceWithoutBump);
    assert!(why.contains("fencing"), "{why}");
}

#[test]
fn a_restart_without_persistence_lets_two_believe_with_ordered_tokens() {
    use latchkey_sim::model::lock::{Action, Op};
    use latchkey_sim::model::replay;
    // The documented case, replayed step by step: the restart lost c0's
    // hold, c1 takes the lock while c0 still believes in its own; the
    // fencing tokens still order them.
    let model = LockModel::new(small(true, 1)).unwrap_or_else(|e| panic!("{e}"));
    let steps = [
        Action::Step(0, Op::Try, false),
        Action::Fault(Fault::Restart),
        Action::Step(1, Op::Try, false),
    ];
    let (trace, verdict) = replay(&model, &steps);
    assert_eq!(
        verdict,
        Ok(()),
        "{}",
        latchkey_sim::model::trace::table(&trace)
    );
    let fences: Vec<u64> = trace
        .iter()
        .filter(|r| r.script == "acquire.lua")
        .map(|r| r.reply.clone())
        .filter_map(|r| r.trim_matches(['[', ']']).split(", ").nth(1)?.parse().ok())
        .collect();
    assert_eq!(fences.len(), 2, "{fences:?}");
    assert!(fences[0] < fences[1], "{fences:?}");
}

#[test]
fn a_walk_that_breaks_an_invariant_is_shrunk_to_a_short_replayable_trace() {
    // The watchdog mutant, found by a walk of five clients: the walk's
    // violation comes shrunk, with its seed.
    let model = LockModel::new(Config {
        clients: 5,
        holds: u8::MAX,
        max_time: None,
        max_faults: 4,
        mutant: Some(Mutant::RenewPastDeadline),
        ..small(true, 0)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let v = walk_catches(&model, 1..=8, 3000);
    assert!(v.message.contains("exclusion"), "{v}");
    assert!(v.trace.len() <= 12, "{v}");
    assert!(v.seed.is_some());
}

#[test]
fn every_state_with_two_faults_keeps_the_invariants() {
    // Two faults of any kind (a restart and a lost reply, a pause and a
    // lost wake-up, …) over 12 ms: each hold's TTL runs out once.
    let config = Config {
        max_time: Some(12),
        ..small(true, 2)
    };
    let stats =
        search("fenced, watchdog, 2 faults, 12 ms", config).unwrap_or_else(|e| panic!("{e}"));
    assert!(stats.states > 100_000, "{stats:?}");
}

/// Holds made `with_max_hold(14 ms)`, TTL 10 ms: the watchdog renews once
/// (at 4 ms, 10 ms left: a full TTL to 14 ms), then the cap leaves less
/// than the minimum TTL and it stops; the holder lets go by the cap minus
/// the margin.
fn capped(max_faults: u8) -> Result<LockModel, String> {
    let config = Config {
        // A pause is the fault that matters here: a holder stopped past
        // its cap, then resuming.
        faults: Faults {
            pause: true,
            lost_reply: true,
            lost_message: false,
            restart: false,
        },
        ..small(true, max_faults)
    };
    Ok(LockModel::new(config)?.with_max_hold(14))
}

#[test]
fn capped_holds_end_by_their_cap() {
    let model = capped(1).unwrap_or_else(|e| panic!("{e}"));
    let stats = search_model("max hold 14 ms, 1 fault", &model).unwrap_or_else(|e| panic!("{e}"));
    assert!(stats.states > 10_000, "{stats:?}");
}

#[test]
fn a_watchdog_renewing_past_the_cap_is_caught() {
    // The control, the same configuration without the mutant, is
    // capped_holds_end_by_their_cap.
    let mutated = LockModel::new(Config {
        mutant: Some(Mutant::RenewPastCap),
        ..small(true, 0)
    })
    .map(|m| m.with_max_hold(14))
    .unwrap_or_else(|e| panic!("{e}"));
    let v = match mutated.search(MAX_STATES) {
        Ok(stats) => panic!("the mutant RenewPastCap was not caught ({stats:?})"),
        Err(v) => v,
    };
    eprintln!("renewal past the cap: caught\n{v}");
    assert!(v.message.contains("past the cap"), "{v}");
}

/// Only the faults `lock_failover.rs` adds (`small`'s others off), over
/// 12 ms: each hold's TTL runs out once.
fn failover_faults(fenced: bool) -> Config {
    Config {
        faults: Faults {
            pause: false,
            lost_reply: false,
            lost_message: false,
            restart: false,
        },
        max_time: Some(12),
        ..small(fenced, 1)
    }
}

#[test]
fn every_state_with_a_failover_to_a_stale_replica_keeps_the_invariants() {
    // Replication on its own between any two steps, and one failover to
    // the replica's copy: an acquisition, a renewal, a release or a
    // counter's raise not replicated is lost.
    // (Fenced: the SET + issue_fence variant counts ~768k states, 25 s.)
    let model = LockModel::new(failover_faults(true))
        .unwrap_or_else(|e| panic!("{e}"))
        .with_failover();
    let stats = search_model("failover, fenced", &model).unwrap_or_else(|e| panic!("{e}"));
    assert!(stats.states > 50_000, "{stats:?}");
}

#[test]
fn a_failover_that_lost_the_acquisition_lets_two_believe_with_ordered_tokens() {
    use latchkey_sim::model::lock::{Action, Op};
    use latchkey_sim::model::replay;
    // The documented case: the replica never had c0's key nor the
    // counter's raise; c1 takes the lock on the new primary while c0
    // still believes; TIME, a tick later, still orders the tokens.
    let model = LockModel::new(failover_faults(true))
        .unwrap_or_else(|e| panic!("{e}"))
        .with_failover();
    let steps = [
        Action::Step(0, Op::Try, false),
        Action::Failover,
        Action::Step(1, Op::Try, false),
    ];
    let (trace, verdict) = replay(&model, &steps);
    let table = latchkey_sim::model::trace::table(&trace);
    assert_eq!(verdict, Ok(()), "{table}");
    let fences = acquired_fences(&trace);
    assert_eq!(fences.len(), 2, "{table}");
    assert!(fences[0] < fences[1], "{table}");
}

#[test]
fn every_state_with_a_restart_moving_the_server_clock_keeps_the_invariants() {
    // δ = 1 tick: behind by as much as the restart's downtime; 2 ticks:
    // behind by more (tokens may go back, as documented); and ahead.
    for ticks in [1, 2] {
        let model = LockModel::new(failover_faults(true))
            .unwrap_or_else(|e| panic!("{e}"))
            .with_clock_step(ticks);
        let stats = search_model(&format!("restart, clock ±{ticks} ticks"), &model)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(stats.states > 1_000, "{stats:?}");
    }
}

#[test]
fn a_fencing_token_from_the_counter_alone_is_caught() {
    // Without TIME, a failover that lost the counter's last raise hands
    // out a token again. (The control: the failover search above.)
    let model = LockModel::new(Config {
        mutant: Some(Mutant::FenceFromCounterOnly),
        ..failover_faults(true)
    })
    .unwrap_or_else(|e| panic!("{e}"))
    .with_failover();
    let v = match model.search(MAX_STATES) {
        Ok(stats) => panic!("the mutant FenceFromCounterOnly was not caught ({stats:?})"),
        Err(v) => v,
    };
    eprintln!("token from the counter alone: caught\n{v}");
    assert!(v.message.contains("fencing"), "{v}");
}

/// The fencing tokens acquire.lua answered in `trace`, in order.
fn acquired_fences(trace: &[latchkey_sim::model::trace::Record]) -> Vec<u64> {
    trace
        .iter()
        .filter(|r| r.script == "acquire.lua")
        .map(|r| r.reply.clone())
        .filter_map(|r| r.trim_matches(['[', ']']).split(", ").nth(1)?.parse().ok())
        .collect()
}

#[test]
fn a_restart_with_the_clock_behind_by_its_downtime_repeats_a_token() {
    use latchkey_sim::model::lock::{Action, Op};
    use latchkey_sim::model::replay;
    // The documented limit (docs/fencing.md, "Guarantee", 2): the restart
    // takes one tick and the server's clock goes back one tick, so TIME
    // reads what it read at c0's token: c1's token is the same. Both
    // believe (the restart lost c0's hold); the tokens do not order them.
    let model = LockModel::new(failover_faults(true))
        .unwrap_or_else(|e| panic!("{e}"))
        .with_clock_step(1);
    let steps = [
        Action::Step(0, Op::Try, false),
        Action::RestartClock(-1),
        Action::Step(1, Op::Try, false),
    ];
    let (trace, verdict) = replay(&model, &steps);
    let table = latchkey_sim::model::trace::table(&trace);
    assert_eq!(verdict, Ok(()), "{table}");
    let fences = acquired_fences(&trace);
    assert_eq!(fences.len(), 2, "{table}");
    assert_eq!(fences[0], fences[1], "{table}");
    eprintln!("{table}");
}

/// Two clients, one hold each, no fault: the long idle can fall between
/// the first client's release and the second's acquisition.
fn idle_config(fenced: bool, mutant: Option<Mutant>) -> Config {
    Config {
        max_faults: 0,
        max_time: small(fenced, 0).max_time,
        mutant,
        ..failover_faults(fenced)
    }
}

#[test]
fn every_state_with_a_long_idle_keeps_the_invariants() {
    // The counter expires in the idle (an hour after its token's instant):
    // the next token, from the server's clock, is above it.
    for fenced in [true, false] {
        let model = LockModel::new(idle_config(fenced, None))
            .unwrap_or_else(|e| panic!("{e}"))
            .with_idle();
        let stats = search_model(&format!("long idle, fenced {fenced}"), &model)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(stats.states > 1_000, "{stats:?}");
    }
}

#[test]
fn a_counter_gone_after_a_long_idle_still_gives_a_higher_token() {
    use latchkey_sim::model::lock::{Action, Op};
    use latchkey_sim::model::replay;
    let model = LockModel::new(idle_config(true, None))
        .unwrap_or_else(|e| panic!("{e}"))
        .with_idle();
    let steps = [
        Action::Step(0, Op::Try, false),
        Action::Step(0, Op::Release, false),
        Action::Idle,
        Action::Step(1, Op::Try, false),
    ];
    let (trace, verdict) = replay(&model, &steps);
    let table = latchkey_sim::model::trace::table(&trace);
    assert_eq!(verdict, Ok(()), "{table}");
    let idle = trace.iter().find(|r| r.script == "idle");
    // The counter (the only key left after the release) expired.
    assert!(
        idle.is_some_and(|r| r.reply.contains("0 of 1 keys left")),
        "{table}"
    );
    let fences = acquired_fences(&trace);
    assert_eq!(fences.len(), 2, "{table}");
    assert!(fences[0] < fences[1], "{table}");
}

#[test]
fn a_fencing_token_from_the_counter_alone_is_caught_after_a_long_idle() {
    // Without TIME, the counter's expiry restarts the tokens at 1. The
    // control: the same mutant without the idle is not caught (no fault
    // here loses the counter), so the idle is what finds it.
    let config = idle_config(true, Some(Mutant::FenceFromCounterOnly));
    let quiet = LockModel::new(config.clone()).unwrap_or_else(|e| panic!("{e}"));
    if let Err(v) = quiet.search(MAX_STATES) {
        panic!("caught without the idle: {v}");
    }
    let model = LockModel::new(config)
        .unwrap_or_else(|e| panic!("{e}"))
        .with_idle();
    let v = match model.search(MAX_STATES) {
        Ok(stats) => panic!("the mutant FenceFromCounterOnly was not caught ({stats:?})"),
        Err(v) => v,
    };
    eprintln!("token from the counter alone, long idle: caught\n{v}");
    assert!(
        v.message.contains("fencing tokens must strictly increase"),
        "{v}"
    );
}
