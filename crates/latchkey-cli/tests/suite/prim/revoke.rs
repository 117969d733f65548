//! `latchkey revoke` at its edges: a revoked fair lock goes to the queued
//! `run` with a fencing token above the revocation's (its writes are
//! accepted, the revoked holder's refused); a fence named like the lock, a
//! key no latchkey client wrote and a fence that failed after the
//! revocation (retried on the free name) are handled without breaking
//! anything; the confirmation shows who holds the name.

use crate::common;

use std::fs::File;
use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use latchkey::FencedWrite;

const QUICK: Duration = Duration::from_secs(15);

/// The number after `word ` in `text` (the last such line).
fn number_after(text: &str, word: &str) -> u64 {
    text.lines()
        .rev()
        .filter_map(|l| l.strip_prefix(word))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .next()
        .unwrap_or_else(|| panic!("no {word:?} in {text:?}"))
}

/// A fenced write with `token` to `resource`, through the library.
fn fenced_write(redis: &RedisServer, resource: &str, token: u64) -> FencedWrite {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = latchkey::Client::builder(&redis.url())
            .prefix(PREFIX)
            .connect()
            .await
            .unwrap();
        let resource = client.fenced(resource).unwrap();
        resource.write(token, b"w").await.unwrap()
    })
}

#[test]
fn a_revoked_fair_run_hands_on_to_the_queued_run_above_the_fence() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("revoke-fair");
    let marks = scratch.path("marks");
    let holder_cmd = format!(
        "echo \"holder $LATCHKEY_FENCING_TOKEN\" >> {m}; trap 'exit 0' TERM; while :; do sleep 0.05; done",
        m = marks.display()
    );
    let mut holder = latchkey(&redis)
        .args(["run", "--fair", "fl2", "--", "sh", "-c", &holder_cmd])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stale = number_after(&wait_for_text(&marks, "holder ", QUICK), "holder ");
    let waiter_cmd = format!(
        "echo \"waiter $LATCHKEY_FENCING_TOKEN\" >> {m}",
        m = marks.display()
    );
    let mut waiter = latchkey(&redis)
        .args(["run", "--fair", "fl2", "--", "sh", "-c", &waiter_cmd])
        .spawn()
        .unwrap();
    latchkey_testkit::eventually_blocking("the waiter is queued", || {
        redis.command(&["LLEN", "{test:fl2}:queue"]).unwrap().trim() == "1"
    });

    let out = output(
        latchkey(&redis).args(["revoke", "fl2", "--fence", "fl2-out", "--yes"]),
        QUICK,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    let fence = number_after(
        &stdout(&out).replace("; fencing token", "\nfencing token"),
        "fencing token ",
    );
    assert!(fence > stale);
    let next = number_after(&wait_for_text(&marks, "waiter ", QUICK), "waiter ");
    assert!(
        next > fence,
        "the next holder's token {next} is not above the fence {fence}"
    );
    assert_eq!(code(wait_exit(&mut waiter, QUICK)), 0);
    // The revoked holder's writes are refused, the next holder's accepted.
    assert!(matches!(
        fenced_write(&redis, "fl2-out", stale),
        FencedWrite::Rejected { .. }
    ));
    assert_eq!(fenced_write(&redis, "fl2-out", next), FencedWrite::Accepted);
    let _ = holder.kill();
    let _ = holder.wait();
}

#[test]
fn a_fence_named_like_the_lock_is_refused_and_the_lock_stays_usable() {
    let redis = RedisServer::start();
    let out = output(
        latchkey(&redis).args(["acquire", "job", "--ttl", "30s"]),
        QUICK,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    let refused = output(
        latchkey(&redis).args(["revoke", "job", "--fence", "job", "--yes"]),
        QUICK,
    );
    assert_eq!(code(refused.status), 2, "{}", stderr(&refused));
    assert_one_error_line(&refused);
    // Nothing was revoked, and the key is still a lock.
    assert_eq!(
        redis.command(&["TYPE", "test:job"]).unwrap().trim(),
        "string"
    );
    // A resource whose key holds a lock is refused too, before revoking.
    let out = output(
        latchkey(&redis).args(["acquire", "other", "--ttl", "30s"]),
        QUICK,
    );
    assert_eq!(code(out.status), 0);
    let refused = output(
        latchkey(&redis).args(["revoke", "job", "--fence", "other", "--yes"]),
        QUICK,
    );
    assert_eq!(code(refused.status), 2, "{}", stderr(&refused));
    assert_eq!(
        redis.command(&["TYPE", "test:job"]).unwrap().trim(),
        "string"
    );
    assert_eq!(
        redis.command(&["TYPE", "test:other"]).unwrap().trim(),
        "string"
    );
}

#[test]
fn a_key_no_latchkey_client_wrote_is_not_revoked() {
    let redis = RedisServer::start();
    redis.command(&["SET", "mydata", "important"]).unwrap();
    let out = output(
        Command::new(env!("CARGO_BIN_EXE_latchkey"))
            .args([
                "--redis",
                &redis.url(),
                "--prefix",
                "",
                "revoke",
                "mydata",
                "--yes",
            ])
            .env_remove("LATCHKEY_REDIS_URL")
            .env_remove("LATCHKEY_PREFIX")
            .stdin(Stdio::null()),
        QUICK,
    );
    assert_eq!(code(out.status), 1, "{}", stderr(&out));
    assert_one_error_line(&out);
    assert!(
        stderr(&out).contains("important"),
        "the evidence: {}",
        stderr(&out)
    );
    assert_eq!(
        redis.command(&["GET", "mydata"]).unwrap().trim(),
        "important"
    );
    assert_eq!(
        redis.command(&["EXISTS", "{mydata}:fence"]).unwrap().trim(),
        "0"
    );
}

/// The revocation succeeds, raising the resource fails (the user may read
/// it but not write it): the same command, run again once the name is
/// free, raises the resource above every token the name issued.
#[test]
fn a_fence_that_failed_after_the_revocation_is_retried_on_the_free_name() {
    let redis = RedisServer::start();
    redis
        .command(&[
            "ACL",
            "SETUSER",
            "op",
            "on",
            ">pw",
            "+@all",
            "~test:stuck",
            "~test:stuck:*",
            "~{test:stuck}*",
            "%R~test:out",
            "&*",
        ])
        .unwrap();
    let out = output(
        latchkey(&redis).args(["acquire", "stuck", "--ttl", "30s"]),
        QUICK,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    let stale = number_after(&stdout(&out), "");
    let op_url = format!("redis://op:pw@127.0.0.1:{}/", redis.port());
    let failed = output(
        latchkey_at(&op_url).args(["revoke", "stuck", "--fence", "out", "--yes"]),
        QUICK,
    );
    assert_ne!(code(failed.status), 0, "{}", stdout(&failed));
    assert!(
        stdout(&failed).starts_with("revoked lock \"stuck\""),
        "{}",
        stdout(&failed)
    );
    assert!(
        stderr(&failed).contains("run the same command again"),
        "{}",
        stderr(&failed)
    );
    assert_eq!(
        redis.command(&["EXISTS", "test:stuck"]).unwrap().trim(),
        "0"
    );

    let retried = output(
        latchkey(&redis).args(["revoke", "stuck", "--fence", "out", "--yes"]),
        QUICK,
    );
    assert_eq!(code(retried.status), 0, "{}", stderr(&retried));
    let raised = number_after(
        &stdout(&retried).replace("raised to", "\nraised"),
        "raised ",
    );
    assert!(raised > stale);
    assert!(matches!(
        fenced_write(&redis, "out", stale),
        FencedWrite::Rejected { .. }
    ));
    // A name that never had a token has nothing to raise to: exit 1.
    let never = output(
        latchkey(&redis).args(["revoke", "never", "--fence", "out", "--yes"]),
        QUICK,
    );
    assert_eq!(code(never.status), 1, "{}", stderr(&never));
}

/// A pseudo-terminal for stdin: (master, slave).
fn pty() -> (File, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    unsafe { (File::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

#[test]
fn the_confirmation_shows_who_holds_the_name() {
    let redis = RedisServer::start();
    let mut holder = latchkey(&redis)
        .args(["run", "held", "--", "sleep", "60"])
        .spawn()
        .unwrap();
    latchkey_testkit::eventually_blocking("the lock is held", || {
        redis.command(&["EXISTS", "test:held"]).unwrap().trim() == "1"
    });
    let pid = format!("pid {}", holder.id());
    // Without a terminal: refused, naming the holder in its one line.
    let refused = output(latchkey(&redis).args(["revoke", "held"]), QUICK);
    assert_eq!(code(refused.status), 2);
    assert_one_error_line(&refused);
    assert!(stderr(&refused).contains(&pid), "{}", stderr(&refused));
    // On a terminal: the holder, then the question; "n" revokes nothing.
    let (mut master, slave) = pty();
    master.write_all(b"n\n").unwrap();
    let asked = output(
        latchkey(&redis)
            .args(["revoke", "held"])
            .stdin(Stdio::from(slave)),
        QUICK,
    );
    assert_eq!(code(asked.status), 1, "{}", stderr(&asked));
    let prompt = stderr(&asked);
    assert!(
        prompt.contains(&pid) && prompt.contains(" for "),
        "{prompt}"
    );
    assert!(prompt.contains("[y/N]"), "{prompt}");
    assert_eq!(redis.command(&["EXISTS", "test:held"]).unwrap().trim(), "1");
    let _ = holder.kill();
    let _ = holder.wait();
}

/// Names are escaped as `list` and `status` escape them (`\e`, not Rust's
/// `\u{1b}`).
#[test]
fn names_are_escaped_as_list_escapes_them() {
    let redis = RedisServer::start();
    let out = output(
        latchkey(&redis).args(["revoke", "x\u{1b}[2J", "--yes"]),
        QUICK,
    );
    assert_eq!(code(out.status), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("\"x\\e[2J\""), "{}", stderr(&out));
    assert!(!stderr(&out).contains("\\u{1b}"), "{}", stderr(&out));
}
