//! Control over holds from the command line: `latchkey revoke` ends a stuck
//! holder's hold (its CMD is stopped, exit 77; a fenced resource refuses its
//! token; nothing is revoked without a confirmation), and `latchkey
//! request-release` asks a holder to let go (its CMD gets SIGTERM), and so
//! does a waiting `latchkey run --ask`, which then runs.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::*;

const QUICK: Duration = Duration::from_secs(15);

#[test]
fn revoking_a_run_stops_its_command_and_fences_its_resource() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("revoke");
    let marks = scratch.path("marks");
    // The holder records its fencing token, then stays "stuck" (renewed by
    // the watchdog every second, for ever).
    let script = format!(
        "echo \"token $LATCHKEY_FENCING_TOKEN\" >> {m}; trap 'echo TERM >> {m}; exit 0' TERM; while :; do sleep 0.05; done",
        m = marks.display()
    );
    let mut run = latchkey(&redis)
        .args(["run", "stuck", "--ttl", "3s", "--", "sh", "-c", &script])
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn latchkey run");
    let text = wait_for_text(&marks, "token ", QUICK);
    let token: u64 = text
        .split_whitespace()
        .nth(1)
        .and_then(|t| t.parse().ok())
        .expect("a fencing token");

    // Without a terminal and without --yes: refused, nothing revoked.
    let refused = output(latchkey(&redis).args(["revoke", "stuck"]), QUICK);
    assert_eq!(code(refused.status), 2, "{}", stderr(&refused));
    assert_one_error_line(&refused);
    assert!(stderr(&refused).contains("--yes"), "{}", stderr(&refused));
    assert!(!redis
        .command(&["GET", &format!("{PREFIX}stuck")])
        .unwrap()
        .is_empty());

    let out = output(
        latchkey(&redis).args(["revoke", "stuck", "--fence", "stuck-output", "--yes"]),
        QUICK,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    let said = stdout(&out);
    assert!(
        said.starts_with("revoked lock \"stuck\": 1 hold ended; fencing token "),
        "{said}"
    );
    let fence: u64 = said
        .lines()
        .next()
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|t| t.parse().ok())
        .expect("the revocation's token");
    assert!(fence > token);
    assert!(
        said.contains(&format!(
            "fenced resource \"stuck-output\" raised to {fence}"
        )),
        "{said}"
    );
    // The resource's fence is above the revoked holder's token.
    let seen = redis
        .command(&["HGET", &format!("{PREFIX}stuck-output"), "fence"])
        .unwrap();
    assert_eq!(seen.trim(), fence.to_string());

    assert_eq!(code(wait_exit(&mut run, QUICK)), 77);
    wait_for_text(&marks, "TERM", QUICK);

    // Nothing holds it now: exit 1, one line.
    let again = output(latchkey(&redis).args(["revoke", "stuck", "--yes"]), QUICK);
    assert_eq!(code(again.status), 1);
    assert_one_error_line(&again);
}

#[test]
fn a_release_request_stops_a_runs_command_and_frees_the_lock() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("request");
    let marks = scratch.path("marks");
    let script = format!(
        "trap 'echo TERM >> {m}; exit 0' TERM; echo started >> {m}; while :; do sleep 0.05; done",
        m = marks.display()
    );
    let mut run = latchkey(&redis)
        .args(["run", "asked", "--ttl", "30s", "--", "sh", "-c", &script])
        .spawn()
        .expect("spawn latchkey run");
    wait_for_text(&marks, "started", QUICK);
    // The holder listens for requests once CMD runs (PUBSUB NUMSUB).
    latchkey_testkit::eventually_blocking("the holder listens", || {
        redis.subscribers(&format!("{{{PREFIX}asked}}:released")) >= 1
    });
    let out = output(latchkey(&redis).args(["request-release", "asked"]), QUICK);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "1");
    // CMD trapped the SIGTERM and exited 0: so does run, and the lock is free.
    assert_eq!(code(wait_exit(&mut run, QUICK)), 0);
    wait_for_text(&marks, "TERM", QUICK);
    assert!(redis
        .command(&["GET", &format!("{PREFIX}asked")])
        .unwrap()
        .trim()
        .is_empty());
    // Nobody holds it now: nobody hears.
    let none = output(latchkey(&redis).args(["request-release", "asked"]), QUICK);
    assert_eq!(stdout(&none).trim(), "0");
}

#[test]
fn run_ask_stops_the_holders_command_and_then_runs() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("ask");
    let marks = scratch.path("marks");
    let script = format!(
        "trap 'echo TERM >> {m}; exit 0' TERM; echo started >> {m}; while :; do sleep 0.05; done",
        m = marks.display()
    );
    let mut holder = latchkey(&redis)
        .args(["run", "asked", "--ttl", "30s", "--", "sh", "-c", &script])
        .spawn()
        .expect("spawn the holder");
    wait_for_text(&marks, "started", QUICK);
    latchkey_testkit::eventually_blocking("the holder listens", || {
        redis.subscribers(&format!("{{{PREFIX}asked}}:released")) >= 1
    });
    // The lock's TTL is 30 s: only the asked holder's release lets the
    // asking run in within QUICK.
    let asking = output(
        latchkey(&redis).args([
            "run", "--ask", "asked", "--wait", "10s", "--", "sh", "-c", "echo ran",
        ]),
        QUICK,
    );
    assert_eq!(code(asking.status), 0, "{}", stderr(&asking));
    assert_eq!(stdout(&asking).trim(), "ran");
    assert_eq!(code(wait_exit(&mut holder, QUICK)), 0);
    wait_for_text(&marks, "TERM", QUICK);

    // Free: `--ask` runs at once and asks nobody.
    let published = redis.calls("publish");
    let free = output(
        latchkey(&redis).args(["run", "--ask", "asked", "--wait", "5s", "--", "true"]),
        QUICK,
    );
    assert_eq!(code(free.status), 0, "{}", stderr(&free));
    assert_eq!(redis.calls("publish"), published);
}

#[test]
fn max_hold_stops_a_stuck_command_although_the_watchdog_renews() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("max-hold");
    let marks = scratch.path("marks");
    let script = format!(
        "trap 'echo TERM >> {m}; exit 0' TERM; echo started >> {m}; while :; do sleep 0.05; done",
        m = marks.display()
    );
    // A 30 s TTL renewed every 10 s: only the 1 s cap can end it soon.
    let mut run = latchkey(&redis)
        .args([
            "run",
            "capped",
            "--ttl",
            "30s",
            "--max-hold",
            "1s",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn latchkey run");
    wait_for_text(&marks, "started", QUICK);
    assert_eq!(code(wait_exit(&mut run, QUICK)), 75);
    wait_for_text(&marks, "TERM", QUICK);
    let bad = output(
        latchkey(&redis).args(["run", "capped", "--max-hold", "0s", "--", "true"]),
        QUICK,
    );
    assert_eq!(code(bad.status), 2, "{}", stderr(&bad));
    assert_one_error_line(&bad);
}
