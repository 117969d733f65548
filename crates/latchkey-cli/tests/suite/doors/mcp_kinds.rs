//! `latchkey mcp` beyond plain locks: permits of a semaphore, the sides of a
//! read-write lock and an election's leadership, each taken by `acquire` or
//! `elect`, kept by the caller's token and kind, renewed only by `extend`,
//! and excluding the CLI on the same names.

use std::time::Duration;

use serde_json::json;

use super::session::*;
use crate::common::*;

/// The members of the permits set of the semaphore `name` (both members of
/// a hold of 2 included).
fn permits_held(redis: &RedisServer, name: &str) -> u64 {
    let key = format!("{{{PREFIX}{name}}}:permits");
    redis.command(&["ZCARD", &key]).unwrap().parse().unwrap()
}

#[test]
fn permits_of_a_semaphore_are_taken_kept_and_given_back_by_token_and_k() {
    let redis = RedisServer::start();
    let mut first = Session::start(&redis);
    let mut second = Session::start(&redis);

    let both = json!({"name": "gpus", "ttl": "1m", "permits": 2, "k": 2});
    let held = first.ok("acquire", both.clone());
    assert_eq!(held["acquired"], true, "{held}");
    assert_eq!(held["kind"], "semaphore");
    assert_eq!(num(&held, "k"), 2);
    assert!(num(&held, "fencing_token") > 0);
    assert_eq!(permits_held(&redis, "gpus"), 2);
    let busy = second.ok(
        "acquire",
        json!({"name": "gpus", "ttl": "1m", "permits": 2}),
    );
    assert_eq!(busy["acquired"], false, "{busy}");
    // The CLI counts the same permits.
    let cli = output(
        latchkey(&redis).args(["run", "--permits", "2", "gpus", "--no-wait", "--", "true"]),
        Duration::from_secs(20),
    );
    assert_eq!(cli.status.code(), Some(1), "busy for the CLI too");

    // The heartbeat moves both members of the hold.
    let token = held["token"].clone();
    first.ok(
        "extend",
        json!({"name": "gpus", "token": token, "ttl": "10m", "kind": "semaphore", "k": 2}),
    );
    let key = format!("{{{PREFIX}gpus}}:permits");
    let scores = redis
        .command(&["ZRANGE", &key, "0", "-1", "WITHSCORES"])
        .unwrap();
    let time = redis.command(&["TIME"]).unwrap();
    let now_ms: u64 = time.lines().next().unwrap().parse::<u64>().unwrap() * 1000;
    for score in scores.lines().skip(1).step_by(2) {
        let expiry: u64 = score.parse().unwrap();
        assert!(expiry > now_ms + 60_000, "renewed to 10m: {scores}");
    }

    // A waiter for one permit is woken by the release of the two.
    let waiting = second.start_call(
        "acquire",
        json!({"name": "gpus", "ttl": "1m", "permits": 2, "wait": "30s"}),
    );
    let released = first.ok(
        "release",
        json!({"name": "gpus", "token": token, "kind": "semaphore", "k": 2}),
    );
    assert_eq!(released["released"], true);
    let woken = second
        .called(waiting, REPLY_WITHIN)
        .expect("the waiter's acquire");
    assert_eq!(woken["acquired"], true, "{woken}");
    assert_eq!(num(&woken, "k"), 1);
    assert!(num(&woken, "fencing_token") > num(&held, "fencing_token"));
    assert_eq!(permits_held(&redis, "gpus"), 1);
    let again = first.err(
        "release",
        json!({"name": "gpus", "token": token, "kind": "semaphore", "k": 2}),
    );
    assert_eq!(again.code, "NOT_HELD", "{again:?}");

    // Bad input: a typed error, and nothing taken.
    for (arguments, code) in [
        (
            json!({"name": "gpus", "ttl": "1m", "k": 2}),
            "INVALID_INPUT",
        ),
        (
            json!({"name": "gpus", "ttl": "1m", "permits": 2, "k": 3}),
            "INVALID_COUNT",
        ),
        (
            json!({"name": "gpus", "ttl": "1m", "permits": 0}),
            "INVALID_COUNT",
        ),
        (
            json!({"name": "gpus", "ttl": "1m", "permits": 2, "fair": true}),
            "INVALID_INPUT",
        ),
        (
            json!({"name": "gpus", "ttl": "1m", "permits": 2, "access": "read"}),
            "INVALID_INPUT",
        ),
    ] {
        let refused = first.err("acquire", arguments.clone());
        assert_eq!(refused.code, code, "{arguments}: {refused:?}");
    }
    let misplaced = first.err(
        "release",
        json!({"name": "gpus", "token": woken["token"], "k": 1}),
    );
    assert_eq!(
        misplaced.code, "INVALID_INPUT",
        "k with a lock: {misplaced:?}"
    );
    assert_eq!(permits_held(&redis, "gpus"), 1, "nothing more taken");
}

#[test]
fn readers_share_a_read_write_lock_and_a_writer_waits_for_them_alone() {
    let redis = RedisServer::start();
    let mut a = Session::start(&redis);
    let mut b = Session::start(&redis);
    let mut writer = Session::start(&redis);

    let read = json!({"name": "catalog", "ttl": "1m", "access": "read"});
    let first = a.ok("acquire", read.clone());
    let second = b.ok("acquire", read);
    for reader in [&first, &second] {
        assert_eq!(reader["acquired"], true, "{reader}");
        assert_eq!(reader["kind"], "read");
        assert!(reader["fencing_token"].is_null(), "readers do not write");
    }
    let write = json!({"name": "catalog", "ttl": "1m", "access": "write", "wait": "30s"});
    let waiting = writer.start_call("acquire", write);
    for (session, held) in [(&mut a, &first), (&mut b, &second)] {
        session.ok(
            "extend",
            json!({"name": "catalog", "token": held["token"], "ttl": "2m", "kind": "read"}),
        );
        session.ok(
            "release",
            json!({"name": "catalog", "token": held["token"], "kind": "read"}),
        );
    }
    let writing = writer
        .called(waiting, REPLY_WITHIN)
        .expect("the writer's acquire");
    assert_eq!(writing["acquired"], true, "{writing}");
    assert_eq!(writing["kind"], "write");
    assert!(num(&writing, "fencing_token") > 0);
    let writer_key = format!("{{{PREFIX}catalog}}:rw:writer");
    assert_eq!(
        redis.command(&["GET", &writer_key]).unwrap(),
        text(&writing, "token")
    );

    // Alone: a reader is refused, through the door and the CLI.
    let refused = a.ok(
        "acquire",
        json!({"name": "catalog", "ttl": "1m", "access": "read"}),
    );
    assert_eq!(refused["acquired"], false);
    let cli = output(
        latchkey(&redis).args(["run", "--read", "catalog", "--no-wait", "--", "true"]),
        Duration::from_secs(20),
    );
    assert_eq!(cli.status.code(), Some(1), "busy for the CLI too");
    // A reader's kind does not release the writer's token.
    let wrong = writer.err(
        "release",
        json!({"name": "catalog", "token": writing["token"], "kind": "read"}),
    );
    assert_eq!(wrong.code, "NOT_HELD");
    writer.ok(
        "release",
        json!({"name": "catalog", "token": writing["token"], "kind": "write"}),
    );
    assert_eq!(redis.command(&["EXISTS", &writer_key]).unwrap(), "0");
}

#[test]
fn an_agent_leads_until_it_stops_extending_and_the_next_candidate_is_elected() {
    let redis = RedisServer::start();
    let mut silent = Session::start(&redis);
    let mut next = Session::start(&redis);

    let led = silent.ok(
        "elect",
        json!({"name": "planner", "value": "agent-a", "ttl": "1500ms"}),
    );
    assert_eq!(led["elected"], true, "{led}");
    assert_eq!(led["kind"], "leader");
    let shown = next.ok("leader", json!({"name": "planner"}));
    assert_eq!(shown["value"], "agent-a");
    assert_eq!(shown["term"], led["term"]);
    // The CLI sees the same leader.
    let cli = output(
        latchkey(&redis).args(["leader", "planner"]),
        Duration::from_secs(20),
    );
    assert!(
        String::from_utf8_lossy(&cli.stdout).contains("agent-a"),
        "{cli:?}"
    );

    // Not elected: told who leads.
    let lost = next.ok(
        "elect",
        json!({"name": "planner", "value": "agent-b", "ttl": "1m"}),
    );
    assert_eq!(lost["elected"], false);
    assert_eq!(lost["leader"]["value"], "agent-a");

    // The silent leader calls nothing more: its leadership ends at the TTL
    // (nothing renews it), and the waiting candidate is elected then.
    let elected = next.ok(
        "elect",
        json!({"name": "planner", "value": "agent-b", "ttl": "1m", "wait": "30s"}),
    );
    assert_eq!(elected["elected"], true, "{elected}");
    assert!(num(&elected, "term") > num(&led, "term"));
    let late = silent.err(
        "extend",
        json!({"name": "planner", "token": led["token"], "ttl": "1m", "kind": "leader"}),
    );
    assert_eq!(late.code, "NOT_HELD", "{late:?}");

    // The heartbeat, then the resignation.
    next.ok(
        "extend",
        json!({"name": "planner", "token": elected["token"], "ttl": "2m", "kind": "leader"}),
    );
    let pttl: i64 = redis
        .command(&["PTTL", &format!("{{{PREFIX}planner}}:leader")])
        .unwrap()
        .parse()
        .unwrap();
    assert!(pttl > 60_000, "extended to 2m: {pttl}");
    next.ok(
        "release",
        json!({"name": "planner", "token": elected["token"], "kind": "leader"}),
    );
    let none = silent.ok("leader", json!({"name": "planner"}));
    assert_eq!(none["leader"], false, "{none}");
}
