//! `latchkey doctor` against servers configured safely and unsafely.

use crate::common;

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

/// `latchkey doctor` as the user in `url`: stdout and the exit code.
fn doctor_at(url: &str) -> (String, i32) {
    let out = output(latchkey_at(url).args(["doctor", "--pings", "5"]), QUICK);
    (stdout(&out), code(out.status))
}

/// The line of `check` in doctor output `text`.
fn line_of<'a>(text: &'a str, check: &str) -> &'a str {
    text.lines()
        .find(|l| l.get(6..).is_some_and(|rest| rest.starts_with(check)))
        .unwrap_or_else(|| panic!("no {check} line in {text}"))
}

/// The `ACL SETUSER …` fix at the end of a doctor line, as arguments.
fn fix_of(line: &str) -> Vec<&str> {
    let (_, fix) = line.split_once("Fix: ").expect(line);
    assert!(fix.starts_with("ACL SETUSER "), "{line}");
    fix.split_whitespace().collect()
}

#[test]
fn a_full_server_or_a_replica_gets_the_real_fix_not_an_acl_one() {
    let primary = RedisServer::start();
    primary
        .command(&["CONFIG", "SET", "maxmemory", "1"])
        .unwrap();
    let (text, exit) = doctor_at(&primary.url());
    primary
        .command(&["CONFIG", "SET", "maxmemory", "0"])
        .unwrap();
    let line = line_of(&text, "scripts");
    assert!(
        line.starts_with("FAIL") && line.contains("out of memory") && line.contains("maxmemory"),
        "{line}"
    );
    assert!(!line.contains("ACL SETUSER"), "{line}");
    assert_eq!(exit, 1);

    let replica = RedisServer::builder().replica_of(primary.port()).start();
    let (text, _) = doctor_at(&replica.url());
    let line = line_of(&text, "scripts");
    assert!(
        line.starts_with("FAIL")
            && line.contains("read-only replica")
            && line.contains("connect to the primary"),
        "{line}"
    );
    assert!(!line.contains("ACL SETUSER"), "{line}");
}

#[test]
fn a_user_without_append_is_warned_and_the_fix_works() {
    let redis = RedisServer::start();
    redis
        .command(&[
            "ACL", "SETUSER", "noappend", "on", ">pw", "~*", "&*", "+@all", "-append",
        ])
        .unwrap();
    let url = format!("redis://noappend:pw@127.0.0.1:{}/", redis.port());
    let (text, exit) = doctor_at(&url);
    assert!(line_of(&text, "scripts").starts_with("PASS"), "{text}");
    let line = line_of(&text, "append");
    assert!(line.starts_with("WARN"), "{line}");
    assert_eq!(exit, 0, "a WARN is not a failure: {text}");

    redis.command(&fix_of(line)).expect("the fix is accepted");
    let (text, _) = doctor_at(&url);
    assert!(line_of(&text, "append").starts_with("PASS"), "{text}");
}

#[test]
fn the_acl_fix_applies_to_a_user_with_all_keys_and_channels() {
    let redis = RedisServer::start();
    redis
        .command(&[
            "ACL", "SETUSER", "allkeys", "on", ">pw", "~*", "&*", "+@all", "-evalsha", "-eval",
        ])
        .unwrap();
    let url = format!("redis://allkeys:pw@127.0.0.1:{}/", redis.port());
    let (text, _) = doctor_at(&url);
    let line = line_of(&text, "scripts");
    assert!(line.starts_with("FAIL"), "{line}");
    // Redis refuses `&test:*` after `&*` ("adding a pattern after the *
    // pattern is not valid"): the rule must be one it accepts.
    redis.command(&fix_of(line)).expect("the fix is accepted");
    let (text, exit) = doctor_at(&url);
    assert!(line_of(&text, "scripts").starts_with("PASS"), "{text}");
    assert_eq!(exit, 0, "{text}");
}

#[test]
fn an_even_number_of_redlock_servers_is_warned_about_without_verbose() {
    let servers = RedisServer::start_many(2);
    let mut doctor = latchkey_at(&servers[0].url());
    doctor.args(["--redis", &servers[1].url(), "doctor", "--pings", "5"]);
    let out = output(&mut doctor, QUICK);
    assert!(
        stdout(&out)
            .lines()
            .any(|l| l.starts_with("WARN  redlock") && l.contains("2 servers")),
        "{}",
        stdout(&out)
    );

    let mut acquire = latchkey_at(&servers[0].url());
    acquire.args(["--redis", &servers[1].url(), "acquire", "x", "--ttl", "5s"]);
    let out = output(&mut acquire, QUICK);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("warning: Redlock over 2 servers"),
        "{}",
        stderr(&out)
    );
}
