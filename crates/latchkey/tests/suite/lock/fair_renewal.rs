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

fn fair(c: &Client) -> Lock {
    c.lock("renewal", TTL)
        .unwrap()
        .fair_with_lease(LEASE)
        .unwrap()
}

fn count(server: &RedisServer, args: &[&str]) -> u64 {
    server.command(args).unwrap().trim().parse().unwrap()
}

/// Scripts the server has run so far (`EVALSHA`, and `EVAL` after a
/// `NOSCRIPT`).
fn scripts_run(server: &RedisServer) -> u64 {
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

    // The queue is served whole once the holder releases.
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    for w in waiting {
        assert_eq!(w.await.unwrap().unwrap(), Ownership::Owned);
    }
    assert_eq!(count(&server, &["EXISTS", QUEUE, LEASES]), 0);
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
