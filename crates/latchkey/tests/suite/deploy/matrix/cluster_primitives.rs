//! The latch, barrier, semaphore and read-write lock on a real Redis
//! Cluster (3 primaries from the test kit): every script names keys of one
//! hash tag only, so it runs on the node of that slot (a CROSSSLOT error
//! would fail these tests), and waiters are woken by the scripts' SPUBLISH
//! (sharded pub/sub, at the node of the primitive's slot).

use std::time::Duration;

use latchkey::Client;
use latchkey_testkit::RedisCluster;

const TTL: Duration = Duration::from_secs(30);

/// Until the node that owns `channel`'s slot has a sharded subscriber on
/// it: the waiter listens (sharded pub/sub, `SSUBSCRIBE` at that node).
async fn until_listening(cluster: &RedisCluster, channel: String) {
    latchkey_testkit::eventually(&format!("a waiter listens on {channel}"), || async {
        cluster
            .primary_for_key(&channel)
            .server()
            .shard_subscribers(&channel)
            > 0
    })
    .await
}
const WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_primitive_works_on_a_cluster() {
    let cluster = tokio::task::spawn_blocking(|| {
        RedisCluster::builder()
            .primaries(3)
            .replicas_per_primary(0)
            .start()
    })
    .await
    .unwrap();
    let client = Client::builder(&cluster.seed_url())
        .prefix("test:")
        .connect()
        .await
        .expect("connect to the cluster");
    assert!(client.connection().is_cluster());
    let mut primaries = std::collections::HashSet::new();
    for i in 0..6 {
        let name = format!("prim-{i}");
        primaries.insert(cluster.primary_for_key(format!("{{test:{name}}}")).port());

        // Latch: a waiter woken by the opening.
        let latch = client.latch(&name, TTL).unwrap();
        assert!(latch.create(1).await.unwrap());
        let waiting = latch.clone();
        let waiter = tokio::spawn(async move { waiting.wait_until(WAIT).await });
        until_listening(&cluster, format!("{{test:{name}}}:latch:opened")).await;
        assert_eq!(latch.count_down().await.unwrap(), 0);
        waiter.await.unwrap().unwrap();

        // Barrier of 2.
        let barrier = client.barrier(&name, 2, TTL).unwrap();
        let other = barrier.clone();
        let first = tokio::spawn(async move { other.arrive_and_wait_until(WAIT).await });
        assert_eq!(barrier.arrive_and_wait_until(WAIT).await.unwrap(), 0);
        assert_eq!(first.await.unwrap().unwrap(), 0);

        // Semaphore: a waiter woken by a release, fenced.
        let semaphore = client.semaphore(&name, 1, TTL).unwrap().with_fencing();
        let held = semaphore.try_acquire().await.unwrap().expect("free");
        assert!(held.issued_fencing_token().is_some());
        let waiting = semaphore.clone();
        let waiter = tokio::spawn(async move { waiting.acquire_until(WAIT).await });
        until_listening(&cluster, format!("{{test:{name}}}:permits:released")).await;
        let _ = held.release().await.unwrap();
        let _ = waiter.await.unwrap().unwrap().release().await.unwrap();
        assert!(semaphore.holders().await.unwrap().is_empty());

        // Read-write lock: a writer waits for the reader.
        let rw = client.rwlock(&name, TTL).unwrap().with_fencing();
        let reader = rw.try_read().await.unwrap().expect("free");
        let waiting = rw.clone();
        let writer = tokio::spawn(async move { waiting.write_until(WAIT).await });
        until_listening(&cluster, format!("{{test:{name}}}:rw:released")).await;
        let _ = reader.release().await.unwrap();
        let writer = writer.await.unwrap().unwrap();
        assert!(writer.issued_fencing_token().is_some());
        let _ = writer.release().await.unwrap();
    }
    assert!(
        primaries.len() >= 2,
        "the names cover several primaries: {primaries:?}"
    );
}
