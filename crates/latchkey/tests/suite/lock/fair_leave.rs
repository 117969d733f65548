//! A fair waiter leaving the queue (its wait cancelled) without a scan of
//! the queue: at an end of the queue its entry is taken off (with the dead
//! entries next to it), in the middle it stays without a lease, and the
//! hand-on skips it there. The waiters keep their order throughout.

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::{Client, LockGuard, Ownership};
use tokio::task::JoinHandle;

const QUEUE: &str = "{test:leaving}:queue";
const LEASES: &str = "{test:leaving}:leases";

fn count(server: &RedisServer, args: &[&str]) -> usize {
    server.command(args).unwrap().trim().parse().unwrap()
}

/// The queue's entries, and which of them still have a lease.
fn queue(server: &RedisServer) -> (Vec<String>, Vec<bool>) {
    let listed = server.command(&["LRANGE", QUEUE, "0", "-1"]).unwrap();
    let entries: Vec<String> = listed.lines().map(str::to_owned).collect();
    let leased = entries
        .iter()
        .map(|e| {
            !server
                .command(&["ZSCORE", LEASES, e])
                .unwrap()
                .trim()
                .is_empty()
        })
        .collect();
    (entries, leased)
}

struct Waiter {
    client: Client,
    waiting: JoinHandle<latchkey::Result<LockGuard>>,
}

impl Waiter {
    /// Cancels the wait, and waits for its leave to be done.
    async fn leave(self) {
        self.waiting.abort();
        assert!(self.waiting.await.is_err(), "cancelled, not returned");
        assert!(self.client.flush(Duration::from_secs(10)).await);
    }
}

#[tokio::test]
async fn a_waiter_leaving_the_middle_stays_dead_in_place_and_the_ends_are_trimmed() {
    let server = RedisServer::start();
    let holder = client(&server.url()).await;
    let ttl = Duration::from_secs(60);
    let held = holder.lock("leaving", ttl).unwrap().fair().unwrap();
    let held = held.acquire().await.unwrap();

    // Five waiters, queued one after the other (each on a client of its own).
    let mut waiters = Vec::new();
    for i in 1..=5 {
        let client = client(&server.url()).await;
        let lock = client.lock("leaving", ttl).unwrap().fair().unwrap();
        let waiting =
            tokio::spawn(async move { lock.acquire_until(Duration::from_secs(60)).await });
        eventually(&format!("waiter {i} queued"), || async {
            count(&server, &["LLEN", QUEUE]) == i
        })
        .await;
        waiters.push(Some(Waiter { client, waiting }));
    }
    let (entries, _) = queue(&server);
    let mut take = |i: usize| waiters[i - 1].take().expect("a waiter");

    // The second and the fourth leave: in the middle, their entries stay,
    // without a lease (no LREM reads the queue for them).
    take(2).leave().await;
    take(4).leave().await;
    assert_eq!(
        queue(&server),
        (entries.clone(), vec![true, false, true, false, true])
    );
    // The last leaves: its entry is taken off the tail, and the fourth's,
    // dead next to it, with it; the third is live and stays.
    take(5).leave().await;
    assert_eq!(
        queue(&server),
        (entries[..3].to_vec(), vec![true, false, true])
    );

    // The hand-on: to the first, then past the dead second to the third.
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    let first = take(1).waiting.await.unwrap().expect("the first gets it");
    let third = take(3);
    assert!(!third.waiting.is_finished());
    assert_eq!(first.release().await.unwrap(), Ownership::Owned);
    let third = third
        .waiting
        .await
        .unwrap()
        .expect("the third gets it next");
    assert_eq!(
        count(&server, &["LLEN", QUEUE]),
        0,
        "the dead entry was dropped"
    );
    assert_eq!(third.release().await.unwrap(), Ownership::Owned);
}
