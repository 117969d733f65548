//! `latchkey latch` and `latchkey barrier`: what they print and how they exit.

mod common;

use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

const QUICK: Duration = Duration::from_secs(15);

fn spawn(redis: &RedisServer, args: &[&str]) -> Child {
    latchkey(redis)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn latchkey")
}

fn finish(child: Child) -> Output {
    let mut child = child;
    wait_exit(&mut child, QUICK);
    child.wait_with_output().expect("output")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn run(redis: &RedisServer, args: &[&str]) -> Output {
    output(latchkey(redis).args(args), QUICK)
}

#[test]
fn a_latch_is_created_counted_down_and_waited_for() {
    let redis = RedisServer::start();
    let created = run(&redis, &["latch", "deploy", "--count", "2"]);
    assert_eq!(created.status.code(), Some(0), "{created:?}");
    assert_eq!(stdout(&created), "2");
    // Creating again changes nothing and says what is there.
    assert_eq!(
        stdout(&run(&redis, &["latch", "deploy", "--count", "9"])),
        "2"
    );

    let waiter = spawn(&redis, &["latch", "deploy", "wait", "--timeout", "10s"]);
    latchkey_testkit::eventually_blocking("the waiter listens", || {
        redis.subscribers("{test:deploy}:latch:opened") == 1
    });
    assert_eq!(
        stdout(&run(&redis, &["latch", "deploy", "count-down"])),
        "1"
    );
    assert_eq!(
        stdout(&run(&redis, &["latch", "deploy", "count-down"])),
        "0"
    );
    let waited = finish(waiter);
    assert_eq!(waited.status.code(), Some(0), "{waited:?}");

    // A late waiter returns at once.
    let started = Instant::now();
    let late = run(&redis, &["latch", "deploy", "wait", "--timeout", "10s"]);
    assert_eq!(late.status.code(), Some(0), "{late:?}");
    assert!(started.elapsed() < Duration::from_secs(5));

    // Below zero, or a latch that does not exist: a conflict, one line.
    for name in ["deploy", "missing"] {
        let out = run(&redis, &["latch", name, "count-down"]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
    }
}

#[test]
fn a_latch_wait_times_out_with_exit_1() {
    let redis = RedisServer::start();
    run(&redis, &["latch", "closed", "--count", "1"]);
    let out = run(&redis, &["latch", "closed", "wait", "--timeout", "200ms"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("timed out"));
}

#[test]
fn bad_latch_and_barrier_input_exits_2() {
    let redis = RedisServer::start();
    for args in [
        &["latch", "x", "--count", "0"][..],
        &["latch", "x", "--count", "100001"],
        &["latch", "x"],
        &["latch", "x", "--count", "1", "wait"],
        &["barrier", "x", "--parties", "0"],
    ] {
        let out = run(&redis, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).lines().count(),
            1,
            "{args:?}"
        );
    }
}

#[test]
fn a_barrier_releases_all_parties_together() {
    let redis = RedisServer::start();
    let early: Vec<Child> = (0..2)
        .map(|_| {
            spawn(
                &redis,
                &["barrier", "step", "--parties", "3", "--timeout", "10s"],
            )
        })
        .collect();
    latchkey_testkit::eventually_blocking("two parties arrived", || {
        redis
            .command(&["HGET", "{test:step}:barrier", "arrived"])
            .is_ok_and(|n| n.trim() == "2")
    });
    let last = run(
        &redis,
        &["barrier", "step", "--parties", "3", "--timeout", "10s"],
    );
    assert_eq!(last.status.code(), Some(0), "{last:?}");
    assert_eq!(stdout(&last), "0");
    for party in early {
        let out = finish(party);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert_eq!(stdout(&out), "0", "the same generation");
    }
    // A lone party of the next generation times out (exit 1), arrival taken back.
    let lone = run(
        &redis,
        &["barrier", "step", "--parties", "3", "--timeout", "200ms"],
    );
    assert_eq!(lone.status.code(), Some(1), "{lone:?}");
    assert_eq!(
        redis
            .command(&["HGET", "{test:step}:barrier", "arrived"])
            .unwrap()
            .trim(),
        "0"
    );
}
