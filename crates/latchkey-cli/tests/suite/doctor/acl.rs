//! ACL users from the command line: a user with the rule of
//! `docs/security.md` works (inspection included) and `doctor` says so; a
//! user lacking part of it gets one line and exit 69 naming what is missing,
//! and `doctor` prints the `ACL SETUSER` that fixes it. Whether the user may
//! use the primitives is a WARN of its own (`primitives`), never a FAIL.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::*;
use latchkey::acl::{rule, Use};

const QUICK: Duration = Duration::from_secs(15);

fn create_user(server: &RedisServer, user: &str, rule: &str) {
    let mut args = vec!["ACL", "SETUSER", user, "reset", "on", ">pw"];
    args.extend(rule.split_whitespace());
    server.command(&args).expect("ACL SETUSER");
}

fn as_user(server: &RedisServer, user: &str) -> Command {
    latchkey_at(&format!("redis://{user}:pw@127.0.0.1:{}/", server.port()))
}

/// The doctor's `check` line for `user`, and the doctor's exit code.
fn doctor_run(server: &RedisServer, user: &str, check: &str) -> (String, i32) {
    let out = output(
        as_user(server, user).args(["doctor", "--pings", "5"]),
        QUICK,
    );
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|line| line.get(6..).is_some_and(|rest| rest.starts_with(check)))
        .unwrap_or_else(|| panic!("no {check} line in {text}; stderr {}", stderr(&out)))
        .to_owned();
    (line, code(out.status))
}

/// The doctor's `check` line for `user`.
fn doctor_line(server: &RedisServer, user: &str, check: &str) -> String {
    doctor_run(server, user, check).0
}

fn everything() -> String {
    rule(&[Use::Locks, Use::Signals, Use::Inspection], PREFIX)
}

#[test]
fn a_user_with_the_documented_rule_passes_the_doctor_and_inspects() {
    let server = RedisServer::start();
    create_user(&server, "ops", &everything());
    for check in ["acl", "scripts", "append", "subscribe"] {
        let line = doctor_line(&server, "ops", check);
        assert!(line.starts_with("PASS"), "{line}");
    }
    let out = output(
        as_user(&server, "ops").args(["acquire", "inspected", "--ttl", "30s"]),
        QUICK,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    let out = output(as_user(&server, "ops").args(["list"]), QUICK);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("inspected"), "{}", stdout(&out));
}

#[test]
fn the_doctor_prints_the_fix_for_what_is_missing_and_the_fix_works() {
    let server = RedisServer::start();
    let lacking = everything()
        .replace("+evalsha ", "")
        .replace(" ~{test:*", "");
    create_user(&server, "lim", &lacking);
    let line = doctor_line(&server, "lim", "acl");
    assert!(line.starts_with("FAIL"), "{line}");
    let fix = line
        .split("Fix: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no fix in {line}"));
    // The command to run, then (lim may not run ACL SETUSER) the access
    // string for a managed service.
    let (fix, managed) = fix
        .split_once(" (by an admin); ")
        .unwrap_or_else(|| panic!("no access string in {fix}"));
    assert_eq!(fix, "ACL SETUSER lim +evalsha ~{test:*");
    assert!(
        managed.contains("access string with at least \"on +ping"),
        "{managed}"
    );
    // The fix is one Redis takes, and it is enough.
    server
        .command(&fix.split_whitespace().collect::<Vec<_>>())
        .expect("the printed fix");
    let line = doctor_line(&server, "lim", "acl");
    assert!(line.starts_with("PASS"), "{line}");
}

#[test]
fn a_user_missing_only_a_signal_channel_is_warned() {
    let server = RedisServer::start();
    // Locks and inspection, channels for the locks' release channels only.
    let lacking = everything().replace(" &test:*", "");
    create_user(&server, "nosig", &lacking);
    let line = doctor_line(&server, "nosig", "acl");
    assert!(line.starts_with("WARN"), "{line}");
    assert!(
        line.contains("Fix: ACL SETUSER nosig &test:* (by an admin); "),
        "{line}"
    );
}

#[test]
fn without_acl_dryrun_the_rule_check_is_skipped_with_a_warning() {
    let server = RedisServer::start();
    create_user(&server, "app", &rule(&[Use::Locks, Use::Signals], PREFIX));
    let line = doctor_line(&server, "app", "acl");
    assert!(
        line.starts_with("WARN") && line.contains("acl|dryrun"),
        "{line}"
    );
    // The probes still pass: the rule is enough for locks.
    let line = doctor_line(&server, "app", "scripts");
    assert!(line.starts_with("PASS"), "{line}");
}

#[test]
fn a_user_without_evalsha_exits_69_with_one_line_naming_it() {
    let server = RedisServer::start();
    create_user(&server, "noscript", &everything().replace("+evalsha ", ""));
    let out = output(
        as_user(&server, "noscript").args(["acquire", "job", "--ttl", "5s"]),
        QUICK,
    );
    assert_eq!(code(out.status), 69, "{}", stderr(&out));
    assert_one_error_line(&out);
    let err = stderr(&out);
    assert!(
        err.contains("'evalsha' command") && err.contains("docs/security.md"),
        "{err}"
    );
}

#[test]
fn a_signal_without_its_channel_exits_69_with_one_line_naming_it() {
    let server = RedisServer::start();
    create_user(&server, "nosig", &everything().replace(" &test:*", ""));
    let out = output(
        as_user(&server, "nosig").args(["signal", "deploy", "v1"]),
        QUICK,
    );
    assert_eq!(code(out.status), 69, "{}", stderr(&out));
    assert_one_error_line(&out);
    let err = stderr(&out);
    assert!(err.contains("test:signal:deploy"), "{err}");
}

#[test]
fn a_user_of_plain_locks_is_warned_about_the_primitives_and_the_fix_works() {
    let server = RedisServer::start();
    // Locks, signals and inspection (ACL DRYRUN): everything but primitives.
    create_user(&server, "plain", &everything());
    assert!(doctor_line(&server, "plain", "acl").starts_with("PASS"));
    let (line, exit) = doctor_run(&server, "plain", "primitives");
    assert!(line.starts_with("WARN"), "{line}");
    assert_eq!(exit, 0, "a WARN is not a failure: {line}");
    // Exactly what is missing: inspection grants ZRANGEBYSCORE, LRANGE,
    // HMGET and SCARD already (`inspect_any.lua` reads every kind).
    let missing: Vec<String> = Use::Primitives
        .commands()
        .iter()
        .filter(|c| !Use::Inspection.commands().contains(c))
        .map(|c| format!("+{c}"))
        .collect();
    let fix = format!("ACL SETUSER plain {}", missing.join(" "));
    assert!(
        line.contains(&format!("Fix: {fix} (by an admin); ")),
        "{line}"
    );
    let out = output(
        as_user(&server, "plain").args(["run", "--permits", "2", "pool", "--", "true"]),
        QUICK,
    );
    assert_eq!(code(out.status), 69, "refused: {}", stderr(&out));
    assert_one_error_line(&out);

    server
        .command(&fix.split_whitespace().collect::<Vec<_>>())
        .expect("the printed fix");
    let line = doctor_line(&server, "plain", "primitives");
    assert!(line.starts_with("PASS"), "{line}");
    let out = output(
        as_user(&server, "plain").args(["run", "--permits", "2", "pool", "--", "true"]),
        QUICK,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
}

#[test]
fn a_user_with_the_locks_and_primitives_rules_passes_the_primitives_check() {
    let server = RedisServer::start();
    // Inspection for `ACL DRYRUN`, which the doctor's check needs.
    let granted = rule(&[Use::Locks, Use::Primitives, Use::Inspection], PREFIX);
    create_user(&server, "prim", &granted);
    let (line, exit) = doctor_run(&server, "prim", "primitives");
    assert!(line.starts_with("PASS"), "{line}");
    assert_eq!(exit, 0, "{line}");
    for args in [
        &["run", "--permits", "1", "pool", "--", "true"][..],
        &["run", "--write", "doc", "--", "true"],
    ] {
        let out = output(as_user(&server, "prim").args(args), QUICK);
        assert_eq!(code(out.status), 0, "{args:?}: {}", stderr(&out));
    }
}
