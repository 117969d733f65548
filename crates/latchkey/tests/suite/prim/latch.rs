//! Count-down latches: opening wakes every waiter by one message, a late
//! waiter returns at once, an early one waits for the creation, abandoned
//! latches disappear at their TTL, bad input is a typed error.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use futures_util::future::join_all;
use latchkey::limits::MAX_COUNT;
use latchkey::Error;
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(60);

#[tokio::test]
async fn counting_down_to_zero_opens_the_latch_and_wakes_every_waiter() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let latch = client.latch("loaded", TTL).unwrap();
    assert!(latch.create(3).await.unwrap(), "created");
    assert!(
        !latch.create(5).await.unwrap(),
        "a second create changes nothing"
    );
    assert_eq!(latch.count().await.unwrap(), Some(3));

    let waiters: Vec<_> = (0..5)
        .map(|_| {
            let latch = latch.clone();
            tokio::spawn(async move { latch.wait_until(Duration::from_secs(10)).await })
        })
        .collect();
    eventually("the waiters listen", || async {
        redis.subscribers("{test:loaded}:latch:opened") == 1
    })
    .await;
    assert_eq!(latch.count_down().await.unwrap(), 2);
    assert_eq!(latch.count_down().await.unwrap(), 1);
    // One more round trip on the same server: had a count-down woken
    // anybody, its message would have come before this reply.
    assert_eq!(latch.count().await.unwrap(), Some(1));
    assert!(
        waiters.iter().all(|w| !w.is_finished()),
        "no waiter may return before the latch opens"
    );
    let publishes = redis.calls("publish");
    assert_eq!(latch.count_down().await.unwrap(), 0);
    assert_eq!(
        redis.calls("publish"),
        publishes + 1,
        "one message opens it"
    );
    for waiter in join_all(waiters).await {
        waiter.unwrap().expect("every waiter sees the latch open");
    }
    assert_eq!(
        latch.count().await.unwrap(),
        Some(0),
        "an open latch stays open"
    );
}

#[tokio::test]
async fn a_late_waiter_returns_at_once() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let latch = client.latch("done", TTL).unwrap();
    latch.create(1).await.unwrap();
    latch.count_down().await.unwrap();

    let started = Instant::now();
    latch.wait_until(Duration::from_secs(10)).await.unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "a late waiter took {took:?}");
    // And with no time to wait at all: the latch is read, not waited for.
    latch.wait_until(Duration::ZERO).await.unwrap();
}

#[tokio::test]
async fn a_waiter_that_comes_before_the_latch_waits_for_it() {
    let redis = RedisServer::start();
    let waiting = client(&redis.url()).await;
    let latch = waiting.latch("early", TTL).unwrap();
    let waiter = tokio::spawn(async move { latch.wait_until(Duration::from_secs(10)).await });
    eventually("the waiter listens", || async {
        redis.subscribers("{test:early}:latch:opened") == 1
    })
    .await;

    let other = client(&redis.url()).await;
    let latch = other.latch("early", TTL).unwrap();
    assert!(latch.create(1).await.unwrap());
    assert!(!waiter.is_finished(), "a created latch is not open");
    latch.count_down().await.unwrap();
    waiter.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_closed_latch_times_out() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let latch = client.latch("closed", TTL).unwrap();
    latch.create(2).await.unwrap();
    latch.count_down().await.unwrap();
    let started = Instant::now();
    assert!(matches!(
        latch.wait_until(Duration::from_millis(200)).await,
        Err(latchkey::Error::WaitTimedOut { .. })
    ));
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(
        latch.count().await.unwrap(),
        Some(1),
        "waiting changes nothing"
    );
}

#[tokio::test]
async fn an_abandoned_latch_disappears_at_its_ttl() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let latch = client
        .latch("abandoned", Duration::from_millis(300))
        .unwrap();
    latch.create(2).await.unwrap();
    let mut raw = raw(&redis.url()).await;
    let pttl: i64 = raw.pttl("{test:abandoned}:latch").await.unwrap();
    assert!(
        (1..=300).contains(&pttl),
        "the latch key expires: pttl {pttl}"
    );
    eventually("the latch is gone", || async {
        latch.count().await.unwrap().is_none()
    })
    .await;
    assert!(matches!(
        latch.count_down().await,
        Err(Error::NotFound { what: "latch", .. })
    ));
}

#[tokio::test]
async fn bad_input_is_a_typed_error() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let latch = client.latch("input", TTL).unwrap();
    assert!(matches!(
        latch.create(0).await,
        Err(Error::InvalidCount { count: 0, .. })
    ));
    let too_many = u64::from(MAX_COUNT) + 1;
    assert!(matches!(
        latch.create(too_many).await,
        Err(Error::InvalidCount { count, .. }) if count == too_many
    ));
    assert!(
        latch.create(u64::from(MAX_COUNT)).await.unwrap(),
        "MAX_COUNT itself is fine"
    );
    assert!(matches!(
        client.latch("", TTL),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        client.latch("x", Duration::ZERO),
        Err(Error::InvalidTtl { .. })
    ));

    let missing = client.latch("missing", TTL).unwrap();
    assert!(matches!(
        missing.count_down().await,
        Err(Error::NotFound { .. })
    ));

    let once = client.latch("once", TTL).unwrap();
    once.create(1).await.unwrap();
    once.count_down().await.unwrap();
    assert!(matches!(
        once.count_down().await,
        Err(Error::CountedBelowZero { .. })
    ));
    assert_eq!(
        once.count().await.unwrap(),
        Some(0),
        "still open, not below zero"
    );

    let mut raw = raw(&redis.url()).await;
    let _: () = raw.hset("{test:hash}:latch", "f", "v").await.unwrap();
    let _: () = raw.set("{test:junk}:latch", "lots").await.unwrap();
    for name in ["hash", "junk"] {
        let latch = client.latch(name, TTL).unwrap();
        assert!(
            matches!(latch.create(1).await, Err(Error::WrongType { .. })),
            "{name}"
        );
        assert!(
            matches!(latch.count_down().await, Err(Error::WrongType { .. })),
            "{name}"
        );
        assert!(
            matches!(latch.count().await, Err(Error::WrongType { .. })),
            "{name}"
        );
        assert!(
            matches!(
                latch.wait_until(Duration::from_secs(1)).await,
                Err(Error::WrongType { .. })
            ),
            "{name}"
        );
    }
}

/// The wake-up of 1,000 waiters in one process: one `SUBSCRIBE` and one
/// `PUBLISH` on the server; the figure is printed (`--nocapture`).
#[tokio::test]
async fn a_thousand_waiters_wake_on_one_message() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let latch = client.latch("crowd", TTL).unwrap();
    latch.create(1).await.unwrap();
    let gets = redis.calls("get");
    let waiters: Vec<_> = (0..1000)
        .map(|_| {
            let latch = latch.clone();
            tokio::spawn(async move {
                let opened = latch.wait_until(Duration::from_secs(20)).await;
                (opened, Instant::now())
            })
        })
        .collect();
    eventually("the waiters listen", || async {
        redis.subscribers("{test:crowd}:latch:opened") == 1
    })
    .await;
    // Every waiter has read the count (one GET each) before it sleeps.
    eventually("every waiter read the count", || async {
        redis.calls("get") >= gets + 1000
    })
    .await;
    let subscribes = redis.calls("subscribe");
    let opened_at = Instant::now();
    latch.count_down().await.unwrap();
    let mut last = opened_at;
    for waiter in join_all(waiters).await {
        let (opened, at) = waiter.unwrap();
        opened.unwrap();
        last = last.max(at);
    }
    let took = last - opened_at;
    println!("1000 waiters woken in {took:?} after the count-down was sent");
    assert_eq!(redis.calls("subscribe"), subscribes, "no resubscription");
    assert!(
        took < Duration::from_secs(5),
        "waking 1000 waiters took {took:?}"
    );
}

#[tokio::test]
async fn an_open_latch_is_not_created_again() {
    // Creating an open latch said nothing, and the next
    // wait passed at once.
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let latch = client.latch("once", TTL).unwrap();
    assert!(latch.create(1).await.unwrap());
    assert!(!latch.create(1).await.unwrap(), "closed: left as it is");
    assert_eq!(latch.count_down().await.unwrap(), 0);
    match latch.create(3).await {
        Err(Error::LatchOpen { name, expires_in }) => {
            assert_eq!(name, "once");
            assert!(expires_in.is_some_and(|d| d <= TTL), "{expires_in:?}");
        }
        other => panic!("expected LatchOpen, got {other:?}"),
    }
    assert_eq!(latch.count().await.unwrap(), Some(0), "left as it was");
}

#[tokio::test]
async fn counting_down_keeps_the_creators_ttl() {
    // A count-down reset the TTL to the counting latch's.
    let redis = RedisServer::start();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let created = a.latch("kept", Duration::from_secs(5)).unwrap();
    created.create(2).await.unwrap();
    let counter = b.latch("kept", Duration::from_secs(3600)).unwrap();
    let mut raw = raw(&redis.url()).await;
    for left in [1, 0] {
        assert_eq!(counter.count_down().await.unwrap(), left);
        let pttl: i64 = raw.pttl("{test:kept}:latch").await.unwrap();
        assert!((1..=5000).contains(&pttl), "after {left}: pttl {pttl}");
    }
}

/// `wait()` waits as long as it takes and wakes on the opening count-down;
/// `wait_until` and `wait_timeout` on a closed latch fail with
/// `Err(WaitTimedOut)`.
#[tokio::test]
async fn wait_forever_wakes_on_the_opening_and_bounded_waits_time_out() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let latch = client.latch("forever", TTL).unwrap();
    latch.create(1).await.unwrap();
    let short = Duration::from_millis(50);
    assert!(matches!(
        latch.wait_until(Instant::now() + short).await,
        Err(Error::WaitTimedOut { .. })
    ));
    assert!(matches!(
        latch.wait_until(short).await,
        Err(Error::WaitTimedOut { .. })
    ));
    let waiting = latch.clone();
    let waiter = tokio::spawn(async move { waiting.wait().await });
    until_subscribed(&redis, "{test:forever}:latch:opened", 1).await;
    assert!(!waiter.is_finished());
    latch.count_down().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the opening wakes the waiter")
        .unwrap()
        .unwrap();
}
