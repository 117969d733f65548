//! `latchkey run` / `acquire` when things go wrong around them: the
//! supervisor killed with SIGKILL, Redis gone during a bounded wait.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

const QUICK: Duration = Duration::from_secs(15);

/// Whether process `pid` has ended: gone, or a zombie nobody reaped yet
/// (after our `kill -9` of its parent it is reparented to init, or a
/// subreaper, that may reap it later).
fn ended(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
        Err(_) => true,
    }
}

/// Polls until process `pid` has ended, at most `limit`.
fn wait_ended(pid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while !ended(pid) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

#[cfg(target_os = "linux")]
#[test]
fn the_command_dies_when_latchkey_is_killed() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("orphan");
    let pid_file = scratch.path("pid");
    // CMD is the shell itself (exec): its pid is the one to watch.
    let script = format!(
        "echo $$ > {p}.tmp; mv {p}.tmp {p}; exec sleep 60",
        p = pid_file.display()
    );
    let mut run = latchkey(&redis)
        .args(["run", "orphan", "--ttl", "30s", "--", "sh", "-c", &script])
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn latchkey run");
    let text = wait_for_text(&pid_file, "\n", QUICK);
    let cmd_pid: i32 = text.trim().parse().expect("pid");
    assert!(!ended(cmd_pid), "the command runs");

    send_signal(&run, libc::SIGKILL);
    let _ = wait_exit(&mut run, QUICK);

    let gone = wait_ended(cmd_pid, QUICK);
    if !gone {
        unsafe { libc::kill(cmd_pid, libc::SIGKILL) };
    }
    assert!(gone, "the command outlived its supervisor (and the lock)");
}

/// Polls until the lock key carries the waiting mark (`+w`): a waiter has
/// tried and is now waiting.
fn until_marked(redis: &RedisServer, name: &str) {
    let key = format!("{PREFIX}{name}");
    let deadline = Instant::now() + QUICK;
    while !redis.command(&["GET", &key]).unwrap().ends_with("+w") {
        assert!(Instant::now() < deadline, "no waiter marked {key}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_bounded_wait_through_an_outage_exits_69_whatever_the_conflict_code() {
    let scratch = Scratch::new("outage");
    let ran = scratch.path("ran");
    let ran = ran.to_str().unwrap();
    let commands: [&[&str]; 2] = [
        &["run", "busy", "--wait", "3s", "-E", "0", "--", "touch", ran],
        &["acquire", "busy", "--ttl", "10s", "--wait", "3s", "-E", "0"],
    ];
    for command in commands {
        let mut redis = RedisServer::start();
        let held = output(
            latchkey(&redis).args(["acquire", "busy", "--ttl", "30s"]),
            QUICK,
        );
        assert_eq!(code(held.status), 0, "{}", stderr(&held));
        let waiter = latchkey(&redis)
            .args(command)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the waiter");
        until_marked(&redis, "busy");
        redis.kill();

        let out = finish(waiter);
        assert_eq!(code(out.status), 69, "{command:?}: {}", stderr(&out));
        assert_one_error_line(&out);
        assert!(
            stderr(&out).contains("could not reach Redis while waiting for lock \"busy\""),
            "{command:?}: {}",
            stderr(&out)
        );
        assert_eq!(stdout(&out), "", "{command:?}");
    }
    assert!(!std::path::Path::new(ran).exists(), "ran without the lock");
}

/// Collects a spawned child's output, bounded by [`QUICK`].
fn finish(child: std::process::Child) -> std::process::Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(QUICK) {
        Ok(out) => out.expect("wait for latchkey"),
        Err(_) => {
            // SAFETY: sending SIGKILL to our own child.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            panic!("latchkey did not finish within {QUICK:?}");
        }
    }
}

/// `acquire` whose reply is lost (the request reached Redis, the reply
/// never came back) exits 69, and does not leave the lock held for its
/// TTL: the owner-only release it sends in the background lands before the
/// process exits.
#[test]
fn an_acquisition_whose_reply_was_lost_leaves_no_lock_behind() {
    use latchkey_testkit::{Proxy, ProxyMode};
    let redis = RedisServer::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let proxy = runtime.block_on(Proxy::start(redis.addr()));
    // Once with replies: the acquire script is then in Redis' script cache
    // (a lost NOSCRIPT reply would stop the attempt before it took anything).
    let warm = output(
        latchkey_at(&proxy.url()).args(["acquire", "lost", "--ttl", "60s"]),
        QUICK,
    );
    assert!(warm.status.success(), "{warm:?}");
    let token = String::from_utf8_lossy(&warm.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    let released = output(
        latchkey_at(&proxy.url()).args(["release", "lost", &token]),
        QUICK,
    );
    assert!(released.status.success(), "{released:?}");

    for wait in ["--no-wait", "--wait=3s"] {
        // Connecting (PING) goes through; the acquire script's reply is lost.
        proxy.set_mode(ProxyMode::DropRepliesFrom("EVALSHA"));
        let lost = output(
            latchkey_at(&proxy.url()).args(["acquire", "lost", "--ttl", "60s", wait]),
            QUICK,
        );
        assert_eq!(lost.status.code(), Some(69), "{wait}: {lost:?}");
        assert_eq!(
            redis.command(&["EXISTS", "test:lost"]).unwrap().trim(),
            "0",
            "{wait}: the lost acquisition left the lock held until its TTL"
        );
        proxy.set_mode(ProxyMode::Pass);
    }
    drop(proxy);
}

/// A server that refuses writes is an outage with its cause named (exit
/// 69), not a raw script error with exit 70: a read-only replica, and a
/// primary at `maxmemory` under `noeviction`.
#[test]
fn a_full_server_or_a_replica_is_named_and_exits_69() {
    let primary = RedisServer::start();
    let replica = RedisServer::builder().replica_of(primary.port()).start();
    let out = output(
        latchkey(&replica).args(["acquire", "job", "--ttl", "5s", "--no-wait"]),
        QUICK,
    );
    assert_eq!(code(out.status), 69, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("read-only replica"),
        "{}",
        stderr(&out)
    );

    primary
        .command(&["CONFIG", "SET", "maxmemory-policy", "noeviction"])
        .unwrap();
    primary
        .command(&["CONFIG", "SET", "maxmemory", "1"])
        .unwrap();
    let out = output(
        latchkey(&primary).args(["acquire", "job", "--ttl", "5s", "--no-wait"]),
        QUICK,
    );
    assert_eq!(code(out.status), 69, "{}", stderr(&out));
    assert!(stderr(&out).contains("out of memory"), "{}", stderr(&out));
}
