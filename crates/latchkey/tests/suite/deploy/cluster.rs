//! The lock on a real Redis Cluster (3 primaries on loopback, from the test
//! kit): given any node's URL, the client detects the cluster and routes
//! each script to the node that serves the lock's slot; layout 3 keeps the
//! lock key, its fencing counter and its channel in one slot. Waiting is
//! woken by the release message, over sharded pub/sub (SPUBLISH in the
//! release script, SSUBSCRIBE at the node that owns the lock's slot), also
//! after the slot moved to another node.

use crate::common;

use std::time::{Duration, Instant};

use latchkey::{Client, Error, FencedWrite, Ownership};
use latchkey_testkit::{key_slot, RedisCluster};

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
async fn locks_on_every_primary_with_fencing_and_watchdog() {
    let cluster = tokio::task::spawn_blocking(cluster).await.unwrap();
    let client = cluster_client(&cluster).await;
    assert!(client.connection().is_cluster());
    // Names whose slots cover all three primaries.
    let mut primaries_used = std::collections::HashSet::new();
    let mut last_token = std::collections::HashMap::new();
    for round in 0..2 {
        if round == 1 {
            // NOSCRIPT on every node: each script is loaded again where needed.
            for node in cluster.nodes() {
                node.command(&["SCRIPT", "FLUSH"]).unwrap();
            }
        }
        for i in 0..30 {
            let name = format!("job-{i}");
            let key = format!("test:{name}");
            primaries_used.insert(cluster.primary_for_key(&key).port());
            let lock = client
                .lock(&name, Duration::from_secs(3))
                .unwrap()
                .with_fencing()
                .with_watchdog();
            let guard = lock.try_acquire().await.unwrap().expect("free");
            let token = guard
                .issued_fencing_token()
                .expect("issued with the acquisition");
            if let Some(previous) = last_token.insert(name.clone(), token) {
                assert!(token > previous, "round {round}: {name} token went back");
            }
            // The counter is in the lock key's slot, on the node that serves it.
            let counter = latchkey::protocol::fence_key(key.as_bytes());
            assert_eq!(key_slot(&counter), key_slot(key.as_bytes()));
            let owner = cluster.primary_for_key(&key);
            assert_eq!(
                owner
                    .command(&["GET", &String::from_utf8_lossy(&counter)])
                    .unwrap(),
                token.to_string()
            );
            assert!(
                lock.try_acquire().await.unwrap().is_none(),
                "{name} acquired twice"
            );
            assert_eq!(
                guard.extend(Duration::from_secs(3)).await.unwrap(),
                Ownership::Owned
            );
            assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
        }
    }
    assert_eq!(
        primaries_used.len(),
        3,
        "the names did not spread over the primaries"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_is_woken_by_a_release_on_another_client() {
    let cluster = tokio::task::spawn_blocking(cluster).await.unwrap();
    let holder = cluster_client(&cluster).await;
    let waiter = cluster_client(&cluster).await;
    for name in ["alpha", "beta", "gamma", "{user42}:cart"] {
        let guard = holder
            .lock(name, Duration::from_secs(30))
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .unwrap();
        let lock = waiter.lock(name, Duration::from_secs(30)).unwrap();
        let waiting = tokio::spawn(async move {
            let guard = lock.acquire_until(Duration::from_secs(20)).await;
            (Instant::now(), guard)
        });
        // The waiter's refused attempt marked the holder's token: from then
        // on only the release message wakes it before the 30 s TTL.
        let key = format!("test:{name}");
        let owner = cluster.primary_for_key(&key);
        latchkey_testkit::eventually("the waiter marked the holder", || async {
            owner.command(&["GET", &key]).unwrap().ends_with("+w")
        })
        .await;
        // Sharded pub/sub: the waiter listens at the node that owns the
        // lock's slot, and the release publishes there with SPUBLISH.
        let channel =
            String::from_utf8(latchkey::protocol::release_channel(key.as_bytes())).unwrap();
        assert_eq!(owner.server().shard_subscribers(&channel), 1, "{name}");
        let published_before = owner.server().calls("publish");
        let released_at = Instant::now();
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
        assert!(owner.server().calls("spublish") >= 1, "{name}: no SPUBLISH");
        assert_eq!(
            owner.server().calls("publish"),
            published_before,
            "{name}: a PUBLISH"
        );
        let (acquired_at, got) = waiting.await.unwrap();
        let got = got.expect("woken and acquired");
        assert!(
            acquired_at - released_at < Duration::from_secs(5),
            "{name}: woken {:?} after the release, not by it",
            acquired_at - released_at
        );
        assert_eq!(got.release().await.unwrap(), Ownership::Owned);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_writes_signals_and_what_is_refused() {
    let cluster = tokio::task::spawn_blocking(cluster).await.unwrap();
    let client = cluster_client(&cluster).await;
    let resource = client.fenced("report-output").unwrap();
    assert_eq!(
        resource.write(10, b"new").await.unwrap(),
        FencedWrite::Accepted
    );
    assert_eq!(
        resource.write(9, b"stale").await.unwrap(),
        FencedWrite::Rejected { seen: 10 }
    );
    // Broadcast signals reach a listener connected to any node (both
    // sharded: SSUBSCRIBE and SPUBLISH at the channel's node).
    let mut listener = client.listen(["deploy-done"]).await.unwrap();
    let sender = cluster_client(&cluster).await;
    // (The count is the receiving node's subscribers only: not asserted.)
    let _counted = sender.signal("deploy-done", b"v42").await.unwrap();
    let signal = listener
        .recv_timeout(Duration::from_secs(5))
        .await
        .expect("the signal");
    assert_eq!(signal.payload, b"v42");
    // What would be silently wrong on a cluster is refused, with a reason.
    for refused in [
        client.signal_one("deploy-done", b"x").await.map(|_| ()),
        client.waiters("deploy-done").await.map(|_| ()),
        client.listen_patterns(["deploy-*"]).await.map(|_| ()),
    ] {
        match refused {
            Err(Error::InvalidInput(why)) => assert!(why.contains("Redis Cluster"), "{why}"),
            other => panic!("expected a clear refusal, got {other:?}"),
        }
    }
    // Inspecting one lock works: it is one script on one slot.
    let guard = client
        .lock("inspected", Duration::from_secs(5))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let info = client.inspect("inspected").await.unwrap();
    assert!(info.held);
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_all_walks_every_primary() {
    let cluster = tokio::task::spawn_blocking(cluster).await.unwrap();
    let client = cluster_client(&cluster).await;
    let names: Vec<String> = (0..24).map(|i| format!("listed-{i}")).collect();
    let mut guards = Vec::new();
    for name in &names {
        let lock = client.lock(name, Duration::from_secs(30)).unwrap();
        guards.push(lock.try_acquire().await.unwrap().unwrap());
    }
    let ports: std::collections::HashSet<u16> = names
        .iter()
        .map(|n| cluster.primary_for_key(format!("test:{n}")).port())
        .collect();
    assert_eq!(
        ports.len(),
        3,
        "the names did not spread over the primaries"
    );
    let listed: Vec<String> = client
        .list_all("listed-*")
        .await
        .unwrap()
        .into_iter()
        .map(|info| String::from_utf8_lossy(info.name()).into_owned())
        .collect();
    let mut expected = names.clone();
    expected.sort();
    assert_eq!(listed, expected);
    for guard in guards {
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    }
}

/// A held and waited-on lock whose slot moves to another primary (`CLUSTER
/// SETSLOT … MIGRATING/IMPORTING`, `MIGRATE`, `SETSLOT … NODE`): the holder
/// keeps it (its watchdog renews at the new owner and nothing is lost), and
/// the waiter — whose sharded subscription the old owner drops with an
/// unsolicited `sunsubscribe` — is subscribed again at the new owner and is
/// woken there by the release, long before the 30 s TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_keeps_its_holder_and_wakes_its_waiter_after_its_slot_moves() {
    let cluster = tokio::task::spawn_blocking(cluster).await.unwrap();
    let cluster = std::sync::Arc::new(cluster);
    let holder = cluster_client(&cluster).await;
    let waiter = cluster_client(&cluster).await;
    let name = "moving";
    let key = format!("test:{name}");
    let channel = String::from_utf8(latchkey::protocol::release_channel(key.as_bytes())).unwrap();
    let slot = key_slot(key.as_bytes());
    let guard = holder
        .lock(name, Duration::from_secs(2))
        .unwrap()
        .with_fencing()
        .with_watchdog()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let token = guard.issued_fencing_token().unwrap();
    let lock = waiter.lock(name, Duration::from_secs(30)).unwrap();
    let waiting = tokio::spawn(async move {
        let guard = lock.acquire_until(Duration::from_secs(25)).await;
        (Instant::now(), guard)
    });
    let from_port = cluster.primary_for_slot(slot).port();
    latchkey_testkit::eventually("the waiter listens at the slot's owner", || async {
        cluster
            .primary_for_slot(slot)
            .server()
            .shard_subscribers(&channel)
            == 1
    })
    .await;

    let moving = cluster.clone();
    tokio::task::spawn_blocking(move || {
        let to = moving
            .primaries()
            .into_iter()
            .find(|p| p.port() != from_port)
            .unwrap();
        moving.migrate_slot(slot, to);
    })
    .await
    .unwrap();
    let to = cluster.primary_for_slot(slot);
    assert_ne!(to.port(), from_port, "the slot did not move");
    latchkey_testkit::eventually("the waiter listens at the new owner", || async {
        to.server().shard_subscribers(&channel) == 1
    })
    .await;

    // The holder still holds it, at the new owner, and can prove it.
    assert!(guard.is_held());
    assert_eq!(
        guard.extend(Duration::from_secs(2)).await.unwrap(),
        Ownership::Owned
    );
    assert!(to
        .command(&["GET", &key])
        .unwrap()
        .starts_with(guard.token()));
    let released_at = Instant::now();
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    let (acquired_at, got) = waiting.await.unwrap();
    let got = got.expect("woken and acquired");
    assert!(
        acquired_at - released_at < Duration::from_secs(5),
        "woken {:?} after the release, not by it",
        acquired_at - released_at
    );
    // The counter moved with the slot: the next token is still greater.
    assert!(got.fencing_token().await.unwrap() > token);
    assert_eq!(got.release().await.unwrap(), Ownership::Owned);
}

/// docs/security.md's cluster note: the rule of `latchkey::acl` plus
/// `+cluster|slots +cluster|nodes +pubsub|shardnumsub` lets a
/// least-privilege user count a lock's waiters (`top`), which are sharded
/// subscribers at the lock's primary; without `pubsub|shardnumsub` the
/// count is refused (and `top` shows `-`), nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_least_privilege_user_counts_waiters_with_the_cluster_note() {
    use latchkey::acl::{rule, Use};
    let cluster = tokio::task::spawn_blocking(cluster).await.unwrap();
    let base = rule(&[Use::Locks, Use::Inspection], "test:");
    let note = "+cluster|slots +cluster|nodes +pubsub|shardnumsub";
    for node in cluster.nodes() {
        let mut args = vec!["ACL", "SETUSER", "app", "reset", "on", ">pw"];
        args.extend(base.split_whitespace().chain(note.split_whitespace()));
        node.command(&args).expect("ACL SETUSER");
    }
    let port = cluster.primaries()[0].port();
    let client = Client::builder(&format!("redis://app:pw@127.0.0.1:{port}/"))
        .prefix("test:")
        .command_timeout(Duration::from_secs(2))
        .connect()
        .await
        .expect("the documented rule connects");
    let lock = client.lock("counted", Duration::from_secs(10)).unwrap();
    let held = lock.acquire().await.unwrap();
    // A waiter of another client: one subscriber of the lock's channel.
    let other = Client::builder(&format!("redis://app:pw@127.0.0.1:{port}/"))
        .prefix("test:")
        .connect()
        .await
        .unwrap();
    let waiting = tokio::spawn(async move {
        let lock = other.lock("counted", Duration::from_secs(10)).unwrap();
        lock.acquire_until(Duration::from_secs(20)).await
    });
    common::eventually("the waiter counted", || async {
        client.lock_waiters(&[b"counted"]).await.unwrap() == vec![1]
    })
    .await;

    for node in cluster.nodes() {
        node.command(&["ACL", "SETUSER", "app", "-pubsub|shardnumsub"])
            .expect("ACL SETUSER");
    }
    let refused = client.lock_waiters(&[b"counted"]).await;
    assert!(
        matches!(refused, Err(Error::NoPermission(_))),
        "{refused:?}"
    );
    // The locks themselves are unaffected.
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    let got = waiting.await.unwrap().expect("woken by the release");
    assert_eq!(got.release().await.unwrap(), Ownership::Owned);
}
