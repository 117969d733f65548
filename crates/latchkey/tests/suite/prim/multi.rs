//! Several locks at once (`Client::lock_all`): all or nothing, each lock an
//! ordinary lock to everyone else (plain locks exclude it and are woken by
//! it), no deadlock and no overlap when callers name the locks in opposite
//! orders, on one server and on a Redis Cluster with the names in
//! different slots (one lock after the other), lost() when any lock goes,
//! and no lock left behind by a cancelled call.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use latchkey::{Client, Error, FencedWrite, Ownership};
use latchkey_testkit::{key_slot, RedisCluster};

/// Long: a waiter served within `SOON` was woken, not let in by the TTL.
const TTL: Duration = Duration::from_secs(30);
const SOON: Duration = Duration::from_secs(10);

fn exists(server: &RedisServer, key: &str) -> bool {
    server.command(&["EXISTS", key]).unwrap().trim() == "1"
}

#[tokio::test]
async fn a_busy_name_leaves_the_others_free_and_a_hold_looks_like_plain_locks() {
    let redis = RedisServer::start();
    let c = client(&redis.url()).await;
    let other = client(&redis.url()).await;
    let b = other.lock("b", TTL).unwrap().try_acquire().await.unwrap();
    let b = b.expect("b is free");

    let both = c.lock_all(&["a", "b"], TTL).unwrap();
    assert!(both.one_round_trip());
    assert!(both.try_acquire().await.unwrap().is_none(), "b is busy");
    assert!(!exists(&redis, "test:a"), "a taken although b was busy");
    let a = c.lock("a", TTL).unwrap().try_acquire().await.unwrap();
    assert_eq!(
        a.expect("a stayed free").release().await.unwrap(),
        Ownership::Owned
    );

    assert_eq!(b.release().await.unwrap(), Ownership::Owned);
    let guard = both.try_acquire().await.unwrap().expect("both free");
    // The one owner token in both keys, as a plain lock's.
    for key in ["test:a", "test:b"] {
        assert_eq!(redis.command(&["GET", key]).unwrap().trim(), guard.token());
        let ttl: u64 = redis
            .command(&["PTTL", key])
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(ttl > 25_000, "{key}: {ttl} ms");
    }
    for name in ["a", "b"] {
        assert!(other
            .lock(name, TTL)
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .is_none());
        assert!(other.inspect(name).await.unwrap().held, "{name}");
    }
    let names: Vec<&[u8]> = guard.names().collect();
    assert_eq!(names, [b"a", b"b"]);
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    assert!(!exists(&redis, "test:a") && !exists(&redis, "test:b"));

    // Bad input is typed, never a panic.
    let no_names: [&str; 0] = [];
    assert!(matches!(
        c.lock_all(&no_names, TTL),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        c.lock_all(&["x", "x"], TTL),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        c.lock_all(&["x", ""], TTL),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        c.lock_all(&["x"], Duration::ZERO),
        Err(Error::InvalidTtl { .. })
    ));
    // Not over a Redlock: refused with the reason.
    let redlock = latchkey::Redlock::new(vec![c.clone()]).unwrap();
    assert!(matches!(
        redlock.lock_all(&["a", "b"], TTL),
        Err(Error::Unsupported(_))
    ));
}

#[tokio::test]
async fn fencing_tokens_are_one_per_name_and_outrank_plain_holds() {
    let redis = RedisServer::start();
    let c = client(&redis.url()).await;
    let plain = c.lock("acct:1", TTL).unwrap().acquire().await.unwrap();
    let before = plain.fencing_token().await.unwrap();
    assert_eq!(plain.release().await.unwrap(), Ownership::Owned);

    for fenced in [false, true] {
        let mut both = c.lock_all(&["acct:2", "acct:1"], TTL).unwrap();
        if fenced {
            both = both.with_fencing();
        }
        let guard = both.acquire().await.unwrap();
        assert_eq!(guard.issued_fencing_tokens().is_some(), fenced);
        let tokens = guard.fencing_tokens().await.unwrap();
        assert_eq!(guard.fencing_token_of("acct:2").await.unwrap(), tokens[0]);
        assert_eq!(guard.fencing_token_of("acct:1").await.unwrap(), tokens[1]);
        assert!(tokens[1] > before);
        assert!(matches!(
            guard.fencing_token_of("acct:3").await,
            Err(Error::InvalidInput(_))
        ));
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
        let after = c.lock("acct:2", TTL).unwrap().acquire().await.unwrap();
        assert!(after.fencing_token().await.unwrap() > tokens[0]);
        assert_eq!(after.release().await.unwrap(), Ownership::Owned);
    }
}

/// Two clients take `names` and its reverse in a tight loop for `time`:
/// every acquisition succeeds well within its bound (no deadlock), no two
/// holds overlap (a flag per name, and each name's fenced resource accepts
/// every write: a hold out of order would be refused), and each name's
/// tokens only grow. Returns the holds of each client.
async fn opposite_orders(a: Client, b: Client, names: [&str; 2], time: Duration) -> [u64; 2] {
    let names: [String; 2] = names.map(str::to_owned);
    let inside: Arc<[AtomicBool; 2]> = Arc::default();
    let last: Arc<[AtomicU64; 2]> = Arc::default();
    let until = Instant::now() + time;
    let mut tasks = Vec::new();
    for (i, c) in [a, b].into_iter().enumerate() {
        let order: Vec<usize> = if i == 0 { vec![0, 1] } else { vec![1, 0] };
        let given: Vec<&str> = order.iter().map(|&n| names[n].as_str()).collect();
        let locks = c.lock_all(&given[..], TTL).unwrap().with_fencing();
        let resources: Vec<_> = names
            .iter()
            .map(|n| c.fenced(format!("{n}-resource")).unwrap())
            .collect();
        let (inside, last, names) = (inside.clone(), last.clone(), names.clone());
        tasks.push(tokio::spawn(async move {
            let mut holds = 0u64;
            while Instant::now() < until {
                let guard = locks.acquire_until(SOON).await.expect("a deadlock?");
                let tokens = guard.issued_fencing_tokens().expect("with_fencing");
                for (&n, &token) in order.iter().zip(&tokens) {
                    assert!(
                        !inside[n].swap(true, Ordering::SeqCst),
                        "{} overlapped",
                        names[n]
                    );
                    assert!(
                        last[n].swap(token, Ordering::SeqCst) < token,
                        "token went back"
                    );
                }
                for (&n, &token) in order.iter().zip(&tokens) {
                    let wrote = resources[n].write(token, b"x").await.unwrap();
                    assert_eq!(wrote, FencedWrite::Accepted, "{}: a stale hold", names[n]);
                }
                for &n in &order {
                    inside[n].store(false, Ordering::SeqCst);
                }
                assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
                holds += 1;
            }
            holds
        }));
    }
    let mut holds = [0; 2];
    for (i, task) in tasks.into_iter().enumerate() {
        holds[i] = task.await.unwrap();
    }
    eprintln!("{names:?} and reversed, {time:?}: {holds:?} holds");
    holds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opposite_orders_never_deadlock_nor_overlap_on_one_server() {
    let redis = RedisServer::start();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let holds = opposite_orders(a, b, ["x", "y"], Duration::from_secs(3)).await;
    assert!(holds[0] >= 1 && holds[1] >= 1, "{holds:?}");
    assert!(holds[0] + holds[1] >= 20, "{holds:?}");
}

/// Two names whose keys (under `test:`) are served by different primaries.
fn names_on_two_primaries(cluster: &RedisCluster) -> [String; 2] {
    let first = "multi-0".to_owned();
    let port = cluster.primary_for_key(format!("test:{first}")).port();
    let second = (1..)
        .map(|i| format!("multi-{i}"))
        .find(|n| cluster.primary_for_key(format!("test:{n}")).port() != port)
        .unwrap();
    [first, second]
}

async fn cluster_client(cluster: &RedisCluster) -> Client {
    Client::builder(&cluster.seed_url())
        .prefix("test:")
        .command_timeout(Duration::from_secs(2))
        .connect()
        .await
        .expect("connect to the cluster")
}

fn cluster() -> RedisCluster {
    RedisCluster::builder()
        .primaries(3)
        .replicas_per_primary(0)
        .start()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_names_in_different_slots_are_taken_one_by_one_in_order() {
    let cluster = tokio::task::spawn_blocking(cluster).await.unwrap();
    let (a, b) = (
        cluster_client(&cluster).await,
        cluster_client(&cluster).await,
    );
    let [x, y] = names_on_two_primaries(&cluster);
    assert!(!a.lock_all(&[&x, &y], TTL).unwrap().one_round_trip());
    // One hash tag: one slot, one script.
    let tagged = a.lock_all(&["{acct}:1", "{acct}:2"], TTL).unwrap();
    assert!(tagged.one_round_trip());
    assert_eq!(key_slot(b"test:{acct}:1"), key_slot(b"test:{acct}:2"));
    let guard = tagged.try_acquire().await.unwrap().expect("free");
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);

    // All or nothing here too: a busy second lock gives the first back.
    let held = b
        .lock(&y, TTL)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    let both = a.lock_all(&[&x, &y], TTL).unwrap();
    assert!(both.try_acquire().await.unwrap().is_none());
    let first = cluster.primary_for_key(format!("test:{x}"));
    assert_eq!(
        first
            .command(&["EXISTS", &format!("test:{x}")])
            .unwrap()
            .trim(),
        "0"
    );
    // A waiter is woken by the busy lock's release (sharded pub/sub).
    let waiter = tokio::spawn(async move { both.acquire_until(SOON).await });
    let channel = format!("{{test:{y}}}:released");
    let owner = cluster.primary_for_key(format!("test:{y}"));
    eventually("the multi waiter listens", || async {
        owner.server().shard_subscribers(&channel) >= 1
    })
    .await;
    let released = Instant::now();
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    let guard = waiter.await.unwrap().expect("woken");
    assert!(released.elapsed() < Duration::from_secs(5));
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);

    let holds = opposite_orders(a, b, [&x, &y], Duration::from_secs(3)).await;
    assert!(holds[0] >= 1 && holds[1] >= 1, "{holds:?}");
    assert!(holds[0] + holds[1] >= 10, "{holds:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_on_a_cluster_leaves_no_lock_held() {
    let cluster = tokio::task::spawn_blocking(cluster).await.unwrap();
    let c = cluster_client(&cluster).await;
    let names: Vec<String> = (0..8).map(|i| format!("cancel-{i}")).collect();
    let locks = c.lock_all(&names, TTL).unwrap().with_fencing();
    assert!(!locks.one_round_trip());
    // Dropped at every point of the eight round trips, or after them.
    for cancel_after_us in [0, 100, 300, 600, 1_000, 2_000, 4_000, 8_000] {
        let cancelled =
            tokio::time::timeout(Duration::from_micros(cancel_after_us), locks.acquire()).await;
        if let Ok(guard) = cancelled {
            drop(guard.unwrap());
        }
        assert!(c.flush(Duration::from_secs(5)).await);
        for name in &names {
            let key = format!("test:{name}");
            let node = cluster.primary_for_key(&key);
            assert_eq!(
                node.command(&["EXISTS", &key]).unwrap().trim(),
                "0",
                "{key}"
            );
        }
    }
}

#[tokio::test]
async fn a_cancelled_call_leaves_no_lock_held() {
    let redis = RedisServer::start();
    let proxy = Proxy::start(redis.addr()).await;
    let c = client(&proxy.url()).await;
    let locks = c.lock_all(&["p", "q"], TTL).unwrap();
    // Warm the script cache, so the cancelled requests are the script's.
    drop(locks.try_acquire().await.unwrap().expect("free"));
    assert!(c.flush(Duration::from_secs(3)).await);
    // One way 20 ms: cancelled before the request is written, while it
    // travels, after Redis ran it while the reply travels back.
    proxy.set_mode(ProxyMode::Delay(Duration::from_millis(20)));
    for cancel_after_ms in [0, 1, 10, 30, 38] {
        let cancelled =
            tokio::time::timeout(Duration::from_millis(cancel_after_ms), locks.acquire()).await;
        assert!(cancelled.is_err(), "acquired within {cancel_after_ms} ms");
        assert!(c.flush(Duration::from_secs(3)).await);
        assert!(!exists(&redis, "test:p") && !exists(&redis, "test:q"));
    }
    // A waiter cancelled while it waits leaves no lock and no subscription.
    proxy.set_mode(ProxyMode::Pass);
    let other = client(&redis.url()).await;
    let q = other.lock("q", TTL).unwrap().acquire().await.unwrap();
    let waiting = tokio::time::timeout(Duration::from_millis(300), locks.acquire()).await;
    assert!(waiting.is_err());
    assert!(c.flush(Duration::from_secs(3)).await);
    assert!(!exists(&redis, "test:p"));
    eventually("the cancelled waiter unsubscribed", || async {
        redis.subscribers("{test:p}:released") == 0
    })
    .await;
    assert_eq!(q.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn lost_fires_when_any_lock_is_revoked_or_deleted() {
    let redis = RedisServer::start();
    let holder = client(&redis.url()).await;
    let operator = client(&redis.url()).await;
    for (i, how) in ["revoke", "delete"].into_iter().enumerate() {
        let names = [format!("r{i}-a"), format!("r{i}-b"), format!("r{i}-c")];
        let locks = holder
            .lock_all(&names, TTL)
            .unwrap()
            .with_renewal_every(Duration::from_millis(200))
            .unwrap();
        let guard = locks.acquire().await.unwrap();
        let tokens = guard.fencing_tokens().await.unwrap();
        match how {
            "revoke" => {
                let revoked = operator.revoke(&names[1]).await.unwrap();
                assert_eq!(revoked.len(), 1, "{revoked:?}");
                assert!(revoked[0].fencing_token.unwrap() > tokens[1]);
            }
            _ => {
                redis
                    .command(&["DEL", &format!("test:{}", names[1])])
                    .unwrap();
            }
        }
        tokio::time::timeout(SOON, guard.lost())
            .await
            .expect("lost() fired");
        assert!(!guard.is_held());
        // The release gives back the locks still ours and says one was gone.
        assert_eq!(guard.release().await.unwrap(), Ownership::Expired);
        for name in &names {
            assert!(
                !exists(&redis, &format!("test:{name}")),
                "{how}: {name} left held"
            );
        }
    }
}

#[tokio::test]
async fn a_release_wakes_a_plain_waiter_on_each_lock_and_a_plain_release_wakes_it() {
    let redis = RedisServer::start();
    let c = client(&redis.url()).await;
    let other = client(&redis.url()).await;
    let guard = c
        .lock_all(&["w1", "w2"], TTL)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let waiters: Vec<_> = ["w1", "w2"]
        .into_iter()
        .map(|name| {
            let lock = other.lock(name, TTL).unwrap();
            tokio::spawn(async move { lock.acquire_until(SOON).await })
        })
        .collect();
    for name in ["w1", "w2"] {
        until_subscribed(&redis, &format!("{{test:{name}}}:released"), 1).await;
        // Each waiter marked the multi hold's token in its lock's key.
        let key = format!("test:{name}");
        eventually("the waiter marked the holder", || async {
            redis
                .command(&["GET", &key])
                .unwrap()
                .trim()
                .ends_with("+w")
        })
        .await;
    }
    let released = Instant::now();
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    let mut plain = Vec::new();
    for waiter in waiters {
        plain.push(waiter.await.unwrap().expect("woken by the release"));
    }
    assert!(
        released.elapsed() < Duration::from_secs(5),
        "woken, not timed out"
    );

    // And the other way: a multi waiter wakes when a plain lock is released.
    let multi = c.lock_all(&["w0", "w2"], TTL).unwrap();
    let waiter = tokio::spawn(async move { multi.acquire_until(SOON).await });
    until_subscribed(&redis, "{test:w0}:released", 1).await;
    let released = Instant::now();
    let w1 = plain.remove(0);
    assert_eq!(w1.release().await.unwrap(), Ownership::Owned);
    assert_eq!(plain.remove(0).release().await.unwrap(), Ownership::Owned);
    let guard = waiter.await.unwrap().expect("woken by w2's release");
    assert!(released.elapsed() < Duration::from_secs(5));
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}
