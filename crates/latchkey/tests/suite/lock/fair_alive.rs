//! A fair lock's process records (`S:alive`): an entry is live while its
//! own (long) lease runs and its process's record has not run out, so a
//! process that dies takes its waiters with it within one waiter lease,
//! and one renewal per process keeps them all. Against a real
//! redis-server; entries of a process that died are written raw.

use crate::common;

use std::time::{Duration, Instant};

use super::fair::server_ms;
use super::fair_renewal::{count, scripts_run};
use common::*;
use latchkey::{Client, Lock, Ownership};

const TTL: Duration = Duration::from_secs(10);
const QUEUE: &str = "{test:alive}:queue";
const LEASES: &str = "{test:alive}:leases";
const ALIVE: &str = "{test:alive}:alive";

fn fair(c: &Client, lease: Duration) -> Lock {
    c.lock("alive", TTL)
        .unwrap()
        .fair_with_lease(lease)
        .unwrap()
}

/// Queues the entry of a waiter of process `dead` whose own lease runs a
/// minute more and whose hand-off TTL is 5 s, with the process's record
/// running out `record_ms` from now (server time); returns that instant.
fn queue_dead(server: &RedisServer, dead: &str, record_ms: i64) -> u64 {
    let entry = format!("{dead}{:016x}:5000:0:lk2:dead", 1);
    let now = server_ms(server);
    let own = (now + 60_000).to_string();
    let record = now.saturating_add_signed(record_ms);
    server.command(&["RPUSH", QUEUE, &entry]).unwrap();
    server.command(&["ZADD", LEASES, &own, &entry]).unwrap();
    server
        .command(&["ZADD", ALIVE, &record.to_string(), dead])
        .unwrap();
    record
}

/// A process with a shorter waiter lease keeps the record of a process
/// that died while that process's entries still hold their (longer) own
/// leases: dropped, the record would no longer judge them, and they would
/// be live again until their own leases ran out.
#[tokio::test]
async fn a_shorter_lease_keeps_the_record_of_a_longer_one() {
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let held = fair(&a, Duration::from_secs(6))
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    let dead = "f".repeat(16);
    // Queued with a minute's entry lease (the horizon a 0.4 client writes
    // beside it), its record live for now.
    queue_dead(&server, &dead, 60_000);
    server
        .command(&["ZADD", ALIVE, "-60000", "horizon"])
        .unwrap();
    // A waiter with the shortest lease (entry lease 900 ms) renews every
    // 20 ms.
    let lock = fair(&b, Duration::from_millis(60));
    let waiting = tokio::spawn(async move { lock.acquire().await });
    eventually("the live waiter queued", || async {
        count(&server, &["LLEN", QUEUE]) == 2
    })
    .await;
    // The dead process's record ran out 3 s ago: longer ago than the
    // waiter's entry lease, not than the dead entry's.
    let past = (server_ms(&server) - 3_000).to_string();
    server.command(&["ZADD", ALIVE, &past, &dead]).unwrap();
    let before = scripts_run(&server);
    eventually("three renewals since", || async {
        scripts_run(&server) >= before + 3
    })
    .await;
    assert_eq!(
        server.command(&["ZSCORE", ALIVE, &dead]).unwrap().trim(),
        past,
        "the dead process's record kept"
    );
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    let guard = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("handed over at once, not after the dead waiter's hand-off TTL")
        .unwrap()
        .unwrap();
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

/// A release skips the waiter of a process whose record ran out, though
/// the entry's own lease has a minute to run: handed to it, the lock would
/// sit with nobody for its hand-off TTL (5 s).
#[tokio::test]
async fn a_release_skips_the_waiters_of_a_process_that_died() {
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let held = fair(&a, Duration::from_secs(6))
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    let record_end = queue_dead(&server, &"d".repeat(16), 200);
    // A long lease for the live waiter: its renewals do not look at the
    // queue while the lock is held.
    let lock = fair(&b, Duration::from_secs(6));
    let waiting = tokio::spawn(async move { lock.acquire().await });
    eventually("the live waiter queued", || async {
        count(&server, &["LLEN", QUEUE]) == 2
    })
    .await;
    eventually("the dead process's record ran out", || async {
        server_ms(&server) > record_end
    })
    .await;
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    let guard = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("handed over at once, not after the dead waiter's hand-off TTL")
        .unwrap()
        .unwrap();
    assert_eq!(
        count(&server, &["LLEN", QUEUE]),
        0,
        "the dead entry dropped"
    );
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

/// An attempt on a free lock drops a dead process's entry at the head and
/// takes the lock; while the record runs, the entry is live and first.
#[tokio::test]
async fn an_attempt_takes_a_free_lock_past_a_dead_process_s_entry() {
    let server = RedisServer::start();
    let a = client(&server.url()).await;
    let lease = Duration::from_secs(2);
    let dead = "e".repeat(16);
    queue_dead(&server, &dead, 60_000);
    assert!(
        fair(&a, lease).try_acquire().await.unwrap().is_none(),
        "a live head goes first"
    );
    // The process's record runs out (it died): its entry is dead at once.
    let past = (server_ms(&server) - 1).to_string();
    server.command(&["ZADD", ALIVE, &past, &dead]).unwrap();
    let guard = fair(&a, lease).try_acquire().await.unwrap();
    let guard = guard.expect("taken past the dead entry");
    assert_eq!(count(&server, &["LLEN", QUEUE]), 0);
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

/// A process held up past its record (here: its record set back) finds,
/// at its next renewal, that other scripts may have dropped any of its
/// entries, and looks for all of them at once, not only for the first few
/// it sends every time: each waiter queues again within a few renewals,
/// not when its turn among the first few comes (8 a renewal: 12
/// renewals, 8 s, for 96) or its own lease is next due (5 leases, 10 s).
#[tokio::test]
async fn waiters_dropped_while_their_record_ran_out_queue_again_soon() {
    const WAITERS: usize = 96;
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let lease = Duration::from_secs(2);
    let held = fair(&a, lease).try_acquire().await.unwrap().expect("free");
    let mut waiting = Vec::new();
    for _ in 0..WAITERS {
        let lock = fair(&b, lease);
        waiting.push(tokio::spawn(async move {
            let guard = lock.acquire_until(Duration::from_secs(60)).await?;
            guard.release().await
        }));
    }
    eventually("every waiter queued", || async {
        count(&server, &["LLEN", QUEUE]) == WAITERS as u64
    })
    .await;
    // b's record runs out: another process's attempt drops every one of
    // its entries as dead (the lock stays held: no message wakes them).
    // The records are deadlines (the horizon's score is below 0).
    let records = server
        .command(&["ZRANGEBYSCORE", ALIVE, "0", "+inf"])
        .unwrap();
    let process = records.trim().to_owned();
    assert_eq!(process.len(), 16, "one record: {records:?}");
    let past = (server_ms(&server) - 1).to_string();
    server.command(&["ZADD", ALIVE, &past, &process]).unwrap();
    assert!(
        fair(&a, lease).try_acquire().await.unwrap().is_none(),
        "held"
    );
    assert_eq!(count(&server, &["LLEN", QUEUE]), 0, "all dropped as dead");
    let dropped = Instant::now();
    tokio::time::timeout(
        lease * 2,
        eventually("every waiter queued again", || async {
            count(&server, &["LLEN", QUEUE]) == WAITERS as u64
        }),
    )
    .await
    .unwrap_or_else(|_| {
        panic!(
            "{} of {WAITERS} queued again {:?} after the drop: the waiters not sent every time \
             wait for their own leases' renewal",
            count(&server, &["LLEN", QUEUE]),
            dropped.elapsed()
        )
    });
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    for w in waiting {
        assert_eq!(w.await.unwrap().unwrap(), Ownership::Owned);
    }
}
