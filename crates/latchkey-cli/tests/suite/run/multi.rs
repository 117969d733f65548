//! `latchkey run NAME --and NAME2 -- CMD`: several locks held for CMD, all
//! or nothing; each excludes a plain `run` of its name; runs naming the
//! locks in opposite orders neither deadlock nor overlap; CMD gets one
//! fencing token per lock; losing any lock stops CMD (exit 75); options
//! that cannot combine with `--and` are refused in one line (exit 2).

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

/// Generous bound for commands that should finish quickly: catches a hang,
/// not a slow machine.
const QUICK: Duration = Duration::from_secs(15);

#[test]
fn a_run_of_several_locks_excludes_a_plain_run_of_any_of_them() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("multi-excl");
    let (started, go) = (scratch.path("started"), scratch.path("go"));
    let script = format!(
        "echo started > {s}; while [ ! -e {g} ]; do sleep 0.02; done",
        s = started.display(),
        g = go.display()
    );
    let mut both = latchkey(&redis)
        .args(["run", "a", "--and", "b", "--", "sh", "-c", &script])
        .spawn()
        .expect("spawn latchkey run");
    wait_for_text(&started, "started", QUICK);
    for name in ["a", "b"] {
        let out = output(
            latchkey(&redis).args(["run", name, "--no-wait", "--", "true"]),
            QUICK,
        );
        assert_eq!(code(out.status), 1, "{name}: {}", stderr(&out));
        assert_one_error_line(&out);
    }
    let out = output(
        latchkey(&redis).args(["run", "b", "--and", "c", "--no-wait", "--", "true"]),
        QUICK,
    );
    assert_eq!(code(out.status), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("lock \"b\" of \"b\", \"c\" is busy (held by "),
        "{}",
        stderr(&out)
    );
    // c stayed free: taking b and c was all or nothing.
    assert_eq!(redis.command(&["EXISTS", "test:c"]).unwrap(), "0");
    let out = output(
        latchkey(&redis).args(["run", "c", "--no-wait", "--", "true"]),
        QUICK,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));

    // A waiting plain run of b gets it once the pair is released.
    let marks = scratch.path("b-ran");
    let mut waiting = latchkey(&redis)
        .args(["run", "b", "--wait", "10s", "--", "touch"])
        .arg(&marks)
        .spawn()
        .expect("spawn latchkey run");
    std::fs::write(&go, "").unwrap();
    assert_eq!(code(wait_exit(&mut both, QUICK)), 0);
    assert_eq!(code(wait_exit(&mut waiting, QUICK)), 0);
    assert!(marks.exists());
    for key in ["test:a", "test:b"] {
        assert_eq!(
            redis.command(&["EXISTS", key]).unwrap(),
            "0",
            "{key} released"
        );
    }
}

#[test]
fn runs_naming_the_locks_in_opposite_orders_never_overlap() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("multi-orders");
    let marks = scratch.path("marks");
    let section = format!(
        "echo \"start $(date +%s%N)\" >> {m}; sleep 0.1; echo \"end $(date +%s%N)\" >> {m}",
        m = marks.display()
    );
    let mut runs: Vec<_> = (0..6)
        .map(|i| {
            let names = if i % 2 == 0 { ["x", "y"] } else { ["y", "x"] };
            latchkey(&redis)
                .args([
                    "run", names[0], "--and", names[1], "--", "sh", "-c", &section,
                ])
                .spawn()
                .expect("spawn latchkey run")
        })
        .collect();
    for run in &mut runs {
        assert_eq!(code(wait_exit(run, QUICK)), 0);
    }
    let text = std::fs::read_to_string(&marks).expect("marks");
    let mut open = false;
    let mut sections = 0;
    for line in text.lines() {
        match (line.split(' ').next(), open) {
            (Some("start"), false) => open = true,
            (Some("end"), true) => {
                open = false;
                sections += 1;
            }
            _ => panic!("sections overlap: {text}"),
        }
    }
    assert_eq!(sections, 6, "every run ran once: {text}");
}

#[test]
fn the_command_gets_a_fencing_token_per_lock() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("multi-env");
    let env = scratch.path("env");
    let script = format!(
        "echo \"$LATCHKEY_NAME $LATCHKEY_TOKEN $LATCHKEY_FENCING_TOKEN \
         $LATCHKEY_NAME_1 $LATCHKEY_FENCING_TOKEN_1 $LATCHKEY_NAME_2 $LATCHKEY_FENCING_TOKEN_2 \
         $LATCHKEY_NAME_3 $LATCHKEY_FENCING_TOKEN_3 | $LATCHKEY_FENCING_TOKENS\" > {e}",
        e = env.display()
    );
    let out = output(
        latchkey(&redis).args([
            "run", "p", "--and", "r", "--and", "q", "--", "sh", "-c", &script,
        ]),
        QUICK,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    let text = std::fs::read_to_string(&env).unwrap();
    let (each, all) = text.trim().split_once(" | ").expect("two parts");
    let f: Vec<&str> = each.split_whitespace().collect();
    assert_eq!(f.len(), 9, "{text:?}");
    assert_eq!((f[0], f[3], f[5], f[7]), ("p", "p", "r", "q"));
    assert!(f[1].starts_with("lk2:"), "{text:?}");
    assert_eq!(f[2], f[4], "LATCHKEY_FENCING_TOKEN is NAME's");
    for (name, token) in [("p", f[4]), ("r", f[6]), ("q", f[8])] {
        let counter = redis.command(&["GET", &format!("{{test:{name}}}:fence")]);
        assert_eq!(counter.unwrap(), token, "{name}'s token is its counter's");
    }
    assert_eq!(all, [f[4], f[6], f[8]].join(" "));
}

#[test]
fn losing_any_of_the_locks_stops_the_command_and_exits_75() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("multi-lost");
    let marks = scratch.path("marks");
    let script = format!(
        "trap 'echo TERM >> {m}; exit 0' TERM; echo started >> {m}; while :; do sleep 0.05; done",
        m = marks.display()
    );
    // A 1 s TTL: the watchdog renews every 333 ms, so it notices soon.
    let mut run = latchkey(&redis)
        .args([
            "run", "keep", "--and", "doomed", "--ttl", "1s", "--", "sh", "-c",
        ])
        .arg(&script)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn latchkey run");
    wait_for_text(&marks, "started", QUICK);
    redis.command(&["DEL", "test:doomed"]).unwrap();
    assert_eq!(code(wait_exit(&mut run, QUICK)), 75);
    wait_for_text(&marks, "TERM", QUICK);
    let mut err = String::new();
    std::io::Read::read_to_string(run.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(
        err.contains("lost lock \"doomed\" of the locks \"keep\", \"doomed\""),
        "{err}"
    );
    // The lock still ours was released.
    assert_eq!(redis.command(&["EXISTS", "test:keep"]).unwrap(), "0");
}

#[test]
fn options_that_cannot_combine_with_and_are_usage_errors() {
    for extra in [
        &["--permits", "2"][..],
        &["--read"],
        &["--write"],
        &["--fair"],
        &["--replicas", "1"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_latchkey"))
            .args(["--redis", "redis://127.0.0.1:1", "run", "a", "--and", "b"])
            .args(extra)
            .args(["--", "true"])
            .env_remove("LATCHKEY_REDIS_URL")
            .output()
            .expect("run latchkey");
        assert_eq!(code(out.status), 2, "{extra:?}: {}", stderr(&out));
        assert_one_error_line(&out);
        assert!(
            stderr(&out).contains("--and"),
            "{extra:?}: {}",
            stderr(&out)
        );
    }
    // Several servers that are not one cluster (a Redlock): refused too.
    let (one, two) = (RedisServer::start(), RedisServer::start());
    let out = output(
        Command::new(env!("CARGO_BIN_EXE_latchkey"))
            .args(["--redis", &one.url(), "--redis", &two.url()])
            .args(["run", "a", "--and", "b", "--", "true"])
            .env_remove("LATCHKEY_REDIS_URL"),
        QUICK,
    );
    assert_eq!(code(out.status), 2, "{}", stderr(&out));
    assert_one_error_line(&out);
}
