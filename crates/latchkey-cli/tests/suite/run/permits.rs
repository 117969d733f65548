//! `latchkey run --permits N NAME -- CMD` and the permits in `latchkey
//! status`: at most N commands at once across processes, a killed holder's
//! permit returns within its TTL, holders are shown by pid and host;
//! `--take K` holds K permits at once, counted as K.

use crate::common;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;

const QUICK: Duration = Duration::from_secs(20);

fn permits_held(redis: &RedisServer, name: &str) -> usize {
    redis
        .command(&["ZCARD", &format!("{{{PREFIX}{name}}}:permits")])
        .ok()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn at_most_n_commands_run_at_once() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("permits-n");
    let log = scratch.path("log");
    // Each command appends "+" on entry and "-" on exit (O_APPEND: one
    // write each, never interleaved), so the log replays who was inside.
    let script = format!(
        "printf + >> {l}; sleep 0.3; printf - >> {l}",
        l = log.display()
    );
    let runs: Vec<Child> = (0..5)
        .map(|_| {
            latchkey(&redis)
                .args(["run", "--permits", "2", "jobs", "--", "sh", "-c", &script])
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn latchkey run")
        })
        .collect();
    for mut run in runs {
        let status = wait_exit(&mut run, QUICK);
        assert_eq!(status.code(), Some(0));
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let (mut inside, mut peak) = (0i32, 0i32);
    for step in text.chars() {
        inside += if step == '+' { 1 } else { -1 };
        peak = peak.max(inside);
    }
    assert_eq!(text.len(), 10, "all 5 ran: {text:?}");
    assert_eq!(peak, 2, "at most 2 at once, and they did overlap: {text:?}");
    assert_eq!(permits_held(&redis, "jobs"), 0, "every permit given back");
}

#[cfg(target_os = "linux")]
#[test]
fn a_killed_holders_permit_returns_within_its_ttl_and_status_names_it() {
    let redis = RedisServer::start();
    let mut holder = latchkey(&redis)
        .args([
            "run",
            "--permits",
            "1",
            "--ttl",
            "1s",
            "pool",
            "--",
            "sleep",
            "60",
        ])
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn latchkey run");
    latchkey_testkit::eventually_blocking("the permit is held", || {
        permits_held(&redis, "pool") == 1
    });

    let status = output(latchkey(&redis).args(["status", "pool"]), QUICK);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("1 semaphore permit(s) held"), "{text}");
    assert!(text.contains(&format!("pid {}", holder.id())), "{text}");
    let json = output(latchkey(&redis).args(["status", "pool", "--json"]), QUICK);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["permits"][0]["pid"], holder.id());

    let busy = output(
        latchkey(&redis).args(["run", "--permits", "1", "--no-wait", "pool", "--", "true"]),
        QUICK,
    );
    assert_eq!(busy.status.code(), Some(1));
    let message = String::from_utf8_lossy(&busy.stderr);
    assert!(
        message.contains("all 1 permits") && message.contains(&format!("pid {}", holder.id())),
        "{message}"
    );

    // kill -9: nothing gives the permit back; its TTL does.
    send_signal(&holder, libc::SIGKILL);
    let killed = Instant::now();
    let _ = wait_exit(&mut holder, QUICK);
    let next = output(
        latchkey(&redis).args([
            "run",
            "--permits",
            "1",
            "--ttl",
            "1s",
            "--wait",
            "10s",
            "pool",
            "--",
            "true",
        ]),
        QUICK,
    );
    let after = killed.elapsed();
    assert_eq!(next.status.code(), Some(0), "{next:?}");
    // Within the TTL (1 s, the watchdog's last renewal at most a TTL ago),
    // plus process start-up on a busy machine.
    assert!(
        after < Duration::from_secs(3),
        "the permit came back after {after:?}"
    );
}

#[test]
fn bad_permits_exit_2() {
    let redis = RedisServer::start();
    for n in ["0", "100001", "x"] {
        let out = output(
            latchkey(&redis).args(["run", "--permits", n, "p", "--", "true"]),
            QUICK,
        );
        assert_eq!(out.status.code(), Some(2), "--permits {n}: {out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
    }
}

#[test]
fn take_k_holds_k_permits_at_once_and_status_counts_them() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("take");
    let gate = scratch.path("gate");
    let script = format!(
        "echo \"$LATCHKEY_TOKEN\"; while [ ! -e {g} ]; do sleep 0.02; done",
        g = gate.display()
    );
    let mut holder = latchkey(&redis)
        .args([
            "run",
            "--permits",
            "3",
            "--take",
            "2",
            "pool",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn latchkey run");
    latchkey_testkit::eventually_blocking("two permits are held", || {
        permits_held(&redis, "pool") == 2
    });

    let status = output(latchkey(&redis).args(["status", "pool"]), QUICK);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("2 semaphore permit(s) held"), "{text}");
    assert_eq!(
        text.matches(&format!("pid {}", holder.id())).count(),
        2,
        "{text}"
    );

    // One left: a second 2-take is refused, a 1-take runs.
    let busy = output(
        latchkey(&redis).args([
            "run",
            "--permits",
            "3",
            "--take",
            "2",
            "--no-wait",
            "pool",
            "--",
            "true",
        ]),
        QUICK,
    );
    assert_eq!(busy.status.code(), Some(1), "{busy:?}");
    let message = String::from_utf8_lossy(&busy.stderr);
    assert!(
        message.contains("fewer than 2 of the 3 permits"),
        "{message}"
    );
    let one = output(
        latchkey(&redis).args(["run", "--permits", "3", "--no-wait", "pool", "--", "true"]),
        QUICK,
    );
    assert_eq!(one.status.code(), Some(0), "{one:?}");

    std::fs::write(&gate, "").unwrap();
    assert_eq!(wait_exit(&mut holder, QUICK).code(), Some(0));
    assert_eq!(permits_held(&redis, "pool"), 0, "both given back");
}

#[test]
fn bad_takes_are_usage_errors() {
    let redis = RedisServer::start();
    for (args, says) in [
        (&["run", "--take", "2", "p", "--", "true"][..], "--permits"),
        (
            &["run", "--permits", "3", "--take", "4", "p", "--", "true"],
            "permits",
        ),
        (
            &["run", "--permits", "3", "--take", "0", "p", "--", "true"],
            "0 is too small",
        ),
    ] {
        let out = output(latchkey(&redis).args(args), QUICK);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(text.lines().count(), 1, "{args:?}: {text}");
        assert!(text.contains(says), "{args:?}: {text}");
    }
    assert_eq!(permits_held(&redis, "p"), 0);
}

fn readers_inside(redis: &RedisServer, name: &str) -> usize {
    redis
        .command(&["ZCARD", &format!("{{{PREFIX}{name}}}:rw:readers")])
        .ok()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn readers_share_and_a_writer_runs_alone() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("rw");
    let log = scratch.path("log");
    let gate = scratch.path("gate");
    // Readers stay inside until the gate file exists.
    let reader = format!(
        "printf r >> {l}; while [ ! -e {g} ]; do sleep 0.02; done; printf R >> {l}",
        l = log.display(),
        g = gate.display()
    );
    let readers: Vec<Child> = (0..2)
        .map(|_| {
            latchkey(&redis)
                .args(["run", "--read", "doc", "--", "sh", "-c", &reader])
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn reader")
        })
        .collect();
    latchkey_testkit::eventually_blocking("both readers are inside at once", || {
        readers_inside(&redis, "doc") == 2
    });
    let refused = output(
        latchkey(&redis).args(["run", "--write", "--no-wait", "doc", "--", "true"]),
        QUICK,
    );
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    let writer = latchkey(&redis)
        .args(["run", "--write", "--wait", "10s", "doc", "--", "sh", "-c"])
        .arg(format!(
            "printf w >> {l}; printf W >> {l}",
            l = log.display()
        ))
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn writer");
    latchkey_testkit::eventually_blocking("the writer waits", || {
        redis
            .command(&["ZCARD", "{test:doc}:rw:writers-waiting"])
            .is_ok_and(|n| n.trim() == "1")
    });
    let late = output(
        latchkey(&redis).args(["run", "--read", "--no-wait", "doc", "--", "true"]),
        QUICK,
    );
    assert_eq!(
        late.status.code(),
        Some(1),
        "a waiting writer holds new readers back"
    );
    std::fs::write(&gate, "").unwrap();
    for mut child in readers.into_iter().chain([writer]) {
        assert_eq!(wait_exit(&mut child, QUICK).code(), Some(0));
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        &text[text.len() - 2..],
        "wW",
        "the writer ran alone, last: {text:?}"
    );
    assert_eq!(text.len(), 6, "{text:?}");
}
