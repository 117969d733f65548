//! `Client::keep`: a hold the client keeps until the program releases it,
//! it is lost, or the client is closed, whoever drops the handles; shared
//! by its clones and released through any of them.

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::{Error, LostReason, Ownership};

const TTL: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_kept_hold_outlives_every_handle_until_the_client_closes() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    // Short, renewed: were the hold dropped, its key would go at once
    // (released) or within a TTL (no watchdog left to renew it).
    let ttl = Duration::from_millis(300);
    let guard = c
        .lock("k-kept", ttl)
        .unwrap()
        .with_watchdog()
        .acquire()
        .await
        .unwrap();
    let token = guard.token().to_owned();
    let kept = c.keep(Box::new(guard)).unwrap();
    drop(kept);
    tokio::time::sleep(ttl * 4).await;
    assert_eq!(
        server.command(&["GET", "test:k-kept"]).unwrap(),
        token,
        "still held, renewed"
    );

    assert!(c.close(Duration::from_secs(10)).await);
    assert_eq!(
        server.command(&["EXISTS", "test:k-kept"]).unwrap(),
        "0",
        "released by the close"
    );
}

#[tokio::test]
async fn any_clone_releases_and_the_others_find_it_ended() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let guard = c
        .lock("k-shared", TTL)
        .unwrap()
        .with_fencing()
        .acquire()
        .await
        .unwrap();
    let fence = guard.issued_fencing_token().expect("fenced");
    let kept = c.keep(Box::new(guard)).unwrap();
    let other = kept.clone();
    assert!(other.is_held());
    assert_eq!(other.confirm().await.unwrap(), Ownership::Owned);

    let ended = tokio::spawn({
        let kept = kept.clone();
        async move { kept.ended().await }
    });
    assert_eq!(kept.release().await.unwrap(), Some(Ownership::Owned));
    tokio::time::timeout(Duration::from_secs(5), ended)
        .await
        .expect("told")
        .unwrap();
    assert_eq!(other.release().await.unwrap(), None, "released already");
    assert_eq!(other.forget().await, None);
    assert!(other.is_ended() && !other.is_held());
    assert!(matches!(
        other.extend(TTL).await,
        Err(Error::NotHeld { .. })
    ));
    assert!(matches!(
        other.fencing_token().await,
        Err(Error::NotHeld { .. })
    ));
    // What it was stays readable.
    assert_eq!(other.issued_fencing_token(), Some(fence));
    assert_eq!(other.name(), b"k-shared");
    assert_eq!(other.lost_reason(), None);
    assert_eq!(server.command(&["EXISTS", "test:k-shared"]).unwrap(), "0");
}

#[tokio::test]
async fn a_release_that_finds_the_hold_taken_says_why() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let guard = c.lock("k-taken", TTL).unwrap().acquire().await.unwrap();
    let kept = c.keep(Box::new(guard)).unwrap();
    server
        .command(&["SET", "test:k-taken", "someone-else"])
        .unwrap();
    assert_eq!(kept.release().await.unwrap(), Some(Ownership::HeldByOther));
    assert_eq!(kept.lost_reason(), Some(LostReason::TakenOver));
    assert_eq!(
        server.command(&["GET", "test:k-taken"]).unwrap(),
        "someone-else"
    );
}

#[tokio::test]
async fn forget_leaves_the_key_and_returns_the_token() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let guard = c.lock("k-forget", TTL).unwrap().acquire().await.unwrap();
    let token = guard.token().to_owned();
    let kept = c.keep(Box::new(guard)).unwrap();
    assert_eq!(kept.forget().await.as_deref(), Some(token.as_str()));
    assert!(kept.is_ended());
    drop(kept);
    c.flush(Duration::from_secs(5)).await;
    assert_eq!(server.command(&["GET", "test:k-forget"]).unwrap(), token);
}

#[tokio::test]
async fn a_close_ends_kept_holds_and_refuses_to_keep_more() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let guard = c
        .semaphore("k-pool", 2, TTL)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let kept = c.keep(Box::new(guard)).unwrap();
    let late = c.lock("k-late", TTL).unwrap().acquire().await.unwrap();
    assert!(c.close(Duration::from_secs(10)).await);
    assert!(!kept.is_held());
    assert_eq!(kept.lost_reason(), Some(LostReason::Closed));
    tokio::time::timeout(Duration::from_secs(1), kept.lost())
        .await
        .expect("lost() fired");
    assert!(matches!(c.keep(Box::new(late)), Err(Error::ClientClosed)));
    assert_eq!(
        kept.release().await.unwrap(),
        Some(Ownership::Expired),
        "ended by the close"
    );
    assert_eq!(
        server.command(&["ZCARD", "{test:k-pool}:permits"]).unwrap(),
        "0"
    );
}

#[test]
fn the_last_handle_dropped_off_the_runtime_ends_nothing() {
    // A garbage collector's thread, outside any runtime, drops the last
    // handle: nothing panics, and the client still keeps the hold.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = RedisServer::start();
    let (c, kept) = runtime.block_on(async {
        let c = client(&server.url()).await;
        let guard = c.lock("k-gc", TTL).unwrap().acquire().await.unwrap();
        (c.clone(), c.keep(Box::new(guard)).unwrap())
    });
    std::thread::spawn(move || drop(kept))
        .join()
        .expect("no panic");
    // Still kept by the client: nothing was released.
    assert_eq!(server.command(&["EXISTS", "test:k-gc"]).unwrap(), "1");
    runtime.block_on(async { assert!(c.close(Duration::from_secs(10)).await) });
    assert_eq!(server.command(&["EXISTS", "test:k-gc"]).unwrap(), "0");
}

#[tokio::test]
async fn a_weak_client_reaches_a_client_only_its_kept_holds_keep_alive() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    weak_reaches_what_kept_holds_keep(c, &[server]).await;
}

#[tokio::test]
async fn a_weak_redlock_client_reaches_it_as_well() {
    let servers = RedisServer::start_many(3);
    let mut clients = Vec::new();
    for s in &servers {
        clients.push(client(&s.url()).await);
    }
    let c = latchkey::Client::from(latchkey::Redlock::new(clients).unwrap());
    weak_reaches_what_kept_holds_keep(c, &servers).await;
}

async fn weak_reaches_what_kept_holds_keep(c: latchkey::Client, servers: &[RedisServer]) {
    let weak = c.downgrade();
    let guard = c
        .lock("k-weak", TTL)
        .unwrap()
        .with_watchdog()
        .acquire()
        .await
        .unwrap();
    drop(c.keep(Box::new(guard)).unwrap());
    drop(c);
    // Every handle of the program's is gone: the kept hold keeps the client.
    let c = weak.upgrade().expect("kept alive by its kept hold");
    assert!(c.close(Duration::from_secs(10)).await);
    for server in servers {
        assert_eq!(
            server.command(&["EXISTS", "test:k-weak"]).unwrap(),
            "0",
            "released by the close"
        );
    }
    drop(c);
    // The close let go of the kept hold: nothing keeps the client now.
    eventually("the client is dropped", || async {
        weak.upgrade().is_none()
    })
    .await;
}
