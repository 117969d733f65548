//! The checkers on hand-made histories: each figure and verdict.

use super::*;

fn op(kind: OpKind, fence: u64, value: u64, accepted: bool, stale: bool) -> Op {
    Op {
        kind,
        fence,
        worker: fence as u32,
        value,
        accepted,
        stale,
        time_us: 0,
    }
}

fn limits() -> Limits {
    Limits {
        ttl: Duration::from_millis(1000),
        recovery: Duration::from_millis(2750),
        lost_tolerance: Duration::from_millis(50),
        slow_handoff: Duration::from_millis(200),
    }
}

#[test]
fn a_clean_history_has_no_violations() {
    use OpKind::*;
    let ops = [
        op(Read, 1, 0, true, false),
        op(Write, 1, 1, true, false),
        op(Read, 2, 1, true, false),
        op(Write, 2, 2, true, false),
    ];
    let mut f = Figures::default();
    resource_figures(&ops, &mut f);
    assert_eq!(
        (
            f.overlaps,
            f.lost_updates,
            f.stale_accepted,
            f.writes_accepted
        ),
        (0, 0, 0, 2)
    );
}

#[test]
fn each_resource_of_a_multi_workload_is_checked_on_its_own() {
    use OpKind::*;
    // The first resource's history is clean; the second's overlaps (holds
    // 2 and 3 interleave on it): the figures count what every log shows.
    let clean = vec![op(Read, 1, 0, true, false), op(Write, 1, 1, true, false)];
    let overlapping = vec![
        op(Read, 2, 0, true, false),
        op(Read, 3, 0, true, false),
        op(Write, 3, 1, true, false),
        op(Write, 2, 1, true, true),
    ];
    let record = Record {
        ops: clean.clone(),
        more_ops: vec![clean, overlapping],
        end_ns: 1,
        ..Record::default()
    };
    let f = figures(&record, &limits());
    assert_eq!((f.overlaps, f.lost_updates, f.stale_accepted), (1, 1, 1));
    assert_eq!(f.writes_accepted, 4);
}

#[test]
fn an_unfenced_pause_shows_overlap_lost_update_and_stale_write() {
    use OpKind::*;
    // Holder 1 reads 0 and stalls; holder 2 reads 0, writes 1; holder 1
    // wakes and writes 1 again.
    let ops = [
        op(Read, 1, 0, true, false),
        op(Read, 2, 0, true, false),
        op(Write, 2, 1, true, false),
        op(Write, 1, 1, true, true),
    ];
    let mut f = Figures::default();
    resource_figures(&ops, &mut f);
    assert_eq!((f.overlaps, f.lost_updates, f.stale_accepted), (1, 1, 1));
    // With fencing the same history has the stale write refused.
    let fenced = [
        ops[0].clone(),
        ops[1].clone(),
        ops[2].clone(),
        op(Write, 1, 1, false, true),
    ];
    let mut f = Figures::default();
    resource_figures(&fenced, &mut f);
    assert_eq!(
        (
            f.overlaps,
            f.lost_updates,
            f.stale_accepted,
            f.stale_rejected
        ),
        (0, 0, 0, 1)
    );
}

fn acq(t_send: u64, t_reply: u64, fence: u64) -> Acquisition {
    Acquisition {
        worker: 0,
        t_send,
        t_reply,
        fence,
    }
}

#[test]
fn tokens_must_grow_in_real_time_order() {
    assert_eq!(
        token_violations(&[acq(0, 10, 5), acq(20, 30, 6), acq(40, 50, 9)]),
        0
    );
    // Sent after the first was answered, yet a lower token.
    assert_eq!(token_violations(&[acq(0, 10, 5), acq(20, 30, 4)]), 1);
    // Overlapping requests may come back in either order.
    assert_eq!(token_violations(&[acq(0, 10, 5), acq(5, 12, 4)]), 0);
    // A token handed out twice is always wrong.
    assert_eq!(token_violations(&[acq(0, 10, 5), acq(5, 12, 5)]), 1);
}

const MS: u64 = 1_000_000;

fn acquired(t_send: u64, t_reply: u64, fence: u64) -> Event {
    Event::Acquired {
        t_send,
        t_reply,
        fence,
        wall_ms: 0,
    }
}

fn released(t_send: u64, t_reply: u64) -> Event {
    Event::Released {
        t_send,
        t_reply,
        outcome: "released".into(),
    }
}

#[test]
fn a_waiter_that_sleeps_through_a_release_is_a_slow_wake_up() {
    // Worker 1 waits from 50 ms on. The first release hands over within
    // 2 ms; after the second the lock stays free for 400 ms although
    // worker 0 waits: it slept through the wake-up.
    let events = vec![
        (0, Event::Waiting { t: 0 }),
        (0, acquired(MS, 2 * MS, 1)),
        (1, Event::Waiting { t: 50 * MS }),
        (0, released(100 * MS, 101 * MS)),
        (1, acquired(102 * MS, 103 * MS, 2)),
        (0, Event::Waiting { t: 150 * MS }),
        (1, released(200 * MS, 201 * MS)),
        (0, acquired(600 * MS, 601 * MS, 3)),
    ];
    let record = Record {
        events,
        end_ns: 10_000 * MS,
        ..Record::default()
    };
    let f = figures(&record, &limits());
    assert_eq!(f.handoffs.len(), 2);
    assert_eq!(f.slow_handoffs, 1);
    assert_eq!(f.holds, 3);
    assert_eq!(f.token_violations, 0);
}

#[test]
fn recovery_is_measured_from_the_fault_to_the_next_acquisition() {
    let window = |start_ns| Window {
        fault: super::super::faults::Fault::Kill,
        victim: Some(0),
        start_ns,
        end_ns: start_ns,
    };
    let record = Record {
        events: vec![
            (0, acquired(0, MS, 1)),
            (1, acquired(900 * MS, 1_000 * MS, 2)),
        ],
        windows: vec![window(10 * MS), window(2_000 * MS)],
        end_ns: 10_000 * MS,
        ..Record::default()
    };
    let f = figures(&record, &limits());
    assert_eq!(f.recoveries, [Duration::from_millis(990)]);
    assert_eq!(f.unrecovered, 1, "nobody acquired after the second kill");
    assert!(judge(&f, &limits(), true, false).failed());
}

#[test]
fn verdicts() {
    let l = limits();
    let ok = Figures {
        holds: 10,
        ..Figures::default()
    };
    assert_eq!(judge(&ok, &l, true, false), Verdict::Pass);
    let broken = Figures {
        lost_updates: 1,
        ..ok.clone()
    };
    assert!(judge(&broken, &l, true, false).failed());
    assert_eq!(
        judge(&broken, &l, false, false),
        Verdict::Pass,
        "unfenced: violations are figures, not failures"
    );
    assert_eq!(
        judge(&broken, &l, false, true),
        Verdict::ControlShowedViolations
    );
    assert!(
        judge(&ok, &l, false, true).failed(),
        "a control without violations proves nothing"
    );
    let slow = Figures {
        recoveries: vec![Duration::from_secs(5)],
        ..ok.clone()
    };
    assert!(judge(&slow, &l, true, false).failed());
    assert!(judge(&Figures::default(), &l, true, false).failed());
}
