//! Fair locks (`Lock::fair`): arrival order, direct hand-off, dead waiters,
//! cancellation, lost messages, fencing. Against real redis-servers; the
//! queue is checked in Redis (no sleeps as synchronisation). The
//! cross-process tests (the `latchkey` binary, `kill -9`) are in
//! `crates/latchkey-cli/tests/fair.rs`.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use latchkey::{Client, Error, Lock, Ownership};

const TTL: Duration = Duration::from_secs(10);
/// Short, so that the bounds tests are quick; renewed every 100 ms.
const LEASE: Duration = Duration::from_millis(300);
const QUEUE: &str = "{test:fair}:queue";
const LEASES: &str = "{test:fair}:leases";

fn fair(c: &Client) -> Lock {
    c.lock("fair", TTL).unwrap().fair_with_lease(LEASE).unwrap()
}

fn queue_len(server: &RedisServer) -> usize {
    server
        .command(&["LLEN", QUEUE])
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The holder's token, without the '+w' a waiter may have marked it with
/// (a hand-off keeps the mark: `fair_release.lua`).
fn holder(server: &RedisServer) -> String {
    let value = server.command(&["GET", "test:fair"]).unwrap();
    let value = value.trim();
    value.strip_suffix("+w").unwrap_or(value).to_owned()
}

/// The server's clock in ms (`TIME`), which the leases are counted in.
pub(super) fn server_ms(server: &RedisServer) -> u64 {
    let time = server.command(&["TIME"]).unwrap();
    let mut parts = time.lines().map(|l| l.trim().parse::<u64>().unwrap());
    let (s, us) = (parts.next().unwrap(), parts.next().unwrap());
    s * 1000 + us / 1000
}

async fn until_queued(server: &RedisServer, n: usize) {
    eventually(&format!("{n} waiter(s) queued"), || async {
        queue_len(server) == n
    })
    .await
}

#[tokio::test]
async fn waiters_in_other_clients_acquire_in_arrival_order() {
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..5 {
        clients.push(client(&server.url()).await);
    }
    let holder_client = client(&server.url()).await;
    for round in 0..3 {
        let first = fair(&holder_client)
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        // Each enqueues only once the one before it is in the queue.
        let arrival: Vec<usize> = match round % 2 {
            0 => (0..5).collect(),
            _ => (0..5).rev().collect(),
        };
        for (i, &who) in arrival.iter().enumerate() {
            let lock = fair(&clients[who]);
            let order = order_tx.clone();
            tasks.push(tokio::spawn(async move {
                let guard = lock.acquire().await.unwrap();
                order.send(who).unwrap();
                guard.release().await.unwrap()
            }));
            until_queued(&server, i + 1).await;
        }
        assert_eq!(first.release().await.unwrap(), Ownership::Owned);
        let mut served = Vec::new();
        for _ in 0..5 {
            served.push(order_rx.recv().await.unwrap());
        }
        assert_eq!(served, arrival, "round {round}");
        for task in tasks {
            assert_eq!(task.await.unwrap(), Ownership::Owned);
        }
        assert_eq!(queue_len(&server), 0);
    }
}

#[tokio::test]
async fn a_release_hands_the_lock_over_in_its_own_script() {
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let held = fair(&a).try_acquire().await.unwrap().expect("free");
    let lock = fair(&b);
    let waiting = tokio::spawn(async move { lock.acquire().await });
    until_queued(&server, 1).await;
    // The release alone makes the waiter the holder: the key holds its token
    // when the release's reply is back, before the waiter has done anything.
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    let handed_to = holder(&server);
    assert!(handed_to.starts_with("lk2:"), "{handed_to:?}");
    let guard = waiting.await.unwrap().unwrap();
    assert_eq!(handed_to, guard.token());
    // The hand-off's short TTL is brought to the lock's TTL at once.
    eventually("the handed lock extended to its TTL", || async {
        let pttl: i64 = server
            .command(&["PTTL", "test:fair"])
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        pttl > LEASE.as_millis() as i64
    })
    .await;
    assert!(guard.is_held());
    // Held for longer than the hand-off TTL (no watchdog): the extension
    // kept it, so the release finds it still ours.
    tokio::time::sleep(LEASE * 2).await;
    assert!(guard.is_held());
    assert_eq!(holder(&server), guard.token());
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    assert_eq!(holder(&server), "");
}

#[tokio::test]
async fn handed_over_fencing_tokens_increase() {
    let server = RedisServer::start();
    let clients = [
        client(&server.url()).await,
        client(&server.url()).await,
        client(&server.url()).await,
    ];
    let lock = |c: &Client| fair(c).with_fencing();
    let mut guard = lock(&clients[0])
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    let mut last = guard
        .issued_fencing_token()
        .expect("issued with the acquisition");
    for i in 1..8 {
        let next = lock(&clients[i % 3]);
        let waiting = tokio::spawn(async move { next.acquire().await });
        until_queued(&server, 1).await;
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
        guard = waiting.await.unwrap().unwrap();
        let token = guard
            .issued_fencing_token()
            .expect("issued by the hand-off");
        assert!(token > last, "{token} after {last}");
        assert_eq!(guard.fencing_token().await.unwrap(), token);
        let counter: u64 = server
            .command(&["GET", "{test:fair}:fence"])
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(counter, token);
        last = token;
    }
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn try_acquire_does_not_jump_the_queue() {
    let server = RedisServer::start();
    let (a, b, c) = (
        client(&server.url()).await,
        client(&server.url()).await,
        client(&server.url()).await,
    );
    let held = fair(&a).try_acquire().await.unwrap().expect("free");
    let lock = fair(&b);
    let waiting = tokio::spawn(async move { lock.acquire().await });
    until_queued(&server, 1).await;
    assert!(fair(&c).try_acquire().await.unwrap().is_none());
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    assert!(
        fair(&c).try_acquire().await.unwrap().is_none(),
        "handed over"
    );
    let guard = waiting.await.unwrap().unwrap();
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    // Free and nobody waits: a try takes it, in one script.
    let guard = fair(&c).try_acquire().await.unwrap().expect("free");
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn a_wait_that_times_out_leaves_the_queue() {
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let held = fair(&a).try_acquire().await.unwrap().expect("free");
    let err = fair(&b)
        .acquire_until(Duration::from_millis(400))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::WaitTimedOut { .. }), "{err}");
    assert_eq!(queue_len(&server), 0, "left before returning");
    assert_eq!(server.command(&["ZCARD", LEASES]).unwrap().trim(), "0");
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    assert_eq!(holder(&server), "", "nobody to hand it to: freed");
}

#[tokio::test]
async fn a_cancelled_wait_leaves_the_queue() {
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let held = fair(&a).try_acquire().await.unwrap().expect("free");
    let lock = fair(&b);
    let waiting = tokio::spawn(async move { lock.acquire().await });
    until_queued(&server, 1).await;
    waiting.abort();
    // Well before the lease could have run out and been skipped.
    let aborted = Instant::now();
    eventually("the cancelled waiter left the queue", || async {
        queue_len(&server) == 0
    })
    .await;
    assert!(aborted.elapsed() < LEASE, "{:?}", aborted.elapsed());
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    assert_eq!(holder(&server), "");
}

#[tokio::test]
async fn a_lock_handed_to_a_waiter_that_is_cancelled_then_is_handed_on() {
    let server = RedisServer::start();
    let clients = [
        client(&server.url()).await,
        client(&server.url()).await,
        client(&server.url()).await,
    ];
    for _ in 0..5 {
        let held = fair(&clients[0])
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let lock = fair(&clients[1]);
        let cancelled = tokio::spawn(async move { lock.acquire().await });
        until_queued(&server, 1).await;
        let lock = fair(&clients[2]);
        let next = tokio::spawn(async move { lock.acquire().await });
        until_queued(&server, 2).await;
        // Cancelled in the same instant as the hand-off: either it left the
        // queue first, or it got the lock and releases (hands on) it.
        let releasing = tokio::spawn(held.release());
        cancelled.abort();
        assert_eq!(releasing.await.unwrap().unwrap(), Ownership::Owned);
        let guard = tokio::time::timeout(LEASE / 2, next)
            .await
            .expect("handed on well within the lease")
            .unwrap()
            .unwrap();
        if let Ok(Ok(g)) = cancelled.await {
            // It won the race with the abort: a guard that releases on drop.
            drop(g);
        }
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
        eventually("nothing held", || async { holder(&server).is_empty() }).await;
        clients[1].flush(Duration::from_secs(5)).await;
    }
}

/// A waiter that died between being queued and the hand-off (simulated by a
/// queue entry with a live lease and nobody behind it): the lock frees
/// itself within the lease, and the next waiter takes it.
#[tokio::test]
async fn a_lock_handed_to_a_dead_waiter_frees_itself_within_the_lease() {
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let held = fair(&a).try_acquire().await.unwrap().expect("free");
    let dead = format!("{}:300:0:lk2:dead", "0".repeat(32));
    server.command(&["RPUSH", QUEUE, &dead]).unwrap();
    server
        .command(&["ZADD", LEASES, "99999999999999", &dead])
        .unwrap();
    let lock = fair(&b);
    let waiting = tokio::spawn(async move { lock.acquire().await });
    until_queued(&server, 2).await;
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    let released = Instant::now();
    assert_eq!(holder(&server), "lk2:dead", "handed to the dead waiter");
    let guard = waiting.await.unwrap().unwrap();
    let waited = released.elapsed();
    // The dead waiter's key lives 300 ms; the next waiter looks at its TTL.
    assert!(waited >= Duration::from_millis(250), "{waited:?}");
    assert!(
        waited < LEASE + LEASE / 3 + Duration::from_millis(200),
        "{waited:?}"
    );
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

/// A queued waiter whose lease ran out (its process died) is skipped.
#[tokio::test]
async fn a_dead_queued_waiter_is_skipped() {
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let held = fair(&a).try_acquire().await.unwrap().expect("free");
    // Its lease runs out 200 ms from now (server time): after the live
    // waiter queues behind it, before the release.
    let dead = format!("{}:300:0:lk2:dead", "0".repeat(32));
    let lease_end = server_ms(&server) + 200;
    server.command(&["RPUSH", QUEUE, &dead]).unwrap();
    server
        .command(&["ZADD", LEASES, &lease_end.to_string(), &dead])
        .unwrap();
    // A long lease for the live waiter: its renewals (every third of it,
    // which drop dead heads too) must not come between the dead lease's end
    // and the release, or the release would have nothing to skip.
    let lock = b
        .lock("fair", TTL)
        .unwrap()
        .fair_with_lease(Duration::from_secs(6))
        .unwrap();
    let waiting = tokio::spawn(async move { lock.acquire().await });
    until_queued(&server, 2).await;
    eventually("the dead waiter's lease ran out", || async {
        server_ms(&server) > lease_end
    })
    .await;
    assert_eq!(queue_len(&server), 2, "nobody dropped it yet");
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    let guard = tokio::time::timeout(Duration::from_secs(1), waiting)
        .await
        .expect("handed over at once")
        .unwrap()
        .unwrap();
    assert_eq!(holder(&server), guard.token());
    assert_eq!(queue_len(&server), 0);
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn the_head_takes_a_lock_whose_holder_died() {
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let short = a
        .lock("fair", Duration::from_millis(400))
        .unwrap()
        .fair_with_lease(LEASE)
        .unwrap();
    let held = short.try_acquire().await.unwrap().expect("free");
    std::mem::forget(held); // dies without releasing
    let taken = Instant::now();
    let guard = fair(&b).acquire().await.unwrap();
    let waited = taken.elapsed();
    assert!(waited >= Duration::from_millis(350), "{waited:?}");
    assert!(waited < Duration::from_millis(900), "{waited:?}");
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn a_lost_handoff_message_is_recovered_within_the_bound() {
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    for _ in 0..3 {
        let held = fair(&a).try_acquire().await.unwrap().expect("free");
        let lock = fair(&b);
        let waiting = tokio::spawn(async move { lock.acquire().await });
        until_queued(&server, 1).await;
        let killed = server
            .command(&["CLIENT", "KILL", "TYPE", "pubsub"])
            .unwrap();
        assert_ne!(killed.trim(), "0", "a pub/sub connection was killed");
        // Released while the waiter's subscriber reconnects: the message
        // goes nowhere. The reconnection or the lease renewal finds it.
        assert_eq!(held.release().await.unwrap(), Ownership::Owned);
        let released = Instant::now();
        let guard = tokio::time::timeout(LEASE, waiting)
            .await
            .expect("recovered within a lease")
            .unwrap()
            .unwrap();
        assert!(released.elapsed() < LEASE / 3 + Duration::from_millis(150));
        assert_eq!(holder(&server), guard.token());
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    }
}

#[tokio::test]
async fn a_plain_release_wakes_the_head() {
    // A fair holder released by the barging script (`latchkey release`
    // without --fair, another version): the waiter marked the token, so
    // the release publishes and the head takes the lock at once.
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let held = fair(&a).try_acquire().await.unwrap().expect("free");
    let token = held.token().to_owned();
    std::mem::forget(held);
    let lock = fair(&b);
    let waiting = tokio::spawn(async move { lock.acquire().await });
    until_queued(&server, 1).await;
    let plain = a.lock("fair", TTL).unwrap();
    assert_eq!(plain.release_token(&token).await.unwrap(), Ownership::Owned);
    let guard = tokio::time::timeout(LEASE / 3, waiting)
        .await
        .expect("woken by the release message")
        .unwrap()
        .unwrap();
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn redlock_refuses_fair() {
    let servers = RedisServer::start_many(3);
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    let refs: Vec<&str> = urls.iter().map(String::as_str).collect();
    let redlock = latchkey::Redlock::connect(&refs).await.unwrap();
    let err = redlock.lock("fair", TTL).unwrap().fair().unwrap_err();
    assert!(matches!(err, Error::Unsupported(_)), "{err}");
}

#[tokio::test]
async fn bad_leases_are_refused() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    for lease in [
        Duration::ZERO,
        Duration::from_millis(59),
        Duration::from_secs(86_401),
    ] {
        let err = c
            .lock("fair", TTL)
            .unwrap()
            .fair_with_lease(lease)
            .unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    }
    assert!(c.lock("fair", TTL).unwrap().fair().unwrap().is_fair());
}

/// On a Redis Cluster: the queue keys share the lock's slot (the scripts
/// would fail with CROSSSLOT otherwise), and the hand-off message published
/// inside the release script reaches the waiter's node. Names spread over
/// the primaries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_hand_off_on_a_cluster() {
    use latchkey_testkit::RedisCluster;
    let cluster = tokio::task::spawn_blocking(|| {
        RedisCluster::builder()
            .primaries(3)
            .replicas_per_primary(0)
            .start()
    })
    .await
    .unwrap();
    let connect = || async {
        Client::builder(&cluster.seed_url())
            .prefix("test:")
            .command_timeout(Duration::from_secs(2))
            .connect()
            .await
            .unwrap()
    };
    let (a, b) = (connect().await, connect().await);
    let mut primaries = std::collections::HashSet::new();
    for i in 0..6 {
        let name = format!("fair-{i}");
        let node = cluster.primary_for_key(format!("test:{name}"));
        primaries.insert(node.port());
        let lock = |c: &Client| c.lock(&name, TTL).unwrap().fair().unwrap().with_fencing();
        let held = lock(&a).try_acquire().await.unwrap().expect("free");
        let first = held.issued_fencing_token().unwrap();
        let waiter = lock(&b);
        let waiting = tokio::spawn(async move { waiter.acquire().await });
        let queue = format!("{{test:{name}}}:queue");
        eventually("queued on the lock's node", || async {
            node.command(&["LLEN", &queue]).unwrap().trim() == "1"
        })
        .await;
        assert_eq!(held.release().await.unwrap(), Ownership::Owned);
        // Before the waiter's first lease renewal (2 s / 3): by message.
        let guard = tokio::time::timeout(Duration::from_millis(500), waiting)
            .await
            .expect("handed over by message")
            .unwrap()
            .unwrap();
        assert!(guard.issued_fencing_token().unwrap() > first);
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    }
    assert!(primaries.len() > 1, "names on one primary only");
}
