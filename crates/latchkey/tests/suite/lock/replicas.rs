//! Replicated acquisition (`Lock::with_replicas`) beyond the plain first
//! try (`sentinel.rs` has that, and the failover): a fair lock's holds, taken
//! or handed on, and a fencing token issued on request wait for the replicas
//! too. A stopped replica (SIGSTOP: linked, silent) acknowledges nothing.

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::{Client, Error, Lock, Ownership};

/// A primary with one linked replica, and a client of the primary.
async fn primary_and_replica() -> (RedisServer, RedisServer, Client) {
    let primary = RedisServer::start();
    let replica = RedisServer::builder().replica_of(primary.port()).start();
    let client = Client::builder(&primary.url())
        .prefix("test:")
        .command_timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap();
    (primary, replica, client)
}

/// `lock`'s first hold once the replica has linked (refused before).
async fn first_hold(lock: &Lock) -> latchkey::LockGuard {
    eventually("the replica is linked", || async {
        lock.try_acquire().await.ok().flatten()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_lock_waits_for_its_replicas_taken_or_handed_on() {
    let (primary, replica, client) = primary_and_replica().await;
    let other = Client::builder(&primary.url())
        .prefix("test:")
        .connect()
        .await
        .unwrap();
    let within = Duration::from_millis(300);
    let fair = |c: &Client| {
        c.lock("fair-replicated", Duration::from_secs(10))
            .unwrap()
            .fair()
            .unwrap()
            .with_fencing()
            .with_replicas_within(1, within)
            .unwrap()
    };
    let (lock, waiting) = (fair(&client), fair(&other));
    let held = first_hold(&lock).await;

    // A waiter handed the lock confirms it with the replica, then holds it.
    let waiter = tokio::spawn(async move {
        waiting
            .acquire_until(Duration::from_secs(20))
            .await
            .map(|g| (g, waiting))
    });
    eventually("the waiter is queued", || async {
        primary
            .command(&["LLEN", "{test:fair-replicated}:queue"])
            .is_ok_and(|n| n == "1")
    })
    .await;
    let first_token = held.issued_fencing_token().unwrap();
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    let (handed, waiting) = waiter.await.unwrap().unwrap();
    assert!(handed.issued_fencing_token().unwrap() > first_token);
    // The hand-off keeps the queued waiter's '+w' mark (fair_release.lua).
    let value = primary.command(&["GET", "test:fair-replicated"]).unwrap();
    assert_eq!(value.strip_suffix("+w").unwrap_or(&value), handed.token());
    assert_eq!(handed.release().await.unwrap(), Ownership::Owned);

    // The replica stopped: a fair hold is refused, and nothing is left held.
    replica.pause();
    match lock.try_acquire().await {
        Err(Error::TooFewReplicas {
            wanted: 1,
            acked: 0,
            ..
        }) => {}
        other => panic!("expected TooFewReplicas, got {other:?}"),
    }
    // Released at once, or, when that release failed (a loaded machine),
    // by its retry in the background: never left to its TTL.
    // (Half the TTL: a key that merely expired would take 10 s.)
    let by = std::time::Instant::now() + Duration::from_secs(5);
    while primary
        .command(&["EXISTS", "test:fair-replicated"])
        .unwrap()
        != "0"
    {
        assert!(
            std::time::Instant::now() < by,
            "the refused hold was left to its TTL"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A waiting fair acquire retries until its deadline, then says why.
    match waiting.acquire_until(Duration::from_millis(900)).await {
        Err(Error::TooFewReplicas { .. }) => {}
        other => panic!("expected TooFewReplicas, got {other:?}"),
    }
    // Released at once, or, when that release failed (a loaded machine),
    // by its retry in the background: never left to its TTL.
    // (Half the TTL: a key that merely expired would take 10 s.)
    let by = std::time::Instant::now() + Duration::from_secs(5);
    while primary
        .command(&["EXISTS", "test:fair-replicated"])
        .unwrap()
        != "0"
    {
        assert!(
            std::time::Instant::now() < by,
            "the refused hold was left to its TTL"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    replica.resume();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fencing_token_issued_on_request_waits_for_the_replicas() {
    let (primary, replica, client) = primary_and_replica().await;
    let lock = client
        .lock("token-replicated", Duration::from_secs(10))
        .unwrap()
        .with_replicas_within(1, Duration::from_millis(300))
        .unwrap();
    let guard = first_hold(&lock).await;
    assert_eq!(guard.issued_fencing_token(), None);

    replica.pause();
    match guard.fencing_token().await {
        Err(Error::TooFewReplicas { acked: 0, .. }) => {}
        other => panic!("expected TooFewReplicas, got {other:?}"),
    }
    // The lock stays held; no token is kept.
    assert!(guard.is_held());
    assert_eq!(guard.issued_fencing_token(), None);
    assert_eq!(
        primary.command(&["GET", "test:token-replicated"]).unwrap(),
        guard.token()
    );

    replica.resume();
    let token = eventually("the replica answers again", || async {
        guard.fencing_token().await.ok()
    })
    .await;
    assert_eq!(guard.issued_fencing_token(), Some(token));
    let counter = latchkey::protocol::fence_key(b"test:token-replicated");
    let counter = String::from_utf8(counter).unwrap();
    assert_eq!(
        replica.command(&["GET", &counter]).unwrap(),
        token.to_string(),
        "the token reached the replica"
    );
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}
