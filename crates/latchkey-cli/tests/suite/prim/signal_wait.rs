//! `latchkey signal` and `latchkey wait`: what they print and how they exit.

use crate::common;

use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

const QUICK: Duration = Duration::from_secs(15);

/// Starts `latchkey wait ARGS...` in the background.
fn spawn_wait(redis: &RedisServer, args: &[&str]) -> Child {
    latchkey(redis)
        .arg("wait")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn latchkey wait")
}

/// Waits until the server reports `check` true: the waiter process has
/// subscribed (no other signal tells another process that).
fn until_server(redis: &RedisServer, what: &str, check: impl Fn(&RedisServer) -> bool) {
    latchkey_testkit::eventually_blocking(what, || check(redis));
}

fn subscribers(redis: &RedisServer, name: &str) -> u64 {
    redis.subscribers(&format!("{PREFIX}signal:{name}"))
}

fn patterns(redis: &RedisServer) -> usize {
    redis
        .command(&["PUBSUB", "NUMPAT"])
        .unwrap()
        .parse()
        .unwrap()
}

fn signal(redis: &RedisServer, args: &[&str]) -> String {
    let out = output(latchkey(redis).arg("signal").args(args), QUICK);
    assert_eq!(code(out.status), 0, "signal {args:?}: {}", stderr(&out));
    stdout(&out)
}

fn finish(child: Child) -> Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(QUICK) {
        Ok(out) => out.expect("wait for latchkey wait"),
        Err(_) => {
            // SAFETY: sending SIGKILL to our own child.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            panic!("latchkey wait did not finish");
        }
    }
}

#[test]
fn a_waiter_prints_the_payload_and_signal_prints_the_receivers() {
    let redis = RedisServer::start();
    let waiter = spawn_wait(&redis, &["deploy", "--timeout", "10s"]);
    until_server(&redis, "the waiter listens", |r| {
        subscribers(r, "deploy") == 1
    });
    assert_eq!(signal(&redis, &["deploy", "v42"]), "1\n");
    let out = finish(waiter);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out), "v42\n");
    // Nobody listens any more: the signal is lost, and says so.
    assert_eq!(signal(&redis, &["deploy", "v43"]), "0\n");
}

#[test]
fn one_waiter_gets_a_unicast_and_nobody_is_reported() {
    let redis = RedisServer::start();
    assert_eq!(signal(&redis, &["jobs", "j1", "--one"]), "0\n");
    let waiter = spawn_wait(&redis, &["jobs"]);
    until_server(&redis, "the waiter listens", |r| {
        subscribers(r, "jobs") == 1
    });
    assert_eq!(signal(&redis, &["jobs", "j2", "--one"]), "1\n");
    let out = finish(waiter);
    assert_eq!((code(out.status), stdout(&out)), (0, "j2\n".to_owned()));
}

#[test]
fn all_prints_every_name_in_the_order_given() {
    let redis = RedisServer::start();
    let waiter = spawn_wait(&redis, &["build", "test", "--all", "--timeout", "10s"]);
    until_server(&redis, "the waiter listens", |r| {
        subscribers(r, "test") == 1
    });
    assert_eq!(signal(&redis, &["test", "passed"]), "1\n");
    assert_eq!(signal(&redis, &["build", "ok"]), "1\n");
    let out = finish(waiter);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out), "build\tok\ntest\tpassed\n");
}

#[test]
fn any_and_pattern_print_the_name_first() {
    let redis = RedisServer::start();
    let any = spawn_wait(&redis, &["a", "b", "--any"]);
    until_server(&redis, "the waiter listens", |r| subscribers(r, "b") == 1);
    signal(&redis, &["b", "bee"]);
    assert_eq!(stdout(&finish(any)), "b\tbee\n");

    let pattern = spawn_wait(&redis, &["job.*", "--pattern"]);
    until_server(&redis, "the pattern is subscribed", |r| patterns(r) == 1);
    assert_eq!(
        signal(&redis, &["other", "no"]),
        "0\n",
        "the pattern does not match"
    );
    assert_eq!(
        signal(&redis, &["job.17", "go"]),
        "1\n",
        "the pattern subscription counts"
    );
    let out = finish(pattern);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out), "job.17\tgo\n");
}

#[test]
fn a_timeout_exits_1_and_bad_input_exits_2() {
    let redis = RedisServer::start();
    let started = Instant::now();
    let out = output(
        latchkey(&redis).args(["wait", "nobody", "--timeout", "100ms"]),
        QUICK,
    );
    assert_eq!(code(out.status), 1);
    assert!(started.elapsed() >= Duration::from_millis(100));
    assert_eq!(stdout(&out), "");
    assert_one_error_line(&out);

    for args in [
        &["wait", ""][..],
        &["signal", ""],
        &["wait", "x", "--timeout", "5"],
        &["wait", "a", "--any", "--all"],
    ] {
        let out = output(latchkey(&redis).args(args), QUICK);
        assert_eq!(code(out.status), 2, "{args:?}: {}", stderr(&out));
        assert_one_error_line(&out);
    }
}

#[test]
fn a_wait_that_never_subscribed_is_unavailable_within_its_timeout() {
    let redis = RedisServer::start();
    // Frozen: connections are accepted but nothing is answered, so the
    // connect would wait for its own 2 s timeout. The wait's timeout bounds it.
    redis.pause();
    let out = output(
        latchkey(&redis).args(["wait", "nobody", "--timeout", "300ms"]),
        QUICK,
    );
    redis.resume();
    assert_eq!(code(out.status), 69, "{}", stderr(&out));
    assert_one_error_line(&out);
    assert!(
        stderr(&out).contains("could not subscribe within 300.0ms"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_wait_whose_server_died_is_unavailable_at_its_timeout() {
    let mut redis = RedisServer::start();
    let waiter = spawn_wait(&redis, &["lonely", "--timeout", "4s"]);
    until_server(&redis, "the waiter subscribed", |r| {
        subscribers(r, "lonely") == 1
    });
    redis.kill();
    let out = finish(waiter);
    assert_eq!(code(out.status), 69, "{}", stderr(&out));
    // Either the timeout finds the listener unsubscribed, or the dead link
    // surfaces first: both name the outage, neither is "timed out".
    let said = stderr(&out);
    assert!(
        said.contains("not subscribed") || said.contains("unreachable"),
        "{said}"
    );
}

#[test]
fn a_replica_url_that_is_not_a_replica_is_warned_about() {
    let redis = RedisServer::start();
    let other = RedisServer::start();
    let waiter = spawn_wait(
        &redis,
        &["w", "--replica", &other.url(), "--timeout", "10s"],
    );
    until_server(&redis, "the waiter subscribed", |r| {
        subscribers(r, "w") == 1
    });
    assert_eq!(signal(&redis, &["w", "hi"]), "1\n");
    let out = finish(waiter);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out), "hi\n");
    assert!(
        stderr(&out).contains("is not a replica (ROLE: master)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_payload_of_dash_is_read_from_stdin() {
    let redis = RedisServer::start();
    let waiter = spawn_wait(&redis, &["big", "--timeout", "10s"]);
    until_server(&redis, "the waiter subscribed", |r| {
        subscribers(r, "big") == 1
    });
    // Larger than one argument may be (MAX_ARG_STRLEN is 128 KiB on Linux).
    let payload = "p".repeat(200_000);
    let mut sender = latchkey(&redis)
        .args(["signal", "big", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn latchkey signal");
    let mut stdin = sender.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, payload.as_bytes()).unwrap();
    drop(stdin);
    let sent = sender.wait_with_output().unwrap();
    assert_eq!(code(sent.status), 0, "{}", stderr(&sent));
    assert_eq!(stdout(&sent), "1\n");
    let out = finish(waiter);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out), format!("{payload}\n"));
}
