//! A barrier gone under a waiting party (a restart without persistence;
//! `FLUSHALL` stands for it) and made again by another party's arrival:
//! its generations repeat the old one's, so only the barrier's identity
//! (`id`, docs/protocol.md) tells the waiting party that nobody released
//! its generation. It must never pass.

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::{Client, Error};

const TTL: Duration = Duration::from_secs(60);
const WAIT: Duration = Duration::from_secs(10);

async fn wipe(url: &str) {
    let mut raw = raw(url).await;
    let _: () = redis::cmd("FLUSHALL").query_async(&mut raw).await.unwrap();
}

async fn arrived(client: &Client, name: &str, n: u64) -> Option<(u64, u64)> {
    client.barrier(name, n, TTL).unwrap().state().await.unwrap()
}

#[tokio::test]
async fn a_party_that_gives_up_after_its_barrier_was_made_again_did_not_pass() {
    let redis = RedisServer::start();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let party_a = a.barrier("remade", 3, TTL).unwrap();
    let waits = tokio::spawn(async move {
        party_a
            .arrive_and_wait_until(Duration::from_millis(1500))
            .await
    });
    eventually("A arrived", || async {
        arrived(&b, "remade", 3).await == Some((0, 1))
    })
    .await;
    wipe(&redis.url()).await;
    // B makes the barrier again: generation 0 once more, B's arrival in it.
    let party_b = b.barrier("remade", 3, TTL).unwrap();
    let b_waits = tokio::spawn(async move { party_b.arrive_and_wait_until(WAIT).await });
    eventually("B arrived in the new barrier", || async {
        arrived(&b, "remade", 3).await == Some((0, 1))
    })
    .await;
    // At its deadline A reads the barrier (another identity: gone) or,
    // when the deadline comes first, gives up and its leave finds no
    // arrival of its own in it (gone too); never "released meanwhile".
    let outcome = waits.await.unwrap();
    assert!(
        matches!(
            outcome,
            Err(Error::NotFound {
                what: "barrier",
                ..
            } | Error::WaitTimedOut { .. })
        ),
        "A's generation was never released: {outcome:?}"
    );
    // B's arrival is untouched by A's leave.
    assert_eq!(arrived(&b, "remade", 3).await, Some((0, 1)));
    b_waits.abort();
}

#[tokio::test]
async fn the_release_of_a_barrier_made_again_does_not_release_the_old_party() {
    let redis = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(client(&redis.url()).await);
    }
    let party_a = clients[0].barrier("again", 2, TTL).unwrap();
    let waits = tokio::spawn(async move { party_a.arrive_and_wait_until(WAIT).await });
    eventually("A arrived", || async {
        arrived(&clients[1], "again", 2).await == Some((0, 1))
    })
    .await;
    wipe(&redis.url()).await;
    // B and C make the barrier again and release its generation 0, which
    // publishes "0": the number of A's generation too.
    let party_b = clients[1].barrier("again", 2, TTL).unwrap();
    let b_waits = tokio::spawn(async move { party_b.arrive_and_wait_until(WAIT).await });
    eventually("B arrived in the new barrier", || async {
        arrived(&clients[2], "again", 2).await == Some((0, 1))
    })
    .await;
    let party_c = clients[2].barrier("again", 2, TTL).unwrap();
    assert_eq!(party_c.arrive_and_wait_until(WAIT).await.unwrap(), 0);
    assert_eq!(b_waits.await.unwrap().unwrap(), 0);
    // A hears "0" but reads another barrier: gone, before its deadline.
    let outcome = tokio::time::timeout(WAIT / 2, waits)
        .await
        .expect("A hears the release and decides at once")
        .unwrap();
    assert!(
        matches!(
            outcome,
            Err(Error::NotFound {
                what: "barrier",
                ..
            })
        ),
        "A's generation was never released: {outcome:?}"
    );
}

#[tokio::test]
async fn the_leave_script_tells_a_release_from_a_barrier_made_again() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let mut raw = raw(&redis.url()).await;
    let key = "{test:leave}:barrier";
    // A barrier of 2 released once: generation 1 now, its id kept.
    let barrier = client.barrier("leave", 2, TTL).unwrap();
    let other = barrier.clone();
    let first = tokio::spawn(async move { other.arrive_and_wait_until(WAIT).await });
    eventually("one party arrived", || async {
        barrier.state().await.unwrap() == Some((0, 1))
    })
    .await;
    assert_eq!(barrier.arrive_and_wait_until(WAIT).await.unwrap(), 0);
    assert_eq!(first.await.unwrap().unwrap(), 0);
    let id: String = redis::cmd("HGET")
        .arg(key)
        .arg("id")
        .query_async(&mut raw)
        .await
        .unwrap();
    let leaving = raw.clone();
    let answer = async |args: &[&str]| -> i64 {
        redis::cmd("EVAL")
            .arg(latchkey::protocol::script_text("barrier_leave.lua").unwrap())
            .arg(1)
            .arg(key)
            .arg(args)
            .query_async(&mut leaving.clone())
            .await
            .unwrap()
    };
    assert_eq!(answer(&["t", &id, "0"]).await, 0, "released");
    assert_eq!(answer(&["t", &id, "1"]).await, -1, "not released");
    assert_eq!(answer(&["t", "other", "0"]).await, -1, "made again");
    assert_eq!(answer(&["t"]).await, 0, "an arrival cancelled in flight");
    // A 0.3 client's release drops the id: judged by the generation alone.
    let _: () = redis::cmd("HDEL")
        .arg(key)
        .arg("id")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(answer(&["t", "other", "0"]).await, 0, "0.3's release");
    wipe(&redis.url()).await;
    assert_eq!(answer(&["t", &id, "0"]).await, -1, "gone");
}
