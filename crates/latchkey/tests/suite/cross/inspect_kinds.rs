//! One inspection for every kind: `Client::describe` and `Client::list_all`
//! tell what each name is and who holds it (by host and pid, never by
//! token), for a lock, a fair lock with a queue, a semaphore, a read-write
//! lock, a latch, a barrier and an election, and for a name that is two
//! kinds at once.

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::inspect::PrimitiveInfo;
use latchkey::Kind;

const TTL: Duration = Duration::from_secs(60);

fn kinds(infos: &[PrimitiveInfo]) -> Vec<Kind> {
    infos.iter().map(PrimitiveInfo::kind).collect()
}

#[tokio::test]
async fn every_kind_is_described_with_its_holders() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let me = gethostname_lossy();

    let _lock = client.lock("l", TTL).unwrap().acquire().await.unwrap();
    let fair = client.lock("f", TTL).unwrap().fair().unwrap();
    let _fair_holder = fair.acquire().await.unwrap();
    let waiter = tokio::spawn({
        let fair = fair.clone();
        async move { fair.acquire_until(Duration::from_secs(30)).await }
    });
    let semaphore = client.semaphore("s", 3, TTL).unwrap();
    let _p1 = semaphore.acquire().await.unwrap();
    let _p2 = semaphore.acquire().await.unwrap();
    let rw = client.rwlock("rw", TTL).unwrap();
    let _r1 = rw.try_read().await.unwrap().expect("a read hold");
    let _r2 = rw.try_read().await.unwrap().expect("a second read hold");
    let latch = client.latch("go", TTL).unwrap();
    assert!(latch.create(3).await.unwrap());
    latch.count_down().await.unwrap();
    let barrier = client.barrier("meet", 3, TTL).unwrap();
    let arrival = tokio::spawn({
        let barrier = barrier.clone();
        async move { barrier.arrive_and_wait_until(Duration::from_secs(30)).await }
    });
    let election = client.election("e", TTL).unwrap();
    let _leading = election
        .try_campaign("node-a")
        .await
        .unwrap()
        .expect("elected");

    eventually("the fair waiter queues and the party arrives", || async {
        let f = client.describe("f").await.unwrap();
        let b = barrier.state().await.unwrap();
        kinds(&f) == [Kind::FairLock] && b.is_some_and(|(_, arrived)| arrived == 1)
    })
    .await;

    let one = |infos: Vec<PrimitiveInfo>| {
        assert_eq!(infos.len(), 1, "{infos:?}");
        infos.into_iter().next().unwrap()
    };
    match one(client.describe("l").await.unwrap()) {
        PrimitiveInfo::Lock(info) => {
            assert!(info.held);
            assert_eq!(info.holder.unwrap().pid, std::process::id());
        }
        other => panic!("{other:?}"),
    }
    match one(client.describe("f").await.unwrap()) {
        PrimitiveInfo::FairLock(info) => {
            assert!(info.lock.held);
            assert_eq!(info.queue.len(), 1, "{info:?}");
            assert_eq!(
                info.queue[0].holder.as_ref().unwrap().pid,
                std::process::id()
            );
        }
        other => panic!("{other:?}"),
    }
    match one(client.describe("s").await.unwrap()) {
        PrimitiveInfo::Semaphore(info) => {
            assert_eq!(info.permits.len(), 2);
            assert!(info
                .permits
                .iter()
                .all(|p| p.holder.as_ref().unwrap().host == me));
            assert!(info.permits[0].ttl.unwrap() <= TTL);
        }
        other => panic!("{other:?}"),
    }
    match one(client.describe("rw").await.unwrap()) {
        PrimitiveInfo::RwLock(info) => {
            assert_eq!(info.readers.len(), 2);
            assert!(info.writer.is_none());
        }
        other => panic!("{other:?}"),
    }
    match one(client.describe("go").await.unwrap()) {
        PrimitiveInfo::Latch(info) => assert_eq!(info.count, Some(2)),
        other => panic!("{other:?}"),
    }
    match one(client.describe("meet").await.unwrap()) {
        PrimitiveInfo::Barrier(info) => {
            assert_eq!(
                (info.parties, info.arrived, info.generation),
                (Some(3), 1, 0)
            );
        }
        other => panic!("{other:?}"),
    }
    match one(client.describe("e").await.unwrap()) {
        PrimitiveInfo::Election(info) => {
            let leader = info.leader.expect("a leader");
            assert_eq!(leader.holder.unwrap().pid, std::process::id());
            assert_eq!(info.value.as_deref(), Some(&b"node-a"[..]));
            assert!(info.term.is_some_and(|t| t > 0));
        }
        other => panic!("{other:?}"),
    }
    assert!(client.describe("nothing-here").await.unwrap().is_empty());

    let listed = client.list_all("*").await.unwrap();
    let pairs: Vec<(String, Kind)> = listed
        .iter()
        .map(|i| (String::from_utf8_lossy(i.name()).into_owned(), i.kind()))
        .collect();
    let expected: Vec<(String, Kind)> = [
        ("e", Kind::Election),
        ("f", Kind::FairLock),
        ("go", Kind::Latch),
        ("l", Kind::Lock),
        ("meet", Kind::Barrier),
        ("rw", Kind::RwLock),
        ("s", Kind::Semaphore),
    ]
    .into_iter()
    .map(|(n, k)| (n.to_owned(), k))
    .collect();
    assert_eq!(pairs, expected);
    // A pattern narrows it, by name, for keys found under any suffix.
    let narrowed = client.list_all("[rs]*").await.unwrap();
    assert_eq!(kinds(&narrowed), [Kind::RwLock, Kind::Semaphore]);
    waiter.abort();
    arrival.abort();
}

#[tokio::test]
async fn a_name_that_is_two_kinds_is_described_as_both() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let _lock = client.lock("both", TTL).unwrap().acquire().await.unwrap();
    let _permit = client
        .semaphore("both", 2, TTL)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let described = client.describe("both").await.unwrap();
    assert_eq!(kinds(&described), [Kind::Lock, Kind::Semaphore]);
    let listed = client.list_all("both").await.unwrap();
    assert_eq!(kinds(&listed), [Kind::Lock, Kind::Semaphore]);
    // A writer, and a writer waiting behind a reader.
    let rw = client.rwlock("w", TTL).unwrap();
    let writer = rw.try_write().await.unwrap().expect("a write hold");
    match &client.describe("w").await.unwrap()[..] {
        [PrimitiveInfo::RwLock(info)] => {
            assert!(info.writer.as_ref().is_some_and(|w| w.holder.is_some()));
        }
        other => panic!("{other:?}"),
    }
    drop(writer);
    let rw2 = client.rwlock("w2", TTL).unwrap();
    let _reader = rw2.try_read().await.unwrap().expect("a read hold");
    let waiting = tokio::spawn({
        let rw2 = rw2.clone();
        async move { rw2.write_until(Duration::from_secs(30)).await }
    });
    eventually("the writer waits", || async {
        matches!(&client.describe("w2").await.unwrap()[..],
            [PrimitiveInfo::RwLock(info)] if info.writers_waiting.len() == 1 && info.readers.len() == 1)
    })
    .await;
    waiting.abort();
}

fn gethostname_lossy() -> String {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    host.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// On a Redis Cluster every key the inspection reads is in the name's slot
/// (a CROSSSLOT error would fail this), and `list_all` walks every primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_is_described_and_listed_on_a_cluster() {
    let cluster = tokio::task::spawn_blocking(|| {
        latchkey_testkit::RedisCluster::builder()
            .primaries(3)
            .replicas_per_primary(0)
            .start()
    })
    .await
    .unwrap();
    let client = latchkey::Client::builder(&cluster.seed_url())
        .prefix("test:")
        .connect()
        .await
        .expect("connect to the cluster");
    let mut guards = Vec::new();
    let mut primaries = std::collections::HashSet::new();
    for i in 0..6 {
        let name = format!("n-{i}");
        primaries.insert(cluster.primary_for_key(format!("{{test:{name}}}")).port());
        guards.push(
            client
                .semaphore(&name, 2, TTL)
                .unwrap()
                .acquire()
                .await
                .unwrap(),
        );
        let latch = client.latch(&name, TTL).unwrap();
        assert!(latch.create(2).await.unwrap());
        assert_eq!(
            kinds(&client.describe(&name).await.unwrap()),
            [Kind::Semaphore, Kind::Latch]
        );
    }
    assert!(primaries.len() > 1, "the names span several primaries");
    let listed = client.list_all("n-*").await.unwrap();
    assert_eq!(listed.len(), 12, "{listed:?}");
    assert!(listed
        .iter()
        .all(|i| matches!(i.kind(), Kind::Semaphore | Kind::Latch)));
}
