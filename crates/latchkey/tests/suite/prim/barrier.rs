//! Barriers: the N-th arrival releases all N together, the next generation
//! starts clean, a party that gives up takes its arrival back, bad input is
//! a typed error.

use crate::common;

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
                tokio::spawn(async move { barrier.arrive_and_wait_until(WAIT).await })
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
        assert_eq!(last.arrive_and_wait_until(WAIT).await.unwrap(), generation);
        for party in join_all(early).await {
            assert_eq!(party.unwrap().unwrap(), generation);
        }
        assert_eq!(
            arrived(&clients[2], "step").await,
            Some((generation + 1, 0)),
            "the next generation starts with nobody arrived"
        );
    }
    // Nothing of a released generation is left in the hash, not even its N.
    let mut raw = raw(&redis.url()).await;
    let mut fields: Vec<String> = raw.hkeys("{test:step}:barrier").await.unwrap();
    fields.sort();
    // (`id`: the barrier's identity, kept by a release.)
    assert_eq!(fields, ["arrived", "gen", "id"]);
}

#[tokio::test]
async fn a_party_that_times_out_takes_its_arrival_back() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let barrier = client.barrier("lonely", 2, TTL).unwrap();
    assert!(matches!(
        barrier
            .arrive_and_wait_until(Duration::from_millis(200))
            .await,
        Err(latchkey::Error::WaitTimedOut { .. })
    ));
    assert_eq!(barrier.state().await.unwrap(), Some((0, 0)));
    // So the next two parties are a generation of their own.
    let other = barrier.clone();
    let first = tokio::spawn(async move { other.arrive_and_wait_until(WAIT).await });
    eventually("one party arrived", || async {
        barrier.state().await.unwrap() == Some((0, 1))
    })
    .await;
    assert!(!first.is_finished());
    assert_eq!(barrier.arrive_and_wait_until(WAIT).await.unwrap(), 0);
    assert_eq!(first.await.unwrap().unwrap(), 0);
}

#[tokio::test]
async fn a_cancelled_party_takes_its_arrival_back() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let barrier = client.barrier("cancelled", 2, TTL).unwrap();
    let other = barrier.clone();
    let party = tokio::spawn(async move { other.arrive_and_wait_until(WAIT).await });
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
        client.barrier("b", u64::from(latchkey::limits::MAX_COUNT) + 1, TTL),
        Err(Error::InvalidCount { .. })
    ));

    let three = client.barrier("b", 3, TTL).unwrap();
    let waiting = tokio::spawn(async move { three.arrive_and_wait_until(WAIT).await });
    eventually("a party of three arrived", || async {
        arrived(&client, "b").await == Some((0, 1))
    })
    .await;
    let two = client.barrier("b", 2, TTL).unwrap();
    match two.arrive_and_wait_until(WAIT).await {
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
                barrier.arrive_and_wait_until(WAIT).await,
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
    assert!(matches!(
        barrier
            .arrive_and_wait_until(Duration::from_millis(50))
            .await,
        Err(latchkey::Error::WaitTimedOut { .. })
    ));
    eventually("the barrier is gone", || async {
        barrier.state().await.unwrap().is_none()
    })
    .await;
}

#[tokio::test]
async fn a_generation_nobody_waits_in_takes_the_next_arrivals_parties() {
    // After a release (or once every party gave up) the
    // next generation kept the old N and refused another with nobody waiting.
    let redis = RedisServer::start();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let alone = a.barrier("cycle", 1, TTL).unwrap();
    assert_eq!(alone.arrive_and_wait_until(WAIT).await.unwrap(), 0);
    // Generation 1, nobody waiting: a barrier of 2 may start it.
    let pair = a.barrier("cycle", 2, TTL).unwrap();
    let waiting = tokio::spawn(async move { pair.arrive_and_wait_until(WAIT).await });
    eventually("one party of two arrived", || async {
        arrived(&b, "cycle").await == Some((1, 1))
    })
    .await;
    // While it waits, its N binds.
    let three = b.barrier("cycle", 3, TTL).unwrap();
    assert!(matches!(
        three.arrive_and_wait_until(WAIT).await,
        Err(Error::PartiesMismatch {
            stored: 2,
            given: 3,
            ..
        })
    ));
    let pair = b.barrier("cycle", 2, TTL).unwrap();
    assert_eq!(pair.arrive_and_wait_until(WAIT).await.unwrap(), 1);
    assert_eq!(waiting.await.unwrap().unwrap(), 1);
    // A party that gives up alone leaves no N behind either.
    let four = a.barrier("cycle", 4, TTL).unwrap();
    assert!(matches!(
        four.arrive_and_wait_until(Duration::from_millis(50)).await,
        Err(latchkey::Error::WaitTimedOut { .. })
    ));
    assert_eq!(alone.arrive_and_wait_until(WAIT).await.unwrap(), 2);
}

#[tokio::test]
async fn a_barrier_lives_as_long_as_its_parties_wait() {
    // A TTL shorter than the wait made the key expire
    // under the first party; both timed out although both arrived.
    let redis = RedisServer::start();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let ttl = Duration::from_millis(200);
    let first = a.barrier("brief", 2, ttl).unwrap();
    let waiting = tokio::spawn(async move { first.arrive_and_wait_until(WAIT).await });
    eventually("the first party arrived", || async {
        b.barrier("brief", 2, ttl).unwrap().state().await.unwrap() == Some((0, 1))
    })
    .await;
    let mut raw = raw(&redis.url()).await;
    let pttl: i64 = raw.pttl("{test:brief}:barrier").await.unwrap();
    assert!(
        pttl > WAIT.as_millis() as i64 - 1000,
        "kept for the wait: {pttl}"
    );
    // Time passing beyond the TTL is the point here, not a signal.
    tokio::time::sleep(ttl * 3).await;
    let second = b.barrier("brief", 2, ttl).unwrap();
    assert_eq!(second.arrive_and_wait_until(WAIT).await.unwrap(), 0);
    assert_eq!(waiting.await.unwrap().unwrap(), 0);
    // Released: the key still lives for the first party's wait, so a party
    // that missed the message reads the release instead of a key gone (a
    // release that cut the TTL to the barrier's made it `NotFound`).
    let pttl: i64 = raw.pttl("{test:brief}:barrier").await.unwrap();
    assert!(
        pttl > WAIT.as_millis() as i64 - 5000,
        "kept after the release: {pttl}"
    );
    // Past the barrier's TTL, the generation read is the released one's
    // successor, of the same barrier.
    tokio::time::sleep(ttl * 3).await;
    assert_eq!(
        b.barrier("brief", 2, ttl).unwrap().state().await.unwrap(),
        Some((1, 0))
    );
}

/// `arrive_and_wait()` waits as long as it takes and is released by the
/// last party; `arrive_and_wait_until` alone fails with `Err(WaitTimedOut)`
/// and takes its arrival back.
#[tokio::test]
async fn arrive_and_wait_forever_is_released_and_until_times_out() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let barrier = client.barrier("forever", 2, TTL).unwrap();
    let until = std::time::Instant::now() + Duration::from_millis(50);
    assert!(matches!(
        barrier.arrive_and_wait_until(until).await,
        Err(Error::WaitTimedOut { .. })
    ));
    assert_eq!(barrier.state().await.unwrap(), Some((0, 0)));
    let first = barrier.clone();
    let party = tokio::spawn(async move { first.arrive_and_wait().await });
    eventually("the first party arrived", || async {
        barrier.state().await.unwrap() == Some((0, 1))
    })
    .await;
    assert_eq!(barrier.arrive_and_wait_until(WAIT).await.unwrap(), 0);
    assert_eq!(party.await.unwrap().unwrap(), 0);
}
