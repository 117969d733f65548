//! The single-instance lock: mutual exclusion, ownership, expiry, and the
//! typed errors for bad input and a sick Redis.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use latchkey::{Error, Ownership};
use redis::AsyncCommands;

const TASKS: usize = 32;
const ROUNDS: usize = 4;

/// One side of `two_processes_exclude_each_other`: TASKS tasks, each doing
/// ROUNDS read-sleep-write increments of a counter in Redis under the lock.
async fn contend(url: &str) {
    let client = client(url).await;
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let client = client.clone();
        let url = url.to_owned();
        tasks.push(tokio::spawn(async move {
            let lock = client.lock("counter", Duration::from_secs(5)).unwrap();
            let mut conn = raw(&url).await;
            for _ in 0..ROUNDS {
                let guard = lock.acquire_until(Duration::from_secs(60)).await.unwrap();
                let n: i64 = conn.get("counter-value").await.unwrap_or(0);
                // The sleep widens the race window a missing lock would expose.
                tokio::time::sleep(Duration::from_millis(1)).await;
                let _: () = conn.set("counter-value", n + 1).await.unwrap();
                assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper process: run by its parent test"]
async fn child_contender() {
    let url = helper_env("LATCHKEY_TEST_URL");
    contend(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_exclude_each_other() {
    let server = RedisServer::start();
    let mut child = spawn_child(
        concat!(module_path!(), "::child_contender"),
        &[("LATCHKEY_TEST_URL", server.url())],
    );
    contend(&server.url()).await;
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "child process failed: {status}");
    let mut conn = raw(&server.url()).await;
    let count: usize = conn.get("counter-value").await.unwrap();
    assert_eq!(
        count,
        2 * TASKS * ROUNDS,
        "lost updates: the lock let two holders in"
    );
}

#[tokio::test]
async fn only_the_owner_releases_or_extends() {
    let server = RedisServer::start();
    let client = client(&server.url()).await;
    let lock = client.lock("owned", Duration::from_millis(50)).unwrap();
    let first = lock.try_acquire().await.unwrap().expect("free lock");
    let first_token = first.fencing_token().await.unwrap();
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "held lock acquired twice"
    );

    // Let the first holder's TTL run out (timing is the point of the test).
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert!(
        !first.is_held(),
        "guard still believes it holds an expired lock"
    );
    // Long enough that the checks below, on a loaded machine, all run
    // while it holds: the first guard must find it someone else's.
    let second = client
        .lock("owned", Duration::from_secs(10))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("expired lock is free");
    assert!(second.fencing_token().await.unwrap() > first_token);
    // Asked again, the first guard's token is the one it was issued.
    assert_eq!(first.fencing_token().await.unwrap(), first_token);

    assert_eq!(
        first.extend(Duration::from_secs(1)).await.unwrap(),
        Ownership::HeldByOther
    );
    assert_eq!(first.release().await.unwrap(), Ownership::HeldByOther);
    let mut conn = raw(&server.url()).await;
    let holder: String = conn.get("test:owned").await.unwrap();
    assert_eq!(holder, second.token(), "a non-owner changed the lock");

    // The scenario again: the second holder's TTL, cut to 50 ms, runs out.
    assert_eq!(
        second.extend(Duration::from_millis(50)).await.unwrap(),
        Ownership::Owned
    );
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert_eq!(second.release().await.unwrap(), Ownership::Expired);
}

#[tokio::test]
async fn expiry_frees_the_lock_after_its_ttl() {
    let server = RedisServer::start();
    let client = client(&server.url()).await;
    let lock = client.lock("expiring", Duration::from_millis(200)).unwrap();
    let guard = lock.try_acquire().await.unwrap().unwrap();
    let mut conn = raw(&server.url()).await;
    let pttl: i64 = conn.pttl("test:expiring").await.unwrap();
    assert!((1..=200).contains(&pttl), "PTTL {pttl} not within the TTL");
    std::mem::forget(guard); // a holder that vanished without releasing
    assert!(lock.try_acquire().await.unwrap().is_none());
    // The scenario: the 200 ms TTL runs out.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let again = lock.try_acquire().await.unwrap();
    assert!(again.is_some(), "lock still held after its TTL");
}

#[tokio::test]
async fn script_flush_is_invisible() {
    let server = RedisServer::start();
    let client = client(&server.url()).await;
    let lock = client.lock("flushed", Duration::from_secs(5)).unwrap();
    let guard = lock.try_acquire().await.unwrap().unwrap();
    server.command(&["SCRIPT", "FLUSH"]).unwrap();
    assert_eq!(
        guard.extend(Duration::from_secs(5)).await.unwrap(),
        Ownership::Owned
    );
    server.command(&["SCRIPT", "FLUSH"]).unwrap();
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    server.command(&["SCRIPT", "FLUSH"]).unwrap();
    let again = lock
        .try_acquire()
        .await
        .unwrap()
        .expect("free after release");
    assert_eq!(again.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn a_wrong_type_key_is_a_typed_error() {
    let server = RedisServer::start();
    let client = client(&server.url()).await;
    server.command(&["HSET", "test:hashy", "f", "v"]).unwrap();
    let lock = client.lock("hashy", Duration::from_secs(1)).unwrap();
    match lock.try_acquire().await {
        Err(Error::WrongType { key }) => assert_eq!(key, "test:hashy"),
        other => panic!("expected WrongType, got {other:?}"),
    }
    // Through the acquire script's busy path too (a lock `with_fencing`,
    // and a waiter's attempts): an error, not a lock that looks busy.
    match lock.clone().with_fencing().try_acquire().await {
        Err(Error::WrongType { key }) => assert_eq!(key, "test:hashy"),
        other => panic!("expected WrongType, got {other:?}"),
    }
    assert!(matches!(
        lock.with_fencing()
            .acquire_until(Duration::from_millis(300))
            .await,
        Err(Error::WrongType { .. })
    ));
    assert_eq!(
        server.command(&["TYPE", "test:hashy"]).unwrap().trim(),
        "hash"
    );
    // A wrong-type fencing counter is caught too, naming the counter.
    server
        .command(&["LPUSH", "{test:fenced}:fence", "x"])
        .unwrap();
    let lock = client.lock("fenced", Duration::from_secs(1)).unwrap();
    // When the token is asked for, or at once for a lock `with_fencing`.
    let guard = lock.try_acquire().await.unwrap().expect("free");
    assert!(matches!(
        guard.fencing_token().await,
        Err(Error::BadFencingCounter { key }) if key == "{test:fenced}:fence"
    ));
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    assert!(matches!(
        lock.with_fencing().try_acquire().await,
        Err(Error::BadFencingCounter { key }) if key == "{test:fenced}:fence"
    ));
}

#[tokio::test]
async fn bad_names_and_ttls_are_typed_errors() {
    let server = RedisServer::start();
    let client = client(&server.url()).await;
    let ok = Duration::from_secs(1);
    assert!(matches!(
        client.lock("", ok),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        client.lock(vec![b'a'; 1025], ok),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        client.lock("x:fence", ok),
        Err(Error::InvalidName { .. })
    ));
    for ttl in [
        Duration::ZERO,
        Duration::from_micros(500),
        Duration::from_secs(86_401),
    ] {
        assert!(
            matches!(client.lock("x", ttl), Err(Error::InvalidTtl { .. })),
            "{ttl:?} accepted"
        );
    }
    let lock = client.lock("x", ok).unwrap();
    assert!(matches!(
        lock.clone().with_renewal_every(ok),
        Err(Error::InvalidInput(_))
    ));
    let guard = lock.try_acquire().await.unwrap().unwrap();
    assert!(matches!(
        guard.extend(Duration::ZERO).await,
        Err(Error::InvalidTtl { .. })
    ));
    // Binary names work.
    let binary = client.lock([0u8, 0xff, b'\n'], ok).unwrap();
    let g = binary
        .try_acquire()
        .await
        .unwrap()
        .expect("binary-named lock");
    assert_eq!(g.release().await.unwrap(), Ownership::Owned);
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn a_paused_redis_times_out_within_the_configured_timeout() {
    let server = RedisServer::start();
    let client = client(&server.url()).await; // 500 ms command timeout
    let lock = client.lock("paused", Duration::from_secs(1)).unwrap();
    server.pause();
    let started = Instant::now();
    let result = lock.try_acquire().await;
    let took = started.elapsed();
    server.resume();
    assert!(
        matches!(result, Err(Error::Timeout { .. })),
        "got {result:?}"
    );
    // Lower bound: it did wait for the server; upper: the timeout plus scheduling margin.
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_millis(1500),
        "took {took:?}"
    );
}

#[tokio::test]
async fn a_dead_redis_is_unreachable() {
    let mut server = RedisServer::start();
    let client = client(&server.url()).await;
    let lock = client.lock("dead", Duration::from_secs(1)).unwrap();
    server.kill();
    let started = Instant::now();
    let result = lock.try_acquire().await;
    assert!(
        matches!(
            result,
            Err(Error::Unreachable(_)) | Err(Error::Timeout { .. })
        ),
        "got {result:?}"
    );
    assert!(started.elapsed() < Duration::from_millis(1500));
    // And connecting to a dead server fails with Unreachable at once.
    let err = latchkey::Client::connect(&server.url()).await.unwrap_err();
    assert!(matches!(err, Error::Unreachable(_)), "got {err:?}");
}

#[tokio::test]
async fn wrong_credentials_are_an_auth_error() {
    let server = RedisServer::builder().password("s3cret").start();
    let url = format!("redis://127.0.0.1:{}/", server.port());
    let err = latchkey::Client::connect(&url).await.unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "no password: got {err:?}");
    let url = format!("redis://:wrong@127.0.0.1:{}/", server.port());
    let err = latchkey::Client::connect(&url).await.unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "wrong password: got {err:?}");
    let ok = latchkey::Client::connect(&server.url()).await;
    assert!(ok.is_ok(), "right password refused: {ok:?}");
}

#[tokio::test]
async fn interoperates_with_plain_set_nx_locks_when_unprefixed() {
    let server = RedisServer::start();
    let client = latchkey::Client::builder(&server.url())
        .prefix("")
        .connect()
        .await
        .unwrap();
    // Another library (redis-py Lock, redsync, node-redlock) holds "shared".
    server
        .command(&["SET", "shared", "their-uuid", "NX", "PX", "5000"])
        .unwrap();
    let lock = client.lock("shared", Duration::from_secs(1)).unwrap();
    assert!(lock.try_acquire().await.unwrap().is_none());
    server.command(&["DEL", "shared"]).unwrap();
    let guard = lock.try_acquire().await.unwrap().expect("free");
    // ... and theirs is refused while ours is held.
    let theirs = server
        .command(&["SET", "shared", "their-uuid", "NX", "PX", "5000"])
        .unwrap();
    assert_ne!(theirs, "OK");
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn a_cancelled_acquire_does_not_leave_the_lock_held() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr()).await;
    let c = latchkey::Client::builder(&proxy.url())
        .prefix("test:")
        .command_timeout(Duration::from_secs(5))
        .connect()
        .await
        .unwrap();
    let lock = c.lock("cancelled", Duration::from_secs(30)).unwrap();
    let mut conn = raw(&server.url()).await;
    // Load the script first: a cold EVALSHA would only get NOSCRIPT back.
    let warm = c
        .lock("warm", Duration::from_secs(1))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(warm.release().await.unwrap(), Ownership::Owned);
    // 300 ms each way: the request reaches Redis after 300 ms, the reply
    // would reach us after 600 ms. Cancel in between.
    proxy.set_mode(ProxyMode::Delay(Duration::from_millis(300)));
    let cancelled = tokio::time::timeout(Duration::from_millis(450), lock.try_acquire()).await;
    assert!(cancelled.is_err(), "the attempt was not cancelled");
    let exists: bool = conn.exists("test:cancelled").await.unwrap();
    assert!(
        exists,
        "the cancelled request never took the lock; the test proves nothing"
    );
    // The background release goes through the same slow link: it must land
    // well before the 30 s TTL.
    eventually("the lock is free after a cancelled acquire", || {
        let mut conn = conn.clone();
        async move {
            let exists: bool = conn.exists("test:cancelled").await.unwrap();
            !exists
        }
    })
    .await;
}

#[tokio::test]
async fn a_foreign_fencing_counter_is_refused_without_taking_the_lock() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let lock = c
        .lock("counted", Duration::from_secs(5))
        .unwrap()
        .with_fencing();
    for garbage in ["9007199254740993", "1e400", "-5", "12.5", "not-a-number"] {
        server
            .command(&["SET", "{test:counted}:fence", garbage])
            .unwrap();
        match lock.try_acquire().await {
            Err(Error::BadFencingCounter { key }) => assert_eq!(key, "{test:counted}:fence"),
            other => panic!("counter {garbage:?}: expected BadFencingCounter, got {other:?}"),
        }
        let exists = server.command(&["EXISTS", "test:counted"]).unwrap();
        assert_eq!(
            exists, "0",
            "counter {garbage:?}: the lock was taken anyway"
        );
        // Without `with_fencing` the lock is taken (no token asked yet) and
        // the token is refused when asked for, the counter left as it was.
        let guard = c
            .lock("counted", Duration::from_secs(5))
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        match guard.fencing_token().await {
            Err(Error::BadFencingCounter { key }) => assert_eq!(key, "{test:counted}:fence"),
            other => panic!("counter {garbage:?}: expected BadFencingCounter, got {other:?}"),
        }
        assert_eq!(
            server.command(&["GET", "{test:counted}:fence"]).unwrap(),
            garbage
        );
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    }
    server.command(&["DEL", "{test:counted}:fence"]).unwrap();
    let g = lock
        .try_acquire()
        .await
        .unwrap()
        .expect("free after the counter was reset");
    assert_eq!(g.release().await.unwrap(), Ownership::Owned);
}

/// A full server and a read-only replica refuse writes: each is a typed,
/// transient error saying so, not a raw script error.
#[tokio::test]
async fn out_of_memory_and_read_only_replicas_are_typed_errors() {
    let primary = RedisServer::start();
    let c = client(&primary.url()).await;
    primary
        .command(&["CONFIG", "SET", "maxmemory-policy", "noeviction"])
        .unwrap();
    primary
        .command(&["CONFIG", "SET", "maxmemory", "1"])
        .unwrap();
    for fenced in [false, true] {
        let mut lock = c.lock("full", Duration::from_secs(5)).unwrap();
        if fenced {
            lock = lock.with_fencing();
        }
        match lock.try_acquire().await {
            Err(e @ Error::OutOfMemory(_)) => assert!(e.is_transient()),
            other => panic!("fenced {fenced}: expected OutOfMemory, got {other:?}"),
        }
    }
    primary
        .command(&["CONFIG", "SET", "maxmemory", "0"])
        .unwrap();

    let replica = RedisServer::builder().replica_of(primary.port()).start();
    let r = client(&replica.url()).await;
    for fenced in [false, true] {
        let mut lock = r.lock("replicated", Duration::from_secs(5)).unwrap();
        if fenced {
            lock = lock.with_fencing();
        }
        match lock.try_acquire().await {
            Err(e @ Error::ReadOnlyReplica(_)) => assert!(e.is_transient()),
            other => panic!("fenced {fenced}: expected ReadOnlyReplica, got {other:?}"),
        }
    }
}
