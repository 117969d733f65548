//! `latchkey run --fair` and `acquire --fair` across processes: arrival
//! order, `kill -9` of queued waiters and of the waiter at the head, a
//! cancelled wait, a lost hand-off message, fencing tokens. Each process
//! starts only once the one before it is in the queue (checked in Redis).

use crate::common;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;
use latchkey_testkit::eventually_blocking;

const QUICK: Duration = Duration::from_secs(20);
/// The waiter lease these tests use: short, so that a dead waiter costs
/// little; renewed every third of it.
const LEASE: Duration = Duration::from_millis(600);

fn queue_len(redis: &RedisServer, name: &str) -> usize {
    redis
        .command(&["LLEN", &format!("{{{PREFIX}{name}}}:queue")])
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn until_queued(redis: &RedisServer, name: &str, n: usize) {
    eventually_blocking(&format!("{n} waiter(s) queued for {name}"), || {
        queue_len(redis, name) == n
    });
}

/// Takes the lock (free) with `acquire --fair`; returns its owner token.
fn hold(redis: &RedisServer, name: &str) -> String {
    let out = output(
        latchkey(redis).args(["acquire", "--fair", name, "--ttl", "30s"]),
        QUICK,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    stdout(&out).lines().next().expect("token").to_owned()
}

/// `release --fair`: hands the lock to the first live waiter.
fn release(redis: &RedisServer, name: &str, token: &str) {
    let out = output(
        latchkey(redis).args(["release", "--fair", name, token]),
        QUICK,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
}

/// `run --fair` whose command appends `label fencing-token` to `file`.
fn runner(redis: &RedisServer, name: &str, label: &str, file: &std::path::Path) -> Child {
    let script = format!(
        "echo \"{label} $LATCHKEY_FENCING_TOKEN\" >> {}",
        file.display()
    );
    latchkey(redis)
        .args(["run", "--fair", name, "--ttl", "30s", "--waiter-lease"])
        .arg(format!("{}ms", LEASE.as_millis()))
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn latchkey run --fair")
}

/// The labels in `file`, in order, and their fencing tokens.
fn served(file: &std::path::Path) -> Vec<(String, u64)> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|line| {
            let (label, fence) = line.split_once(' ').expect("label fence");
            (label.to_owned(), fence.parse().expect("fencing token"))
        })
        .collect()
}

fn exit_ok(child: &mut Child) {
    let status = wait_exit(child, QUICK);
    assert_eq!(code(status), 0);
}

#[test]
fn processes_acquire_in_arrival_order_with_increasing_fencing_tokens() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("fair-fifo");
    let mut last_fence = 0;
    for round in 0..3 {
        let file = scratch.path(&format!("order-{round}"));
        let token = hold(&redis, "fifo");
        let labels: Vec<String> = (0..6)
            .map(|i| format!("r{round}p{}", (i * 5 + round) % 6))
            .collect();
        let mut children = Vec::new();
        for (i, label) in labels.iter().enumerate() {
            children.push(runner(&redis, "fifo", label, &file));
            until_queued(&redis, "fifo", i + 1);
        }
        release(&redis, "fifo", &token);
        for child in &mut children {
            exit_ok(child);
        }
        let got = served(&file);
        let order: Vec<&String> = got.iter().map(|(label, _)| label).collect();
        assert_eq!(order, labels.iter().collect::<Vec<_>>(), "round {round}");
        for (label, fence) in &got {
            assert!(
                *fence > last_fence,
                "{label}: token {fence} after {last_fence}"
            );
            last_fence = *fence;
        }
        assert_eq!(queue_len(&redis, "fifo"), 0);
    }
}

/// Runs one kill -9 scenario: the holder, waiters `0..n` queued in order,
/// `victim` killed; after the release, every survivor must be served, in
/// order, within the bound a dead waiter may cost (a lease and a third of
/// one, plus slack for starting processes on a busy host); a stalled queue
/// would wait for the 30 s TTL.
fn kill_scenario(test: &str, n: usize, victim: usize) {
    let redis = RedisServer::start();
    let scratch = Scratch::new(test);
    let file = scratch.path("order");
    let token = hold(&redis, test);
    let mut children = Vec::new();
    for i in 0..n {
        children.push(runner(&redis, test, &format!("w{i}"), &file));
        until_queued(&redis, test, i + 1);
    }
    children[victim].kill().expect("kill -9");
    let _ = children[victim].wait();
    release(&redis, test, &token);
    let released = Instant::now();
    for (i, child) in children.iter_mut().enumerate() {
        if i != victim {
            exit_ok(child);
        }
    }
    let took = released.elapsed();
    let expected: Vec<String> = (0..n)
        .filter(|&i| i != victim)
        .map(|i| format!("w{i}"))
        .collect();
    let order: Vec<String> = served(&file).into_iter().map(|(label, _)| label).collect();
    assert_eq!(order, expected);
    eprintln!("{test}: the survivors were served {took:?} after the release");
    if victim == 0 {
        // Killed right before the release, within a third of a lease of
        // its last renewal: the lock was handed to it, and its key had to
        // run out (the path under test, not a lucky skip).
        assert!(took >= LEASE / 2, "served after {took:?}");
    }
    let bound = LEASE + LEASE / 3 + Duration::from_millis(1500);
    assert!(took < bound, "the queue took {took:?} (bound {bound:?})");
    assert_eq!(queue_len(&redis, test), 0);
}

#[test]
fn a_killed_queued_waiter_delays_the_queue_by_at_most_the_bound() {
    kill_scenario("fair-kill-queued", 4, 2);
}

#[test]
fn a_killed_waiter_at_the_head_delays_the_queue_by_at_most_the_bound() {
    kill_scenario("fair-kill-head", 3, 0);
}

#[test]
fn a_wait_that_times_out_or_is_interrupted_leaves_the_queue() {
    let redis = RedisServer::start();
    let token = hold(&redis, "fair-leave");
    // A long lease: only leaving empties the queue this soon.
    let out = output(
        latchkey(&redis).args([
            "acquire",
            "--fair",
            "fair-leave",
            "--ttl",
            "30s",
            "--wait",
            "300ms",
            "--waiter-lease",
            "30s",
        ]),
        QUICK,
    );
    assert_eq!(code(out.status), 1, "{}", stderr(&out));
    assert_one_error_line(&out);
    assert_eq!(queue_len(&redis, "fair-leave"), 0);

    let mut waiting = latchkey(&redis)
        .args([
            "run",
            "--fair",
            "fair-leave",
            "--ttl",
            "30s",
            "--waiter-lease",
            "30s",
            "--",
            "true",
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    until_queued(&redis, "fair-leave", 1);
    send_signal(&waiting, libc::SIGTERM);
    assert_eq!(code(wait_exit(&mut waiting, QUICK)), 128 + libc::SIGTERM);
    assert_eq!(queue_len(&redis, "fair-leave"), 0, "left before exiting");
    release(&redis, "fair-leave", &token);
    let held = redis.command(&["EXISTS", "test:fair-leave"]).unwrap();
    assert_eq!(held.trim(), "0", "nobody left to hand it to");
}

#[test]
fn a_lost_handoff_message_is_recovered_within_the_lease() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("fair-lost");
    let file = scratch.path("order");
    let token = hold(&redis, "lost");
    let mut waiting = runner(&redis, "lost", "w", &file);
    until_queued(&redis, "lost", 1);
    eventually_blocking("the waiter subscribed", || {
        redis.subscribers("{test:lost}:released") >= 1
    });
    let killed = redis
        .command(&["CLIENT", "KILL", "TYPE", "pubsub"])
        .unwrap();
    assert_ne!(
        killed.trim(),
        "0",
        "the waiter's pub/sub connection was killed"
    );
    release(&redis, "lost", &token);
    let released = Instant::now();
    exit_ok(&mut waiting);
    let took = released.elapsed();
    assert_eq!(served(&file).len(), 1);
    assert!(took < LEASE + Duration::from_millis(1000), "{took:?}");
}

/// `run --fair` whose command writes `label start <ns>` and `label stop <ns>`
/// (the clock of `date`, one for every process) to `file` around `sleep`.
fn timed_runner(
    redis: &RedisServer,
    name: &str,
    label: &str,
    secs: &str,
    file: &std::path::Path,
) -> Child {
    let f = file.display();
    let script = format!(
        "echo \"{label} start $(date +%s%N)\" >> {f}; sleep {secs}; echo \"{label} stop $(date +%s%N)\" >> {f}"
    );
    latchkey(redis)
        .args([
            "run",
            "--fair",
            name,
            "--ttl",
            "30s",
            "--wait",
            "60s",
            "--waiter-lease",
        ])
        .arg(format!("{}ms", LEASE.as_millis()))
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn latchkey run --fair")
}

/// `label`'s CMD interval in `text` (start and stop, ns); a CMD that was
/// killed before its stop line counts as running until the end.
fn interval(text: &str, label: &str) -> (u128, u128) {
    let at = |what: &str| {
        let prefix = format!("{label} {what} ");
        let line = text.lines().find(|l| l.starts_with(&prefix))?;
        line[prefix.len()..].trim().parse::<u128>().ok()
    };
    let start = at("start").unwrap_or_else(|| panic!("no {label} start in {text:?}"));
    (start, at("stop").unwrap_or(u128::MAX))
}

fn is_stopped(child: &Child) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap_or_default();
    // The state follows the command's name in parentheses.
    stat.rsplit_once(") ")
        .is_some_and(|(_, rest)| rest.starts_with('T'))
}

#[test]
fn a_waiter_stopped_while_the_lock_is_handed_to_it_never_runs_beside_the_holder() {
    // W1 is stopped (SIGSTOP) just before the holder's
    // release hands it the lock; its hand-off TTL runs out and W2 takes the
    // lock. Resumed, W1 must not start CMD while W2 holds: it queues again
    // and runs after W2.
    let redis = RedisServer::start();
    let scratch = Scratch::new("fair-stopped");
    let file = scratch.path("times");
    let token = hold(&redis, "stopped");
    let mut w1 = timed_runner(&redis, "stopped", "W1", "0.5", &file);
    until_queued(&redis, "stopped", 1);
    let mut w2 = timed_runner(&redis, "stopped", "W2", "2", &file);
    until_queued(&redis, "stopped", 2);
    send_signal(&w1, libc::SIGSTOP);
    eventually_blocking("W1 stopped", || is_stopped(&w1));
    release(&redis, "stopped", &token);
    wait_for_text(&file, "W2 start", QUICK);
    send_signal(&w1, libc::SIGCONT);
    let (s1, s2) = (wait_exit(&mut w1, QUICK), wait_exit(&mut w2, QUICK));
    let text = std::fs::read_to_string(&file).unwrap();
    let ((a0, a1), (b0, b1)) = (interval(&text, "W1"), interval(&text, "W2"));
    assert!(a1 <= b0 || b1 <= a0, "W1 ran beside W2: {text}");
    assert_eq!((code(s1), code(s2)), (0, 0), "{text}");
}

#[test]
fn fair_and_plain_runs_of_one_name_finish_in_about_their_holds() {
    // A plain waiter slept about a TTL while a fair queue
    // handed the lock on (an 8-process mix took 31 s instead of ~2.5 s).
    let redis = RedisServer::start();
    let token = hold(&redis, "mixed");
    let mut children: Vec<Child> = (0..8)
        .map(|i| {
            let mut cmd = latchkey(&redis);
            cmd.arg("run");
            if i % 2 == 0 {
                cmd.arg("--fair");
            }
            cmd.args([
                "mixed", "--ttl", "30s", "--wait", "60s", "--", "sleep", "0.1",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn latchkey run")
        })
        .collect();
    until_queued(&redis, "mixed", 4);
    eventually_blocking("every waiter listens for releases", || {
        redis.subscribers("{test:mixed}:released") >= 8
    });
    release(&redis, "mixed", &token);
    let released = Instant::now();
    for child in &mut children {
        exit_ok(child);
    }
    let took = released.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "8 holds of 100 ms took {took:?} (TTL 30 s)"
    );
}

#[test]
fn a_redlock_refuses_fair() {
    let servers = RedisServer::start_many(3);
    let mut cmd = latchkey_at(&servers[0].url());
    for server in &servers[1..] {
        cmd.args(["--redis", &server.url()]);
    }
    let out = output(cmd.args(["acquire", "--fair", "x", "--ttl", "10s"]), QUICK);
    assert_eq!(code(out.status), 2, "{}", stderr(&out));
    assert_one_error_line(&out);
    assert!(stderr(&out).contains("Redlock"), "{}", stderr(&out));
}

/// The torture suite with fair workers (`torture --fair`): the faults that
/// hit a fair lock hardest (a killed or paused holder or waiter, a Redis
/// that forgets the queue, dropped hand-off messages, a deleted key) keep
/// every must-hold figure: no overlap, no lost update, tokens in order, and
/// the lock taken again within the recovery bound. About 20 s.
#[test]
fn fair_workers_hold_under_the_torture_faults() {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_latchkey"));
    cmd.args(["torture", "--quick", "--fair"])
        .env_remove("LATCHKEY_REDIS_URL")
        .env_remove("LATCHKEY_PREFIX");
    for fault in ["kill", "pause", "restart", "pubsub-kill", "delete-key"] {
        cmd.args(["--fault", fault]);
    }
    let out = output(&mut cmd, Duration::from_secs(120));
    let text = stdout(&out);
    assert_eq!(code(out.status), 0, "{text}{}", stderr(&out));
    for fault in [
        "kill",
        "pause",
        "restart",
        "pubsub-kill",
        "delete-key",
        "mixed",
    ] {
        let row = text
            .lines()
            .find(|line| line.starts_with(&format!("{fault} ")))
            .unwrap_or_else(|| panic!("no {fault} row in:\n{text}"));
        assert!(row.trim_end().ends_with("PASS"), "{row}\n{text}");
    }
}

#[test]
fn the_demo_runs_the_fair_lock_beside_the_barging_one() {
    let redis = RedisServer::start();
    let out = output(
        latchkey(&redis).args(["demo", "--workers", "4", "--increments", "10"]),
        QUICK,
    );
    let text = stdout(&out);
    assert_eq!(code(out.status), 0, "{text}{}", stderr(&out));
    let fair = text.split("With a fair latchkey lock").nth(1).expect(&text);
    assert!(
        fair.contains("expected 40, got 40: 0 updates lost"),
        "{text}"
    );
    assert!(fair.contains("acquisitions    40"), "{text}");
    assert!(fair.contains("strictly increasing"), "{text}");
    assert!(fair.contains("longest wait"), "{text}");
    assert_eq!(
        redis.command(&["DBSIZE"]).unwrap(),
        "0",
        "nothing left behind"
    );
}
