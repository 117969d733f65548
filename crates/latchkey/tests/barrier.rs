//! Barriers: the N-th arrival releases all N together, the next generation
//! starts clean, a party that gives up takes its arrival back, bad input is
//! a typed error.

mod common;

use std::time::Duration;

use common::*;
use futures_util::future::join_all;
use latchkey::{Client, Error};
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(60);
const WAIT: Duration = Duration::from_secs(10);

async fn arrived(client: &Client, name: &str) -> Option<(u64, u64)> {
    client.barrier(name, 3, TTL).unwrap().state().await.unwrap()
}

#[tokio::test]
async fn the_last_party_releases_all_together_and_the_next_generation_starts_clean() {
    let redis = RedisServer::start();
    // One client per party: separate connections, as separate processes have.
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(client(&redis.url()).await);
    }
    for generation in 0..2u64 {
        let early: Vec<_> = clients[..2]
            .iter()
            .map(|c| {
                let barrier = c.barrier("step", 3, TTL).unwrap();
                tokio::spawn(async move { barrier.arrive_and_wait(WAIT).await })
            })
            .collect();
        eventually("two parties arrived", || async {
            arrived(&clients[2], "step").await == Some((generation, 2))
        })
        .await;
        assert!(
            early.iter().all(|p| !p.is_finished()),
            "nobody is released before the last party arrives"
        );
        let last = clients[2].barrier("step", 3, TTL).unwrap();
        assert_eq!(last.arrive_and_wait(WAIT).await.unwrap(), Some(generation));
        for party in join_all(early).await {
            assert_eq!(party.unwrap().unwrap(), Some(generation));
        }
        assert_eq!(
            arrived(&clients[2], "step").await,
            Some((generation + 1, 0)),
            "the next generation starts with nobody arrived"
        );
    }
    // Nothing of a released generation is left in the hash.
    let mut raw = raw(&redis.url()).await;
    let fields: Vec<String> = raw.hkeys("{test:step}:barrier").await.unwrap();
    assert_eq!(fields.len(), 3, "parties, gen, arrived: {fields:?}");
}

#[tokio::test]
async fn a_party_that_times_out_takes_its_arrival_back() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let barrier = client.barrier("lonely", 2, TTL).unwrap();
    assert_eq!(
        barrier
            .arrive_and_wait(Duration::from_millis(200))
            .await
            .unwrap(),
        None
    );
    assert_eq!(barrier.state().await.unwrap(), Some((0, 0)));
    // So the next two parties are a generation of their own.
    let other = barrier.clone();
    let first = tokio::spawn(async move { other.arrive_and_wait(WAIT).await });
    eventually("one party arrived", || async {
        barrier.state().await.unwrap() == Some((0, 1))
    })
    .await;
    assert!(!first.is_finished());
    assert_eq!(barrier.arrive_and_wait(WAIT).await.unwrap(), Some(0));
    assert_eq!(first.await.unwrap().unwrap(), Some(0));
}

#[tokio::test]
async fn a_cancelled_party_takes_its_arrival_back() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let barrier = client.barrier("cancelled", 2, TTL).unwrap();
    let other = barrier.clone();
    let party = tokio::spawn(async move { other.arrive_and_wait(WAIT).await });
    eventually("the party arrived", || async {
        barrier.state().await.unwrap() == Some((0, 1))
    })
    .await;
    party.abort();
    assert!(party.await.unwrap_err().is_cancelled());
    assert!(client.flush(WAIT).await, "the arrival is taken back");
    assert_eq!(barrier.state().await.unwrap(), Some((0, 0)));
}

#[tokio::test]
async fn bad_input_is_a_typed_error() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    assert!(matches!(
        client.barrier("b", 0, TTL),
        Err(Error::InvalidCount { count: 0, .. })
    ));
    assert!(matches!(
        client.barrier("b", u64::from(latchkey::MAX_COUNT) + 1, TTL),
        Err(Error::InvalidCount { .. })
    ));

    let three = client.barrier("b", 3, TTL).unwrap();
    let waiting = tokio::spawn(async move { three.arrive_and_wait(WAIT).await });
    eventually("a party of three arrived", || async {
        arrived(&client, "b").await == Some((0, 1))
    })
    .await;
    let two = client.barrier("b", 2, TTL).unwrap();
    match two.arrive_and_wait(WAIT).await {
        Err(Error::PartiesMismatch { stored, given, .. }) => {
            assert_eq!((stored, given), (3, 2));
        }
        other => panic!("expected PartiesMismatch, got {other:?}"),
    }
    assert_eq!(arrived(&client, "b").await, Some((0, 1)), "nothing changed");
    waiting.abort();

    let mut raw = raw(&redis.url()).await;
    let _: () = raw.set("{test:str}:barrier", "x").await.unwrap();
    let _: () = raw
        .hset("{test:junk}:barrier", "gen", "many")
        .await
        .unwrap();
    for name in ["str", "junk"] {
        let barrier = client.barrier(name, 2, TTL).unwrap();
        assert!(
            matches!(
                barrier.arrive_and_wait(WAIT).await,
                Err(Error::WrongType { .. })
            ),
            "{name}"
        );
        assert!(
            matches!(barrier.state().await, Err(Error::WrongType { .. })),
            "{name}"
        );
    }
}

#[tokio::test]
async fn an_abandoned_barrier_disappears_at_its_ttl() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let barrier = client
        .barrier("gone", 2, Duration::from_millis(300))
        .unwrap();
    // It waits less than the TTL, so its arrival is taken back; the key
    // (generation 0) stays until the TTL.
    assert_eq!(
        barrier
            .arrive_and_wait(Duration::from_millis(50))
            .await
            .unwrap(),
        None
    );
    eventually("the barrier is gone", || async {
        barrier.state().await.unwrap().is_none()
    })
    .await;
}
