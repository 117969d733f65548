//! The command line through a `kill -9` of the primary that owns the
//! names' slot, on a real 3+3 Redis Cluster:
//! waiters (`run --wait`, `--fair`, `--permits`, `--read`, `latch wait`,
//! an `elect` standby, `wait` for a signal) ride the failover out and
//! finish normally, and `leader --watch` keeps watching; `run --no-wait` during the window
//! exits 0 or 69, never 70; names with a `}` and no hash tag are refused
//! with exit 2 and the reason, tagged ones work; several URLs of
//! one cluster are seeds, a dead one among them is skipped, and Redlock
//! over a cluster node is refused with exit 2. And `run --wait` started
//! while a standalone Redis is stopped connects when it is back.

use crate::common;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;
use latchkey_testkit::RedisCluster;

const QUICK: Duration = Duration::from_secs(20);

fn spawn(url: &str, args: &[&str]) -> Child {
    latchkey_at(url)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn latchkey")
}

fn finish(mut child: Child, what: &str) {
    let status = wait_exit(&mut child, Duration::from_secs(60));
    let out = child.wait_with_output().expect("output");
    assert_eq!(code(status), 0, "{what}: {}", stderr(&out));
}

#[test]
fn waiters_ride_out_the_kill_of_their_primary_and_braces_need_a_tag() {
    let mut cluster = RedisCluster::builder()
        .primaries(3)
        .replicas_per_primary(1)
        .node_timeout(Duration::from_millis(1000))
        .start();
    let url = cluster.seed_url();

    // Item 7: one line, exit 2, the reason; a tagged name works.
    for args in [
        &["run", "x}y", "--", "true"][..],
        &["run", "--fair", "job}", "--", "true"],
        &["run", "--permits", "2", "job}", "--", "true"],
        &["run", "--read", "x}y", "--", "true"],
        &["elect", "x}y", "--", "true"],
        &["leader", "job}"],
        &["status", "x}y"],
    ] {
        let out = output(latchkey_at(&url).args(args), QUICK);
        assert_eq!(code(out.status), 2, "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("hash tag"),
            "{args:?}: {}",
            stderr(&out)
        );
        assert_one_error_line(&out);
    }
    for args in [
        &["run", "{a}b}", "--", "true"][..],
        &["run", "--permits", "2", "{a}b}", "--", "true"],
        &["run", "--write", "{a}b}", "--", "true"],
    ] {
        let out = output(latchkey_at(&url).args(args), QUICK);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }

    // Names in one slot, whose primary is not the seed.
    let seed = cluster.nodes()[0].port();
    let tag = (0..)
        .map(|i| format!("victim-{i}"))
        .find(|t| cluster.primary_for_key(format!("{{{t}}}")).port() != seed)
        .unwrap();
    let (lock, latch, elect) = (
        format!("{{{tag}}}:lock"),
        format!("{{{tag}}}:latch"),
        format!("{{{tag}}}:elect"),
    );
    let acquired = output(
        latchkey_at(&url).args(["acquire", &lock, "--ttl", "60s"]),
        QUICK,
    );
    assert!(acquired.status.success(), "{}", stderr(&acquired));
    let token = stdout(&acquired)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    let created = output(
        latchkey_at(&url).args(["latch", &latch, "--count", "1"]),
        QUICK,
    );
    assert!(created.status.success(), "{}", stderr(&created));
    let leader = spawn(&url, &["elect", &elect, "--once", "--", "sleep", "8"]);
    latchkey_testkit::eventually_blocking("the first candidate leads", || {
        let out = output(latchkey_at(&url).args(["leader", &elect]), QUICK);
        !stdout(&out).contains("no leader") && out.status.success()
    });
    let run_waiter = spawn(&url, &["run", &lock, "--wait", "50s", "--", "true"]);
    let latch_waiter = spawn(&url, &["latch", &latch, "wait", "--timeout", "50s"]);
    // The standby leads for seconds, not for the few milliseconds of
    // `true`: when the first leader's hold is lost in the failover (allowed
    // here), the standby is elected at once, while `--watch` may still be
    // resubscribing at the new primary; a watcher that comes back reads the
    // state then, and would never see a leadership that already ended. A
    // watcher that missed the message reads again within its periodic
    // re-read (5 s): the standby leads longer than that, and the slow heal
    // of a loaded machine's failover besides. The watch logs (`-v`), so that
    // a failure shows when it was deaf.
    let standby = spawn(
        &url,
        &["elect", &elect, "--value", "standby", "--", "sleep", "9"],
    );
    let watch = spawn(&url, &["-v", "leader", &elect, "--watch"]);
    // A holder and a waiter of each other kind, the holders done after the
    // failover (a hold lost in it lets its waiter in sooner: also fine).
    let (fair, permits, rw) = (
        format!("{{{tag}}}:fair"),
        format!("{{{tag}}}:permits"),
        format!("{{{tag}}}:rw"),
    );
    let holders = [
        spawn(&url, &["run", "--fair", &fair, "--", "sleep", "8"]),
        spawn(
            &url,
            &["run", "--permits", "1", &permits, "--", "sleep", "8"],
        ),
        spawn(&url, &["run", "--write", &rw, "--", "sleep", "8"]),
    ];
    std::thread::sleep(Duration::from_millis(700));
    let kinds = [
        (
            "run --fair",
            spawn(
                &url,
                &["run", "--fair", &fair, "--wait", "50s", "--", "true"],
            ),
        ),
        (
            "run --permits",
            spawn(
                &url,
                &[
                    "run",
                    "--permits",
                    "1",
                    &permits,
                    "--wait",
                    "50s",
                    "--",
                    "true",
                ],
            ),
        ),
        (
            "run --read",
            spawn(&url, &["run", "--read", &rw, "--wait", "50s", "--", "true"]),
        ),
    ];
    let signal = format!("{{{tag}}}:signal");
    let signal_waiter = spawn(&url, &["wait", &signal, "--timeout", "50s"]);
    let channel = format!("{PREFIX}signal:{signal}");
    latchkey_testkit::eventually_blocking("the signal waiter subscribes", || {
        cluster
            .primary_for_key(&channel)
            .server()
            .shard_subscribers(&channel)
            == 1
    });
    std::thread::sleep(Duration::from_millis(500));

    let victim = cluster.primary_for_key(format!("{{{tag}}}")).port();
    cluster
        .nodes_mut()
        .iter_mut()
        .find(|n| n.port() == victim)
        .unwrap()
        .kill();
    // During the window: busy (1), unavailable (69), or (a lock lost in
    // the failover) done (0); never 70.
    let started = Instant::now();
    let probe = format!("{{{tag}}}:probe");
    loop {
        let out = output(
            latchkey_at(&url).args(["run", &probe, "--no-wait", "--", "true"]),
            QUICK,
        );
        let c = code(out.status);
        assert!(
            matches!(c, 0 | 69),
            "run --no-wait in the window: {c}: {}",
            stderr(&out)
        );
        if c == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no answer: {}",
            stderr(&out)
        );
    }

    // Item 6: several URLs of one cluster are its seeds: a dead one first
    // does not stop a new invocation; Redlock over a standalone server and
    // a cluster node is refused with one line, exit 2.
    let seeds = format!("redis://127.0.0.1:{victim}/,{url}");
    for args in [&["run", &probe, "--", "true"][..], &["leader", &elect]] {
        let out = output(latchkey_at(&seeds).args(args), QUICK);
        assert!(
            out.status.success(),
            "{args:?} with a dead seed: {}",
            stderr(&out)
        );
    }
    let (a, b) = (RedisServer::start(), RedisServer::start());
    let mixed = format!("{},{},{url}", a.url(), b.url());
    let out = output(
        latchkey_at(&mixed).args(["run", &probe, "--", "true"]),
        QUICK,
    );
    assert_eq!(
        code(out.status),
        2,
        "Redlock with a cluster node: {}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("Redis Cluster node"),
        "{}",
        stderr(&out)
    );
    assert_one_error_line(&out);

    let released = output(latchkey_at(&url).args(["release", &lock, &token]), QUICK);
    assert!(
        matches!(code(released.status), 0 | 1),
        "{}",
        stderr(&released)
    );
    let counted = output(
        latchkey_at(&url).args(["latch", &latch, "count-down"]),
        QUICK,
    );
    assert!(counted.status.success(), "{}", stderr(&counted));
    // Item 5: the signal waiter is subscribed at the new primary (a deaf
    // one leaves `signal` printing 0 until its timeout, then exits 1).
    let heard = Instant::now();
    loop {
        let sent = output(latchkey_at(&url).args(["signal", &signal, "after"]), QUICK);
        assert!(sent.status.success(), "{}", stderr(&sent));
        if stdout(&sent).trim() != "0" {
            break;
        }
        assert!(
            heard.elapsed() < Duration::from_secs(30),
            "the waiter went deaf"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut signal_waiter = signal_waiter;
    let status = wait_exit(&mut signal_waiter, Duration::from_secs(60));
    let out = signal_waiter.wait_with_output().unwrap();
    assert_eq!(code(status), 0, "wait: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "after");
    finish(run_waiter, "run --wait");
    finish(latch_waiter, "latch wait");
    let mut leader = leader;
    let _ = wait_exit(&mut leader, Duration::from_secs(60));
    finish(standby, "elect standby");
    for (what, waiter) in kinds {
        finish(waiter, what);
    }
    for mut holder in holders {
        let _ = wait_exit(&mut holder, Duration::from_secs(60));
    }
    // `leader --watch` is still watching, and saw the standby take over.
    let mut watch = watch;
    assert!(
        watch.try_wait().unwrap().is_none(),
        "leader --watch ended in the failover"
    );
    send_signal(&watch, libc::SIGTERM);
    let _ = wait_exit(&mut watch, Duration::from_secs(10));
    let watched = watch.wait_with_output().unwrap();
    assert!(
        stdout(&watched).contains("leader standby"),
        "leader --watch: {}{}",
        stdout(&watched),
        stderr(&watched)
    );
}

#[test]
fn run_started_while_redis_is_stopped_connects_when_it_is_back() {
    let mut server = RedisServer::start();
    let url = server.url();
    server.stop();
    let started = Instant::now();
    let waiter = spawn(&url, &["run", "outage", "--wait", "30s", "--", "true"]);
    // Still trying after the ~2 s it used to give up at.
    std::thread::sleep(Duration::from_millis(2500));
    server.restart();
    finish(waiter, "run --wait started during the outage");
    assert!(started.elapsed() < Duration::from_secs(30));

    // --no-wait: one try, 69.
    server.stop();
    let once = output(
        latchkey_at(&url).args(["run", "outage", "--no-wait", "--", "true"]),
        QUICK,
    );
    assert_eq!(code(once.status), 69, "{}", stderr(&once));
}
