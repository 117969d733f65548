//! A fair lock's queue leases, renewed once per process per lock
//! (`primitives/lock/fair/renewer.rs`): what waiting costs Redis does not
//! grow with the waiters of one process, and no lease lapses. Against a
//! real redis-server.

use crate::common;

use std::time::Duration;

use super::fair::server_ms;
use common::*;
use latchkey::{Client, Lock, Ownership};

const TTL: Duration = Duration::from_secs(30);
/// Renewed every 200 ms.
const LEASE: Duration = Duration::from_millis(600);
const QUEUE: &str = "{test:renewal}:queue";
const LEASES: &str = "{test:renewal}:leases";
const ALIVE: &str = "{test:renewal}:alive";

fn fair(c: &Client) -> Lock {
    c.lock("renewal", TTL)
        .unwrap()
        .fair_with_lease(LEASE)
        .unwrap()
}

pub(super) fn count(server: &RedisServer, args: &[&str]) -> u64 {
    server.command(args).unwrap().trim().parse().unwrap()
}

/// Scripts the server has run so far (`EVALSHA`, and `EVAL` after a
/// `NOSCRIPT`).
pub(super) fn scripts_run(server: &RedisServer) -> u64 {
    let stats = server.command(&["INFO", "commandstats"]).unwrap();
    stats
        .lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            let calls = l.split_once("calls=")?.1;
            calls.split(',').next()?.parse::<u64>().ok()
        })
        .sum()
}

#[tokio::test]
async fn one_script_renews_every_queued_waiter_of_a_process() {
    const WAITERS: usize = 64;
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let held = fair(&a).try_acquire().await.unwrap().expect("free");
    let mut waiting = Vec::new();
    for _ in 0..WAITERS {
        let lock = fair(&b);
        waiting.push(tokio::spawn(async move {
            let guard = lock.acquire_until(Duration::from_secs(60)).await?;
            guard.release().await
        }));
    }
    eventually("every waiter queued", || async {
        count(&server, &["LLEN", QUEUE]) == WAITERS as u64
    })
    .await;

    // Nine renewal intervals of doing nothing but waiting. One script per
    // waiter per interval (how waiters used to renew) would be 576.
    // An entry whose own lease ends after this was renewed since.
    let first_renewal = server_ms(&server) + LEASE.as_millis() as u64 * 15;
    let before = scripts_run(&server);
    tokio::time::sleep(LEASE * 3).await;
    let renewals = scripts_run(&server) - before;
    assert!(
        renewals <= 32,
        "{renewals} scripts in 9 renewal intervals of {WAITERS} waiters of one process"
    );
    // And every lease was kept: each entry's deadline is still ahead.
    let now = server_ms(&server).to_string();
    let live = count(&server, &["ZCOUNT", LEASES, &now, "+inf"]);
    assert_eq!(live, WAITERS as u64, "queue leases kept");
    // The renewals kept the process's record, not each entry: most
    // entries' own (long) leases are as their waiters queued them.
    let renewed = count(
        &server,
        &["ZCOUNT", LEASES, &format!("({first_renewal}"), "+inf"],
    );
    assert!(
        renewed <= 8,
        "{renewed} of {WAITERS} entries' own leases renewed in 9 renewal intervals"
    );
    let record_left = count(&server, &["ZCOUNT", ALIVE, &now, "+inf"]);
    assert_eq!(record_left, 1, "the process's record kept");

    // The queue is served whole once the holder releases.
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    for w in waiting {
        assert_eq!(w.await.unwrap().unwrap(), Ownership::Owned);
    }
    assert_eq!(
        count(&server, &["EXISTS", QUEUE, LEASES, ALIVE]),
        0,
        "a drained queue leaves no key"
    );
}

/// Waiters that waited longer than their hand-off TTL are handed the lock
/// without asking Redis again: the first hand-off to the process makes its
/// renewal task prove every other entry still queued, so each hears its
/// hand-off with a fresh proof (a stale one costs a round trip).
#[tokio::test]
async fn a_long_wait_ends_in_hand_offs_that_cost_no_extra_round_trip() {
    const WAITERS: usize = 32;
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let held = fair(&a).try_acquire().await.unwrap().expect("free");
    let (done_tx, mut done) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..WAITERS {
        let lock = fair(&b);
        let done_tx = done_tx.clone();
        tokio::spawn(async move {
            let guard = lock.acquire_until(Duration::from_secs(60)).await;
            let released = match guard {
                Ok(g) => g.release().await.ok(),
                Err(_) => None,
            };
            let _ = done_tx.send(released);
        });
    }
    eventually("every waiter queued", || async {
        count(&server, &["LLEN", QUEUE]) == WAITERS as u64
    })
    .await;
    // Waiting twice the hand-off TTL (the lease): the proofs the waiters
    // got when they queued are stale now.
    tokio::time::sleep(LEASE * 2).await;
    let before = scripts_run(&server);
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    for _ in 0..WAITERS {
        assert_eq!(done.recv().await.unwrap(), Some(Ownership::Owned));
    }
    // One release script per hand-off, and a few renewals (and, on a
    // loaded machine, a few waiters heard before the proof came back); a
    // waiter that asks again would add one each: 24 more.
    let scripts = scripts_run(&server) - before;
    assert!(
        scripts <= WAITERS as u64 + 1 + 12,
        "{scripts} scripts for {WAITERS} hand-offs after a long wait"
    );
}

#[tokio::test]
async fn the_head_of_many_waiters_takes_a_lock_whose_holder_died() {
    const WAITERS: usize = 8;
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let short = a
        .lock("renewal", Duration::from_millis(500))
        .unwrap()
        .fair_with_lease(LEASE)
        .unwrap();
    std::mem::forget(short.try_acquire().await.unwrap().expect("free"));
    let (done_tx, mut done) = tokio::sync::mpsc::unbounded_channel();
    for i in 0..WAITERS {
        let lock = fair(&b);
        let done_tx = done_tx.clone();
        tokio::spawn(async move {
            let guard = lock.acquire_until(Duration::from_secs(30)).await;
            let _ = done_tx.send((i, guard.is_ok()));
            if let Ok(guard) = guard {
                assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
            }
        });
        // Queued in this order.
        eventually("queued", || async {
            count(&server, &["LLEN", QUEUE]) == i as u64 + 1
        })
        .await;
    }
    // Nothing releases: the renewal task sees the holder's key expire and
    // wakes the head, and the queue is served in arrival order.
    for expected in 0..WAITERS {
        let (i, ok) = done.recv().await.unwrap();
        assert!(ok, "waiter {i} got the lock");
        assert_eq!(i, expected, "arrival order");
    }
}

/// The renewal task of a lock runs on the runtime of the waiter that
/// started it. When that runtime shuts down while a waiter of another
/// runtime still waits on the same client, that waiter's lease must go on
/// being renewed (by a task of its own runtime), not lapse.
#[test]
fn a_waiter_outlives_the_runtime_its_renewal_task_ran_on() {
    let server = RedisServer::start();
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    };
    let (ours, other) = (runtime(), runtime());
    ours.block_on(async {
        let (a, b) = (client(&server.url()).await, client(&server.url()).await);
        let held = fair(&a).try_acquire().await.unwrap().expect("free");
        // b's subscriber starts on this runtime (a wait on another name),
        // so that shutting the other down leaves b's connections alive.
        let elsewhere = a.lock("elsewhere", TTL).unwrap().fair().unwrap();
        let _elsewhere = elsewhere.try_acquire().await.unwrap().expect("free");
        let waiting_elsewhere = b.lock("elsewhere", TTL).unwrap().fair().unwrap();
        let _parked = tokio::spawn(async move { waiting_elsewhere.acquire().await });
        eventually("b listens", || async {
            count(&server, &["LLEN", "{test:elsewhere}:queue"]) == 1
        })
        .await;

        // The first waiter on the lock runs on the other runtime: the
        // lock's renewal task starts there.
        let first = fair(&b);
        other.spawn(async move { first.acquire_until(Duration::from_secs(60)).await });
        eventually("the first waiter queued", || async {
            count(&server, &["LLEN", QUEUE]) == 1
        })
        .await;
        let second = fair(&b);
        let second = tokio::spawn(async move {
            let guard = second.acquire_until(Duration::from_secs(60)).await?;
            guard.release().await
        });
        eventually("the second waiter queued", || async {
            count(&server, &["LLEN", QUEUE]) == 2
        })
        .await;

        other.shutdown_background();
        // Three leases on, the process's record (which keeps its entries
        // live) is still renewed, by the second waiter's new task: it was
        // renewed within the last lease.
        tokio::time::sleep(LEASE * 3).await;
        let now = server_ms(&server);
        let records = server
            .command(&["ZRANGEBYSCORE", ALIVE, "0", "+inf", "WITHSCORES"])
            .unwrap();
        let deadline: u64 = records
            .lines()
            .nth(1)
            .and_then(|d| d.trim().parse().ok())
            .unwrap_or_else(|| panic!("one record: {records:?}"));
        assert!(
            deadline > now + LEASE.as_millis() as u64 / 3,
            "the record was renewed: {deadline} at {now}"
        );
        assert_eq!(held.release().await.unwrap(), Ownership::Owned);
        assert_eq!(second.await.unwrap().unwrap(), Ownership::Owned);
    });
}
