//! `latchkey mcp`'s other tools: `wait` woken by `signal`, `status` and
//! `list`, `request_release`, and `revoke` behind `--allow-revoke`.

use serde_json::json;

use super::session::*;
use crate::common::*;

#[test]
fn a_wait_is_woken_by_a_signal_and_times_out_without_one() {
    let redis = RedisServer::start();
    let mut waiter = Session::start(&redis);
    let mut sender = Session::start(&redis);

    let waiting = waiter.start_call("wait", json!({"names": ["built", "go"], "timeout": "30s"}));
    latchkey_testkit::eventually_blocking("the waiter subscribed", || {
        redis.subscribers(&format!("{PREFIX}signal:go")) >= 1
    });
    let sent = sender.ok("signal", json!({"name": "go", "payload": "v42"}));
    assert!(num(&sent, "receivers") >= 1, "{sent}");
    let heard = waiter
        .called(waiting, REPLY_WITHIN)
        .expect("the wait's reply");
    assert_eq!(heard["signalled"], true);
    assert_eq!(text(&heard, "name"), "go");
    assert_eq!(text(&heard, "payload"), "v42");

    let quiet = waiter.ok("wait", json!({"names": ["go"], "timeout": "200ms"}));
    assert_eq!(quiet["signalled"], false, "{quiet}");
    let nobody = sender.ok("signal", json!({"name": "go", "one": true}));
    assert_eq!(num(&nobody, "receivers"), 0, "nobody waits any more");
}

#[test]
fn status_and_list_show_the_holder_and_never_a_token() {
    let redis = RedisServer::start();
    let mut agent = Session::start(&redis);
    let free = agent.ok("status", json!({"name": "file-a"}));
    assert_eq!(free["held"], false);
    assert_eq!(free["primitives"], json!([]));

    let held = agent.ok("acquire", json!({"name": "file-a", "ttl": "1m"}));
    agent.ok("acquire", json!({"name": "file-b", "ttl": "1m"}));
    let status = agent.ok("status", json!({"name": "file-a"}));
    assert_eq!(status["held"], true);
    let lock = &status["primitives"][0];
    assert_eq!(lock["kind"], "lock");
    assert_eq!(num(&lock["holder"], "pid"), u64::from(agent.pid()));
    assert_eq!(lock["fencing_token"], held["fencing_token"]);
    assert!(!status.to_string().contains(&text(&held, "token")));

    let listed = agent.ok("list", json!({"pattern": "file-*"}));
    let names: Vec<&str> = listed["primitives"]
        .as_array()
        .expect("primitives")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["file-a", "file-b"]);
    assert_eq!(listed["truncated"], false);
    let one = agent.ok("list", json!({"limit": 1}));
    assert_eq!(one["primitives"].as_array().map(Vec::len), Some(1));
    assert_eq!(one["truncated"], true);
}

#[test]
fn revoke_ends_a_hold_and_its_fencing_token_outranks_the_revoked() {
    let redis = RedisServer::start();
    let mut agent = Session::start(&redis);
    let mut operator = Session::start_with(&redis, &["--allow-revoke"]);
    let held = agent.ok("acquire", json!({"name": "prod", "ttl": "5m"}));

    let asked = operator.ok("request_release", json!({"name": "prod"}));
    assert_eq!(num(&asked, "heard"), 0, "a door's holder does not listen");
    let revoked = operator.ok("revoke", json!({"name": "prod"}));
    let first = &revoked["revoked"][0];
    assert_eq!(first["kind"], "lock", "{revoked}");
    assert_eq!(num(first, "ended"), 1);
    assert!(num(first, "fencing_token") > num(&held, "fencing_token"));
    assert!(!exists(&redis, "prod"));

    let lost = agent.err(
        "extend",
        json!({"name": "prod", "token": held["token"], "ttl": "5m"}),
    );
    assert_eq!(lost.code, "NOT_HELD");
    let next = agent.ok("acquire", json!({"name": "prod", "ttl": "5m"}));
    assert!(num(&next, "fencing_token") >= num(first, "fencing_token"));
}

#[test]
fn a_long_call_does_not_hold_up_the_sessions_other_calls() {
    let redis = RedisServer::start();
    let mut agent = Session::start(&redis);
    let waiting = agent.start_call("wait", json!({"names": ["later"], "timeout": "30s"}));
    // Answered while the wait is still open.
    let status = agent.ok("status", json!({"name": "anything"}));
    assert_eq!(status["held"], false);
    latchkey_testkit::eventually_blocking("the wait subscribed", || {
        redis.subscribers(&format!("{PREFIX}signal:later")) >= 1
    });
    agent.ok("signal", json!({"name": "later", "payload": "now"}));
    let heard = agent.called(waiting, REPLY_WITHIN).expect("the wait");
    assert_eq!(text(&heard, "payload"), "now");
}
