//! Servers latchkey cannot work on, as the command line tells them: Redis
//! 6.2 (too old: no `SET … NX … GET`) exits 69 with one line naming its
//! version, `doctor` says the same as a FAIL; a server that does not offer
//! a command latchkey needs (disabled with `rename-command`, as proxies
//! and managed services do) is named by `doctor` with that command.

use crate::common;

use std::time::Duration;

use common::*;
use latchkey_testkit::{servers_required, ServerProgram};

const QUICK: Duration = Duration::from_secs(15);

/// Redis 6.2 as `./dev servers` fetched it, or `None` with a note (a
/// failure where `./dev test` promised every server).
fn redis_6_2() -> Option<RedisServer> {
    let Some(program) = ServerProgram::fetched("redis-6.2") else {
        assert!(
            !servers_required(),
            "redis-6.2 is missing although LATCHKEY_REQUIRE_SERVERS=1: run ./dev servers"
        );
        eprintln!("note: redis-6.2 is not fetched (./dev servers): this test is skipped");
        return None;
    };
    Some(RedisServer::builder().program(program).start())
}

#[test]
fn redis_6_2_exits_69_with_one_line_naming_its_version() {
    let Some(redis) = redis_6_2() else { return };
    for args in [&["run", "job", "--", "true"][..], &["status", "job"]] {
        let out = output(latchkey(&redis).args(args), QUICK);
        assert_eq!(code(out.status), 69, "{args:?}: {}", stderr(&out));
        assert_one_error_line(&out);
        let line = stderr(&out);
        assert!(
            line.contains("Redis 6.2.")
                && line.contains(
                    "is not supported: latchkey needs Redis 7.0 or later, or Valkey 7.2 or later"
                ),
            "{args:?}: {line}"
        );
    }
    assert_eq!(redis.command(&["DBSIZE"]).unwrap(), "0", "nothing written");
}

#[test]
fn a_redlock_with_a_redis_6_2_instance_is_refused_naming_it() {
    let Some(old) = redis_6_2() else { return };
    let (a, b) = (RedisServer::start(), RedisServer::start());
    let mut cmd = latchkey(&a);
    cmd.args([
        "--redis",
        &b.url(),
        "--redis",
        &old.url(),
        "run",
        "job",
        "--",
        "true",
    ]);
    let out = output(&mut cmd, QUICK);
    assert_eq!(code(out.status), 69, "{}", stderr(&out));
    assert_one_error_line(&out);
    let line = stderr(&out);
    assert!(
        line.contains(&format!(
            "Redis 6.2.5 at 127.0.0.1:{} is not supported",
            old.port()
        )),
        "the old instance, by its address, not a lost quorum: {line}"
    );
}

#[test]
fn doctor_fails_redis_6_2_on_its_version() {
    let Some(redis) = redis_6_2() else { return };
    let out = output(latchkey(&redis).args(["doctor", "--pings", "5"]), QUICK);
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("FAIL  version"))
        .unwrap_or_else(|| panic!("no FAIL version line: {text}{}", stderr(&out)));
    assert!(
        line.contains("Redis 6.2.")
            && line.contains("Redis 7.0 or later")
            && line.contains("Fix: "),
        "{line}"
    );
    assert_eq!(code(out.status), 1, "a FAIL makes doctor exit 1");
}

#[test]
fn doctor_names_a_command_the_server_does_not_offer() {
    // As a proxy or a managed service that disables scripting would.
    let redis = RedisServer::builder()
        .arg_words("rename-command", &["EVALSHA", ""])
        .start();
    assert!(
        redis.command(&["EVALSHA", "x", "0"]).is_err(),
        "renamed away"
    );
    let out = output(latchkey(&redis).args(["doctor", "--pings", "5"]), QUICK);
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("FAIL  scripts"))
        .unwrap_or_else(|| panic!("no FAIL scripts line: {text}{}", stderr(&out)));
    assert!(
        line.contains("does not offer the evalsha command") && line.contains("Fix: enable evalsha"),
        "{line}"
    );
    assert_eq!(code(out.status), 1);
}

#[test]
fn doctor_names_the_server_under_test() {
    let redis = RedisServer::start();
    let info = redis.command(&["INFO", "server"]).unwrap();
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
            .map(str::to_owned)
    };
    // Valkey 8 and 9 report redis_version:7.2.4: doctor names Valkey's own.
    let expected = match field("valkey_version") {
        Some(version) => format!("Valkey {version}"),
        None => format!("Redis {}", field("redis_version").expect("redis_version")),
    };
    let out = output(latchkey(&redis).args(["doctor", "--pings", "5"]), QUICK);
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.get(6..).is_some_and(|rest| rest.starts_with("version")))
        .unwrap_or_else(|| panic!("no version line: {text}"));
    assert!(
        line.starts_with("PASS") && line.ends_with(&expected),
        "{} (LATCHKEY_TEST_SERVER={}): {line}",
        expected,
        ServerProgram::name_of_this_run()
    );
}
