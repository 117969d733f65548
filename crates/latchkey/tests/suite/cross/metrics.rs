//! The library's metrics: known operations against a real Redis, then exact
//! counts from a `metrics-util` DebuggingRecorder.
//!
//! Each test runs on a current-thread runtime inside
//! `metrics::with_local_recorder`, so the recorder sees everything the test
//! does (background tasks included) and nothing another test does.

use crate::common;

mod errors;

use std::collections::BTreeMap;
use std::time::Duration;

use latchkey::metrics as m;
use latchkey::{MetricsLabels, Ownership};
use metrics_util::debugging::DebuggingRecorder;
use redis::AsyncCommands;

use common::recorded::{client_with, recorded, Recorded};
use common::{eventually, raw, spawn_waiting, RedisServer};

#[test]
fn acquisitions_and_releases_are_counted_by_outcome() {
    let server = RedisServer::start();
    recorded(|snapshotter| async move {
        let client = client_with(&server.url(), MetricsLabels::None).await;
        let a = client.lock("a", Duration::from_secs(10)).unwrap();
        let b = client.lock("b", Duration::from_secs(10)).unwrap();

        let g1 = a.try_acquire().await.unwrap().expect("free"); // ok
        assert!(a.try_acquire().await.unwrap().is_none()); // busy
        let err = a
            .acquire_until(Duration::from_millis(50))
            .await
            .unwrap_err(); // timeout
        assert!(matches!(err, latchkey::Error::WaitTimedOut { .. }), "{err}");
        assert_eq!(g1.release().await.unwrap(), Ownership::Owned);
        let g2 = a.acquire().await.unwrap(); // ok
        let g3 = b.acquire_until(Duration::from_secs(1)).await.unwrap(); // ok
        assert_eq!(g2.release().await.unwrap(), Ownership::Owned);
        // The key vanishes under the holder: its release finds it gone.
        let _: i64 = raw(&server.url()).await.del("test:b").await.unwrap();
        assert_eq!(g3.release().await.unwrap(), Ownership::Expired);

        let mut rec = Recorded::default();
        rec.add(&snapshotter);
        let acquisitions = rec.counters_of(m::ACQUISITIONS);
        assert_eq!(
            acquisitions,
            BTreeMap::from([
                ("latchkey_acquisitions_total{kind=lock,outcome=busy}", 1),
                ("latchkey_acquisitions_total{kind=lock,outcome=ok}", 3),
                ("latchkey_acquisitions_total{kind=lock,outcome=timeout}", 1),
            ])
        );
        assert_eq!(
            rec.counters_of(m::RELEASES),
            BTreeMap::from([
                ("latchkey_releases_total{kind=lock,outcome=expired}", 1),
                ("latchkey_releases_total{kind=lock,outcome=released}", 2),
            ])
        );
        let waits = rec.histogram("latchkey_acquire_wait_seconds{kind=lock}");
        assert_eq!(waits.len(), 3, "one wait per successful acquisition");
        assert!(waits.iter().all(|w| (0.0..5.0).contains(w)), "{waits:?}");
        assert_eq!(rec.histogram("latchkey_hold_seconds{kind=lock}").len(), 3);
        assert!(
            rec.counters_of(m::REDIS_ERRORS).is_empty(),
            "{:?}",
            rec.counters
        );
    });
}

#[test]
fn the_lock_label_follows_the_client_option() {
    let server = RedisServer::start();
    recorded(|snapshotter| async move {
        let named = client_with(&server.url(), MetricsLabels::LockName).await;
        let fixed = client_with(&server.url(), MetricsLabels::Static("billing".into())).await;
        for name in ["alpha", "beta"] {
            let guard = named
                .lock(name, Duration::from_secs(5))
                .unwrap()
                .try_acquire()
                .await
                .unwrap()
                .unwrap();
            assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
        }
        let guard = fixed
            .lock("gamma", Duration::from_secs(5))
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .unwrap();
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);

        let mut rec = Recorded::default();
        rec.add(&snapshotter);
        assert_eq!(
            rec.counters_of(m::ACQUISITIONS),
            BTreeMap::from([
                (
                    "latchkey_acquisitions_total{kind=lock,lock=alpha,outcome=ok}",
                    1
                ),
                (
                    "latchkey_acquisitions_total{kind=lock,lock=beta,outcome=ok}",
                    1
                ),
                (
                    "latchkey_acquisitions_total{kind=lock,lock=billing,outcome=ok}",
                    1
                ),
            ])
        );
        assert_eq!(
            rec.histogram("latchkey_hold_seconds{kind=lock,lock=billing}")
                .len(),
            1
        );
    });
}

#[test]
fn renewals_losses_and_releases_of_a_taken_lock() {
    let server = RedisServer::start();
    recorded(|snapshotter| async move {
        let client = client_with(&server.url(), MetricsLabels::None).await;
        let mut conn = raw(&server.url()).await;
        let lock = client.lock("r", Duration::from_secs(10)).unwrap();

        let guard = lock.try_acquire().await.unwrap().unwrap();
        assert_eq!(
            guard.extend(Duration::from_secs(10)).await.unwrap(),
            latchkey::Ownership::Owned
        );
        // Someone else takes the lock under us: the next extension fails
        // and the guard is lost; the release finds it held by the other.
        let _: () = conn.set("test:r", "someone-else").await.unwrap();
        assert_eq!(
            guard.extend(Duration::from_secs(10)).await.unwrap(),
            latchkey::Ownership::HeldByOther
        );
        assert_eq!(guard.release().await.unwrap(), Ownership::HeldByOther);
        let _: i64 = conn.del("test:r").await.unwrap();

        // The watchdog's first renewal (after 100 ms) finds the key gone.
        let watched = client
            .lock("w", Duration::from_millis(900))
            .unwrap()
            .with_renewal_every(Duration::from_millis(100))
            .unwrap();
        let guard = watched.try_acquire().await.unwrap().unwrap();
        let _: i64 = conn.del("test:w").await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), guard.lost())
            .await
            .expect("lost fires");
        // Polling `lost()` again must not count the loss twice.
        guard.lost().await;
        assert_eq!(guard.release().await.unwrap(), Ownership::Expired);

        let mut rec = Recorded::default();
        rec.add(&snapshotter);
        assert_eq!(
            rec.counters_of(m::RENEWALS),
            BTreeMap::from([
                ("latchkey_renewals_total{kind=lock,outcome=failed}", 2),
                ("latchkey_renewals_total{kind=lock,outcome=ok}", 1),
            ])
        );
        assert_eq!(
            rec.listed(m::LOCKS_LOST),
            [
                "latchkey_locks_lost_total{kind=lock,reason=gone} 1",
                "latchkey_locks_lost_total{kind=lock,reason=taken-over} 1",
            ]
        );
        assert_eq!(
            rec.counters_of(m::RELEASES),
            BTreeMap::from([
                ("latchkey_releases_total{kind=lock,outcome=expired}", 1),
                (
                    "latchkey_releases_total{kind=lock,outcome=held_by_other}",
                    1
                ),
            ])
        );
    });
}

#[test]
fn a_dropped_guard_is_counted_when_its_background_release_ends() {
    let server = RedisServer::start();
    recorded(|snapshotter| async move {
        let client = client_with(&server.url(), MetricsLabels::None).await;
        let guard = client
            .lock("d", Duration::from_secs(10))
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .unwrap();
        drop(guard);
        let mut rec = Recorded::default();
        // The release runs in a background task: wait for its count.
        eventually("the release is counted", || {
            rec.add(&snapshotter);
            let counted = rec.counter("latchkey_releases_total{kind=lock,outcome=released}") > 0;
            async move { counted }
        })
        .await;
        assert_eq!(
            rec.counter("latchkey_releases_total{kind=lock,outcome=released}"),
            1
        );
        assert_eq!(rec.histogram("latchkey_hold_seconds{kind=lock}").len(), 1);
    });
}

#[test]
fn a_waiter_woken_by_a_release_records_its_handoff() {
    let server = RedisServer::start();
    recorded(|snapshotter| async move {
        let client = client_with(&server.url(), MetricsLabels::None).await;
        let lock = client.lock("h", Duration::from_secs(30)).unwrap();
        let holder = lock.try_acquire().await.unwrap().unwrap();
        // The holder is a guard of this same client: the waiter waits for
        // its release, which is a wake-up it must act on.
        let waiter = spawn_waiting(lock.clone(), Duration::from_secs(10)).await;
        assert_eq!(holder.release().await.unwrap(), Ownership::Owned);
        let (_, guard) = waiter.await.unwrap().unwrap();
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);

        let mut rec = Recorded::default();
        rec.add(&snapshotter);
        let handoffs = rec.histogram("latchkey_handoff_seconds{kind=lock}");
        assert_eq!(handoffs.len(), 1, "{rec:?}");
        // One round trip on loopback; the bound only rules out nonsense.
        assert!(handoffs[0] < 2.0, "{handoffs:?}");
        assert_eq!(
            rec.counter("latchkey_acquisitions_total{kind=lock,outcome=ok}"),
            2
        );
    });
}

#[test]
fn semaphores_and_read_write_locks_are_counted_as_locks_are_with_their_kind() {
    let server = RedisServer::start();
    recorded(|snapshotter| async move {
        let client = client_with(&server.url(), MetricsLabels::None).await;
        let mut conn = raw(&server.url()).await;
        let short = Duration::from_millis(50);
        let sem = client.semaphore("s", 1, Duration::from_secs(10)).unwrap();
        let permit = sem.try_acquire().await.unwrap().expect("free"); // ok
        assert!(sem.try_acquire().await.unwrap().is_none()); // busy
        assert!(sem.acquire_until(short).await.is_err()); // timeout
        assert_eq!(permit.extend(sem.ttl()).await.unwrap(), Ownership::Owned); // renewal ok
        assert_eq!(permit.release().await.unwrap(), Ownership::Owned);
        let permit = sem.acquire().await.unwrap(); // ok
        let _: i64 = conn.del(sem.key()).await.unwrap();
        // The permit vanished: the extension fails and the permit is lost.
        assert_eq!(permit.extend(sem.ttl()).await.unwrap(), Ownership::Expired);
        assert_eq!(permit.release().await.unwrap(), Ownership::Expired);

        let rw = client.rwlock("rw", Duration::from_secs(10)).unwrap();
        let read = rw.try_read().await.unwrap().expect("free"); // ok
        assert!(rw.try_write().await.unwrap().is_none()); // busy
        assert!(rw.write_until(short).await.is_err()); // timeout
        assert_eq!(read.release().await.unwrap(), Ownership::Owned);
        drop(rw.write_until(Duration::from_secs(5)).await.unwrap()); // ok, dropped
        let mut rec = Recorded::default();
        eventually("the dropped writer's release is counted", || {
            rec.add(&snapshotter);
            let n = rec.counter("latchkey_releases_total{kind=rwlock,outcome=released}");
            async move { n == 2 }
        })
        .await;
        let acquisitions = |kind: &str| {
            ["busy", "ok", "timeout"].map(|o| {
                rec.counter(&format!(
                    "latchkey_acquisitions_total{{kind={kind},outcome={o}}}"
                ))
            })
        };
        assert_eq!(acquisitions("semaphore"), [1, 2, 1], "{rec:?}");
        assert_eq!(acquisitions("rwlock"), [1, 2, 1], "{rec:?}");
        for kind in ["semaphore", "rwlock"] {
            let waits = rec.histogram(&format!("latchkey_acquire_wait_seconds{{kind={kind}}}"));
            assert_eq!(waits.len(), 2, "{kind}");
            let holds = rec.histogram(&format!("latchkey_hold_seconds{{kind={kind}}}"));
            assert_eq!(holds.len(), 2, "{kind}");
        }
        assert_eq!(
            rec.listed(m::RELEASES),
            [
                "latchkey_releases_total{kind=rwlock,outcome=released} 2",
                "latchkey_releases_total{kind=semaphore,outcome=expired} 1",
                "latchkey_releases_total{kind=semaphore,outcome=released} 1",
            ]
        );
        assert_eq!(
            rec.listed(m::RENEWALS),
            [
                "latchkey_renewals_total{kind=semaphore,outcome=failed} 1",
                "latchkey_renewals_total{kind=semaphore,outcome=ok} 1",
            ]
        );
        assert_eq!(
            rec.listed(m::LOCKS_LOST),
            ["latchkey_locks_lost_total{kind=semaphore,reason=gone} 1"]
        );
        assert!(rec.counters_of(m::LOCKS_LOST).len() == 1, "{rec:?}");
    });
}

#[test]
fn elections_latches_barriers_and_fair_locks_are_counted_with_their_kind() {
    let server = RedisServer::start();
    recorded(|snapshotter| async move {
        let client = client_with(&server.url(), MetricsLabels::LockName).await;
        let mut conn = raw(&server.url()).await;
        let short = Duration::from_millis(50);
        let election = client.election("e", Duration::from_secs(10)).unwrap();
        let leader = election
            .try_campaign("a")
            .await
            .unwrap()
            .expect("nobody leads");
        assert!(election.try_campaign("b").await.unwrap().is_none()); // busy
        assert!(election.campaign_until("b", short).await.is_err()); // timeout
        assert_eq!(leader.resign().await.unwrap(), Ownership::Owned);
        let leader = election.campaign("b").await.unwrap(); // a second term won
        let _: () = conn.set("{test:e}:leader", "someone-else").await.unwrap();
        assert_eq!(leader.proclaim("c").await.unwrap(), Ownership::HeldByOther); // lost
        assert_eq!(leader.resign().await.unwrap(), Ownership::HeldByOther);

        let latch = client.latch("l", Duration::from_secs(60)).unwrap();
        assert!(latch.create(2).await.unwrap());
        assert_eq!(latch.count_down().await.unwrap(), 1);
        assert!(matches!(
            latch.wait_until(short).await,
            Err(latchkey::Error::WaitTimedOut { .. })
        )); // timeout
        assert_eq!(latch.count_down().await.unwrap(), 0); // opened
        latch.wait_until(Duration::from_secs(1)).await.unwrap(); // ok
        assert!(latch.count_down().await.is_err()); // already open
        let never = client.latch("never", Duration::from_secs(60)).unwrap();
        assert!(never.count_down().await.is_err()); // not found

        let alone = client.barrier("b1", 1, Duration::from_secs(60)).unwrap();
        alone
            .arrive_and_wait_until(Duration::from_secs(1))
            .await
            .unwrap();
        let pair = client.barrier("b2", 2, Duration::from_secs(60)).unwrap();
        assert!(matches!(
            pair.arrive_and_wait_until(short).await,
            Err(latchkey::Error::WaitTimedOut { .. })
        )); // timeout

        let fair = client
            .lock("f", Duration::from_secs(10))
            .unwrap()
            .fair()
            .unwrap();
        let guard = fair.try_acquire().await.unwrap().expect("free");
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);

        let mut rec = Recorded::default();
        rec.add(&snapshotter);
        assert_eq!(
            rec.listed(m::ACQUISITIONS),
            [
                "latchkey_acquisitions_total{kind=barrier,lock=b1,outcome=ok} 1",
                "latchkey_acquisitions_total{kind=barrier,lock=b2,outcome=timeout} 1",
                "latchkey_acquisitions_total{kind=election,lock=e,outcome=busy} 1",
                "latchkey_acquisitions_total{kind=election,lock=e,outcome=ok} 2",
                "latchkey_acquisitions_total{kind=election,lock=e,outcome=timeout} 1",
                "latchkey_acquisitions_total{kind=fair-lock,lock=f,outcome=ok} 1",
                "latchkey_acquisitions_total{kind=latch,lock=l,outcome=ok} 1",
                "latchkey_acquisitions_total{kind=latch,lock=l,outcome=timeout} 1",
            ]
        );
        assert_eq!(
            rec.listed(m::COUNT_DOWNS),
            [
                "latchkey_count_downs_total{kind=latch,lock=l,outcome=already_open} 1",
                "latchkey_count_downs_total{kind=latch,lock=l,outcome=counted} 1",
                "latchkey_count_downs_total{kind=latch,lock=l,outcome=opened} 1",
                "latchkey_count_downs_total{kind=latch,lock=never,outcome=not_found} 1",
            ]
        );
        assert_eq!(
            rec.listed(m::RELEASES),
            [
                "latchkey_releases_total{kind=election,lock=e,outcome=held_by_other} 1",
                "latchkey_releases_total{kind=election,lock=e,outcome=released} 1",
                "latchkey_releases_total{kind=fair-lock,lock=f,outcome=released} 1",
            ]
        );
        assert_eq!(
            rec.listed(m::LOCKS_LOST),
            ["latchkey_locks_lost_total{kind=election,lock=e,reason=taken-over} 1"]
        );
        assert_eq!(
            rec.histogram("latchkey_hold_seconds{kind=election,lock=e}")
                .len(),
            2
        );
        for series in [
            "kind=barrier,lock=b1",
            "kind=election,lock=e",
            "kind=latch,lock=l",
        ] {
            let waits = rec.histogram(&format!("latchkey_acquire_wait_seconds{{{series}}}"));
            let expected = if series.contains("election") { 2 } else { 1 };
            assert_eq!(waits.len(), expected, "{series}: {rec:?}");
        }
    });
}

#[test]
fn describe_names_every_metric() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        m::describe();
        // A description shows in a snapshot only for a registered metric.
        metrics::counter!(m::ACQUISITIONS).increment(1);
        metrics::histogram!(m::HOLD).record(1.0);
    });
    let described: Vec<(String, Option<metrics::Unit>, bool)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, unit, description, _)| {
            (key.key().name().to_owned(), unit, description.is_some())
        })
        .collect();
    assert_eq!(
        described,
        vec![
            (m::ACQUISITIONS.to_owned(), None, true),
            (m::HOLD.to_owned(), Some(metrics::Unit::Seconds), true),
        ]
    );
}
