//! Held while idle (`Lock::with_caching`): a released hold is kept in
//! Redis, a re-acquire in the same process costs no round trip, and another
//! process that wants the lock gets it at once, not at the idle time's or
//! the TTL's end. Exclusion and fencing stay what they are.

use crate::common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::*;
use latchkey::inspect::Holder;
use latchkey::{Error, FencedWrite, Ownership};
use redis::AsyncCommands;

/// Long: a lock obtained within `SOON` was given back because it was
/// wanted, not because the idle time or the TTL ran out.
const TTL: Duration = Duration::from_secs(30);
const IDLE: Duration = Duration::from_secs(60);
const SOON: Duration = Duration::from_secs(10);

/// Every command the server ran but INFO (the counting itself) and PING
/// (the subscriber's keep-alive).
fn commands(redis: &RedisServer) -> u64 {
    let calls: HashMap<String, u64> = redis.command_calls();
    calls
        .iter()
        .filter(|(name, _)| !name.starts_with("info") && *name != "ping")
        .map(|(_, n)| n)
        .sum()
}

async fn stored(url: &str, name: &str) -> Option<String> {
    raw(url)
        .await
        .get(format!("test:{name}"))
        .await
        .expect("GET")
}

#[tokio::test]
async fn re_acquiring_a_kept_hold_sends_nothing_to_redis() {
    let redis = RedisServer::start();
    let c = client(&redis.url()).await;
    let lock = c.lock("tenant", TTL).unwrap().with_caching(IDLE).unwrap();
    let first = lock.acquire().await.unwrap();
    assert!(first.took_from_redis());
    let token = first.token().to_owned();
    assert_eq!(first.release().await.unwrap(), Ownership::Owned);
    assert!(lock.is_kept());
    // Still held in Redis, by a token that says it is kept while idle.
    let value = stored(&redis.url(), "tenant").await.expect("kept in Redis");
    assert_eq!(value, token);
    let holder = Holder::from_token(value.as_bytes()).expect("a latchkey token");
    assert!(
        holder.caching && holder.pid == std::process::id(),
        "{holder:?}"
    );

    let before = commands(&redis);
    for _ in 0..200 {
        let guard = lock.try_acquire().await.unwrap().expect("the kept hold");
        assert!(!guard.took_from_redis() && guard.is_held());
        assert_eq!(guard.token(), token);
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
        let guard = lock.acquire().await.unwrap();
        drop(guard); // dropped: kept the same way
    }
    let sent = commands(&redis) - before;
    assert!(sent <= 2, "{sent} commands for 400 local holds");
    assert!(c.flush(Duration::from_secs(5)).await);
    assert_eq!(
        stored(&redis.url(), "tenant").await,
        None,
        "flush gives it back"
    );
    assert!(!lock.is_kept());
}

#[tokio::test]
async fn another_process_gets_an_idle_kept_lock_at_once() {
    let redis = RedisServer::start();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let cached = a.lock("job", TTL).unwrap().with_caching(IDLE).unwrap();
    let _ = cached.acquire().await.unwrap().release().await.unwrap();
    assert!(cached.is_kept());
    // A plain lock of another client: its waiting attempt marks the kept
    // token, which tells the keeper it is wanted.
    let started = Instant::now();
    let guard = b.lock("job", TTL).unwrap().acquire_until(SOON).await;
    let guard = guard.expect("given back when wanted, long before the idle time");
    assert!(started.elapsed() < SOON);
    assert!(!cached.is_kept());
    // And back: the cached lock waits like any waiter, woken by the release.
    let waiting = tokio::spawn({
        let cached = cached.clone();
        async move { cached.acquire_until(SOON).await }
    });
    until_subscribed(&redis, "{test:job}:released", 1).await;
    let _ = guard.release().await.unwrap();
    let again = waiting.await.unwrap().expect("woken by the release");
    assert!(again.took_from_redis());
    let _ = again.release().await.unwrap();
}

#[tokio::test]
async fn a_plain_lock_of_the_same_client_gets_an_idle_kept_hold_at_once() {
    let redis = RedisServer::start();
    let c = client(&redis.url()).await;
    let cached = c.lock("shared", TTL).unwrap().with_caching(IDLE).unwrap();
    let _ = cached.acquire().await.unwrap().release().await.unwrap();
    assert!(cached.is_kept());
    // Not a waiter behind a guard of its own client (that would wait for a
    // local release, which an idle hold never makes): the first try saw a
    // hold kept idle, and told it.
    let guard = c.lock("shared", TTL).unwrap().acquire_until(SOON).await;
    let guard = guard.expect("given back when wanted, not at the TTL");
    assert!(!cached.is_kept());
    let _ = guard.release().await.unwrap();
}

#[tokio::test]
async fn a_fenced_waiter_gets_an_idle_kept_lock_at_once() {
    let redis = RedisServer::start();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let cached = a.lock("fenced", TTL).unwrap().with_caching(IDLE).unwrap();
    let kept = cached.acquire().await.unwrap();
    let kept_token = kept.fencing_token().await.unwrap();
    let _ = kept.release().await.unwrap();
    // A fenced first try is the acquire script: its busy reply says the
    // holder keeps the lock idle (`announced = 2`), as `SET … GET` does.
    let lock = b.lock("fenced", TTL).unwrap().with_fencing();
    let guard = lock.acquire_until(SOON).await;
    let guard = guard.expect("given back when wanted, long before the idle time");
    assert!(guard.fencing_token().await.unwrap() > kept_token);
    assert!(!cached.is_kept());
    let _ = guard.release().await.unwrap();
}

#[tokio::test]
async fn a_hold_in_use_is_given_back_at_its_release() {
    let redis = RedisServer::start();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let cached = a.lock("busy", TTL).unwrap().with_caching(IDLE).unwrap();
    let in_use = cached.acquire().await.unwrap();
    let waiter = tokio::spawn({
        let lock = b.lock("busy", TTL).unwrap();
        async move { lock.acquire_until(SOON).await }
    });
    // Marked (wanted) once the waiter's attempt found it busy.
    eventually("the waiter marked the kept token", || async {
        stored(&redis.url(), "busy")
            .await
            .is_some_and(|v| v.ends_with("+w"))
    })
    .await;
    until_subscribed(&redis, "{test:busy}:released", 2).await; // the waiter and the keeper
    assert_eq!(in_use.release().await.unwrap(), Ownership::Owned);
    let got = waiter
        .await
        .unwrap()
        .expect("the waiter gets it at the release");
    assert!(!cached.is_kept());
    let _ = got.release().await.unwrap();
}

#[tokio::test]
async fn two_caching_processes_never_overlap_and_lose_no_update() {
    let redis = RedisServer::start();
    let url = redis.url();
    let mut workers = Vec::new();
    const ROUNDS: u64 = 150;
    for _ in 0..2 {
        let url = url.clone();
        workers.push(tokio::spawn(async move {
            let c = client(&url).await;
            let lock = c.lock("counter", TTL).unwrap().with_caching(IDLE).unwrap();
            let resource = c.fenced("counter-output").unwrap();
            let mut conn = raw(&url).await;
            let mut last = 0;
            for _ in 0..ROUNDS {
                let guard = lock.acquire_until(SOON).await.expect("acquire");
                let token = guard.fencing_token().await.expect("token");
                assert!(token > last, "tokens increase: {token} after {last}");
                last = token;
                let n: u64 = conn.get("counter").await.unwrap_or(0);
                tokio::task::yield_now().await;
                let _: () = conn.set("counter", n + 1).await.unwrap();
                let write = resource.write(token, n.to_string()).await.unwrap();
                assert_eq!(write, FencedWrite::Accepted, "a stale token at {n}");
                let _ = guard.release().await.expect("release");
            }
            c.flush(Duration::from_secs(5)).await
        }));
    }
    for worker in workers {
        assert!(worker.await.unwrap());
    }
    let n: u64 = raw(&url).await.get("counter").await.unwrap();
    assert_eq!(n, 2 * ROUNDS, "no lost update");
}

#[tokio::test]
async fn each_local_hold_gets_a_greater_fencing_token() {
    let redis = RedisServer::start();
    let c = client(&redis.url()).await;
    let lock = c
        .lock("fenced", TTL)
        .unwrap()
        .with_fencing()
        .with_caching(IDLE)
        .unwrap();
    let resource = c.fenced("fenced-output").unwrap();
    let mut tokens = Vec::new();
    for i in 0..3 {
        let guard = lock.acquire().await.unwrap();
        assert_eq!(guard.took_from_redis(), i == 0);
        let token = guard.fencing_token().await.unwrap();
        assert_eq!(guard.fencing_token().await.unwrap(), token, "one per hold");
        tokens.push(token);
        let _ = guard.release().await.unwrap();
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    let _ = resource.write(tokens[2], b"new").await.unwrap();
    assert!(matches!(
        resource.write(tokens[1], b"stale").await.unwrap(),
        FencedWrite::Rejected { .. }
    ));
}

#[tokio::test]
async fn a_kept_hold_goes_back_when_idle_runs_out() {
    let redis = RedisServer::start();
    let c = client(&redis.url()).await;
    let lock = c
        .lock("short", TTL)
        .unwrap()
        .with_caching(Duration::from_millis(200))
        .unwrap();
    let _ = lock.acquire().await.unwrap().release().await.unwrap();
    assert!(stored(&redis.url(), "short").await.is_some());
    // Well before the TTL: the idle timer gave it back.
    eventually("the idle hold was given back", || async {
        stored(&redis.url(), "short").await.is_none()
    })
    .await;
    assert!(!lock.is_kept());
}

#[tokio::test]
async fn local_holds_exclude_each_other_and_cancelled_waits_leave_nothing() {
    let redis = RedisServer::start();
    let c = client(&redis.url()).await;
    let lock = c.lock("local", TTL).unwrap().with_caching(IDLE).unwrap();
    let held = lock.acquire().await.unwrap();
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "a local holder has it"
    );
    let timed_out = lock.acquire_until(Duration::from_millis(50)).await;
    assert!(
        matches!(timed_out, Err(Error::WaitTimedOut { .. })),
        "{timed_out:?}"
    );
    // A waiter behind the local holder, dropped: nothing of it remains.
    let mut dropped = Box::pin(lock.acquire());
    assert!(futures_poll_once(dropped.as_mut()).await.is_none());
    drop(dropped);
    let next = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire_until(SOON).await }
    });
    let _ = held.release().await.unwrap();
    let next = next.await.unwrap().expect("the next local holder");
    assert!(
        !next.took_from_redis(),
        "handed on in the process, no round trip"
    );
    let _ = next.release().await.unwrap();
}

/// Polls `f` once: `Some` if it finished.
async fn futures_poll_once<F: std::future::Future + Unpin>(f: F) -> Option<F::Output> {
    let mut f = f;
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut f).poll(cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

#[tokio::test]
async fn a_revoked_kept_hold_is_not_reused() {
    let redis = RedisServer::start();
    let (c, operator) = (client(&redis.url()).await, client(&redis.url()).await);
    let lock = c
        .lock("revoked", TTL)
        .unwrap()
        .with_renewal_every(Duration::from_millis(200))
        .unwrap()
        .with_caching(IDLE)
        .unwrap();
    let first = lock.acquire().await.unwrap();
    let old = first.token().to_owned();
    let _ = first.release().await.unwrap();
    let revoked = operator.revoke("revoked").await.unwrap();
    let fence = revoked[0].fencing_token.expect("raised");
    // The watchdog notices at its next renewal; the next acquire then takes
    // a new hold from Redis.
    eventually("the kept hold is known lost", || async { !lock.is_kept() }).await;
    let next = lock.acquire().await.unwrap();
    assert!(next.took_from_redis() && next.token() != old);
    assert!(next.fencing_token().await.unwrap() > fence);
    let _ = next.release().await.unwrap();
}

#[tokio::test]
async fn caching_is_refused_where_it_cannot_work() {
    let redis = RedisServer::start();
    let c = client(&redis.url()).await;
    let lock = c.lock("x", TTL).unwrap();
    assert!(matches!(
        lock.clone().with_caching(Duration::ZERO),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        lock.fair().unwrap().with_caching(IDLE),
        Err(Error::Unsupported(_))
    ));
}

#[tokio::test]
async fn a_killed_caching_process_frees_the_lock_within_its_ttl() {
    let redis = RedisServer::start();
    let ttl = Duration::from_secs(2);
    let mut child = spawn_child(
        concat!(module_path!(), "::helper_keeps_a_cached_lock"),
        &[("LATCHKEY_TEST_URL", redis.url())],
    );
    eventually("the child keeps the lock", || async {
        stored(&redis.url(), "killed")
            .await
            .is_some_and(|v| v.ends_with(":c"))
    })
    .await;
    child.kill().expect("kill -9");
    let killed = Instant::now();
    child.wait().expect("reaped");
    let c = client(&redis.url()).await;
    let guard = c.lock("killed", ttl).unwrap().acquire_until(SOON).await;
    assert!(guard.is_ok(), "{guard:?}");
    assert!(
        killed.elapsed() <= ttl + Duration::from_secs(1),
        "{:?}",
        killed.elapsed()
    );
}

#[tokio::test]
#[ignore = "helper process: run by its parent test"]
async fn helper_keeps_a_cached_lock() {
    let c = client(&helper_env("LATCHKEY_TEST_URL")).await;
    let lock = c
        .lock("killed", Duration::from_secs(2))
        .unwrap()
        .with_caching(IDLE)
        .unwrap();
    let _ = lock.acquire().await.unwrap().release().await.unwrap();
    std::future::pending::<()>().await; // kept, until killed
}

#[tokio::test]
async fn a_cached_lock_dropped_outside_the_runtime_gives_its_idle_hold_back() {
    let redis = RedisServer::start();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let cached = a.lock("dropped", TTL).unwrap().with_caching(IDLE).unwrap();
    let _ = cached.acquire().await.unwrap().release().await.unwrap();
    assert!(stored(&redis.url(), "dropped").await.is_some(), "kept");
    // Dropped on a thread with no runtime, as a binding's garbage
    // collector drops it: nobody would answer a waiter's "wanted" now.
    std::thread::spawn(move || drop(cached)).join().unwrap();
    let started = Instant::now();
    let guard = b.lock("dropped", TTL).unwrap().acquire_until(SOON).await;
    let guard = guard.expect("given back at the drop, not at the TTL");
    assert!(started.elapsed() < SOON);
    let _ = guard.release().await.unwrap();
}

/// A local hold dropped on a thread with no runtime while another process
/// wants the lock: released in Redis on the runtime the hold was taken
/// on, not left to its TTL.
#[tokio::test]
async fn a_cached_guard_dropped_outside_the_runtime_when_wanted_gives_the_lock_back() {
    let redis = RedisServer::start();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let cached = a
        .lock("guard-dropped", TTL)
        .unwrap()
        .with_caching(IDLE)
        .unwrap();
    let guard = cached.acquire().await.unwrap();
    let waiter = {
        let lock = b.lock("guard-dropped", TTL).unwrap();
        tokio::spawn(async move { lock.acquire_until(SOON).await })
    };
    // The waiter's mark tells the keeper the lock is wanted.
    eventually("the holder is marked wanted", || async {
        stored(&redis.url(), "guard-dropped")
            .await
            .is_some_and(|v| v.ends_with("+w"))
    })
    .await;
    let started = Instant::now();
    std::thread::spawn(move || drop(guard)).join().unwrap();
    let got = waiter.await.unwrap().expect("given back at the drop");
    assert!(started.elapsed() < SOON);
    let _ = got.release().await.unwrap();
}

#[tokio::test]
async fn two_cached_locks_of_one_name_in_one_client_hand_the_hold_over() {
    let redis = RedisServer::start();
    let (c, other) = (client(&redis.url()).await, client(&redis.url()).await);
    let first = c.lock("twice", TTL).unwrap().with_caching(IDLE).unwrap();
    let _ = first.acquire().await.unwrap().release().await.unwrap();
    assert!(first.is_kept());
    // A second cache of the name (not a clone): it must ask the first,
    // not queue behind an idle hold that never lets go by itself.
    let second = c.lock("twice", TTL).unwrap().with_caching(IDLE).unwrap();
    let guard = second.acquire_until(SOON).await;
    let guard = guard.expect("the first gives its idle hold over when asked");
    assert!(guard.took_from_redis() && !first.is_kept());
    let _ = guard.release().await.unwrap();
    // Its own wait's "wanted" messages may make it give back once; then
    // it keeps the hold like any cache.
    eventually("the second cache keeps the hold", || async {
        let _ = second.acquire().await.unwrap().release().await.unwrap();
        second.is_kept()
    })
    .await;
    // Dropped while it keeps the hold (on a thread with no runtime): the
    // first cache, a plain lock of the client and another client all get
    // the lock, long before the idle time or the TTL.
    std::thread::spawn(move || drop(second)).join().unwrap();
    let again = first.acquire_until(SOON).await.expect("the first again");
    let _ = again.release().await.unwrap();
    let plain = c.lock("twice", TTL).unwrap().acquire_until(SOON).await;
    let _ = plain.expect("a plain lock of the client").release().await;
    let elsewhere = other.lock("twice", TTL).unwrap().acquire_until(SOON).await;
    let _ = elsewhere.expect("another client").release().await;
}
