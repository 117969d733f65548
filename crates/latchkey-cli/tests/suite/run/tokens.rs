//! `latchkey acquire`, `release` and `extend`: a lock held across shell
//! commands by its token, and their exit codes.

use crate::common;

use std::time::Duration;

use common::*;

const QUICK: Duration = Duration::from_secs(15);

fn acquire(redis: &RedisServer, name: &str, ttl: &str) -> (String, u64) {
    let out = output(latchkey(redis).args(["acquire", name, "--ttl", ttl]), QUICK);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "token and fencing token: {text:?}");
    (
        lines[0].to_owned(),
        lines[1].parse().expect("fencing token is a number"),
    )
}

fn pttl(redis: &RedisServer, name: &str) -> i64 {
    redis
        .command(&["PTTL", &format!("{PREFIX}{name}")])
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn acquire_prints_token_and_fencing_token_and_leaves_the_lock_held() {
    let redis = RedisServer::start();
    let (token, fence) = acquire(&redis, "deploy", "10s");
    assert!(token.starts_with("lk2:"), "{token}");
    assert_eq!(
        redis.command(&["GET", &format!("{PREFIX}deploy")]).unwrap(),
        token
    );
    assert_eq!(
        redis
            .command(&["GET", &format!("{{{PREFIX}deploy}}:fence")])
            .unwrap(),
        fence.to_string()
    );
    let left = pttl(&redis, "deploy");
    assert!((1..=10_000).contains(&left), "TTL as asked: {left}");

    // Busy now: 1, or the -E code, with one line on stderr and nothing on stdout.
    let busy = output(
        latchkey(&redis).args(["acquire", "deploy", "--ttl", "10s", "--no-wait"]),
        QUICK,
    );
    assert_eq!(code(busy.status), 1);
    assert_one_error_line(&busy);
    assert_eq!(stdout(&busy), "");
    let busy = output(
        latchkey(&redis).args([
            "acquire", "deploy", "--ttl", "10s", "--wait", "200ms", "-E", "3",
        ]),
        QUICK,
    );
    assert_eq!(code(busy.status), 3);

    // Released, the next acquisition gets a greater fencing token.
    let out = output(latchkey(&redis).args(["release", "deploy", &token]), QUICK);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    let (_, next) = acquire(&redis, "deploy", "10s");
    assert!(next > fence, "fencing tokens increase: {fence} then {next}");
}

#[test]
fn release_and_extend_act_only_for_the_owner() {
    let redis = RedisServer::start();
    let (token, _) = acquire(&redis, "job", "5s");
    let wrong = "lk2:00000000000000000000000000000000:0:1:nobody";

    let out = output(
        latchkey(&redis).args(["extend", "job", wrong, "--ttl", "60s"]),
        QUICK,
    );
    assert_eq!(code(out.status), 1, "a stranger cannot extend");
    assert_one_error_line(&out);
    assert!(pttl(&redis, "job") <= 5_000, "TTL untouched");

    let out = output(latchkey(&redis).args(["release", "job", wrong]), QUICK);
    assert_eq!(code(out.status), 1, "a stranger cannot release");
    assert_one_error_line(&out);
    assert_eq!(
        redis.command(&["GET", &format!("{PREFIX}job")]).unwrap(),
        token,
        "still held"
    );

    let out = output(
        latchkey(&redis).args(["extend", "job", &token, "--ttl", "60s"]),
        QUICK,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert!(pttl(&redis, "job") > 5_000, "TTL reset to 60 s");

    let out = output(latchkey(&redis).args(["release", "job", &token]), QUICK);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert_eq!(
        redis.command(&["EXISTS", &format!("{PREFIX}job")]).unwrap(),
        "0"
    );

    // Not held any more: releasing or extending again is "not the owner".
    let out = output(latchkey(&redis).args(["release", "job", &token]), QUICK);
    assert_eq!(code(out.status), 1);
    let out = output(
        latchkey(&redis).args(["extend", "job", &token, "--ttl", "5s"]),
        QUICK,
    );
    assert_eq!(code(out.status), 1);
}

#[test]
fn bad_input_is_a_usage_error() {
    let redis = RedisServer::start();
    for args in [
        &["acquire", "x"][..],                  // --ttl is mandatory
        &["acquire", "x", "--ttl", "10"],       // no unit
        &["acquire", "x", "--ttl", "0s"],       // below the minimum TTL
        &["acquire", "x:fence", "--ttl", "1s"], // reserved name
        &["acquire", "x", "--ttl", "1s", "--wait", "1s", "--no-wait"],
        &["run", "x"], // no command
        &["frobnicate"],
    ] {
        let out = output(latchkey(&redis).args(args), QUICK);
        assert_eq!(code(out.status), 2, "{args:?}: {}", stderr(&out));
        assert_one_error_line(&out);
    }
}
