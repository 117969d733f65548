//! A `Client` made from a Redlock: its locks are the Redlock's (held by a
//! majority), it closes as the Redlock does, and everything that is not a
//! lock is refused with `Unsupported`.

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::{Client, Error, Ownership, Redlock};

/// Whether `key` exists on `server`, asked over a fresh connection.
fn has_key(server: &RedisServer, key: &str) -> bool {
    server.command(&["EXISTS", key]).unwrap() == "1"
}

async fn redlock_client(servers: &[RedisServer]) -> Client {
    let mut clients = Vec::new();
    for s in servers {
        clients.push(client(&s.url()).await);
    }
    Client::from(Redlock::new(clients).unwrap())
}

#[tokio::test]
async fn a_client_made_from_a_redlock_locks_on_a_majority_and_closes() {
    let mut servers = RedisServer::start_many(3);
    let client = redlock_client(&servers).await;
    let redlock = client.redlock().expect("made from a Redlock");
    assert_eq!((redlock.instances(), redlock.quorum()), (3, 2));
    assert_eq!(client.prefix(), b"test:");
    let addresses = client.server();
    assert_eq!(addresses.split(", ").count(), 3, "{addresses}");
    assert!(format!("{client:?}").contains("Redlock"));

    // One instance down: two of three are a majority.
    servers[2].kill();
    let lock = client.lock("across", Duration::from_secs(5)).unwrap();
    let guard = lock
        .try_acquire()
        .await
        .unwrap()
        .expect("2 of 3 are a majority");
    assert!(has_key(&servers[0], "test:across") && has_key(&servers[1], "test:across"));
    // The Redlock handle and the client share the group: the lock is busy
    // to both.
    let twin = redlock.lock("across", Duration::from_secs(5)).unwrap();
    assert!(
        twin.try_acquire().await.unwrap().is_none(),
        "acquired twice"
    );

    assert!(client.close(Duration::from_secs(5)).await);
    assert!(!guard.is_held(), "close ends the hold");
    assert!(!has_key(&servers[0], "test:across") && !has_key(&servers[1], "test:across"));
    assert_eq!(guard.release().await.unwrap(), Ownership::Expired);
    assert!(matches!(lock.try_acquire().await, Err(Error::ClientClosed)));
}

#[tokio::test]
async fn a_client_made_from_a_redlock_refuses_what_is_not_a_lock() {
    let servers = RedisServer::start_many(3);
    let client = redlock_client(&servers).await;
    let ttl = Duration::from_secs(5);
    let refused = |e: Error| match e {
        Error::Unsupported(why) => {
            assert!(why.contains("a Redlock client has locks only"), "{why}");
            why
        }
        other => panic!("expected Unsupported, got {other:?}"),
    };
    let why = refused(client.semaphore("s", 2, ttl).unwrap_err());
    assert!(why.starts_with("semaphores on a Redlock"), "{why}");
    refused(client.rwlock("rw", ttl).unwrap_err());
    refused(client.latch("l", ttl).unwrap_err());
    refused(client.barrier("b", 2, ttl).unwrap_err());
    refused(client.election("e", ttl).unwrap_err());
    refused(client.fenced("f").unwrap_err());
    refused(client.inspect("x").await.unwrap_err());
    refused(client.describe("x").await.unwrap_err());
    refused(client.list_all("*").await.unwrap_err());
    refused(client.revoke("x").await.unwrap_err());
    refused(client.request_release("x").await.unwrap_err());
    refused(client.lock_waiters(&[b"x".as_slice()]).await.unwrap_err());
    refused(client.signal("x", "hi").await.unwrap_err());
    refused(client.listen(["x"]).await.unwrap_err());
    refused(
        client
            .wait("x", Duration::from_millis(10))
            .await
            .unwrap_err(),
    );
    // Several locks at once: refused as `Redlock::lock_all` refuses them.
    assert!(matches!(
        client.lock_all(&["a", "b"], ttl),
        Err(Error::Unsupported(_))
    ));
    // A Redlock's client is no instance of another Redlock.
    assert!(matches!(
        Redlock::new(vec![client.clone()]),
        Err(Error::InvalidInput(_))
    ));
    // A client of one server has no Redlock.
    assert!(common::client(&servers[0].url()).await.redlock().is_none());
}
