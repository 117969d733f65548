//! Every primitive held and waited on while the node that owns its slot
//! fails over: on a cluster the primary of the primitives' one slot (all
//! their names share the hash tag `{fo}`), on a Sentinel set the primary.
//! Afterwards every hold is still ours on the new primary, every waiter is
//! listening there again, and each release, count-down, arrival and
//! resignation wakes its waiter.

use std::time::Duration;

use latchkey::{Client, Ownership};
use latchkey_testkit::eventually;

use super::deployment::{Deployment, Kind};

/// Longer than any failover here, so holds outlive it without the watchdog
/// having to win a race against it.
const TTL: Duration = Duration::from_secs(40);
/// Waiters give up after this: a failover plus a wake-up, below the TTL
/// (so no waiter gets in by the holder's expiry).
const WAIT: Duration = Duration::from_secs(30);

/// How the node that owns the slot goes away.
#[derive(Clone, Copy, Debug)]
pub enum How {
    /// `CLUSTER FAILOVER` at its replica; `SENTINEL FAILOVER`.
    Graceful,
    /// `kill -9` of the primary (after its replica caught up).
    Kill,
}

/// The name of primitive `what`, in the slot of the hash tag `{fo}`.
fn name(what: &str) -> String {
    format!("{{fo}}{what}")
}

/// The key (or key stem) `what` is stored under: the name carries its own
/// hash tag, so the stem is the prefixed name.
fn stem(what: &str) -> String {
    format!("test:{}", name(what))
}

/// Every channel a waiter of this test listens on has a subscriber where
/// it is published (`after`: after the failover, where a cluster's
/// sharded messages reach, see [`Deployment::until_heard_in_shard`]).
async fn until_every_waiter_listens(d: &Deployment, after: bool) {
    for (what, suffix) in [
        ("lock", ":released"),
        ("sem", ":permits:released"),
        ("rw", ":rw:released"),
        ("latch", ":latch:opened"),
        ("bar", ":barrier:released"),
        ("el", ":election:changes"),
    ] {
        let channel = format!("{}{suffix}", stem(what));
        if after {
            d.until_heard_in_shard(&stem(what), &channel).await;
        } else {
            d.until_subscribed(&stem(what), &channel).await;
        }
    }
}

/// Runs the kit's blocking failover of `how` on the deployment's node of
/// the `{fo}` slot; returns the deployment.
async fn fail_over(d: Deployment, how: How) -> Deployment {
    tokio::task::spawn_blocking(move || {
        let mut d = d;
        match (&mut d, how) {
            (Deployment::Sentinel(set), How::Graceful) => {
                set.wait_replicas_synced();
                set.failover();
            }
            (Deployment::Sentinel(set), How::Kill) => {
                set.wait_replicas_synced();
                set.kill_primary();
            }
            (Deployment::Cluster(cluster), how) => {
                let primary = cluster.primary_for_key("{fo}");
                let victim = primary.port();
                let replica = cluster.replicas_of(primary)[0].port();
                // The replica has every write of the slot before it goes.
                cluster.wait_replicas_synced(primary);
                match how {
                    How::Graceful => {
                        let replica = cluster.nodes().iter().find(|n| n.port() == replica);
                        cluster.failover(replica.expect("the replica"));
                    }
                    How::Kill => {
                        let nodes = cluster.nodes_mut();
                        let node = nodes.iter_mut().find(|n| n.port() == victim);
                        node.expect("the primary").kill();
                        let started = std::time::Instant::now();
                        while cluster.primary_for_key("{fo}").port() == victim {
                            assert!(started.elapsed() < Duration::from_secs(30), "no promotion");
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        cluster.wait_ok();
                    }
                }
                assert_ne!(cluster.primary_for_key("{fo}").port(), victim);
            }
            (Deployment::Standalone(_), _) => panic!("a standalone server has no failover"),
        }
        d
    })
    .await
    .expect("the failover")
}

/// `waiter`, still waiting; else a panic that says how it ended.
async fn still_waiting<G, E: std::fmt::Debug>(
    what: &str,
    waiter: tokio::task::JoinHandle<Result<G, E>>,
) -> tokio::task::JoinHandle<Result<G, E>> {
    if !waiter.is_finished() {
        return waiter;
    }
    match waiter.await.expect("the waiter's task") {
        Ok(_) => panic!("{what} waiter got in beside a holder"),
        Err(e) => panic!("{what} waiter gave up during the failover: {e:?}"),
    }
}

/// A signal sent until `listener` hears it (signals are fire-and-forget: a
/// listener that re-subscribes on the new primary misses earlier ones).
async fn signal_until_heard(client: &Client, listener: &mut latchkey::Listener) {
    let started = std::time::Instant::now();
    loop {
        client.signal(name("sig"), "after").await.unwrap();
        if let Ok(signal) = listener.recv_timeout(Duration::from_millis(100)).await {
            assert_eq!(signal.payload, b"after");
            return;
        }
        assert!(
            started.elapsed() < WAIT,
            "no signal heard after the failover"
        );
    }
}

pub async fn every_primitive_across_a_failover(kind: Kind, how: How) {
    let d = Deployment::start_with(kind, 1).await;
    let (a, b) = (d.client().await, d.client().await);

    let lock = a.lock(name("lock"), TTL).unwrap().with_watchdog();
    let guard = lock.try_acquire().await.unwrap().expect("free");
    let waiting = b.lock(name("lock"), TTL).unwrap();
    let lock_waiter = tokio::spawn(async move { waiting.acquire_until(WAIT).await });

    let sem = |c: &Client| c.semaphore(name("sem"), 1, TTL).unwrap().with_watchdog();
    let permit = sem(&a).try_acquire().await.unwrap().expect("a permit");
    let waiting = sem(&b);
    let permit_waiter = tokio::spawn(async move { waiting.acquire_until(WAIT).await });

    let rw = |c: &Client| c.rwlock(name("rw"), TTL).unwrap().with_watchdog();
    let reader = rw(&a).try_read().await.unwrap().expect("free");
    let waiting = rw(&b);
    let writer = tokio::spawn(async move { waiting.write_until(WAIT).await });

    let latch = a.latch(name("latch"), TTL).unwrap();
    assert!(latch.create(1).await.unwrap());
    let waiting = b.latch(name("latch"), TTL).unwrap();
    let latch_waiter = tokio::spawn(async move { waiting.wait_until(WAIT).await });

    let arriving = a.barrier(name("bar"), 2, TTL).unwrap();
    let party = tokio::spawn(async move { arriving.arrive_and_wait_until(WAIT).await });

    let leader = a
        .election(name("el"), TTL)
        .unwrap()
        .campaign("a")
        .await
        .unwrap();
    let first_term = leader.term();
    let standby = b.election(name("el"), TTL).unwrap();
    let candidate = tokio::spawn(async move { standby.campaign_until("b", WAIT).await });

    let mut listener = b.listen([name("sig")]).await.unwrap();
    until_every_waiter_listens(&d, false).await;

    let d = fail_over(d, how).await;

    // The holds are still ours, on the new primary.
    assert!(guard.is_held() && permit.is_held() && reader.is_held() && leader.is_leader());
    let lock_key = stem("lock");
    eventually("the lock is ours on the new primary", || async {
        d.command(&lock_key, &["GET", &lock_key])
            .starts_with(guard.token())
    })
    .await;
    // Every waiter listens where the new primary's messages reach.
    until_every_waiter_listens(&d, true).await;
    // A waiter that ended took its hold beside ours, or gave up with an
    // error: either is a failure, and the panic says which.
    let lock_waiter = still_waiting("the lock's", lock_waiter).await;
    let permit_waiter = still_waiting("the permit's", permit_waiter).await;
    let writer = still_waiting("the writer", writer).await;

    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    let next = lock_waiter
        .await
        .unwrap()
        .expect("the lock's waiter gets it");
    assert!(lock.try_acquire().await.unwrap().is_none(), "two holders");
    assert_eq!(next.release().await.unwrap(), Ownership::Owned);

    let _ = permit.release().await.unwrap();
    let next = permit_waiter
        .await
        .unwrap()
        .expect("the permit's waiter gets it");
    assert!(
        sem(&a).try_acquire().await.unwrap().is_none(),
        "2 permits of 1"
    );
    let _ = next.release().await.unwrap();

    let _ = reader.release().await.unwrap();
    let next = writer.await.unwrap().expect("the writer gets in");
    assert!(
        rw(&a).try_read().await.unwrap().is_none(),
        "a reader beside the writer"
    );
    let _ = next.release().await.unwrap();

    assert_eq!(latch.count_down().await.unwrap(), 0);
    latch_waiter
        .await
        .unwrap()
        .expect("the latch's waiter sees it open");

    let last = b.barrier(name("bar"), 2, TTL).unwrap();
    let generation = last.arrive_and_wait_until(WAIT).await.unwrap();
    let _: u64 = generation;
    assert_eq!(
        party.await.unwrap().unwrap(),
        generation,
        "released together"
    );

    assert_eq!(leader.resign().await.unwrap(), Ownership::Owned);
    let next = candidate.await.unwrap().expect("the standby takes over");
    assert!(
        next.term() > first_term,
        "term {} after {first_term}",
        next.term()
    );
    let _ = next.resign().await.unwrap();

    signal_until_heard(&a, &mut listener).await;
}
