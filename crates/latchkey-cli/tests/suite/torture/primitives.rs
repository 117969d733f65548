//! `latchkey torture --workload semaphore`, `--workload rwlock` and
//! `--workload multi` and `--workload cached`: the workers hold one permit of a semaphore of N = 1,
//! the write side of a read-write lock, with the fencing token issued with
//! the hold, or a set of several locks at once (`lock_all`, each lock's
//! resource written with its own token), or a lock half of the workers keep
//! while idle (`with_caching`). Each must exclude as a lock does
//! under a kill of the holder, a deleted key (the permits, the writer, the
//! lock every set shares) and killed wake-up connections; the control run
//! (no fencing, a holder paused past its lease) must show the violations.
//! About 15 s each.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::*;

fn holds_and_control_shows_violations(workload: &str) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_latchkey"));
    cmd.env_remove("LATCHKEY_REDIS_URL")
        .env_remove("LATCHKEY_PREFIX")
        .args([
            "torture",
            "--quick",
            "--workload",
            workload,
            "--duration",
            "1500ms",
        ])
        .args([
            "--fault",
            "kill",
            "--fault",
            "delete-key",
            "--fault",
            "pubsub-kill",
        ]);
    let out = output(&mut cmd, Duration::from_secs(120));
    let text = stdout(&out);
    assert_eq!(code(out.status), 0, "{text}{}", stderr(&out));
    assert!(text.contains(&format!("workload {workload}")), "{text}");
    for row in ["kill ", "delete-key ", "pubsub-kill ", "mixed "] {
        let line = text
            .lines()
            .find(|l| l.starts_with(row) && l.trim_end().ends_with("PASS"))
            .unwrap_or_else(|| panic!("no passing {row:?} row:\n{text}"));
        let cells: Vec<&str> = line.split_whitespace().collect();
        let holds: u64 = cells[2].parse().unwrap();
        assert!(holds > 0, "{line}");
        // overlaps, lost updates, stale writes accepted
        assert_eq!(&cells[4..7], ["0", "0", "0"], "{line}");
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("control (unfenced)") && l.contains("VIOLATIONS SHOWN")),
        "the control must show the overlap without fencing:\n{text}"
    );
}

#[test]
fn the_semaphore_workload_holds_and_its_control_run_shows_violations() {
    holds_and_control_shows_violations("semaphore");
}

#[test]
fn the_rwlock_workload_holds_and_its_control_run_shows_violations() {
    holds_and_control_shows_violations("rwlock");
}

#[test]
fn the_multi_workload_holds_and_its_control_run_shows_violations() {
    holds_and_control_shows_violations("multi");
}

#[test]
fn the_cached_workload_holds_and_its_control_run_shows_violations() {
    // Half of the workers keep the lock while idle (`with_caching`): the
    // others' waits mark it wanted; no overlap and no stale write either way.
    holds_and_control_shows_violations("cached");
}
