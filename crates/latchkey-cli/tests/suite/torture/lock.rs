//! `latchkey torture --quick`, the CI profile of the torture suite, driven
//! through the real binary: every scenario must pass its must-hold figures,
//! and the control run (no fencing, holders paused past their TTL) must
//! show violations, or the zeros everywhere else would prove nothing.
//!
//! This file takes about 45 s (15 scenarios of 2.5 s, the control 6 s, plus
//! server and process start-up): longer than our usual per-file budget,
//! because the suite's whole point is to run every fault against real
//! processes; it is the one profile CI runs (see docs/reliability.md).

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::*;

fn torture() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_latchkey"));
    cmd.arg("torture")
        .env_remove("LATCHKEY_REDIS_URL")
        .env_remove("LATCHKEY_PREFIX");
    cmd
}

/// The table's rows: (scenario label, cells), from the header line on.
fn table_rows(text: &str) -> Vec<(String, Vec<String>)> {
    text.lines()
        .skip_while(|line| !line.starts_with("scenario "))
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .map(|line| {
            // The label may contain one space ("control (unfenced)").
            let (label, rest) = match line.find("  ") {
                Some(i) => (line[..i].trim().to_owned(), &line[i..]),
                None => (line.trim().to_owned(), ""),
            };
            (label, rest.split_whitespace().map(str::to_owned).collect())
        })
        .collect()
}

#[test]
fn the_quick_profile_holds_and_its_control_run_shows_violations() {
    // Bounded: the profile takes under a minute; two leave room for a busy host.
    let out = output(torture().arg("--quick"), Duration::from_secs(120));
    let text = stdout(&out);
    assert_eq!(code(out.status), 0, "{text}{}", stderr(&out));
    assert!(
        text.contains("seed "),
        "the seed must be printed for a replay:\n{text}"
    );

    let rows = table_rows(&text);
    let names: Vec<&str> = rows.iter().map(|(name, _)| name.as_str()).collect();
    for expected in [
        "none",
        "kill",
        "pause",
        "restart",
        "delete-key",
        "redlock-minority",
        "mixed",
    ] {
        assert!(names.contains(&expected), "no {expected} row in:\n{text}");
    }
    for (name, cells) in &rows {
        let verdict = cells[11..].join(" ");
        if name.starts_with("control") {
            // overlaps, lost updates, stale writes accepted
            let violations: u64 = cells[3..6].iter().map(|c| c.parse::<u64>().unwrap()).sum();
            assert!(
                violations > 0,
                "the control run showed no violation:\n{text}"
            );
            assert!(verdict.contains("VIOLATIONS SHOWN"), "{text}");
        } else if !verdict.starts_with("skipped") {
            assert_eq!(verdict, "PASS", "{name}:\n{text}");
            assert!(
                cells[1].parse::<u64>().unwrap() > 0,
                "{name} never acquired the lock:\n{text}"
            );
            assert_eq!(
                &cells[3..6],
                ["0", "0", "0"],
                "{name} lost safety with fencing:\n{text}"
            );
        }
    }
    let control = rows.iter().find(|(name, _)| name == "control (unfenced)");
    assert!(control.is_some(), "no control row:\n{text}");
    assert!(text.contains("All must-hold figures held"), "{text}");
}

/// `--cluster`: a private 3-primary cluster with replicas, its primary
/// killed and the lock's slot moved under the workload; fencing holds, the
/// control still shows violations (about 30 s: four cluster start-ups).
#[test]
fn the_cluster_profile_holds_through_a_primary_kill_and_a_slot_move() {
    let out = output(
        torture().args([
            "--quick",
            "--cluster",
            "--fault",
            "primary-kill",
            "--fault",
            "slot-migration",
        ]),
        Duration::from_secs(180),
    );
    let text = stdout(&out);
    assert_eq!(code(out.status), 0, "{text}{}", stderr(&out));
    let rows = table_rows(&text);
    let names: Vec<&str> = rows.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "primary-kill",
            "slot-migration",
            "mixed",
            "control (unfenced)"
        ],
        "{text}"
    );
    for (name, cells) in &rows {
        if name.starts_with("control") {
            let violations: u64 = cells[3..6].iter().map(|c| c.parse::<u64>().unwrap()).sum();
            assert!(
                violations > 0,
                "the control run showed no violation:\n{text}"
            );
        } else {
            assert_eq!(cells[11..].join(" "), "PASS", "{name}:\n{text}");
            assert!(
                cells[0].parse::<u64>().unwrap() > 0,
                "{name}: no fault injected:\n{text}"
            );
            assert_eq!(&cells[3..6], ["0", "0", "0"], "{name}:\n{text}");
        }
    }
    // A single-server fault is refused on a cluster, clearly.
    let out = output(
        torture().args(["--quick", "--cluster", "--fault", "restart"]),
        Duration::from_secs(60),
    );
    assert!(
        stdout(&out).contains("needs a single server"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn an_unknown_fault_is_a_usage_error() {
    let out = output(
        torture().args(["--fault", "meteor"]),
        Duration::from_secs(10),
    );
    assert_eq!(code(out.status), 2);
    assert_one_error_line(&out);
    assert!(stderr(&out).contains("unknown fault"), "{}", stderr(&out));
}
