//! A wait that has returned no longer listens: right after a `wait` times
//! out (or got its signal), `signal` counts nobody for it, so the "send
//! until someone hears" loop never hands its signal to a waiter that has
//! stopped listening; a closed `Listener` likewise. Other listeners of the
//! same name in the process keep hearing.

use crate::common;

use std::time::Duration;

use common::*;

const SHORT: Duration = Duration::from_millis(30);

#[tokio::test]
async fn a_wait_that_timed_out_is_not_counted_by_the_next_signal() {
    let redis = RedisServer::start();
    let waiter = client(&redis.url()).await;
    let sender = client(&redis.url()).await;
    for round in 0..20 {
        let timed_out = waiter.wait("deploy-done", SHORT).await;
        assert!(matches!(
            timed_out,
            Err(latchkey::Error::WaitTimedOut { .. })
        ));
        assert_eq!(
            sender.signal("deploy-done", b"v42").await.unwrap(),
            0,
            "round {round}: a waiter that timed out was counted"
        );
    }
    // Patterns and wait_all the same way.
    let _ = waiter.wait_pattern("deploy-*", SHORT).await;
    assert_eq!(sender.signal("deploy-x", b"").await.unwrap(), 0);
    let _ = waiter.wait_all(["a", "b"], SHORT).await;
    assert_eq!(sender.signal("a", b"").await.unwrap(), 0);
}

#[tokio::test]
async fn a_wait_that_got_its_signal_and_a_closed_listener_are_gone() {
    let redis = RedisServer::start();
    let waiter = client(&redis.url()).await;
    let sender = client(&redis.url()).await;
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.wait("go", Duration::from_secs(10)).await })
    };
    until_subscribed(&redis, "test:signal:go", 1).await;
    // A listener of the same name in the process shares the subscription.
    let mut kept = waiter.listen(["go"]).await.unwrap();
    assert_eq!(sender.signal("go", b"1").await.unwrap(), 1);
    assert_eq!(waiting.await.unwrap().unwrap().payload, b"1");
    assert_eq!(kept.recv().await.payload, b"1");
    // The returned wait gave nothing up that the kept listener needs.
    assert_eq!(sender.signal("go", b"2").await.unwrap(), 1);
    assert_eq!(kept.recv().await.payload, b"2");
    kept.close().await;
    assert_eq!(sender.signal("go", b"3").await.unwrap(), 0);

    // A wait that got its signal is gone when it returns.
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.wait("once", Duration::from_secs(10)).await })
    };
    until_subscribed(&redis, "test:signal:once", 1).await;
    assert_eq!(sender.signal("once", b"x").await.unwrap(), 1);
    waiting.await.unwrap().unwrap();
    assert_eq!(sender.signal("once", b"y").await.unwrap(), 0);
}

/// The documented loop, with a pause between tries: a waiter that starts
/// later gets the signal, and the loop stops as soon as it is heard.
#[tokio::test]
async fn send_until_someone_hears_reaches_a_late_waiter() {
    let redis = RedisServer::start();
    let waiter = client(&redis.url()).await;
    let sender = client(&redis.url()).await;
    // A first waiter gives up before anyone signals.
    assert!(waiter.wait("ready", SHORT).await.is_err());
    let late = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.wait("ready", Duration::from_secs(10)).await })
    };
    let published = redis.calls("publish");
    let mut tries = 0;
    while sender.signal("ready", b"v1").await.unwrap() == 0 {
        tries += 1;
        assert!(tries < 200, "nobody heard");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(late.await.unwrap().unwrap().payload, b"v1");
    assert_eq!(redis.calls("publish") - published, tries + 1);
}

/// On a Redis Cluster (sharded pub/sub: `SSUBSCRIBE` at the slot's owner).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_too() {
    let cluster = tokio::task::spawn_blocking(|| {
        latchkey_testkit::RedisCluster::builder()
            .primaries(3)
            .replicas_per_primary(0)
            .start()
    })
    .await
    .unwrap();
    let connect = || async {
        latchkey::Client::builder(&cluster.seed_url())
            .prefix("test:")
            .connect()
            .await
            .expect("connect to the cluster")
    };
    let (waiter, sender) = (connect().await, connect().await);
    for name in ["a", "b", "c", "d"] {
        assert!(waiter.wait(name, SHORT).await.is_err());
        assert_eq!(sender.signal(name, b"x").await.unwrap(), 0, "{name}");
    }
}
