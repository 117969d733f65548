//! The core behaviours — exclusion, owner-only release and extend, expiry,
//! fencing, the watchdog and `lost()`, waiting woken by the release,
//! timeouts, cancellation and signals — as one suite run against a
//! standalone server, a 3-primary Redis Cluster **and** a Sentinel set (the
//! `deployments!` macro at the bottom makes one test of each per
//! deployment); every other primitive's core behaviours
//! (`matrix/primitives.rs`) on the same three; and each primitive
//! held and waited on across a failover of the node that owns its slot
//! (`matrix/failover.rs`, on the cluster and the Sentinel set). The
//! cluster-only checks of this module: `matrix/cluster_primitives.rs`
//! (every primitive's scripts on one slot, several primaries) and
//! `matrix/cluster_replicas.rs` (`WAIT` routed to the key's node).
//! The deployment-specific tests (proxies, restarts, replicas, slot moves)
//! stay in their own files of `deploy/`.

mod cluster_primitives;
mod cluster_replicas;
mod deployment;
mod failover;
mod primitives;

use std::time::{Duration, Instant};

use deployment::{Deployment, Kind};
use failover::*;
use latchkey::{Error, FencedWrite, Ownership};
use latchkey_testkit::eventually;
use primitives::*;

async fn exclusion_and_owner_only_release_and_extend(kind: Kind) {
    let d = Deployment::start(kind).await;
    let (a, b) = (d.client().await, d.client().await);
    for i in 0..12 {
        let name = format!("job-{i}");
        let key = format!("test:{name}");
        let guard = a
            .lock(&name, Duration::from_secs(10))
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let other = b.lock(&name, Duration::from_secs(10)).unwrap();
        assert!(other.try_acquire().await.unwrap().is_none(), "{name} twice");
        assert_eq!(
            guard.extend(Duration::from_secs(20)).await.unwrap(),
            Ownership::Owned
        );
        let pttl: i64 = d.command(&key, &["PTTL", &key]).parse().unwrap();
        assert!(
            pttl > 10_000,
            "{name}: extend did not reach the key: {pttl}"
        );
        // Someone else's value under the key: neither extended nor deleted.
        d.command(&key, &["SET", &key, "someone-else", "PX", "10000"]);
        assert_eq!(
            guard.extend(Duration::from_secs(20)).await.unwrap(),
            Ownership::HeldByOther
        );
        assert_eq!(guard.release().await.unwrap(), Ownership::HeldByOther);
        assert_eq!(d.command(&key, &["GET", &key]), "someone-else");
        d.command(&key, &["DEL", &key]);
        let guard = other.try_acquire().await.unwrap().expect("free again");
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    }
}

async fn expiry_frees_the_lock(kind: Kind) {
    let d = Deployment::start(kind).await;
    let c = d.client().await;
    let lock = c.lock("short", Duration::from_millis(300)).unwrap();
    let guard = lock.try_acquire().await.unwrap().unwrap();
    eventually("the key expires", || async {
        d.command("test:short", &["EXISTS", "test:short"]) == "0"
    })
    .await;
    let again = lock
        .try_acquire()
        .await
        .unwrap()
        .expect("free after the TTL");
    assert_eq!(guard.release().await.unwrap(), Ownership::HeldByOther);
    assert_eq!(again.release().await.unwrap(), Ownership::Owned);
    // A key gone by the time of the release: told, not mistaken for ours.
    let guard = c
        .lock("gone", Duration::from_secs(5))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    d.command("test:gone", &["DEL", "test:gone"]);
    assert_eq!(guard.release().await.unwrap(), Ownership::Expired);
}

async fn fencing_tokens_increase_and_fence_writes(kind: Kind) {
    let d = Deployment::start(kind).await;
    let c = d.client().await;
    let mut last = 0;
    for i in 0..40 {
        let name = format!("fenced-{}", i % 4);
        let lock = c.lock(&name, Duration::from_secs(5)).unwrap();
        let lock = if i % 2 == 0 {
            lock.with_fencing()
        } else {
            lock
        };
        let guard = lock.try_acquire().await.unwrap().unwrap();
        let token = guard.fencing_token().await.unwrap();
        // Per name the tokens increase; across names they come from the
        // clock-raised counters, so compare per name only.
        if i % 4 == 0 {
            assert!(token > last, "token {token} after {last}");
            last = token;
        }
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    }
    let resource = c.fenced("output").unwrap();
    assert_eq!(
        resource.write(last, b"new").await.unwrap(),
        FencedWrite::Accepted
    );
    assert_eq!(
        resource.write(last - 1, b"stale").await.unwrap(),
        FencedWrite::Rejected { seen: last }
    );
}

async fn the_watchdog_renews_and_lost_fires_when_the_key_goes(kind: Kind) {
    let d = Deployment::start(kind).await;
    let c = d.client().await;
    let ttl = Duration::from_millis(600);
    let guard = c
        .lock("renewed", ttl)
        .unwrap()
        .with_watchdog()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    // Three TTLs: only renewals keep it.
    tokio::time::sleep(ttl * 3).await;
    assert!(guard.is_held());
    assert!(d
        .command("test:renewed", &["GET", "test:renewed"])
        .starts_with(guard.token()));
    d.command("test:renewed", &["DEL", "test:renewed"]);
    let deleted = Instant::now();
    tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("lost() never fired");
    assert!(!guard.is_held());
    assert!(
        deleted.elapsed() < ttl,
        "lost() {:?} after",
        deleted.elapsed()
    );
}

async fn a_waiter_is_woken_by_the_release_and_times_out_otherwise(kind: Kind) {
    let d = Deployment::start(kind).await;
    let (holder, waiter) = (d.client().await, d.client().await);
    let guard = holder
        .lock("handoff", Duration::from_secs(30))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let lock = waiter.lock("handoff", Duration::from_secs(30)).unwrap();
    match lock.acquire_until(Duration::from_millis(300)).await {
        Err(Error::WaitTimedOut { .. }) => {}
        other => panic!("expected WaitTimedOut, got {other:?}"),
    }
    let waiting = tokio::spawn(async move {
        let got = lock.acquire_until(Duration::from_secs(20)).await;
        (Instant::now(), got)
    });
    d.until_subscribed("test:handoff", "{test:handoff}:released")
        .await;
    // One waiting client, as `latchkey top` shows it.
    assert_eq!(
        holder.lock_waiters(&[b"handoff", b"nobody"]).await.unwrap(),
        [1, 0]
    );
    let released = Instant::now();
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    let (acquired, got) = waiting.await.unwrap();
    let got = got.expect("acquired");
    assert!(
        acquired - released < Duration::from_secs(2),
        "woken {:?} after the release: not by it",
        acquired - released
    );
    assert_eq!(got.release().await.unwrap(), Ownership::Owned);
}

async fn a_cancelled_acquire_leaves_the_lock_free(kind: Kind) {
    let d = Deployment::start(kind).await;
    let c = d.client().await;
    let lock = c.lock("cancelled", Duration::from_secs(30)).unwrap();
    let held = lock.try_acquire().await.unwrap().unwrap();
    let other = c.lock("cancelled", Duration::from_secs(30)).unwrap();
    // Cancelled while waiting: nothing of it stays behind.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), other.acquire())
            .await
            .is_err()
    );
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    assert!(c.flush(Duration::from_secs(3)).await);
    assert_eq!(
        d.command("test:cancelled", &["EXISTS", "test:cancelled"]),
        "0"
    );
    let again = other.try_acquire().await.unwrap().expect("free");
    assert_eq!(again.release().await.unwrap(), Ownership::Owned);
}

async fn signals_reach_every_listener(kind: Kind) {
    let d = Deployment::start(kind).await;
    let (a, b) = (d.client().await, d.client().await);
    let mut listeners = Vec::new();
    for _ in 0..3 {
        listeners.push(b.listen(["deploy"]).await.unwrap());
    }
    a.signal("deploy", b"v1").await.unwrap();
    for listener in &mut listeners {
        let signal = listener
            .recv_timeout(Duration::from_secs(5))
            .await
            .expect("the signal");
        assert_eq!(signal.payload, b"v1");
    }
    assert!(matches!(
        b.wait("nobody-signals", Duration::from_millis(200)).await,
        Err(latchkey::Error::WaitTimedOut { .. })
    ));
}

/// One test per deployment for each of the suite's functions.
macro_rules! deployments {
    ($($test:ident),* $(,)?) => {
        mod standalone {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(super::Kind::Standalone).await
                }
            )*
        }
        mod cluster {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(super::Kind::Cluster).await
                }
            )*
        }
        mod sentinel {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(super::Kind::Sentinel).await
                }
            )*
        }
    };
}

deployments!(
    exclusion_and_owner_only_release_and_extend,
    expiry_frees_the_lock,
    fencing_tokens_increase_and_fence_writes,
    the_watchdog_renews_and_lost_fires_when_the_key_goes,
    a_waiter_is_woken_by_the_release_and_times_out_otherwise,
    a_cancelled_acquire_leaves_the_lock_free,
    signals_reach_every_listener,
    every_primitive_keeps_its_promises,
);

/// The failovers: a graceful one (`CLUSTER FAILOVER` of the slot's primary,
/// `SENTINEL FAILOVER`) and a crash (`kill -9` of that primary).
mod failover_cluster {
    use super::{failover::How, Kind};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_primitive_held_and_waited_on_across_a_graceful_failover() {
        super::every_primitive_across_a_failover(Kind::Cluster, How::Graceful).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_primitive_held_and_waited_on_across_a_kill_of_the_primary() {
        super::every_primitive_across_a_failover(Kind::Cluster, How::Kill).await
    }
}

mod failover_sentinel {
    use super::{failover::How, Kind};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_primitive_held_and_waited_on_across_a_graceful_failover() {
        super::every_primitive_across_a_failover(Kind::Sentinel, How::Graceful).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_primitive_held_and_waited_on_across_a_kill_of_the_primary() {
        super::every_primitive_across_a_failover(Kind::Sentinel, How::Kill).await
    }
}
