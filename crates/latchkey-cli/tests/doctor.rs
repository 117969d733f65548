//! `latchkey doctor` against servers configured safely and unsafely.

mod common;

use std::time::Duration;

use common::*;

const QUICK: Duration = Duration::from_secs(15);

/// The doctor's line for `check`, and its exit code.
fn doctor(redis: &RedisServer, check: &str) -> (String, i32) {
    let out = output(latchkey(redis).args(["doctor", "--pings", "20"]), QUICK);
    let text = stdout(&out);
    for line in text.lines() {
        assert!(
            ["PASS  ", "WARN  ", "FAIL  "]
                .iter()
                .any(|level| line.starts_with(level)),
            "every line is one verdict: {line:?}"
        );
    }
    let line = text
        .lines()
        .find(|line| line[6..].starts_with(check))
        .unwrap_or_else(|| panic!("no {check} line in {text}"))
        .to_owned();
    (line, code(out.status))
}

#[test]
fn an_evicting_policy_fails() {
    for policy in ["allkeys-lru", "volatile-ttl"] {
        let redis = RedisServer::builder()
            .arg("maxmemory-policy", policy)
            .start();
        let (line, exit) = doctor(&redis, "eviction");
        assert!(line.starts_with("FAIL"), "{line}");
        assert!(
            line.contains(policy) && line.contains("Fix: "),
            "reason and fix: {line}"
        );
        assert_eq!(exit, 1, "a FAIL makes the doctor exit 1");
    }
}

#[test]
fn a_plain_noeviction_server_passes() {
    let redis = RedisServer::builder()
        .arg("maxmemory-policy", "noeviction")
        .start();
    let (line, exit) = doctor(&redis, "eviction");
    assert!(line.starts_with("PASS"), "{line}");
    assert_eq!(exit, 0, "no FAIL anywhere: no persistence is only a WARN");
    for check in [
        "version",
        "replication",
        "cluster",
        "clock",
        "scripts",
        "subscribe",
    ] {
        let (line, _) = doctor(&redis, check);
        assert!(line.starts_with("PASS"), "{line}");
    }
    let (line, _) = doctor(&redis, "persistence");
    assert!(line.starts_with("WARN"), "no AOF: {line}");
}

#[test]
fn persistence_and_replication_are_judged() {
    let primary = RedisServer::builder().aof(true).start();
    let (line, _) = doctor(&primary, "persistence");
    assert!(
        line.starts_with("PASS") && line.contains("always"),
        "{line}"
    );

    let replica = RedisServer::builder().replica_of(primary.port()).start();
    // The replica shows up in the primary's INFO once it has connected.
    latchkey_testkit::eventually_blocking("the replica is connected", || {
        !primary
            .command(&["INFO", "replication"])
            .unwrap()
            .contains("connected_slaves:0")
    });
    let (line, _) = doctor(&primary, "replication");
    assert!(line.starts_with("WARN"), "{line}");
    let (line, exit) = doctor(&replica, "replication");
    assert!(
        line.starts_with("FAIL") && line.contains("replica"),
        "{line}"
    );
    assert_eq!(exit, 1);
}

#[test]
fn a_user_without_script_permission_fails() {
    let redis = RedisServer::start();
    redis
        .command(&[
            "ACL", "SETUSER", "limited", "on", ">pw", "~*", "&*", "+@all", "-evalsha", "-eval",
        ])
        .unwrap();
    let port = redis.port();
    let out = output(
        latchkey_at(&format!("redis://limited:pw@127.0.0.1:{port}/"))
            .args(["doctor", "--pings", "5"]),
        QUICK,
    );
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l[6..].starts_with("scripts"))
        .expect(&text);
    assert!(
        line.starts_with("FAIL") && line.contains("limited"),
        "{line}"
    );
    assert_eq!(code(out.status), 1);
}
