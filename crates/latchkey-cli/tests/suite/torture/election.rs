//! `latchkey torture --workload election`: the workers campaign instead of
//! locking, the term is their fencing token. A kill of the leader and a
//! deleted lease must pass; the control run (no fencing, a leader paused
//! past its lease) must show the overlap. About 15 s (two faults of 1.5 s
//! each, mixed, the 6 s control, and start-up).

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::*;

#[test]
fn the_election_workload_holds_and_its_control_run_shows_violations() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_latchkey"));
    cmd.env_remove("LATCHKEY_REDIS_URL")
        .env_remove("LATCHKEY_PREFIX")
        .args([
            "torture",
            "--quick",
            "--workload",
            "election",
            "--duration",
            "1500ms",
        ])
        .args(["--fault", "kill", "--fault", "delete-key"]);
    let out = output(&mut cmd, Duration::from_secs(120));
    let text = stdout(&out);
    assert_eq!(code(out.status), 0, "{text}{}", stderr(&out));
    assert!(text.contains("workload election"), "{text}");
    for row in ["kill ", "delete-key ", "mixed "] {
        let line = text
            .lines()
            .find(|l| l.starts_with(row) && l.trim_end().ends_with("PASS"))
            .unwrap_or_else(|| panic!("no passing {row:?} row:\n{text}"));
        let overlaps: u64 = line.split_whitespace().nth(4).unwrap().parse().unwrap();
        assert_eq!(overlaps, 0, "{line}");
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("control (unfenced)") && l.contains("VIOLATIONS SHOWN")),
        "the control must show the overlap without fencing:\n{text}"
    );
}

#[test]
fn the_election_workload_refuses_redlock() {
    let out = output(
        Command::new(env!("CARGO_BIN_EXE_latchkey"))
            .args([
                "--redis",
                "redis://127.0.0.1:1",
                "--redis",
                "redis://127.0.0.1:2",
            ])
            .args(["torture", "--workload", "election"]),
        Duration::from_secs(30),
    );
    assert_eq!(code(out.status), 2, "{}", stderr(&out));
    assert_one_error_line(&out);
}
