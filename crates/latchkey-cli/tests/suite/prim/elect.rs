//! `latchkey elect` and `latchkey leader`: one leader runs its command, a
//! standby takes over after a kill, lost leadership stops the command, and
//! `leader` prints and follows the leader.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

const QUICK: Duration = Duration::from_secs(15);

fn leader_json(redis: &RedisServer) -> serde_json::Value {
    let out = output(latchkey(redis).args(["leader", "e", "--json"]), QUICK);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_str(stdout(&out).trim()).expect("one JSON object")
}

#[test]
fn one_leader_runs_and_a_standby_takes_over_within_the_ttl_after_a_kill() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("elect-kill");
    let marks = scratch.path("marks");
    let section = format!(
        "echo \"$LATCHKEY_VALUE $LATCHKEY_TERM\" >> {}; exec sleep 60",
        marks.display()
    );
    let spawn = |value: &str| {
        latchkey(&redis)
            .args([
                "elect", "e", "--ttl", "1s", "--value", value, "--", "sh", "-c", &section,
            ])
            .spawn()
            .expect("spawn latchkey elect")
    };
    let mut a = spawn("a");
    let first = wait_for_text(&marks, "\n", QUICK);
    let mut b = spawn("b");
    let (first_value, first_term) = first.trim().split_once(' ').expect("value term");
    // The standby campaigns (subscribed to the changes) but does not run.
    latchkey_testkit::eventually_blocking("the standby is subscribed", || {
        redis.subscribers("{test:e}:election:changes") >= 1
    });
    let shown = leader_json(&redis);
    assert_eq!(shown["value"], first_value);
    assert_eq!(shown["term"].to_string(), first_term);
    assert_eq!(std::fs::read_to_string(&marks).unwrap().lines().count(), 1);

    let (leader, mut standby) = if first_value == "a" {
        (&mut a, b)
    } else {
        (&mut b, a)
    };
    leader.kill().unwrap(); // SIGKILL: no resign; its command dies with it
    let killed_at = Instant::now();
    leader.wait().unwrap();
    let text = wait_for_text_lines(&marks, 2);
    let failover = killed_at.elapsed();
    println!("elect: standby ran its command {failover:?} after kill -9 of the leader (TTL 1 s)");
    assert!(
        failover < Duration::from_millis(1000 + 500),
        "took {failover:?}"
    );
    let second = text.lines().nth(1).unwrap();
    let (second_value, second_term) = second.split_once(' ').unwrap();
    assert_ne!(second_value, first_value);
    assert!(second_term.parse::<u64>().unwrap() > first_term.parse::<u64>().unwrap());

    // SIGTERM is forwarded; the command's exit ends the term: resigned.
    send_signal(&standby, libc::SIGTERM);
    assert_eq!(code(wait_exit(&mut standby, QUICK)), 128 + 15);
    assert_eq!(leader_json(&redis)["leader"], false);
}

fn wait_for_text_lines(path: &std::path::Path, n: usize) -> String {
    let deadline = Instant::now() + QUICK;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().count() >= n {
            return text;
        }
        assert!(Instant::now() < deadline, "{path:?} has {text:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn lost_leadership_stops_the_command_and_once_exits_75() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("elect-lost");
    let marks = scratch.path("marks");
    let section = format!("echo started >> {}; exec sleep 60", marks.display());
    let mut elect = latchkey(&redis)
        .args([
            "elect", "e", "--once", "--ttl", "600ms", "--grace", "1s", "--", "sh", "-c",
        ])
        .arg(&section)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_text(&marks, "started", QUICK);
    redis.command(&["DEL", "{test:e}:leader"]).unwrap();
    let status = wait_exit(&mut elect, QUICK);
    assert_eq!(code(status), 75);
    let mut err = String::new();
    std::io::Read::read_to_string(&mut elect.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(err.contains("lost leadership of \"e\""), "{err:?}");
}

#[test]
fn leader_prints_nobody_then_the_leader_and_watch_follows_changes() {
    let redis = RedisServer::start();
    let out = output(latchkey(&redis).args(["leader", "e"]), QUICK);
    assert_eq!(stdout(&out), "e: no leader\n");
    assert_eq!(leader_json(&redis)["leader"], false);

    let mut watch = latchkey(&redis)
        .args(["leader", "e", "--watch", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut next = || -> serde_json::Value {
        serde_json::from_str(&lines.next().expect("a line").expect("read")).expect("JSON")
    };
    assert_eq!(next()["leader"], false);
    latchkey_testkit::eventually_blocking("the watcher is subscribed", || {
        redis.subscribers("{test:e}:election:changes") >= 1
    });
    // A leader whose command ends at once: elected, then resigned.
    let out = output(
        latchkey(&redis).args(["elect", "e", "--value", "x y", "--", "sh", "-c", "exit 3"]),
        QUICK,
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let elected = next();
    assert_eq!(
        (elected["leader"].clone(), elected["value"].clone()),
        (true.into(), "x y".into())
    );
    assert!(elected["term"].as_u64().unwrap() > 0);
    assert_eq!(next()["leader"], false);
    send_signal(&watch, libc::SIGTERM);
    assert_eq!(code(wait_exit(&mut watch, QUICK)), 0);
}

#[test]
fn a_bad_name_or_ttl_is_a_usage_error() {
    let redis = RedisServer::start();
    let out = output(latchkey(&redis).args(["elect", "", "--", "true"]), QUICK);
    assert_eq!(out.status.code(), Some(2));
    assert_one_error_line(&out);
    let out = output(
        latchkey(&redis).args(["elect", "e", "--ttl", "1ms", "--", "true"]),
        QUICK,
    );
    assert_eq!(out.status.code(), Some(2));
    assert_one_error_line(&out);
}

#[test]
fn without_once_a_lost_leader_stops_its_command_and_campaigns_again() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("elect-again");
    let marks = scratch.path("marks");
    let section = format!(
        "echo \"$LATCHKEY_TERM\" >> {}; exec sleep 60",
        marks.display()
    );
    let mut elect = latchkey(&redis)
        .args([
            "elect", "e", "--ttl", "600ms", "--grace", "1s", "--", "sh", "-c",
        ])
        .arg(&section)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_text_lines(&marks, 1);
    redis.command(&["DEL", "{test:e}:leader"]).unwrap();
    // The first command is stopped; re-elected, the second one runs.
    let text = wait_for_text_lines(&marks, 2);
    let terms: Vec<u64> = text.lines().map(|t| t.parse().unwrap()).collect();
    assert!(terms[1] > terms[0], "{terms:?}");
    send_signal(&elect, libc::SIGTERM);
    assert_eq!(code(wait_exit(&mut elect, QUICK)), 128 + 15);
    let mut err = String::new();
    std::io::Read::read_to_string(&mut elect.stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.contains("campaigning again"), "{err:?}");
}
