//! Every primitive but the plain lock (which has the suite in
//! `matrix.rs`) on one deployment: the fair lock, the semaphore, the
//! read-write lock, the latch, the barrier and the election, each with the
//! promise it makes and a waiter woken where its channel is published.

use std::time::Duration;

use latchkey::{Client, Ownership};

use super::deployment::{Deployment, Kind};

const TTL: Duration = Duration::from_secs(30);
/// A bound on every wait here: far above a wake-up, below the holders' TTL
/// (so no waiter gets in by a holder's expiry).
const WAIT: Duration = Duration::from_secs(15);

/// One deployment per test; each primitive gets a few names so that on a
/// cluster they land on more than one primary.
pub async fn every_primitive_keeps_its_promises(kind: Kind) {
    let d = Deployment::start(kind).await;
    let (a, b, c) = (d.client().await, d.client().await, d.client().await);
    for i in 0..2 {
        let name = format!("prim-{i}");
        fair_lock_serves_waiters_in_order(&d, [&a, &b, &c], &name).await;
        semaphore_never_exceeds_its_permits(&d, [&a, &b, &c], &name).await;
        rwlock_shares_readers_and_excludes_the_writer(&d, [&a, &b, &c], &name).await;
        latch_opens_exactly_at_zero(&d, [&a, &b], &name).await;
        barrier_releases_every_party_together(&d, [&a, &b, &c], &name).await;
        election_has_one_leader_with_increasing_terms(&d, [&a, &b], &name).await;
    }
}

/// The key that names `name`'s slot (its hash tag) under the test prefix.
fn stem(name: &str) -> String {
    format!("{{test:{name}}}")
}

async fn fair_lock_serves_waiters_in_order(d: &Deployment, [a, b, c]: [&Client; 3], name: &str) {
    let stem = stem(name);
    let fair = |client: &Client| client.lock(name, TTL).unwrap().fair().unwrap();
    let held = fair(a).try_acquire().await.unwrap().expect("free");
    assert!(
        fair(b).try_acquire().await.unwrap().is_none(),
        "{name} twice"
    );
    let first = fair(b);
    let first = tokio::spawn(async move { first.acquire_until(WAIT).await });
    let queue = format!("{stem}:queue");
    d.until_subscribed_like(&stem, &format!("{stem}:handoff:*"))
        .await;
    latchkey_testkit::eventually("the first waiter queued", || async {
        d.command(&stem, &["LLEN", &queue]) == "1"
    })
    .await;
    let second = fair(c);
    let second = tokio::spawn(async move { second.acquire_until(WAIT).await });
    latchkey_testkit::eventually("the second waiter queued", || async {
        d.command(&stem, &["LLEN", &queue]) == "2"
    })
    .await;
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    let first = first.await.unwrap().expect("the first waiter gets it");
    // The second still waits behind the first: one holder at a time.
    assert!(!second.is_finished(), "two holders of {name}");
    assert!(fair(a).try_acquire().await.unwrap().is_none());
    assert_eq!(first.release().await.unwrap(), Ownership::Owned);
    let second = second.await.unwrap().expect("the second waiter gets it");
    assert_eq!(second.release().await.unwrap(), Ownership::Owned);
}

async fn semaphore_never_exceeds_its_permits(d: &Deployment, [a, b, c]: [&Client; 3], name: &str) {
    let stem = stem(name);
    let sem = |client: &Client| client.semaphore(name, 2, TTL).unwrap().with_fencing();
    let one = sem(a).try_acquire().await.unwrap().expect("a permit");
    let two = sem(b).try_acquire().await.unwrap().expect("a permit");
    assert!(
        sem(c).try_acquire().await.unwrap().is_none(),
        "a third permit of 2"
    );
    assert!(one.issued_fencing_token() < two.issued_fencing_token());
    let waiting = sem(c);
    let waiter = tokio::spawn(async move { waiting.acquire_until(WAIT).await });
    d.until_subscribed(&stem, &format!("{stem}:permits:released"))
        .await;
    assert_eq!(sem(a).holders().await.unwrap().len(), 2);
    let _ = one.release().await.unwrap();
    let three = waiter.await.unwrap().expect("woken by the release");
    assert_eq!(sem(a).holders().await.unwrap().len(), 2, "never above 2");
    assert!(sem(a).try_acquire().await.unwrap().is_none());
    let _ = two.release().await.unwrap();
    let _ = three.release().await.unwrap();
    assert!(sem(a).holders().await.unwrap().is_empty());
}

async fn rwlock_shares_readers_and_excludes_the_writer(
    d: &Deployment,
    [a, b, c]: [&Client; 3],
    name: &str,
) {
    let stem = stem(name);
    let rw = |client: &Client| client.rwlock(name, TTL).unwrap().with_fencing();
    let r1 = rw(a).try_read().await.unwrap().expect("free");
    let r2 = rw(b).try_read().await.unwrap().expect("readers share");
    assert!(
        rw(c).try_write().await.unwrap().is_none(),
        "a writer beside readers"
    );
    let waiting = rw(c);
    let writer = tokio::spawn(async move { waiting.write_until(WAIT).await });
    d.until_subscribed(&stem, &format!("{stem}:rw:released"))
        .await;
    let _ = r1.release().await.unwrap();
    assert!(!writer.is_finished(), "a writer beside a reader");
    let _ = r2.release().await.unwrap();
    let w = writer
        .await
        .unwrap()
        .expect("the writer, once the readers left");
    assert!(w.issued_fencing_token().is_some());
    assert!(
        rw(a).try_read().await.unwrap().is_none(),
        "a reader beside the writer"
    );
    assert!(rw(b).try_write().await.unwrap().is_none(), "two writers");
    let _ = w.release().await.unwrap();
    let _ = rw(a)
        .try_read()
        .await
        .unwrap()
        .expect("free again")
        .release()
        .await;
}

async fn latch_opens_exactly_at_zero(d: &Deployment, [a, b]: [&Client; 2], name: &str) {
    let stem = stem(name);
    let latch = a.latch(name, TTL).unwrap();
    assert!(latch.create(2).await.unwrap());
    let waiting = b.latch(name, TTL).unwrap();
    let waiter = tokio::spawn(async move { waiting.wait_until(WAIT).await });
    d.until_subscribed(&stem, &format!("{stem}:latch:opened"))
        .await;
    assert_eq!(latch.count_down().await.unwrap(), 1);
    // At 1 it is still shut: a bounded wait runs out.
    assert!(matches!(
        latch.wait_until(Duration::from_millis(200)).await,
        Err(latchkey::Error::WaitTimedOut { .. })
    ));
    assert!(!waiter.is_finished(), "opened at 1");
    assert_eq!(latch.count_down().await.unwrap(), 0);
    waiter.await.unwrap().expect("the waiter sees it open");
    latch.wait_until(Duration::ZERO).await.unwrap();
}

async fn barrier_releases_every_party_together(
    d: &Deployment,
    [a, b, c]: [&Client; 3],
    name: &str,
) {
    let stem = stem(name);
    let key = format!("{stem}:barrier");
    let mut parties = Vec::new();
    for client in [a, b] {
        let barrier = client.barrier(name, 3, TTL).unwrap();
        parties.push(tokio::spawn(async move {
            barrier.arrive_and_wait_until(WAIT).await
        }));
    }
    latchkey_testkit::eventually("two parties arrived", || async {
        d.command(&stem, &["HGET", &key, "arrived"]) == "2"
    })
    .await;
    assert!(
        parties.iter().all(|p| !p.is_finished()),
        "released at 2 of 3"
    );
    let last = c.barrier(name, 3, TTL).unwrap();
    let generation = last.arrive_and_wait_until(WAIT).await.unwrap();
    let _: u64 = generation; // the last party goes through
    for party in parties {
        assert_eq!(party.await.unwrap().unwrap(), generation, "one generation");
    }
}

async fn election_has_one_leader_with_increasing_terms(
    d: &Deployment,
    [a, b]: [&Client; 2],
    name: &str,
) {
    let stem = stem(name);
    let leader = a.election(name, TTL).unwrap().campaign("a").await.unwrap();
    let standby = b.election(name, TTL).unwrap();
    assert!(
        standby.try_campaign("b").await.unwrap().is_none(),
        "two leaders"
    );
    let campaigning = standby.clone();
    let next = tokio::spawn(async move { campaigning.campaign_until("b", WAIT).await });
    d.until_subscribed(&stem, &format!("{stem}:election:changes"))
        .await;
    let now = standby.leader().await.unwrap().expect("a leader");
    assert_eq!((now.value, now.term), (b"a".to_vec(), leader.term()));
    let first = leader.term();
    assert_eq!(leader.resign().await.unwrap(), Ownership::Owned);
    let next = next.await.unwrap().expect("the standby takes over");
    assert!(next.term() > first, "term {} after {first}", next.term());
    assert!(next.is_leader());
    assert_eq!(next.resign().await.unwrap(), Ownership::Owned);
}
