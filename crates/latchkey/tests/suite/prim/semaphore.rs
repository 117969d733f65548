//! Semaphores of leased permits: never more than N holders (also across
//! processes), a release wakes a waiter by message, a dead holder's permit
//! returns within its TTL, the watchdog renews and `lost` fires, a lost
//! reply leaves no permit behind, N can change without losing holders, bad
//! input is a typed error.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use latchkey::limits::MAX_COUNT;
use latchkey::{Error, Ownership};
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(60);
const CHANNEL: &str = "{test:pool}:permits:released";

#[tokio::test]
async fn at_most_n_permits_and_a_release_wakes_a_waiter() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let pool = client.semaphore("pool", 2, TTL).unwrap();
    let a = pool.try_acquire().await.unwrap().expect("first permit");
    let b = pool.try_acquire().await.unwrap().expect("second permit");
    assert!(
        pool.try_acquire().await.unwrap().is_none(),
        "a third is refused"
    );
    let holders = pool.holders().await.unwrap();
    assert_eq!(holders.len(), 2);
    assert!(holders.iter().all(|h| h
        .holder
        .as_ref()
        .is_some_and(|h| h.pid == std::process::id())));

    // The permits' TTL is a minute: only the release's message can wake the
    // waiter within its 10 s.
    let waiting = pool.clone();
    let waiter = tokio::spawn(async move { waiting.acquire_until(Duration::from_secs(10)).await });
    until_subscribed(&redis, CHANNEL, 1).await;
    assert!(!waiter.is_finished());
    let woken = Instant::now();
    assert_eq!(a.release().await.unwrap(), Ownership::Owned);
    let c = waiter
        .await
        .unwrap()
        .expect("the waiter gets the released permit");
    assert!(woken.elapsed() < Duration::from_secs(5));
    assert_eq!(pool.holders().await.unwrap().len(), 2);
    assert!(pool.try_acquire().await.unwrap().is_none());
    let _ = b.release().await.unwrap();
    let _ = c.release().await.unwrap();
    assert!(pool.holders().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_dead_holders_permit_returns_within_its_ttl() {
    let redis = RedisServer::start();
    let ttl = Duration::from_millis(500);
    let dead = client(&redis.url()).await;
    let permit = dead
        .semaphore("pool", 1, ttl)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    // The holder "dies": nothing will release or renew it.
    std::mem::forget(permit);
    let taken = Instant::now();

    let other = client(&redis.url()).await;
    let pool = other.semaphore("pool", 1, ttl).unwrap();
    let permit = pool
        .acquire_until(Duration::from_secs(5))
        .await
        .expect("the dead holder's permit returns");
    let after = taken.elapsed();
    assert!(
        after <= ttl + Duration::from_millis(400),
        "returned after {after:?}"
    );
    assert!(
        after >= ttl - Duration::from_millis(100),
        "returned after {after:?}: before the TTL?"
    );
    let _ = permit.release().await.unwrap();
}

#[tokio::test]
async fn the_watchdog_renews_and_lost_fires_when_the_permit_is_gone() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let ttl = Duration::from_millis(300);
    let pool = client.semaphore("pool", 1, ttl).unwrap().with_watchdog();
    let permit = pool.try_acquire().await.unwrap().expect("free");
    let lost = permit.lost_signal();
    // Three TTLs later it is still ours: renewed.
    tokio::time::sleep(ttl * 3).await;
    assert!(permit.is_held() && !lost.is_lost());
    assert_eq!(pool.holders().await.unwrap().len(), 1);
    assert!(pool.try_acquire().await.unwrap().is_none());

    // An operator deletes the semaphore: the next renewal finds the permit
    // gone and `lost` fires, before the deadline it had.
    let mut raw = raw(&redis.url()).await;
    let deadline = permit.deadline();
    let _: () = raw.del("{test:pool}:permits").await.unwrap();
    tokio::time::timeout(ttl, lost.lost())
        .await
        .expect("lost within a TTL");
    assert!(Instant::now() <= deadline + Duration::from_millis(50));
    assert!(!permit.is_held());
    assert_eq!(permit.release().await.unwrap(), Ownership::Expired);
}

#[tokio::test]
async fn an_acquisition_whose_reply_was_lost_leaves_no_permit() {
    let redis = RedisServer::start();
    let proxy = Proxy::start(redis.addr()).await;
    let client = client(&proxy.url()).await;
    let pool = client.semaphore("pool", 1, TTL).unwrap();
    // Warm the script cache (a lost NOSCRIPT reply would stop the attempt).
    let _ = pool
        .try_acquire()
        .await
        .unwrap()
        .expect("free")
        .release()
        .await
        .unwrap();
    let taken = redis.calls("zadd");
    proxy.set_mode(ProxyMode::DropReplies);
    let attempt = pool.try_acquire().await;
    assert!(
        matches!(&attempt, Err(e) if e.is_transient()),
        "{attempt:?}"
    );
    // (The give-back may already be on its way: count the take, not the set.)
    assert_eq!(
        redis.calls("zadd"),
        taken + 1,
        "the permit was taken in Redis"
    );
    assert!(client.flush(Duration::from_secs(3)).await);
    let mut raw = raw(&redis.url()).await;
    let held: u64 = raw.zcard("{test:pool}:permits").await.unwrap();
    assert_eq!(held, 0, "the permit is given back in the background");
}

#[tokio::test]
async fn fencing_tokens_increase_with_every_hold() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let pool = client.semaphore("pool", 2, TTL).unwrap().with_fencing();
    let mut last = 0;
    for _ in 0..5 {
        let permit = pool.try_acquire().await.unwrap().expect("free");
        let token = permit
            .issued_fencing_token()
            .expect("issued with the permit");
        assert!(token > last, "{token} after {last}");
        last = token;
        let _ = permit.release().await.unwrap();
    }
    let plain = client.semaphore("plain", 2, TTL).unwrap();
    let permit = plain.try_acquire().await.unwrap().unwrap();
    assert_eq!(permit.issued_fencing_token(), None);
    let _ = permit.release().await.unwrap();
}

#[tokio::test]
async fn changing_n_keeps_every_holder() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let three = client.semaphore("pool", 3, TTL).unwrap();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(three.try_acquire().await.unwrap().expect("free"));
    }
    // Lowered to 2: nobody loses a permit, and nobody new gets one.
    let two = client.semaphore("pool", 2, TTL).unwrap();
    assert!(two.try_acquire().await.unwrap().is_none());
    assert_eq!(two.holders().await.unwrap().len(), 3);
    let _ = held.pop().unwrap().release().await.unwrap();
    assert!(two.try_acquire().await.unwrap().is_none(), "2 still held");
    // Raised to 4: room for two more.
    let four = client.semaphore("pool", 4, TTL).unwrap();
    held.push(four.try_acquire().await.unwrap().expect("room"));
    held.push(four.try_acquire().await.unwrap().expect("room"));
    assert!(four.try_acquire().await.unwrap().is_none());
    for permit in held {
        assert_eq!(permit.release().await.unwrap(), Ownership::Owned);
    }
}

#[tokio::test]
async fn bad_input_is_a_typed_error() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    assert!(matches!(
        client.semaphore("s", 0, TTL),
        Err(Error::InvalidCount { count: 0, .. })
    ));
    assert!(matches!(
        client.semaphore("s", u64::from(MAX_COUNT) + 1, TTL),
        Err(Error::InvalidCount { .. })
    ));
    assert!(matches!(
        client.semaphore("", 1, TTL),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        client.semaphore("s", 1, Duration::ZERO),
        Err(Error::InvalidTtl { .. })
    ));
    let mut raw = raw(&redis.url()).await;
    let _: () = raw.set("{test:str}:permits", "x").await.unwrap();
    let pool = client.semaphore("str", 1, TTL).unwrap();
    assert!(matches!(
        pool.try_acquire().await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(
        pool.acquire_until(Duration::from_secs(1)).await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(pool.holders().await, Err(Error::WrongType { .. })));
    let _: () = raw.set("{test:junk}:permits:fence", "x").await.unwrap();
    let pool = client.semaphore("junk", 1, TTL).unwrap().with_fencing();
    assert!(matches!(
        pool.try_acquire().await,
        Err(Error::BadFencingCounter { .. })
    ));
    let held: u64 = raw.zcard("{test:junk}:permits").await.unwrap();
    assert_eq!(held, 0, "no permit taken without its token");
}

const PERMITS: u64 = 2;
const PROCESSES: usize = 4;
const ROUNDS: usize = 15;

/// Counts the holders inside, and the peak, atomically.
const ENTER: &str = "local v = redis.call('INCR', KEYS[1]) \
    if v > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], v) end \
    return v";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_than_n_holders_across_processes() {
    let redis = RedisServer::start();
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            spawn_child(
                concat!(module_path!(), "::semaphore_holder"),
                &[("SEM_URL", redis.url())],
            )
        })
        .collect();
    for mut child in children {
        let status = tokio::task::spawn_blocking(move || child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success());
    }
    let mut raw = raw(&redis.url()).await;
    let done: usize = raw.get("done").await.unwrap();
    let peak: u64 = raw.get("peak").await.unwrap();
    assert_eq!(done, PROCESSES * ROUNDS, "every child did its rounds");
    assert_eq!(peak, PERMITS, "contended up to N holders, never more");
}

#[tokio::test]
#[ignore = "helper process: run by its parent test"]
async fn semaphore_holder() {
    let url = helper_env("SEM_URL");
    let client = client(&url).await;
    let pool = client.semaphore("procs", PERMITS, TTL).unwrap();
    let mut raw = raw(&url).await;
    let enter = redis::Script::new(ENTER);
    for _ in 0..ROUNDS {
        let permit = pool.acquire_until(Duration::from_secs(30)).await.unwrap();
        let _: u64 = enter
            .key("inside")
            .key("peak")
            .invoke_async(&mut raw)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let _: i64 = raw.decr("inside", 1).await.unwrap();
        let _: i64 = raw.incr("done", 1).await.unwrap();
        let _ = permit.release().await.unwrap();
    }
}

/// Cut off from Redis, a holder's `lost()` fires while the server still
/// counts its permit held: it stops before anyone else can get the permit.
#[tokio::test]
async fn lost_fires_before_the_permit_expires_when_redis_is_cut_off() {
    let redis = RedisServer::start();
    let proxy = Proxy::start(redis.addr()).await;
    let client = client(&proxy.url()).await;
    let ttl = Duration::from_secs(3);
    let pool = client.semaphore("cut", 1, ttl).unwrap().with_watchdog();
    let permit = pool.try_acquire().await.unwrap().expect("free");
    let mut raw = raw(&redis.url()).await;
    proxy.set_mode(ProxyMode::Blackhole);
    let lost = permit.lost_signal();
    tokio::time::timeout(ttl * 2, lost.lost())
        .await
        .expect("lost fires while cut off");
    // Read at once, on a connection that bypasses the proxy.
    let (expires, (secs, micros)): (Option<f64>, (u64, u64)) = redis::pipe()
        .zscore("{test:cut}:permits", permit.token())
        .cmd("TIME")
        .query_async(&mut raw)
        .await
        .unwrap();
    let now_ms = (secs * 1000 + micros / 1000) as f64;
    let expires = expires.expect("the permit is still in the set");
    assert!(
        expires > now_ms,
        "lost fired {} ms after the permit expired on the server",
        now_ms - expires
    );
    assert!(!permit.is_held());
}

/// Records a holder's entry with the time it may still assume it holds
/// its permit, in server time, and counts the live entries: KEYS[1] =
/// entries (sorted set: token → until, server ms), KEYS[2] = violations,
/// KEYS[3] = peak; ARGV = token, ms of validity left, N.
const ENTER_LEASED: &str = "
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
local live = redis.call('ZCARD', KEYS[1])
if live > tonumber(ARGV[3]) then redis.call('INCR', KEYS[2]) end
if live > tonumber(redis.call('GET', KEYS[3]) or '0') then redis.call('SET', KEYS[3], live) end
return live";

const KILL_TTL: Duration = Duration::from_millis(400);

/// Holders are killed with SIGKILL (their permits are never given back)
/// while others contend: the permits come back at the TTL, and never are
/// more than N holders inside at once, as seen by a recording resource
/// that counts a killed holder inside until its own deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_than_n_holders_while_holders_are_killed() {
    let redis = RedisServer::start();
    let spawn = || {
        spawn_child(
            concat!(module_path!(), "::killable_holder"),
            &[("SEM_URL", redis.url())],
        )
    };
    let mut children: Vec<_> = (0..PROCESSES).map(|_| spawn()).collect();
    let mut raw = raw(&redis.url()).await;
    let mut kills = 0;
    // At least 3 s of contention, and on until two holders were killed
    // inside (on a loaded machine the children start slowly), up to 30 s.
    let started = Instant::now();
    let mut i = 0;
    while started.elapsed() < Duration::from_secs(3)
        || (kills < 2 && started.elapsed() < Duration::from_secs(30))
    {
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Kill a process while it is inside (it says so in `inside:PID`).
        let victim = &mut children[i % PROCESSES];
        let inside: Option<u64> = raw.get(format!("inside:{}", victim.id())).await.unwrap();
        if inside == Some(1) {
            victim.kill().unwrap();
            let _ = victim.wait();
            kills += 1;
            children[i % PROCESSES] = spawn();
        }
        i += 1;
    }
    let _: () = raw.set("stop", 1).await.unwrap();
    for mut child in children {
        let status = tokio::task::spawn_blocking(move || child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success());
    }
    let violations: Option<u64> = raw.get("violations").await.unwrap();
    let peak: u64 = raw.get("peak").await.unwrap();
    let entries: u64 = raw.get("entries").await.unwrap();
    assert!(kills >= 2, "holders were killed inside ({kills})");
    assert_eq!(violations, None, "never more than {PERMITS} holders inside");
    assert_eq!(peak, PERMITS, "contended up to N");
    assert!(
        entries > 20,
        "work went on after the kills ({entries} holds)"
    );
}

#[tokio::test]
#[ignore = "helper process: run by its parent test"]
async fn killable_holder() {
    let url = helper_env("SEM_URL");
    let client = client(&url).await;
    let pool = client.semaphore("killed", PERMITS, KILL_TTL).unwrap();
    let mut raw = raw(&url).await;
    let enter = redis::Script::new(ENTER_LEASED);
    let me = format!("inside:{}", std::process::id());
    loop {
        let stop: Option<u64> = raw.get("stop").await.unwrap();
        if stop.is_some() {
            return;
        }
        let Ok(permit) = pool.acquire_until(Duration::from_secs(5)).await else {
            continue;
        };
        let left = permit.deadline().saturating_duration_since(Instant::now());
        let _: u64 = enter
            .key("entries-live")
            .key("violations")
            .key("peak")
            .arg(permit.token())
            .arg(left.as_millis() as u64)
            .arg(PERMITS)
            .invoke_async(&mut raw)
            .await
            .unwrap();
        let _: () = raw.set(&me, 1).await.unwrap();
        let _: i64 = raw.incr("entries", 1).await.unwrap();
        // Inside for a while (well within the TTL): a kill lands here.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let _: () = raw.set(&me, 0).await.unwrap();
        let _: i64 = raw.zrem("entries-live", permit.token()).await.unwrap();
        let _ = permit.release().await.unwrap();
    }
}

/// A full semaphore's bounded waits fail with `Err(WaitTimedOut)`
/// (`acquire_timeout` and `acquire_until` alike), and a semaphore made
/// `with_renewal_every` keeps its permit past the TTL, while one without
/// renewal loses it; a bad interval is a typed error.
#[tokio::test]
async fn a_full_semaphore_times_out_and_renewal_every_keeps_a_permit() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let ttl = Duration::from_millis(300);
    let pool = client
        .semaphore("renewed", 1, ttl)
        .unwrap()
        .with_renewal_every(Duration::from_millis(60))
        .unwrap();
    let permit = pool.acquire().await.unwrap();
    assert!(matches!(
        pool.acquire_until(Duration::from_millis(50)).await,
        Err(Error::WaitTimedOut { .. })
    ));
    assert!(matches!(
        pool.acquire_until(Instant::now() + Duration::from_millis(50))
            .await,
        Err(Error::WaitTimedOut { .. })
    ));
    let plain = client.semaphore("plain", 1, ttl).unwrap();
    let unrenewed = plain.acquire().await.unwrap();
    // Time passing is the point here: three TTLs.
    tokio::time::sleep(ttl * 3).await;
    assert!(permit.is_held(), "renewed every 60 ms");
    assert_eq!(pool.holders().await.unwrap().len(), 1);
    assert!(pool.try_acquire().await.unwrap().is_none());
    assert!(!unrenewed.is_held(), "without renewal the permit ran out");
    assert!(plain.holders().await.unwrap().is_empty());
    for bad in [Duration::ZERO, ttl] {
        let semaphore = client.semaphore("renewed", 1, ttl).unwrap();
        assert!(matches!(
            semaphore.with_renewal_every(bad),
            Err(Error::InvalidInput(_))
        ));
    }
}
