//! A semaphore's, a read-write lock's and an election's hold ended and
//! renewed by its owner token alone (what a stateless door does between a
//! caller's calls): the guard's own scripts, so a stale or foreign token
//! changes nothing, and the waiters are woken as by the guard.

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::{Error, Ownership, RwAccess};
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(60);
const LONGER: Duration = Duration::from_secs(600);

/// Milliseconds left to `member` of the sorted set `key` (its score is its
/// expiry in server ms).
async fn left_ms(conn: &mut redis::aio::MultiplexedConnection, key: &[u8], member: &str) -> i64 {
    let score: Option<f64> = conn.zscore(key, member).await.unwrap();
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    score.map_or(-1, |s| s as i64 - (secs * 1000 + micros / 1000))
}

#[tokio::test]
async fn a_semaphore_hold_of_k_permits_is_extended_and_released_by_its_token() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let mut conn = raw(&redis.url()).await;
    let pool = client.semaphore("tokens-pool", 3, TTL).unwrap();
    let token = pool.try_acquire_many(2).await.unwrap().unwrap().forget();
    let other = pool.try_acquire().await.unwrap().unwrap();
    assert!(pool.try_acquire().await.unwrap().is_none(), "all 3 held");

    // Every member of the hold is renewed, and nothing else.
    assert_eq!(
        pool.extend_token(&token, 2, LONGER).await.unwrap(),
        Ownership::Owned
    );
    for member in [token.clone(), format!("{token}#2")] {
        assert!(left_ms(&mut conn, pool.key(), &member).await > TTL.as_millis() as i64);
    }
    assert!(left_ms(&mut conn, pool.key(), other.token()).await <= TTL.as_millis() as i64);
    assert_eq!(
        pool.extend_token("lk2:not-a-holder", 1, LONGER)
            .await
            .unwrap(),
        Ownership::Expired
    );

    // A waiter for two permits is woken by the release by token.
    let waiting = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.acquire_many_until(2, Duration::from_secs(20)).await })
    };
    assert_eq!(
        pool.release_token(&token, 2).await.unwrap(),
        Ownership::Owned
    );
    let woken = waiting
        .await
        .unwrap()
        .expect("the waiter gets both permits");
    assert_eq!(woken.permits(), 2);
    assert_eq!(
        pool.release_token(&token, 2).await.unwrap(),
        Ownership::Expired,
        "a second release finds nothing"
    );
    let holders: Vec<String> = pool
        .holders()
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.token)
        .collect();
    assert_eq!(
        holders.len(),
        3,
        "the waiter's two and the other: {holders:?}"
    );
    assert!(
        !holders.iter().any(|h| h.starts_with(&token)),
        "{holders:?}"
    );

    // Bad input, before anything is sent.
    assert!(matches!(
        pool.release_token(woken.token(), 0).await,
        Err(Error::InvalidCount { .. })
    ));
    assert!(matches!(
        pool.extend_token(woken.token(), 4, TTL).await,
        Err(Error::InvalidCount { .. })
    ));
    assert!(matches!(
        pool.extend_token(woken.token(), 2, Duration::ZERO).await,
        Err(Error::InvalidTtl { .. })
    ));
    assert_eq!(pool.holders().await.unwrap().len(), 3, "nothing changed");
}

#[tokio::test]
async fn a_read_write_lock_hold_is_extended_and_released_by_its_token_on_its_side() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let mut conn = raw(&redis.url()).await;
    let rw = client.rwlock("tokens-rw", TTL).unwrap();
    let reader = rw.try_read().await.unwrap().unwrap().forget();
    assert_eq!(
        rw.extend_token(&reader, RwAccess::Read, LONGER)
            .await
            .unwrap(),
        Ownership::Owned
    );
    assert!(left_ms(&mut conn, rw.readers_key(), &reader).await > TTL.as_millis() as i64);
    assert_eq!(
        rw.extend_token(&reader, RwAccess::Write, LONGER)
            .await
            .unwrap(),
        Ownership::Expired,
        "a reader's token is no writer's"
    );

    // A writer waits for the reader; the reader's release by token lets it in.
    let writing = {
        let rw = rw.clone();
        tokio::spawn(async move { rw.write_until(Duration::from_secs(20)).await })
    };
    assert_eq!(
        rw.release_token(&reader, RwAccess::Read).await.unwrap(),
        Ownership::Owned
    );
    let writer = writing.await.unwrap().expect("the writer gets in");
    assert_eq!(
        rw.release_token(&reader, RwAccess::Read).await.unwrap(),
        Ownership::Expired
    );

    // The writer's hold, by its token: another token finds it held by another.
    let token = writer.forget();
    assert_eq!(
        rw.extend_token("lk2:not-the-writer", RwAccess::Write, LONGER)
            .await
            .unwrap(),
        Ownership::HeldByOther
    );
    assert_eq!(
        rw.extend_token(&token, RwAccess::Write, LONGER)
            .await
            .unwrap(),
        Ownership::Owned
    );
    let pttl: i64 = conn.pttl(rw.writer_key()).await.unwrap();
    assert!(pttl > TTL.as_millis() as i64, "{pttl}");
    assert!(matches!(
        rw.extend_token(&token, RwAccess::Write, Duration::ZERO)
            .await,
        Err(Error::InvalidTtl { .. })
    ));
    assert_eq!(
        rw.release_token(&token, RwAccess::Write).await.unwrap(),
        Ownership::Owned
    );
    assert!(rw.try_write().await.unwrap().is_some(), "free again");
}

#[tokio::test]
async fn a_leadership_is_renewed_and_resigned_by_its_token() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let mut conn = raw(&redis.url()).await;
    let election = client.election("tokens-e", TTL).unwrap();
    let token = election.try_campaign("a").await.unwrap().unwrap().forget();
    assert_eq!(
        election.extend_token(&token, LONGER).await.unwrap(),
        Ownership::Owned
    );
    let pttl: i64 = conn.pttl("{test:tokens-e}:leader").await.unwrap();
    assert!(pttl > TTL.as_millis() as i64, "{pttl}");
    assert_eq!(
        election
            .extend_token("lk2:not-the-leader", LONGER)
            .await
            .unwrap(),
        Ownership::HeldByOther
    );
    assert_eq!(
        election.resign_token("lk2:not-the-leader").await.unwrap(),
        Ownership::HeldByOther
    );
    assert_eq!(
        election.leader().await.unwrap().map(|l| l.value),
        Some(b"a".to_vec())
    );

    // A candidate waiting is elected at the resignation by token.
    let campaigning = {
        let election = election.clone();
        tokio::spawn(async move { election.campaign_until("b", Duration::from_secs(20)).await })
    };
    assert_eq!(
        election.resign_token(&token).await.unwrap(),
        Ownership::Owned
    );
    let next = campaigning.await.unwrap().expect("the candidate leads");
    assert_eq!(
        election.leader().await.unwrap().map(|l| l.value),
        Some(b"b".to_vec())
    );
    assert_eq!(
        election.resign_token(&token).await.unwrap(),
        Ownership::HeldByOther,
        "the old leader's token resigns nobody else"
    );
    assert_eq!(next.resign().await.unwrap(), Ownership::Owned);
    assert_eq!(
        election.resign_token(&token).await.unwrap(),
        Ownership::Expired
    );
}

#[tokio::test]
async fn a_key_of_another_type_is_a_typed_error_and_stays_as_it_was() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let mut conn = raw(&redis.url()).await;
    let pool = client.semaphore("tokens-typed", 2, TTL).unwrap();
    let rw = client.rwlock("tokens-typed", TTL).unwrap();
    let election = client.election("tokens-typed", TTL).unwrap();
    for key in [pool.key(), rw.readers_key()] {
        let _: () = conn.set(key, "not a sorted set").await.unwrap();
    }
    let _: () = conn
        .hset("{test:tokens-typed}:leader", "f", "not a string")
        .await
        .unwrap();
    let outcomes = [
        pool.release_token("lk2:t", 1).await.err(),
        pool.extend_token("lk2:t", 1, TTL).await.err(),
        rw.release_token("lk2:t", RwAccess::Read).await.err(),
        rw.extend_token("lk2:t", RwAccess::Read, TTL).await.err(),
        election.extend_token("lk2:t", TTL).await.err(),
        election.resign_token("lk2:t").await.err(),
    ];
    for (i, outcome) in outcomes.into_iter().enumerate() {
        let code = outcome.map(|e| e.code());
        assert_eq!(code, Some("WRONG_TYPE"), "call {i}");
    }
    let kept: String = conn.get(pool.key()).await.unwrap();
    assert_eq!(kept, "not a sorted set");
    let field: String = conn.hget("{test:tokens-typed}:leader", "f").await.unwrap();
    assert_eq!(field, "not a string");
}
