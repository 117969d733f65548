//! A revocation hands a fair lock to the head of its queue, and the holder
//! it hands to is the legitimate next one: its fencing token is above the
//! revocation's, so a resource raised to the revocation's token refuses the
//! revoked holder and accepts the next (fenced and unfenced waiters alike),
//! on one server and on a Redis Cluster. And a key no latchkey client
//! wrote is never revoked.

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::inspect::PrimitiveInfo;
use latchkey::{Client, Error, FencedWrite, Kind};
use latchkey_testkit::RedisCluster;

const TTL: Duration = Duration::from_secs(30);
const SOON: Duration = Duration::from_secs(10);

/// Holder, a fenced waiter and an unfenced waiter of the fair lock `name`;
/// revoked; the resource raised to the revocation's token: the holder's
/// writes are refused, both waiters' (in their turn) accepted.
async fn revoked_fair_lock_goes_to_a_legitimate_holder(
    holder: &Client,
    operator: &Client,
    name: &str,
) {
    let fair = |c: &Client| c.lock(name, TTL).unwrap().fair().unwrap();
    let guard = fair(holder).with_fencing().acquire().await.unwrap();
    let stale = guard.fencing_token().await.unwrap();
    let output = holder.fenced(format!("{name}-output")).unwrap();
    assert_eq!(
        output.write(stale, b"holder").await.unwrap(),
        FencedWrite::Accepted
    );

    let fenced = fair(operator).with_fencing();
    let first = tokio::spawn(async move { fenced.acquire_until(SOON).await });
    queued(operator, name, 1).await;
    let unfenced = fair(operator);
    let second = tokio::spawn(async move { unfenced.acquire_until(SOON).await });
    queued(operator, name, 2).await;

    let revoked = operator.revoke(name).await.unwrap();
    assert_eq!((revoked[0].kind, revoked[0].ended), (Kind::FairLock, 1));
    let fence = revoked[0].fencing_token.expect("the revocation's token");
    assert!(fence > stale);
    let resource = operator.fenced(format!("{name}-output")).unwrap();
    assert_eq!(resource.raise(fence).await.unwrap(), fence);
    assert!(matches!(
        output.write(stale, b"stale").await.unwrap(),
        FencedWrite::Rejected { .. }
    ));

    let next = first.await.unwrap().expect("handed to the queue's head");
    let token = next.fencing_token().await.unwrap();
    assert!(
        token > fence,
        "next holder's token {token} <= fence {fence}"
    );
    assert_eq!(
        resource.write(token, b"next").await.unwrap(),
        FencedWrite::Accepted
    );
    // Inspection shows the new holder's token, not the revocation's.
    let shown = operator.describe(name).await.unwrap();
    let lock = shown.iter().find_map(|i| match i {
        PrimitiveInfo::FairLock(f) => Some(&f.lock),
        PrimitiveInfo::Lock(l) => Some(l),
        _ => None,
    });
    assert_eq!(lock.and_then(|l| l.fencing_token), Some(token));

    drop(guard);
    assert_eq!(next.release().await.unwrap(), latchkey::Ownership::Owned);
    let last = second.await.unwrap().expect("then the unfenced waiter");
    let later = last.fencing_token().await.unwrap();
    assert!(later > token);
    assert_eq!(
        resource.write(later, b"last").await.unwrap(),
        FencedWrite::Accepted
    );
}

/// Until `name`'s fair queue holds `n` live waiters.
async fn queued(client: &Client, name: &str, n: usize) {
    eventually(&format!("{n} waiter(s) queued for {name}"), || async {
        client
            .describe(name)
            .await
            .unwrap()
            .iter()
            .any(|i| match i {
                PrimitiveInfo::FairLock(f) => f.queue.len() >= n,
                _ => false,
            })
    })
    .await;
}

#[tokio::test]
async fn a_revoked_fair_lock_goes_to_its_head_with_a_token_above_the_fence() {
    let redis = RedisServer::start();
    let holder = client(&redis.url()).await;
    let operator = client(&redis.url()).await;
    revoked_fair_lock_goes_to_a_legitimate_holder(&holder, &operator, "fl2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_too() {
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
            .expect("connect to the cluster")
    };
    let (holder, operator) = (connect().await, connect().await);
    assert!(holder.connection().is_cluster());
    revoked_fair_lock_goes_to_a_legitimate_holder(&holder, &operator, "fl2").await;
}

/// A plain string under the prefix (another program's data, no TTL) is no
/// hold: it is not deleted, and nothing is raised. Nor is a latchkey 0.1
/// token (`lk1:`), which is no longer read.
#[tokio::test]
async fn a_key_no_latchkey_client_wrote_is_not_revoked() {
    let redis = RedisServer::start();
    let operator = Client::builder(&redis.url())
        .prefix("")
        .connect()
        .await
        .unwrap();
    redis.command(&["SET", "mydata", "important"]).unwrap();
    assert!(matches!(
        operator.revoke("mydata").await,
        Err(Error::ForeignValue { .. })
    ));
    assert_eq!(
        redis.command(&["GET", "mydata"]).unwrap().trim(),
        "important"
    );
    assert_eq!(
        redis.command(&["EXISTS", "{mydata}:fence"]).unwrap().trim(),
        "0"
    );
    let v1 = "lk1:0123456789abcdef0123456789abcdef:1700000000000:42:old-host";
    redis.command(&["SET", "old", v1, "PX", "30000"]).unwrap();
    assert!(matches!(
        operator.revoke("old").await,
        Err(Error::ForeignValue { .. })
    ));
    assert_eq!(redis.command(&["GET", "old"]).unwrap().trim(), v1);
    // The same for a read-write lock's writer key.
    redis.command(&["SET", "{cfg}:rw:writer", "x"]).unwrap();
    assert!(matches!(
        operator.revoke("cfg").await,
        Err(Error::ForeignValue { .. })
    ));
    assert_eq!(
        redis.command(&["GET", "{cfg}:rw:writer"]).unwrap().trim(),
        "x"
    );
}
