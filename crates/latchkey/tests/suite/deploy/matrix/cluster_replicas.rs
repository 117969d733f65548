//! Replicated acquisition on a Redis Cluster: `WAIT` goes to the primary
//! that serves the lock's slot (whose connection carried the write), never
//! to the other primaries; too few replicas there is a typed error.

use std::collections::HashMap;
use std::time::Duration;

use latchkey::{Client, Error, Ownership};
use latchkey_testkit::RedisCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_is_routed_to_the_node_of_the_key() {
    let cluster = tokio::task::spawn_blocking(|| {
        RedisCluster::builder()
            .primaries(3)
            .replicas_per_primary(1)
            .start()
    })
    .await
    .unwrap();
    let client = Client::builder(&cluster.seed_url())
        .prefix("test:")
        .connect()
        .await
        .expect("connect to the cluster");
    let before: HashMap<u16, u64> = cluster
        .primaries()
        .iter()
        .map(|p| (p.port(), p.server().calls("wait")))
        .collect();
    let mut expected: HashMap<u16, u64> = before.clone();
    for i in 0..12 {
        let name = format!("job-{i}");
        let owner = cluster.primary_for_key(format!("test:{name}")).port();
        *expected.get_mut(&owner).unwrap() += 1;
        let lock = client
            .lock(&name, Duration::from_secs(10))
            .unwrap()
            .with_fencing()
            // Roomier than the default: this test is about where `WAIT`
            // goes, and a replica on a loaded CI box can be slow to ack.
            .with_replicas_within(1, Duration::from_millis(1500))
            .unwrap();
        let guard = lock.try_acquire().await.unwrap().expect("free");
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    }
    for primary in cluster.primaries() {
        assert_eq!(
            primary.server().calls("wait"),
            expected[&primary.port()],
            "WAITs on primary {}",
            primary.port()
        );
    }
    assert!(
        cluster
            .primaries()
            .iter()
            .all(|p| expected[&p.port()] > before[&p.port()]),
        "the names cover every primary"
    );

    // One replica each: asking for two fails, and the lock is not left held.
    let lock = client
        .lock("job-0", Duration::from_secs(10))
        .unwrap()
        .with_replicas_within(2, Duration::from_millis(100))
        .unwrap();
    match lock.try_acquire().await {
        Err(Error::TooFewReplicas {
            wanted: 2,
            acked: 1,
            ..
        }) => {}
        other => panic!("expected TooFewReplicas, got {other:?}"),
    }
    let owner = cluster.primary_for_key("test:job-0");
    assert_eq!(owner.command(&["EXISTS", "test:job-0"]).unwrap(), "0");
}
