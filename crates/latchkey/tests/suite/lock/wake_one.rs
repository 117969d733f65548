//! A plain lock's release wakes one waiting process, not all of them: the
//! waiters register their process in `S:wake`, and a release of a marked
//! token wakes the first one still listening on its wake channel
//! (`docs/protocol.md`, "Waking one process"). Each client here stands for
//! a process (its own subscriber connection, its own 16 hex digits).
//! Against a real redis-server; the TTL is long, so a waiter that nobody
//! woke would take it to notice.

use crate::common;

use std::time::{Duration, Instant};

use super::fair_renewal::scripts_run;
use common::*;
use latchkey::{Client, Ownership};

const TTL: Duration = Duration::from_secs(30);
const WAKE: &str = "{test:herd}:wake";

/// The processes registered as waiting, in the order they are woken.
fn registered(server: &RedisServer) -> Vec<String> {
    let members = server.command(&["ZRANGE", WAKE, "0", "-1"]).unwrap();
    members.lines().map(str::to_owned).collect()
}

async fn until_registered(server: &RedisServer, n: usize) {
    eventually(&format!("{n} processes registered"), || async {
        registered(server).len() >= n
    })
    .await;
}

/// `n` clients, each with one waiter on the lock that takes it once,
/// holds it briefly and releases it; each task returns when it acquired.
async fn waiters(server: &RedisServer, n: usize) -> Vec<tokio::task::JoinHandle<Instant>> {
    let mut tasks = Vec::new();
    for _ in 0..n {
        let c = client(&server.url()).await;
        tasks.push(tokio::spawn(async move {
            let lock = c.lock("herd", TTL).unwrap();
            let guard = lock.acquire_until(Duration::from_secs(60)).await.unwrap();
            let at = Instant::now();
            tokio::time::sleep(Duration::from_millis(2)).await;
            assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
            drop(c);
            at
        }));
    }
    tasks
}

async fn held(c: &Client) -> latchkey::LockGuard {
    let lock = c.lock("herd", TTL).unwrap();
    lock.try_acquire().await.unwrap().expect("free")
}

/// 16 processes wait; each release wakes one, so the 16 hand-offs cost
/// about an attempt and a release each. Woken all at once, each release
/// would cost an attempt per process still waiting: 16 + 15 + … + 1 = 136
/// attempts.
#[tokio::test]
async fn sixteen_waiting_processes_cost_a_few_scripts_a_hand_off() {
    let server = RedisServer::start();
    let first = client(&server.url()).await;
    let holder = held(&first).await;
    let tasks = waiters(&server, 16).await;
    until_registered(&server, 16).await;
    let before = scripts_run(&server);
    assert_eq!(holder.release().await.unwrap(), Ownership::Owned);
    for task in tasks {
        task.await.unwrap();
    }
    let scripts = scripts_run(&server) - before;
    // 16 releases and 16 winning attempts; a few more where a woken
    // process's attempt met the next holder (it marks and registers again).
    assert!(
        scripts <= 48,
        "16 hand-offs across 16 processes ran {scripts} scripts"
    );
    assert!(registered(&server).is_empty(), "every process took it off");
}

/// A process that registered and then stopped listening (it gave up, or
/// died) is passed over: its wake channel has no listener, so the release
/// wakes the next one at once instead of leaving it to the holder's TTL.
#[tokio::test]
async fn a_release_passes_over_a_process_that_stopped_listening() {
    let server = RedisServer::start();
    let first = client(&server.url()).await;
    let holder = held(&first).await;
    let gone = client(&server.url()).await;
    let gave_up = tokio::spawn({
        let lock = gone.lock("herd", TTL).unwrap();
        async move { lock.acquire_until(Duration::from_secs(60)).await }
    });
    until_registered(&server, 1).await;
    let dead = registered(&server)[0].clone();
    let tasks = waiters(&server, 1).await;
    until_registered(&server, 2).await;
    assert_eq!(registered(&server)[0], dead, "the first to ask comes first");
    gave_up.abort();
    gone.close(Duration::from_secs(5)).await;
    until_subscribed_exactly(&server, &format!("{WAKE}:{dead}"), 0).await;

    let released = Instant::now();
    assert_eq!(holder.release().await.unwrap(), Ownership::Owned);
    for task in tasks {
        let at = task.await.unwrap();
        assert!(
            at - released < TTL / 6,
            "the live process got the lock {:?} after the release (TTL {TTL:?})",
            at - released
        );
    }
}

/// A waiter that listens on the release channel only (a multi hold's)
/// registers as `*`: the release that comes to it wakes everyone, so it is
/// not left to the holder's TTL behind processes that are woken alone.
#[tokio::test]
async fn a_multi_hold_waiting_beside_processes_is_woken() {
    let server = RedisServer::start();
    let first = client(&server.url()).await;
    let holder = held(&first).await;
    let tasks = waiters(&server, 1).await;
    until_registered(&server, 1).await;
    let m = client(&server.url()).await;
    let both = m.lock_all(&["herd", "other"], TTL).unwrap();
    let multi = tokio::spawn(async move {
        let guard = both.acquire_until(Duration::from_secs(60)).await.unwrap();
        let at = Instant::now();
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
        at
    });
    until_registered(&server, 2).await;
    assert!(registered(&server).contains(&"*".to_owned()));

    let released = Instant::now();
    assert_eq!(holder.release().await.unwrap(), Ownership::Owned);
    for task in tasks.into_iter().chain([multi]) {
        let at = task.await.unwrap();
        // Under the multi wait's own re-read (every 5 s), which would
        // otherwise find the lock free.
        assert!(
            at - released < Duration::from_secs(2),
            "a waiter got the lock {:?} after the release (TTL {TTL:?})",
            at - released
        );
    }
}

async fn until_subscribed_exactly(server: &RedisServer, channel: &str, n: u64) {
    eventually(&format!("{n} subscribed to {channel}"), || async {
        server.subscribers(channel) == n
    })
    .await;
}

/// `holder` takes the lock, one waiter of `waiter` (another client) waits
/// for it, and `holder` releases once the waiter marked it: how long after
/// the release the waiter had the lock.
async fn woken_after_release(server: &RedisServer, holder: &Client, waiter: Client) -> Duration {
    let guard = held(holder).await;
    let waiting = tokio::spawn(async move {
        let lock = waiter.lock("herd", TTL).unwrap();
        let got = lock.acquire_until(Duration::from_secs(60)).await.unwrap();
        let at = Instant::now();
        assert_eq!(got.release().await.unwrap(), Ownership::Owned);
        at
    });
    eventually("the waiter marked the holder", || async {
        server
            .command(&["GET", "test:herd"])
            .unwrap()
            .trim()
            .ends_with("+w")
    })
    .await;
    let released = Instant::now();
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    waiting.await.unwrap() - released
}

/// A user not allowed the waiting processes' commands (0.3's rule for
/// locks) still takes, waits for and releases locks: its waiter cannot
/// register, and the release, finding nobody registered, wakes every
/// waiter on the release channel, at once.
#[tokio::test]
async fn a_user_without_the_sorted_set_commands_is_woken_by_broadcast() {
    let server = RedisServer::start();
    let rule = latchkey::acl::rule(&[latchkey::acl::Use::Locks], "test:");
    let without: Vec<&str> = rule
        .split_whitespace()
        .filter(|p| !["+exists", "+zadd", "+zrem", "+zcard", "+zpopmin"].contains(p))
        .collect();
    create_user(&server, "old", &without.join(" "));
    let holder = client(&user_url(&server, "old")).await;
    let waiter = client(&user_url(&server, "old")).await;
    let took = woken_after_release(&server, &holder, waiter).await;
    assert!(
        took < TTL / 6,
        "woken {took:?} after the release (TTL {TTL:?})"
    );
    assert!(registered(&server).is_empty(), "nothing registered");
}

/// Another program's value where the waiting processes would be: left as
/// it is (no expiry set on it), and the waiter is woken by broadcast.
#[tokio::test]
async fn another_programs_key_at_the_waiting_processes_is_left_alone() {
    let server = RedisServer::start();
    server.command(&["SET", WAKE, "theirs"]).unwrap();
    let holder = client(&server.url()).await;
    let took = woken_after_release(&server, &holder, client(&server.url()).await).await;
    assert!(
        took < TTL / 6,
        "woken {took:?} after the release (TTL {TTL:?})"
    );
    assert_eq!(server.command(&["GET", WAKE]).unwrap().trim(), "theirs");
    assert_eq!(server.command(&["PTTL", WAKE]).unwrap().trim(), "-1");
}
