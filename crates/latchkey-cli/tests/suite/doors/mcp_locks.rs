//! `latchkey mcp`'s locks: agents contending, fencing tokens handed on, a
//! silent agent's lease expiring with no renewal by the door, a long wait
//! woken by a release, and the CLI on the same names.

use std::time::{Duration, Instant};

use serde_json::json;

use super::session::*;
use crate::common::*;

#[test]
fn the_second_agent_finds_the_lock_busy_and_is_told_who_holds_it() {
    let redis = RedisServer::start();
    let mut first = Session::start(&redis);
    let mut second = Session::start(&redis);

    let held = first.ok("acquire", json!({"name": "repo", "ttl": "5m"}));
    assert_eq!(held["acquired"], true);
    let token = text(&held, "token");
    assert!(num(&held, "deadline_unix_ms") > 0);
    assert_eq!(num(&held, "ttl_ms"), 300_000);
    assert_eq!(redis.command(&["GET", &key("repo")]).unwrap(), token);

    let busy = second.ok("acquire", json!({"name": "repo", "ttl": "5m"}));
    assert_eq!(busy["acquired"], false, "{busy}");
    assert!(busy["token"].is_null() && busy["fencing_token"].is_null());
    // The holder is the first agent's door, by pid, with its fencing token.
    assert_eq!(
        num(&busy["holder"], "pid"),
        u64::from(first.pid()),
        "{busy}"
    );
    assert_eq!(busy["holder"]["fencing_token"], held["fencing_token"]);
    assert!(busy["holder"]["ttl_ms"]
        .as_u64()
        .is_some_and(|t| t <= 300_000));
    // Nothing of the second agent's is in Redis: the key is the first's.
    assert_eq!(redis.command(&["GET", &key("repo")]).unwrap(), token);
    assert!(
        !busy.to_string().contains(&token),
        "a holder's token is never shown"
    );
}

#[test]
fn the_fencing_token_grows_from_one_holder_to_the_next() {
    let redis = RedisServer::start();
    let mut first = Session::start(&redis);
    let mut second = Session::start(&redis);

    let a = first.ok("acquire", json!({"name": "table", "ttl": "30s"}));
    let released = first.ok("release", json!({"name": "table", "token": a["token"]}));
    assert_eq!(released["released"], true);
    assert!(!exists(&redis, "table"));
    // Released twice: the token owns nothing any more.
    let again = first.err("release", json!({"name": "table", "token": a["token"]}));
    assert_eq!(again.code, "NOT_HELD", "{again:?}");

    let b = second.ok("acquire", json!({"name": "table", "ttl": "30s"}));
    assert!(
        num(&b, "fencing_token") > num(&a, "fencing_token"),
        "the next holder's token is greater: {a} then {b}"
    );
    // The first agent's stale token moves nothing of the second's.
    let stale = first.err(
        "extend",
        json!({"name": "table", "token": a["token"], "ttl": "1m"}),
    );
    assert_eq!(stale.code, "NOT_HELD");
    assert!(stale.message.contains("someone else holds it"), "{stale:?}");
    assert_eq!(
        redis.command(&["GET", &key("table")]).unwrap(),
        text(&b, "token")
    );
}

#[test]
fn extend_is_the_heartbeat_that_resets_the_ttl() {
    let redis = RedisServer::start();
    let mut agent = Session::start(&redis);
    let held = agent.ok("acquire", json!({"name": "env", "ttl": "2s"}));
    let extended = agent.ok(
        "extend",
        json!({"name": "env", "token": held["token"], "ttl": "1m"}),
    );
    assert_eq!(num(&extended, "ttl_ms"), 60_000);
    // The deadline is the TTL from about now, less the drift allowance
    // (ttl / 100 + 2 ms): within the TTL, never past it.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let deadline = num(&extended, "deadline_unix_ms");
    assert!(
        (now_ms + 55_000..=now_ms + 60_000).contains(&deadline),
        "{deadline} vs now {now_ms}"
    );
    assert!(num(&extended, "deadline_unix_ms") > num(&held, "deadline_unix_ms"));
    let pttl: i64 = redis
        .command(&["PTTL", &key("env")])
        .unwrap()
        .parse()
        .unwrap();
    assert!((2_001..=60_000).contains(&pttl), "reset to 1m: {pttl}");
}

#[test]
fn a_silent_agent_loses_its_lease_at_the_ttl_with_no_renewal_by_the_door() {
    let redis = RedisServer::start();
    let mut silent = Session::start(&redis);
    let mut other = Session::start(&redis);
    let ttl = Duration::from_millis(1500);

    let asked = Instant::now();
    let held = silent.ok("acquire", json!({"name": "job", "ttl": "1500ms"}));
    assert_eq!(held["acquired"], true);
    // Before the TTL: busy for everyone else.
    let busy = other.ok("acquire", json!({"name": "job", "ttl": "10s"}));
    assert_eq!(busy["acquired"], false);

    // The silent agent calls nothing more; its door stays up. Watch the
    // key until it is gone: its TTL only ever falls (a renewal would
    // raise it), and it goes at the TTL, not before.
    let mut last_pttl = i64::MAX;
    let gone_after =
        latchkey_testkit::eventually_blocking("the silent agent's lock expired", || {
            let pttl: i64 = redis
                .command(&["PTTL", &key("job")])
                .unwrap()
                .parse()
                .unwrap();
            if pttl < 0 {
                return Some(asked.elapsed());
            }
            assert!(
                pttl <= last_pttl,
                "the TTL went up from {last_pttl} to {pttl}: renewed"
            );
            last_pttl = pttl;
            None
        });
    assert!(
        gone_after >= ttl - Duration::from_millis(50),
        "expired at the TTL, not before: {gone_after:?}"
    );
    assert!(
        silent.is_running(),
        "the door outlived the lease it did not renew"
    );
    let taken = other.ok("acquire", json!({"name": "job", "ttl": "10s"}));
    assert_eq!(taken["acquired"], true, "free after the TTL: {taken}");
    assert!(num(&taken, "fencing_token") > num(&held, "fencing_token"));
}

#[test]
fn a_long_acquire_wait_is_woken_by_a_release() {
    let redis = RedisServer::start();
    let mut holder = Session::start(&redis);
    let mut waiter = Session::start(&redis);
    let held = holder.ok("acquire", json!({"name": "deploy", "ttl": "1m"}));
    let token = text(&held, "token");

    let waiting = waiter.start_call(
        "acquire",
        json!({"name": "deploy", "ttl": "1m", "wait": "30s"}),
    );
    // The waiter has asked to be woken at the release: the lock's value
    // carries its mark (no other sign reaches another process).
    latchkey_testkit::eventually_blocking("the waiter waits", || {
        redis.command(&["GET", &key("deploy")]).unwrap() != token
    });
    let released_at = Instant::now();
    holder.ok("release", json!({"name": "deploy", "token": token}));
    let woken = waiter
        .called(waiting, REPLY_WITHIN)
        .expect("the waiter's acquire");
    let took = released_at.elapsed();
    assert_eq!(woken["acquired"], true, "{woken}");
    assert!(
        took < Duration::from_secs(5),
        "woken by the release, not the 30s wait: {took:?}"
    );
    assert!(num(&woken, "fencing_token") > num(&held, "fencing_token"));
}

#[test]
fn a_bounded_wait_on_a_busy_lock_ends_busy_at_its_bound() {
    let redis = RedisServer::start();
    let mut holder = Session::start(&redis);
    let mut waiter = Session::start(&redis);
    holder.ok("acquire", json!({"name": "q", "ttl": "1m"}));
    let started = Instant::now();
    let busy = waiter.ok(
        "acquire",
        json!({"name": "q", "ttl": "1m", "wait": "300ms"}),
    );
    let waited = started.elapsed();
    assert_eq!(busy["acquired"], false);
    assert!(
        waited >= Duration::from_millis(300),
        "waited its bound: {waited:?}"
    );
    assert!(busy["holder"]["pid"].as_u64() == Some(u64::from(holder.pid())));
}

#[test]
fn a_lock_taken_over_mcp_excludes_the_cli_and_its_token_works_anywhere() {
    let redis = RedisServer::start();
    let mut agent = Session::start(&redis);
    let held = agent.ok("acquire", json!({"name": "shared", "ttl": "1m"}));
    let token = text(&held, "token");

    let cli = output(
        latchkey(&redis).args(["acquire", "shared", "--ttl", "10s", "--no-wait"]),
        REPLY_WITHIN,
    );
    assert_eq!(code(cli.status), 1, "busy for the CLI: {}", stderr(&cli));
    assert!(stderr(&cli).contains("is busy"), "{}", stderr(&cli));
    // Stateless by the token: the door's token releases from the CLI.
    drop(agent);
    let release = output(
        latchkey(&redis).args(["release", "shared", &token]),
        REPLY_WITHIN,
    );
    assert_eq!(code(release.status), 0, "{}", stderr(&release));

    // And the other way: the CLI's lock is busy for a new door.
    let cli = output(
        latchkey(&redis).args(["acquire", "shared", "--ttl", "1m"]),
        REPLY_WITHIN,
    );
    assert_eq!(code(cli.status), 0, "{}", stderr(&cli));
    let cli_token = stdout(&cli).lines().next().unwrap_or_default().to_owned();
    let mut door = Session::start(&redis);
    let busy = door.ok("acquire", json!({"name": "shared", "ttl": "1m"}));
    assert_eq!(busy["acquired"], false);
    door.ok("release", json!({"name": "shared", "token": cli_token}));
    assert!(!exists(&redis, "shared"));
}

#[test]
fn a_fair_lock_is_handed_to_the_waiter_with_the_ttl_it_asked_for() {
    let redis = RedisServer::start();
    let mut first = Session::start(&redis);
    let mut second = Session::start(&redis);
    let held = first.ok(
        "acquire",
        json!({"name": "line", "ttl": "1m", "fair": true}),
    );
    assert_eq!(held["acquired"], true);
    assert_eq!(held["kind"], "fair_lock");

    let waiting = second.start_call(
        "acquire",
        json!({"name": "line", "ttl": "45s", "wait": "30s", "fair": true}),
    );
    // In the queue: the fair lock's waiter list holds the second agent.
    latchkey_testkit::eventually_blocking("the second agent queued", || {
        redis
            .command(&["LLEN", &format!("{{{PREFIX}line}}:queue")])
            .is_ok_and(|n| n == "1")
    });
    first.ok(
        "release",
        json!({"name": "line", "token": held["token"], "kind": "fair_lock"}),
    );
    let handed = second
        .called(waiting, REPLY_WITHIN)
        .expect("the waiter's acquire");
    assert_eq!(handed["acquired"], true, "{handed}");
    // The hand-off's short waiter lease was replaced by the TTL asked for:
    // nothing would renew it after this call.
    let pttl: i64 = redis
        .command(&["PTTL", &key("line")])
        .unwrap()
        .parse()
        .unwrap();
    assert!((30_000..=45_000).contains(&pttl), "the asked TTL: {pttl}");
    assert!(num(&handed, "fencing_token") > num(&held, "fencing_token"));
}

#[test]
fn a_wait_the_host_cancels_is_dropped_and_never_takes_the_lock() {
    let redis = RedisServer::start();
    let mut holder = Session::start(&redis);
    let mut waiter = Session::start(&redis);
    let held = holder.ok("acquire", json!({"name": "deploy", "ttl": "1m"}));
    let released_channel = format!("{{{PREFIX}deploy}}:released");

    let waiting = waiter.start_call(
        "acquire",
        json!({"name": "deploy", "ttl": "1m", "wait": "30s"}),
    );
    latchkey_testkit::eventually_blocking("the waiter listens for the release", || {
        redis.subscribers(&released_channel) >= 1
    });
    waiter.cancel(waiting);
    // Dropped, not left to run: its subscription is given up at once.
    latchkey_testkit::eventually_blocking("the cancelled wait is dropped", || {
        redis.subscribers(&released_channel) == 0
    });
    holder.ok("release", json!({"name": "deploy", "token": held["token"]}));
    assert!(
        !exists(&redis, "deploy"),
        "nobody took it for a caller that gave up"
    );
    // The session goes on (a cancelled request gets no reply, as MCP says).
    let shown = waiter.ok("status", json!({"name": "deploy"}));
    assert_eq!(shown["held"], false);
}
