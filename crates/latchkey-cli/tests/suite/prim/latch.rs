//! `latchkey latch` and `latchkey barrier`: what they print and how they exit.

use crate::common;

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

fn pttl(redis: &RedisServer, key: &str) -> i64 {
    redis
        .command(&["PTTL", key])
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn an_open_latch_is_not_created_again_and_counting_keeps_its_ttl() {
    // `--count` on an open latch printed 0 and exited 0,
    // so the next `wait` passed at once; `count-down` reset the TTL to its
    // own --ttl (default 1h) whatever the creator set.
    let redis = RedisServer::start();
    let key = "{test:short}:latch";
    let created = run(&redis, &["latch", "short", "--count", "2", "--ttl", "2m"]);
    assert_eq!(created.status.code(), Some(0), "{created:?}");
    assert_eq!(stdout(&run(&redis, &["latch", "short", "count-down"])), "1");
    assert!(pttl(&redis, key) <= 120_000, "the creator's TTL stays");
    assert_eq!(stdout(&run(&redis, &["latch", "short", "count-down"])), "0");
    assert!(pttl(&redis, key) <= 120_000, "the creator's TTL stays");
    let again = run(&redis, &["latch", "short", "--count", "2"]);
    assert_eq!(again.status.code(), Some(1), "{again:?}");
    assert_one_error_line(&again);
    let err = String::from_utf8_lossy(&again.stderr).into_owned();
    assert!(
        err.contains("open already") && err.contains("new name"),
        "{err}"
    );
    assert_eq!(
        redis.command(&["GET", key]).unwrap().trim(),
        "0",
        "left as it was"
    );
}

#[test]
fn a_barrier_takes_a_new_party_count_when_nobody_waits() {
    // After a release the next generation kept the old
    // N ("has 1 parties, not 2" with nobody waiting).
    let redis = RedisServer::start();
    let one = run(&redis, &["barrier", "reuse", "--parties", "1"]);
    assert_eq!(
        (one.status.code(), stdout(&one)),
        (Some(0), "0".into()),
        "{one:?}"
    );
    let first = spawn(
        &redis,
        &["barrier", "reuse", "--parties", "2", "--timeout", "10s"],
    );
    latchkey_testkit::eventually_blocking("a party of two arrived", || {
        redis
            .command(&["HGET", "{test:reuse}:barrier", "arrived"])
            .is_ok_and(|n| n.trim() == "1")
    });
    // While one waits, its N binds: another N is refused (exit 2, one line).
    let other = run(
        &redis,
        &["barrier", "reuse", "--parties", "3", "--timeout", "1s"],
    );
    assert_eq!(other.status.code(), Some(2), "{other:?}");
    assert_one_error_line(&other);
    let second = run(
        &redis,
        &["barrier", "reuse", "--parties", "2", "--timeout", "10s"],
    );
    assert_eq!(
        (second.status.code(), stdout(&second)),
        (Some(0), "1".into()),
        "{second:?}"
    );
    assert_eq!(finish(first).status.code(), Some(0));
}

#[test]
fn a_barrier_with_a_ttl_shorter_than_the_wait_still_releases_its_parties() {
    // With --ttl below the wait the key expired under the
    // first party, and both parties timed out although both arrived.
    let redis = RedisServer::start();
    let args = [
        "barrier",
        "brief",
        "--parties",
        "2",
        "--ttl",
        "300ms",
        "--timeout",
        "20s",
    ];
    let first = spawn(&redis, &args);
    latchkey_testkit::eventually_blocking("the first party arrived", || {
        redis
            .command(&["HGET", "{test:brief}:barrier", "arrived"])
            .is_ok_and(|n| n.trim() == "1")
    });
    // Past the TTL (the key's own clock says so: no sleep as a signal).
    latchkey_testkit::eventually_blocking("the barrier outlived its --ttl", || {
        pttl(&redis, "{test:brief}:barrier") > 19_000
    });
    std::thread::sleep(Duration::from_millis(600));
    let second = run(&redis, &args);
    assert_eq!(second.status.code(), Some(0), "{second:?}");
    assert_eq!(finish(first).status.code(), Some(0));
}

#[test]
fn latch_and_barrier_ttls_over_a_day_give_their_own_advice() {
    let redis = RedisServer::start();
    for args in [
        &["latch", "x", "--count", "1", "--ttl", "25h"][..],
        &["barrier", "x", "--parties", "2", "--ttl", "25h"],
    ] {
        let out = run(&redis, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert_one_error_line(&out);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(err.contains("\"25h\"") && !err.contains("run"), "{err}");
    }
}
