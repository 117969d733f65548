//! Why and when a `run` ends: CMD gets SIGTERM `--grace` before its hold
//! could end (the stop margin) and SIGKILL only after it, whatever ended
//! the hold (a cap, a stalled Redis, a revocation heard at once); every end
//! has its line and its exit code (75 lost, 76 never started, 77 revoked;
//! a release request: CMD's own code and a line); a spent wait still makes
//! its one attempt; a loop of holds that run out before CMD starts backs off.

use crate::common;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;

const QUICK: Duration = Duration::from_secs(20);

/// A CMD that notes when it started and when it got SIGTERM (ms since the
/// epoch), then exits 0 on SIGTERM.
fn noting(marks: &std::path::Path) -> String {
    format!(
        "trap 'echo TERM $(date +%s%3N) >> {m}; exit 0' TERM; echo started $(date +%s%3N) >> {m}; while :; do sleep 0.02; done",
        m = marks.display()
    )
}

fn epoch_ms(text: &str, word: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(word)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {word} in {text:?}"))
}

/// Six loops of ten fair runs with a cap shorter than their TTL, on one
/// name, each CMD outliving its cap and trapping SIGTERM: every run stops
/// its CMD with SIGTERM and exits 75 saying why; none is SIGKILLed (137)
/// by its guardian while latchkey is alive.
#[test]
fn fair_runs_at_their_cap_get_sigterm_never_a_silent_sigkill() {
    let redis = RedisServer::start();
    let cmd = "trap 'exit 0' TERM; while :; do sleep 0.05; done";
    let loops: Vec<_> = (0..6)
        .map(|_| {
            let url = redis.url();
            std::thread::spawn(move || {
                let mut ends = Vec::new();
                for _ in 0..10 {
                    let out = output(
                        latchkey_at(&url).args([
                            "run",
                            "--fair",
                            "capped",
                            "--ttl",
                            "1s",
                            "--max-hold",
                            "300ms",
                            "--",
                            "sh",
                            "-c",
                            cmd,
                        ]),
                        Duration::from_secs(60),
                    );
                    ends.push((out.status.code(), stderr(&out)));
                }
                ends
            })
        })
        .collect();
    for ends in loops.into_iter().map(|l| l.join().expect("a loop")) {
        for (code, err) in ends {
            assert_eq!(code, Some(75), "{err}");
            assert!(err.contains("it reached its max hold"), "{err}");
            assert!(err.contains("sent SIGTERM"), "{err}");
        }
    }
}

fn spawn_run(redis: &RedisServer, args: &[&str]) -> Child {
    latchkey(redis)
        .arg("run")
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn latchkey run")
}

fn stderr_of(child: Child) -> String {
    let out = child.wait_with_output().expect("wait");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A revoked holder hears it at once (not at its next renewal, 10 s away
/// with the default 30 s TTL): its CMD gets SIGTERM, run exits 77.
#[test]
fn a_revoked_run_stops_its_command_at_once_and_exits_77() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("revoked-at-once");
    let marks = scratch.path("marks");
    let mut run = spawn_run(&redis, &["job", "--", "sh", "-c", &noting(&marks)]);
    wait_for_text(&marks, "started", QUICK);
    latchkey_testkit::eventually_blocking("the holder listens", || {
        redis.subscribers(&format!("{{{PREFIX}job}}:released")) >= 1
    });
    let revoked_at = Instant::now();
    let out = output(latchkey(&redis).args(["revoke", "job", "--yes"]), QUICK);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    wait_for_text(&marks, "TERM", QUICK);
    let took = revoked_at.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "SIGTERM {took:?} after the revocation"
    );
    let status = wait_exit(&mut run, QUICK);
    let err = stderr_of(run);
    assert_eq!(code(status), 77, "{err}");
    assert!(err.contains("revoked by an operator"), "{err}");
}

/// Redis stops answering: CMD gets SIGTERM `--grace` before the lock could
/// expire (the stop margin), not at the expiry.
#[test]
fn a_stalled_redis_stops_the_command_its_grace_before_the_lock_could_end() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("stalled");
    let marks = scratch.path("marks");
    let mut run = spawn_run(
        &redis,
        &[
            "stalled",
            "--ttl",
            "4s",
            "--grace",
            "1500ms",
            "--",
            "sh",
            "-c",
            &noting(&marks),
        ],
    );
    let text = wait_for_text(&marks, "started", QUICK);
    let started = epoch_ms(&text, "started");
    redis.pause();
    let text = wait_for_text(&marks, "TERM", QUICK);
    redis.resume();
    let term = epoch_ms(&text, "TERM");
    let status = wait_exit(&mut run, QUICK);
    let err = stderr_of(run);
    assert_eq!(code(status), 75, "{err}");
    assert!(
        err.contains("Redis did not answer the renewals in time"),
        "{err}"
    );
    // The last proof came before CMD started: the lock could end 4 s after
    // it at the latest; SIGTERM came at least about the grace before that.
    assert!(
        term < started + 4000 - 1000,
        "SIGTERM {} ms after the start",
        term - started
    );
}

/// A release request: CMD's exit code, and a line saying why it stopped.
#[test]
fn a_release_request_says_so_and_exits_with_the_commands_code() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("requested");
    let marks = scratch.path("marks");
    let mut run = spawn_run(&redis, &["asked", "--", "sh", "-c", &noting(&marks)]);
    wait_for_text(&marks, "started", QUICK);
    latchkey_testkit::eventually_blocking("the holder listens", || {
        redis.subscribers(&format!("{{{PREFIX}asked}}:released")) >= 1
    });
    let out = output(latchkey(&redis).args(["request-release", "asked"]), QUICK);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    let status = wait_exit(&mut run, QUICK);
    let err = stderr_of(run);
    assert_eq!(code(status), 0, "{err}");
    assert!(err.contains("on request"), "{err}");
}

/// A hold that runs out before CMD can start: with `--no-wait`, exit 76
/// and CMD never ran; with a wait, taken again with backoff (a few
/// commands a second, not a spin) until the wait is spent, then 76.
#[test]
fn holds_that_run_out_before_the_command_starts_end_in_76_and_back_off() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("too-late");
    let ran = scratch.path("ran");
    let cmd = format!("echo ran >> {}", ran.display());
    let out = output(
        latchkey(&redis)
            .env("LATCHKEY_TEST_START_DELAY_MS", "300")
            .args([
                "run",
                "late",
                "--max-hold",
                "100ms",
                "--no-wait",
                "--",
                "sh",
                "-c",
                &cmd,
            ]),
        QUICK,
    );
    assert_eq!(code(out.status), 76, "{}", stderr(&out));
    assert_one_error_line(&out);
    assert!(
        stderr(&out).contains("ran out before the command could start"),
        "{}",
        stderr(&out)
    );
    assert!(!ran.exists(), "the command ran");

    let before = tries(&redis);
    let out = output(
        latchkey(&redis)
            .env("LATCHKEY_TEST_START_DELAY_MS", "300")
            .args([
                "run",
                "late",
                "--max-hold",
                "100ms",
                "--wait",
                "3s",
                "--",
                "sh",
                "-c",
                &cmd,
            ]),
        QUICK,
    );
    let sent = tries(&redis) - before;
    assert_eq!(code(out.status), 76, "{}", stderr(&out));
    assert!(!ran.exists(), "the command ran");
    // 3 s of tries, each a few scripts (take, confirm, release), 300 ms
    // apart at least: a spin would send thousands. Only the tries are
    // counted: what a loaded machine adds (a subscriber's reconnections
    // and pings) is not what is tested.
    assert!(sent < 100, "{sent} lock commands in 3 s");
}

/// The lock commands a `run` sends: its scripts and bare `SET`s.
fn tries(redis: &RedisServer) -> u64 {
    redis.calls("evalsha") + redis.calls("eval") + redis.calls("set")
}

/// `--wait 0s` on a free hold takes it (one attempt), for every kind.
#[test]
fn a_spent_wait_still_makes_its_one_attempt() {
    let redis = RedisServer::start();
    for args in [
        &["run", "zero", "--wait", "0s", "--", "true"][..],
        &["run", "--fair", "zero-fair", "--wait", "0s", "--", "true"],
        &[
            "run",
            "--permits",
            "2",
            "zero-pool",
            "--wait",
            "0s",
            "--",
            "true",
        ],
        &["run", "--read", "zero-rw", "--wait", "0s", "--", "true"],
        &["run", "--write", "zero-rw", "--wait", "0s", "--", "true"],
        &[
            "run", "zero-a", "--and", "zero-b", "--wait", "0s", "--", "true",
        ],
    ] {
        let out = output(latchkey(&redis).args(args), QUICK);
        assert_eq!(code(out.status), 0, "{args:?}: {}", stderr(&out));
    }
}

/// Usage errors that need no Redis exit 2 with Redis down.
#[test]
fn usage_errors_need_no_redis() {
    let nowhere = "redis://127.0.0.1:1";
    for (args, says) in [
        (&["run", "x", "--and", "x", "--", "true"][..], "twice"),
        (
            &["run", "x", "--max-hold", "0s", "--", "true"],
            "invalid max hold \"0s\"",
        ),
        (
            &["run", "x", "--max-hold", "10ms", "--", "true"],
            "at least 100",
        ),
        (&["run", "x", "--max-hold", "-1s", "--", "true"], "negative"),
        (&["run", "x", "--grace", "-1s", "--", "true"], "negative"),
        (
            &["run", "--read", "--take", "2", "x", "--", "true"],
            "--take",
        ),
        (
            &["run", "--write", "--take", "2", "x", "--", "true"],
            "--take",
        ),
        (
            &["run", "--fair", "--take", "2", "x", "--", "true"],
            "--take",
        ),
        (
            &["run", "x", "--and", "y", "--take", "2", "--", "true"],
            "--take",
        ),
        (&["run", "--take", "2", "x", "--", "true"], "--permits"),
        (
            &["run", "--ask", "--no-wait", "x", "--", "true"],
            "request-release",
        ),
    ] {
        let started = Instant::now();
        let out = output(latchkey_at(nowhere).args(args), QUICK);
        assert_eq!(code(out.status), 2, "{args:?}: {}", stderr(&out));
        assert_one_error_line(&out);
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("0ns"), "{args:?}: {}", stderr(&out));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{args:?} waited for Redis"
        );
    }
}

/// A lock deleted or taken over while CMD runs, when CMD ends before the
/// next renewal could see it (a `DEL` or a foreign `SET` publishes
/// nothing): the release finds it, and `run` exits 75 saying so, not CMD's
/// 0, since CMD ran unprotected for a while.
#[test]
fn a_lock_taken_over_while_the_command_ran_exits_75_even_when_it_ended_first() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("taken-over");
    for (name, takeover) in [("over", Some("someone-else")), ("deleted", None)] {
        let marks = scratch.path(&format!("{name}-marks"));
        let go = scratch.path(&format!("{name}-go"));
        let script = format!(
            "echo started >> {m}; while [ ! -e {g} ]; do sleep 0.02; done; exit 0",
            m = marks.display(),
            g = go.display()
        );
        // A long TTL: no renewal comes before CMD ends.
        let mut run = latchkey(&redis)
            .args(["run", name, "--ttl", "60s", "--", "sh", "-c", &script])
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn latchkey run");
        wait_for_text(&marks, "started", QUICK);
        let key = format!("{PREFIX}{name}");
        match takeover {
            Some(value) => redis.command(&["SET", &key, value]).unwrap(),
            None => redis.command(&["DEL", &key]).unwrap(),
        };
        std::fs::write(&go, "").expect("go");
        let status = wait_exit(&mut run, QUICK);
        let err = stderr_of(run);
        assert_eq!(code(status), 75, "{err}");
        assert!(err.contains(&format!("lost lock \"{name}\"")), "{err}");
        assert!(err.contains("after the command had exited"), "{err}");
        if let Some(value) = takeover {
            // The other holder's key is left alone.
            assert_eq!(redis.command(&["GET", &key]).unwrap().trim(), value);
        }
    }
}
