//! `latchkey doctor`'s advice is for the user and the server the client
//! really has: the URL's user when `ACL WHOAMI` is not allowed (the
//! documented application rules leave it out), the primary a Sentinel names
//! for its own probes, and a user a cluster refuses at connect gets a FAIL
//! line with the fix instead of a message that sends it back to doctor.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::*;
use latchkey::acl::{rule, Use};
use latchkey_testkit::{RedisCluster, SentinelSet};

const QUICK: Duration = Duration::from_secs(30);

fn create_user(
    server_command: impl Fn(&[&str]) -> std::io::Result<String>,
    user: &str,
    rule: &str,
) {
    let mut args = vec!["ACL", "SETUSER", user, "reset", "on", ">pw"];
    args.extend(rule.split_whitespace());
    server_command(&args).expect("ACL SETUSER");
}

/// The line of `check` in doctor's output.
fn line_of<'a>(text: &'a str, check: &str) -> &'a str {
    text.lines()
        .find(|line| line.get(6..).is_some_and(|rest| rest.starts_with(check)))
        .unwrap_or_else(|| panic!("no {check} line in {text}"))
}

#[test]
fn the_documented_application_rule_gets_advice_for_its_own_user() {
    let server = RedisServer::start();
    // Rules (a) and (c): no `acl|whoami`, no `acl|dryrun`.
    create_user(
        |args| server.command(args),
        "app",
        &rule(&[Use::Locks, Use::Primitives], PREFIX),
    );
    let url = format!("redis://app:pw@127.0.0.1:{}/", server.port());
    let out = output(latchkey_at(&url).args(["doctor", "--pings", "5"]), QUICK);
    let text = stdout(&out);
    assert!(
        !text.contains("default"),
        "doctor speaks of user default:\n{text}"
    );
    let acl = line_of(&text, "acl");
    assert!(acl.starts_with("WARN"), "{acl}");
    assert!(acl.contains("ACL SETUSER app +acl|dryrun"), "{acl}");
    for check in ["scripts", "append", "subscribe"] {
        let line = line_of(&text, check);
        assert!(line.starts_with("PASS"), "{line}");
    }
}

#[test]
fn through_sentinel_the_subscribe_probe_goes_to_the_primary() {
    let set = SentinelSet::start();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_latchkey"));
    cmd.env_remove("LATCHKEY_REDIS_URL")
        .env_remove("LATCHKEY_SENTINEL")
        .env_remove("LATCHKEY_SENTINEL_MASTER")
        // Only the password and database come from --redis; nothing
        // listens at its address (port 1), which the probe must not use.
        .args(["--redis", "redis://127.0.0.1:1/0", "--prefix", PREFIX])
        .args(["--sentinel", &set.sentinel_addrs().join(",")])
        .args(["--master", set.master_name(), "doctor", "--pings", "5"]);
    let out = output(&mut cmd, QUICK);
    let text = stdout(&out);
    let subscribe = line_of(&text, "subscribe");
    assert!(
        subscribe.starts_with("PASS"),
        "{subscribe}\n{text}{}",
        stderr(&out)
    );
    assert!(!text.contains("ACL SETUSER"), "{text}");
}

#[test]
fn a_cluster_user_refused_at_connect_gets_the_fix_from_doctor() {
    let cluster = RedisCluster::builder().replicas_per_primary(0).start();
    // The locks' rule, without the cluster's `+cluster|slots +cluster|nodes`.
    let locks = rule(&[Use::Locks], PREFIX);
    for node in cluster.nodes() {
        create_user(|args| node.command(args), "app", &locks);
    }
    let seed = cluster.nodes()[0].port();
    let url = format!("redis://app:pw@127.0.0.1:{seed}/");

    // What a lock says: the refusal, pointing at doctor...
    let refused = output(latchkey_at(&url).args(["status", "x"]), QUICK);
    assert_eq!(code(refused.status), 69, "{}", stderr(&refused));
    assert!(stderr(&refused).contains("doctor"), "{}", stderr(&refused));

    // ...and doctor gives it: one FAIL line naming the user and the command.
    let out = output(latchkey_at(&url).args(["doctor", "--pings", "5"]), QUICK);
    assert_eq!(code(out.status), 1, "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    let connect = line_of(&text, "connect");
    assert!(connect.starts_with("FAIL"), "{connect}");
    assert!(connect.contains("user app"), "{connect}");
    let fix = connect
        .split("Fix: ")
        .nth(1)
        .unwrap_or_else(|| panic!("{connect}"));
    assert!(fix.starts_with("ACL SETUSER app +cluster|"), "{connect}");

    // The fix works: after it (and the siblings the docs name), doctor runs
    // every check as app.
    for node in cluster.nodes() {
        let cluster_note = ["+cluster|slots", "+cluster|nodes", "+pubsub|shardnumsub"];
        node.command(&[&["ACL", "SETUSER", "app"][..], &cluster_note].concat())
            .expect("ACL SETUSER");
    }
    let out = output(latchkey_at(&url).args(["doctor", "--pings", "5"]), QUICK);
    let text = stdout(&out);
    assert!(!text.contains("FAIL  connect"), "{text}");
    assert!(line_of(&text, "scripts").starts_with("PASS"), "{text}");
}

#[test]
fn a_user_refused_subscribe_gets_acl_advice_for_itself_and_it_works() {
    let server = RedisServer::start();
    let all = rule(&[Use::Locks, Use::Primitives], PREFIX);
    let without: String = all
        .split_whitespace()
        .filter(|part| !part.starts_with('&'))
        .collect::<Vec<_>>()
        .join(" ");
    create_user(|args| server.command(args), "app", &without);
    let url = format!("redis://app:pw@127.0.0.1:{}/", server.port());
    let doctor = || {
        let out = output(latchkey_at(&url).args(["doctor", "--pings", "5"]), QUICK);
        stdout(&out)
    };
    let text = doctor();
    let subscribe = line_of(&text, "subscribe").to_owned();
    assert!(subscribe.starts_with("WARN"), "{subscribe}");
    assert!(
        subscribe.contains("user app may not SUBSCRIBE"),
        "{subscribe}"
    );
    let fix = subscribe
        .split("Fix: ")
        .nth(1)
        .unwrap_or_else(|| panic!("{subscribe}"));
    assert!(fix.starts_with("ACL SETUSER app "), "{subscribe}");

    let args: Vec<&str> = fix.split_whitespace().skip(1).collect();
    server
        .command(&[&["ACL"][..], &args].concat())
        .expect("the fix is valid");
    let text = doctor();
    assert!(line_of(&text, "subscribe").starts_with("PASS"), "{text}");
}

#[test]
fn a_probe_that_fails_without_a_refusal_gets_no_acl_advice() {
    let server = RedisServer::start();
    // Writes stall (reads, PING and INFO go on): the probe lock times out.
    server
        .command(&["CLIENT", "PAUSE", "6000", "WRITE"])
        .expect("CLIENT PAUSE");
    let out = output(latchkey(&server).args(["doctor", "--pings", "5"]), QUICK);
    let text = stdout(&out);
    let scripts = line_of(&text, "scripts");
    assert!(scripts.starts_with("FAIL"), "{scripts}");
    assert!(scripts.contains("not for lack of permission"), "{scripts}");
    assert!(!scripts.contains("ACL SETUSER"), "{scripts}");
    assert_eq!(code(out.status), 1, "{text}");
}
