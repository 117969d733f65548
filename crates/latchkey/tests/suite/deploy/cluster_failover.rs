//! Cluster failover (3 primaries, each with a replica, on loopback): a manual
//! `CLUSTER FAILOVER` loses nothing — the holder keeps its lock and its
//! waiter is still woken by the release at the new primary; a `kill -9` of a
//! primary whose replica missed the lock (replication is asynchronous; the
//! test makes sure it missed it) hands the lock to a second holder, and the
//! first is told through `lost()` while fencing keeps its writes out. Both measure how long until clients work on the new primary
//! (printed; the figures are in docs/reliability.md).

use std::sync::Arc;
use std::time::{Duration, Instant};

use latchkey::{Client, FencedWrite, Ownership};
use latchkey_testkit::{key_slot, RedisCluster};

async fn client(cluster: &RedisCluster) -> Client {
    Client::builder(&cluster.seed_url())
        .prefix("test:")
        .command_timeout(Duration::from_secs(1))
        .pubsub_ping_every(Duration::from_millis(200))
        .connect()
        .await
        .expect("connect to the cluster")
}

async fn start() -> Arc<RedisCluster> {
    let cluster = tokio::task::spawn_blocking(|| {
        RedisCluster::builder()
            .primaries(3)
            .replicas_per_primary(1)
            .node_timeout(Duration::from_millis(1000))
            .start()
    })
    .await
    .unwrap();
    Arc::new(cluster)
}

/// A name whose key is not served by the seed node (so the seed's
/// connection stays up whatever happens to the lock's primary).
fn name_off_the_seed(cluster: &RedisCluster) -> String {
    let seed = cluster.nodes()[0].port();
    (0..)
        .map(|i| format!("failing-{i}"))
        .find(|n| cluster.primary_for_key(format!("test:{n}")).port() != seed)
        .unwrap()
}

/// Tries to acquire `name` until the cluster answers (acquired or busy):
/// what it answered, and how long that took.
async fn until_answered(
    client: &Client,
    name: &str,
    ttl: Duration,
    within: Duration,
) -> (Option<latchkey::LockGuard>, Duration) {
    let started = Instant::now();
    let lock = client.lock(name, ttl).unwrap().with_fencing();
    loop {
        if let Ok(answer) = lock.try_acquire().await {
            return (answer, started.elapsed());
        }
        assert!(started.elapsed() < within, "no answer within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_failover_keeps_the_holder_and_wakes_the_waiter() {
    let cluster = start().await;
    let name = name_off_the_seed(&cluster);
    let key = format!("test:{name}");
    let (holder, waiter) = (client(&cluster).await, client(&cluster).await);
    let guard = holder
        .lock(&name, Duration::from_secs(2))
        .unwrap()
        .with_fencing()
        .with_watchdog()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let token = guard.issued_fencing_token().unwrap();
    let lock = waiter.lock(&name, Duration::from_secs(30)).unwrap();
    let waiting = tokio::spawn(async move {
        let got = lock.acquire_until(Duration::from_secs(25)).await;
        (Instant::now(), got)
    });
    let channel = String::from_utf8(latchkey::protocol::release_channel(key.as_bytes())).unwrap();
    let old = cluster.primary_for_key(&key).port();
    latchkey_testkit::eventually("the waiter listens at the primary", || async {
        cluster
            .primary_for_key(&key)
            .server()
            .shard_subscribers(&channel)
            == 1
    })
    .await;

    let promoting = cluster.clone();
    let started = Instant::now();
    tokio::task::spawn_blocking(move || {
        let slot = key_slot(format!("test:{}", name_off_the_seed(&promoting)).as_bytes());
        let primary = promoting.primary_for_slot(slot);
        let replica = promoting.replicas_of(primary)[0];
        promoting.failover(replica);
    })
    .await
    .unwrap();
    let now = cluster.primary_for_key(&key);
    assert_ne!(now.port(), old, "no new primary");
    let failed_over = started.elapsed();
    let other = client(&cluster).await;
    let (busy, back) = until_answered(
        &other,
        &name,
        Duration::from_secs(5),
        Duration::from_secs(10),
    )
    .await;
    assert!(
        busy.is_none(),
        "acquired a held lock after a manual failover"
    );
    println!("manual failover: {failed_over:?} for CLUSTER FAILOVER, then {back:?} until the new primary answers");
    // Nothing was lost: the holder holds, and renews, at the new primary.
    // (The waiter may still listen at the old primary, now a replica: a
    // shard's messages reach its replicas too.)
    let _ = now;
    assert!(guard.is_held());
    assert_eq!(
        guard.extend(Duration::from_secs(2)).await.unwrap(),
        Ownership::Owned
    );
    let released = Instant::now();
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    let (acquired, got) = waiting.await.unwrap();
    let got = got.expect("woken and acquired");
    assert!(
        acquired - released < Duration::from_secs(5),
        "woken {:?} after the release: not by it",
        acquired - released
    );
    assert!(got.fencing_token().await.unwrap() > token);
    assert_eq!(got.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_is_replaced_and_a_stale_holder_is_told_and_fenced() {
    let cluster = start().await;
    let name = name_off_the_seed(&cluster);
    let key = format!("test:{name}");
    let (holder, rival) = (client(&cluster).await, client(&cluster).await);
    let ttl = Duration::from_secs(3);
    let guard = holder
        .lock(&name, ttl)
        .unwrap()
        .with_fencing()
        .with_watchdog()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let stale_token = guard.issued_fencing_token().unwrap();
    // The protected resource lives on a primary that stays up.
    let victim = cluster.primary_for_key(&key).port();
    let output = (0..)
        .map(|i| format!("output-{i}"))
        .find(|n| cluster.primary_for_key(format!("test:{n}")).port() != victim)
        .unwrap();
    let resource = holder.fenced(&output).unwrap();
    assert_eq!(
        resource.write(stale_token, b"before").await.unwrap(),
        FencedWrite::Accepted
    );

    // Asynchronous replication can lose the latest writes in a failover.
    // Make it certain here: the replica that will be promoted forgets its
    // data, the lock key among it, as if the writes never reached it.
    let replica = cluster.replicas_of(cluster.primary_for_key(&key))[0];
    // (Keyed commands at a replica are redirected to its primary; SCAN and
    // FLUSHALL are not.)
    let replica_has_key = || {
        replica
            .command(&["SCAN", "0", "MATCH", &key, "COUNT", "100000"])
            .unwrap()
            .contains(&key)
    };
    latchkey_testkit::eventually("the replica has the key", || async { replica_has_key() }).await;
    replica
        .command(&["CONFIG", "SET", "replica-read-only", "no"])
        .unwrap();
    replica.command(&["FLUSHALL"]).unwrap();
    assert!(!replica_has_key());

    let killed_at = Instant::now();
    let mut owned = Arc::try_unwrap(cluster).unwrap_or_else(|_| panic!("cluster shared"));
    owned
        .nodes_mut()
        .iter_mut()
        .find(|n| n.port() == victim)
        .unwrap()
        .kill();
    let cluster = Arc::new(owned);
    let (answer, back) = until_answered(&rival, &name, ttl, Duration::from_secs(20)).await;
    println!("kill -9 of a primary: {back:?} until its slots answer again");
    assert!(back < Duration::from_secs(15), "{back:?}");
    assert_ne!(cluster.primary_for_key(&key).port(), victim);

    // The new primary never saw the lock: the rival gets it, the old
    // holder is told before its TTL, and its stale token cannot overwrite
    // the new holder's write.
    let new = answer.expect("the lock was lost in the failover");
    tokio::time::timeout(ttl, guard.lost())
        .await
        .expect("the stale holder was not told");
    assert!(!guard.is_held());
    let fresh = new.issued_fencing_token().unwrap();
    assert!(fresh > stale_token);
    assert_eq!(
        resource.write(fresh, b"new").await.unwrap(),
        FencedWrite::Accepted
    );
    assert_eq!(
        resource.write(stale_token, b"stale").await.unwrap(),
        FencedWrite::Rejected { seen: fresh }
    );
    assert_eq!(new.release().await.unwrap(), Ownership::Owned);
    println!(
        "lost() and fencing checked {:?} after the kill",
        killed_at.elapsed()
    );
}
