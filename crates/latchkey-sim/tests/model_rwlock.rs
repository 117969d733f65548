//! The read-write lock, model-checked: bounded exhaustive searches, seeded
//! random walks of larger configurations, and the mutants each run must
//! catch (so that a checker that checks nothing cannot pass).
//!
//! The figures (states, depth, time) print with `--nocapture`; they are in
//! docs/reliability.md, "Model checking the protocol".

use latchkey_sim::model::common::Faults;
use latchkey_sim::model::common::{caught, search, walk_all};
use latchkey_sim::model::rwlock::{Access, Config, Mutant, RwLockModel};
use latchkey_sim::model::walks;

use Access::{Read, Write};

/// A reader and a writer; a TTL of 10 ms in ticks of 2 ms (a hold is
/// believed for 6 ms, its key lives 10), 16 ms of time, at most one fault
/// of any kind.
fn small(fenced: bool, max_faults: u8) -> Config {
    Config {
        roles: vec![Read, Write],
        holds: 1,
        ttl: 10,
        tick: 2,
        max_time: Some(16),
        max_faults,
        fenced,
        watchdog: true,
        give_up: false,
        faults: Faults::ALL,
        mutant: None,
    }
}

#[test]
fn every_state_of_a_reader_and_a_fenced_writer_with_one_fault_keeps_the_invariants() {
    let stats =
        search("R+W, fenced, watchdog, 1 fault", small(true, 1)).unwrap_or_else(|e| panic!("{e}"));
    // A search that stopped early would count far fewer.
    assert!(stats.states > 10_000, "{stats:?}");
}

#[test]
fn every_state_of_two_readers_and_a_writer_fenced_on_demand_keeps_the_invariants() {
    // Phases: the writer's intent stops a new reader; its release lets the
    // waiting reader in as a batch before the writer's next hold.
    let config = Config {
        roles: vec![Read, Read, Write],
        max_time: Some(12),
        ..small(false, 0)
    };
    let stats = search("R+R+W, issue_fence, watchdog, no fault, 12 ms", config)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(stats.states > 10_000, "{stats:?}");
}

#[test]
fn every_state_of_two_writers_and_a_reader_that_may_give_up_keeps_the_invariants() {
    // A waiter that gives up withdraws its intent (rw_forget.lua) and
    // releases what an unanswered attempt may have taken.
    let config = Config {
        roles: vec![Write, Read, Write],
        give_up: true,
        max_time: Some(10),
        faults: Faults {
            pause: false,
            lost_reply: true,
            lost_message: false,
            restart: false,
        },
        ..small(true, 1)
    };
    let stats = search(
        "W+R+W, give up, fenced, watchdog, 1 lost reply, 10 ms",
        config,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(stats.states > 10_000, "{stats:?}");
}

#[test]
fn every_state_with_two_faults_keeps_the_invariants() {
    let config = Config {
        max_time: Some(12),
        ..small(true, 2)
    };
    let stats =
        search("R+W, fenced, watchdog, 2 faults, 12 ms", config).unwrap_or_else(|e| panic!("{e}"));
    assert!(stats.states > 10_000, "{stats:?}");
}

/// Seeds kept fixed: a failure names its seed, and the same seed replays it.
const SEEDS: std::ops::RangeInclusive<u64> = 1..=8;

#[test]
fn random_walks_of_six_clients_keep_the_invariants() {
    // Four readers and two writers: the configurations `./dev sim
    // --seconds N` walks too.
    let configs = [true, false].map(walks::rwlock);
    let holds = walk_all("holds released or given up", configs, SEEDS, 3000, |last| {
        last.clients.iter().map(|c| usize::from(c.holds)).sum()
    });
    assert!(holds > 10 * 2 * SEEDS.count(), "{holds} holds");
}

#[test]
fn a_write_acquire_that_ignores_readers_is_caught() {
    let config = Config {
        max_time: Some(8),
        ..small(true, 0)
    };
    let why = caught("write ignores readers", config, Mutant::WriteIgnoresReaders);
    assert!(why.contains("policy"), "{why}");
}

#[test]
fn a_read_acquire_that_ignores_a_waiting_writer_is_caught() {
    let config = Config {
        roles: vec![Read, Write, Read],
        max_time: Some(6),
        ..small(true, 0)
    };
    let why = caught(
        "read ignores a waiting writer",
        config,
        Mutant::ReadIgnoresWaitingWriters,
    );
    assert!(why.contains("policy"), "{why}");
}

#[test]
fn a_writer_release_that_forms_no_batch_is_caught() {
    let config = Config {
        roles: vec![Write, Read],
        max_time: Some(8),
        ..small(true, 0)
    };
    let why = caught(
        "release forms no batch",
        config,
        Mutant::ReleaseFormsNoBatch,
    );
    assert!(why.contains("batch"), "{why}");
}

#[test]
fn a_holder_trusting_its_hold_past_the_deadline_is_caught() {
    // A writer paused past its TTL resumes believing: the exclusion check
    // itself (not the policy's) must catch the reader let in meanwhile.
    let config = Config {
        roles: vec![Write, Read],
        faults: Faults {
            pause: true,
            lost_reply: false,
            lost_message: false,
            restart: false,
        },
        ..small(true, 1)
    };
    let why = caught(
        "holder trusts its hold past the deadline",
        config,
        Mutant::TrustPastDeadline,
    );
    assert!(why.contains("exclusion"), "{why}");
}

/// Replays `steps` on R+W+R (1 lost reply allowed) and returns the replies
/// of `rw_acquire.lua`, failing on any broken invariant.
fn acquire_replies(steps: &[latchkey_sim::model::rwlock::Action]) -> Vec<String> {
    let model = RwLockModel::new(Config {
        roles: vec![Read, Write, Read],
        ..small(true, 1)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let (trace, verdict) = latchkey_sim::model::replay_rwlock(&model, steps);
    let table = latchkey_sim::model::trace::table(&trace);
    assert_eq!(verdict, Ok(()), "{table}");
    eprintln!("{table}");
    trace
        .iter()
        .filter(|r| r.script == "rw_acquire.lua")
        .map(|r| r.reply.clone())
        .collect()
}

#[test]
fn a_writer_whose_acquire_reply_was_lost_gets_its_hold_on_the_retry() {
    use latchkey_sim::model::common::KeyedAction::Step;
    use latchkey_sim::model::rwlock::Op;
    // Found by the search: the retry (same token, as the library's wait
    // sends it) used to be refused by the writer key holding its own
    // token, shutting every reader and writer out for a TTL nobody held.
    let replies = acquire_replies(&[Step(1, Op::Try, true), Step(1, Op::Retry, false)]);
    assert!(replies[1].starts_with("[1, "), "{replies:?}");
}

#[test]
fn a_reader_whose_acquire_reply_was_lost_gets_its_hold_despite_a_writer_waiting_since() {
    use latchkey_sim::model::common::KeyedAction::Step;
    use latchkey_sim::model::rwlock::Op;
    // The reader's member was let in; a writer's intent came next; the
    // retry used to be refused (the intent stops new readers), and the
    // writer waited for the reader's unseen member until its TTL.
    let replies = acquire_replies(&[
        Step(0, Op::Try, true),
        Step(1, Op::Try, false),
        Step(0, Op::Retry, false),
    ]);
    assert!(replies[1].starts_with("[0, "), "{replies:?}");
    assert_eq!(replies[2], "[1, 0]", "{replies:?}");
}

#[test]
fn a_batch_reader_that_gives_up_wakes_the_writer_behind_the_batch() {
    use latchkey_sim::model::common::KeyedAction::Step;
    use latchkey_sim::model::rwlock::Op;
    // Found by the liveness check: the reader let in next gives up, and
    // `rw_forget.lua` used to publish nothing, so the writer waiting for
    // the batch slept on until its recheck (a third of the TTL).
    let model = RwLockModel::new(Config {
        roles: vec![Write, Read, Write],
        give_up: true,
        ..small(true, 0)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let steps = [
        Step(0, Op::Try, false),
        Step(1, Op::Try, false),
        Step(0, Op::Release, false),
        Step(2, Op::Try, false),
        Step(1, Op::GiveUp, false),
        Step(2, Op::Retry, false),
    ];
    let (trace, verdict) = latchkey_sim::model::replay_rwlock(&model, &steps);
    let table = latchkey_sim::model::trace::table(&trace);
    // Unwoken, the writer let in by the policy breaks the liveness check.
    assert_eq!(verdict, Ok(()), "{table}");
    assert_eq!(trace.len(), steps.len(), "{table}");
    let last = trace.last().map(|r| r.reply.clone()).unwrap_or_default();
    assert!(last.starts_with("[1, "), "{table}");
}
