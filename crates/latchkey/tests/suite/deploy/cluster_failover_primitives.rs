//! `kill -9` of the primary that owns a slot, with a waiter of every kind
//! on names in that slot: every wait rides the failover
//! out (MOVED, TRYAGAIN, CLUSTERDOWN and dropped connections are transient:
//! `retry.rs`) and ends as it would have without it, within its own
//! deadline. One cluster, one kill, for all of them (a 6-node cluster costs
//! seconds to start). Also: names with a `}` and no hash tag are refused
//! with a typed error on a cluster, and ones with a tag work.

use std::time::{Duration, Instant};

use latchkey::{Client, Error, RwAccess};
use latchkey_testkit::RedisCluster;

async fn client(cluster: &RedisCluster) -> Client {
    Client::builder(&cluster.seed_url())
        .prefix("test:")
        .command_timeout(Duration::from_secs(1))
        .pubsub_ping_every(Duration::from_millis(200))
        .connect()
        .await
        .expect("connect to the cluster")
}

/// A hash tag whose slot is not served by the seed node, so that the
/// clients' seed stays up when that slot's primary is killed.
fn tag_off_the_seed(cluster: &RedisCluster) -> String {
    let seed = cluster.nodes()[0].port();
    (0..)
        .map(|i| format!("victim-{i}"))
        .find(|t| cluster.primary_for_key(format!("{{{t}}}")).port() != seed)
        .unwrap()
}

/// Runs `op` until it succeeds (the cluster answers again), at most `within`.
async fn until_ok<T, F, Fut>(what: &str, within: Duration, mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = latchkey::Result<T>>,
{
    let started = Instant::now();
    loop {
        match op().await {
            Ok(v) => return v,
            Err(e) => {
                assert!(e.is_transient(), "{what}: not transient: {e:?}");
                assert!(started.elapsed() < within, "{what}: still failing: {e}");
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_waiter_rides_out_the_kill_of_its_primary() {
    let mut cluster = tokio::task::spawn_blocking(|| {
        RedisCluster::builder()
            .primaries(3)
            .replicas_per_primary(1)
            .node_timeout(Duration::from_millis(1000))
            .start()
    })
    .await
    .unwrap();
    let tag = tag_off_the_seed(&cluster);
    let name = |kind: &str| format!("{{{tag}}}:{kind}");
    let (holders, waiters) = (client(&cluster).await, client(&cluster).await);
    let ttl = Duration::from_secs(60);
    let wait = Duration::from_secs(40);

    // Item 7: on a cluster, a `}` without a tag is refused with the reason
    // (every kind), a tagged one works.
    for bad in ["x}y", "job}"] {
        assert!(matches!(
            holders.lock(bad, ttl),
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            holders.semaphore(bad, 2, ttl),
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            holders.rwlock(bad, ttl),
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            holders.latch(bad, ttl),
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            holders.election(bad, ttl),
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            holders.inspect(bad).await,
            Err(Error::InvalidName { .. })
        ));
    }
    let tagged = holders.lock("{a}b}", ttl).unwrap().fair().unwrap();
    let g = tagged.try_acquire().await.unwrap().expect("free");
    assert_eq!(g.release().await.unwrap(), latchkey::Ownership::Owned);
    let sem = holders.semaphore("{a}b}", 1, ttl).unwrap();
    let permit = sem.try_acquire().await.unwrap().expect("free");
    assert_eq!(permit.release().await.unwrap(), latchkey::Ownership::Owned);

    // One holder of each kind, and one waiter behind each.
    let lock_held = holders
        .lock(name("lock"), ttl)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let fair_held = holders
        .lock(name("fair"), ttl)
        .unwrap()
        .fair()
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let permit_held = holders
        .semaphore(name("sem"), 1, ttl)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let writer_held = holders
        .rwlock(name("rw"), ttl)
        .unwrap()
        .try_write()
        .await
        .unwrap()
        .unwrap();
    let latch = holders.latch(name("latch"), ttl).unwrap();
    assert!(latch.create(1).await.unwrap());
    let election = holders.election(name("elect"), ttl).unwrap();
    let leader = election.try_campaign("first").await.unwrap().unwrap();

    let deadline = Instant::now() + wait;
    let w = waiters.clone();
    let (n1, n2, n3, n4, n5, n6) = (
        name("lock"),
        name("fair"),
        name("sem"),
        name("rw"),
        name("latch"),
        name("elect"),
    );
    let lock_waiter = tokio::spawn(async move {
        let lock = w.lock(n1, ttl).unwrap();
        lock.acquire_until(deadline).await.map(|_| ())
    });
    let w = waiters.clone();
    let fair_waiter = tokio::spawn(async move {
        let lock = w.lock(n2, ttl).unwrap().fair().unwrap();
        lock.acquire_until(deadline).await.map(|_| ())
    });
    let w = waiters.clone();
    let permit_waiter = tokio::spawn(async move {
        let sem = w.semaphore(n3, 1, ttl).unwrap();
        sem.acquire_until(deadline).await.map(|_| ())
    });
    let w = waiters.clone();
    let reader = tokio::spawn(async move {
        let rw = w.rwlock(n4, ttl).unwrap();
        rw.acquire_until(RwAccess::Read, deadline).await.map(|_| ())
    });
    let w = waiters.clone();
    let latch_waiter =
        tokio::spawn(async move { w.latch(n5, ttl).unwrap().wait_until(deadline).await });
    let w = waiters.clone();
    let standby = tokio::spawn(async move {
        let e = w.election(n6.clone(), ttl).unwrap();
        e.campaign_until("standby", deadline)
            .await
            .map(|l| l.term())
    });
    let observer_election = waiters.election(name("elect"), ttl).unwrap();
    let mut observer = observer_election.observe().await.unwrap();
    let first = observer.next().await.unwrap().expect("a leader");
    assert_eq!(first.value, b"first");
    let watching = tokio::spawn(async move {
        // The next change the observer reports, across the failover.
        loop {
            match observer.next().await? {
                Some(l) if l.value == b"first" => continue,
                other => return Ok::<_, Error>(other.map(|l| l.value)),
            }
        }
    });
    // Every waiter is waiting (none took anything, none failed yet).
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (what, done) in [
        ("lock", lock_waiter.is_finished()),
        ("fair", fair_waiter.is_finished()),
        ("permit", permit_waiter.is_finished()),
        ("reader", reader.is_finished()),
        ("latch", latch_waiter.is_finished()),
        ("standby", standby.is_finished()),
    ] {
        assert!(!done, "the {what} waiter ended before the failover");
    }

    // Item 5: a signal listener on a name in the same slot.
    let signal_name = name("signal");
    let mut listener = waiters.listen([&signal_name]).await.unwrap();

    let victim = cluster.primary_for_key(format!("{{{tag}}}")).port();
    // What the waiters wait on (the latch, the held lock, the queue) must
    // survive the kill: replication is asynchronous, and a replica that
    // had not caught up would be promoted without it.
    cluster.wait_replicas_synced(cluster.primary_for_key(format!("{{{tag}}}")));
    cluster
        .nodes_mut()
        .iter_mut()
        .find(|n| n.port() == victim)
        .unwrap()
        .kill();
    let killed = Instant::now();
    // During the window, a fresh client's first try (what a new `latchkey
    // run --no-wait` does) fails with a transient error, never another.
    let probe = name("probe");
    let fresh = until_ok("a fresh client's try", Duration::from_secs(20), || async {
        // (With the default command timeout, as the CLI has.)
        let fresh = Client::builder(&cluster.seed_url())
            .prefix("test:")
            .connect()
            .await?;
        fresh.lock(&probe, ttl)?.with_fencing().try_acquire().await
    })
    .await;
    let _ = fresh.expect("nobody holds the probe").release().await;
    // While the slot has no primary, the waiters keep waiting.
    let answered = until_ok("latch count", Duration::from_secs(20), || latch.count()).await;
    println!(
        "kill -9: the slot answered again after {:?}",
        killed.elapsed()
    );
    assert_ne!(cluster.primary_for_key(format!("{{{tag}}}")).port(), victim);
    // The listener is subscribed again at the new primary: a signal sent
    // there reaches it (a deaf listener would leave the count at 0).
    let heard = async {
        let sender = client(&cluster).await;
        latchkey_testkit::eventually("the listener hears at the new primary", || async {
            matches!(sender.signal(&signal_name, b"after").await, Ok(n) if n >= 1)
        })
        .await;
        listener.recv().await
    };
    let signal = tokio::time::timeout(Duration::from_secs(30), heard)
        .await
        .expect("the listener went deaf");
    assert_eq!(&signal.payload[..], b"after");

    // Let everything go at the new primary; every waiter then gets what
    // it waited for (a hold the failover lost let its waiter in earlier).
    let _ = lock_held.release().await;
    let _ = fair_held.release().await;
    let _ = permit_held.release().await;
    let _ = writer_held.release().await;
    if answered != Some(0) {
        let _ = until_ok("count down", Duration::from_secs(5), || latch.count_down()).await;
    }
    let _ = leader.resign().await;

    let within = deadline.saturating_duration_since(Instant::now()) + Duration::from_secs(5);
    let join = |what: &'static str, r: Result<latchkey::Result<()>, tokio::task::JoinError>| {
        r.unwrap()
            .unwrap_or_else(|e| panic!("the {what} waiter failed: {e:?}"))
    };
    let all = async {
        join("lock", lock_waiter.await);
        join("fair", fair_waiter.await);
        join("permit", permit_waiter.await);
        join("reader", reader.await);
        latch_waiter
            .await
            .unwrap()
            .expect("the latch did not open for its waiter");
        let term = standby.await.unwrap().expect("the standby failed");
        assert!(term >= 1);
        let seen = watching.await.unwrap().expect("the observer failed");
        // It saw the resignation or the standby's election.
        assert_ne!(seen.as_deref(), Some(&b"first"[..]));
    };
    tokio::time::timeout(within, all)
        .await
        .expect("a waiter still waits");
}

/// The node the clients were given dies: a client
/// made with several seeds connects through a dead one, and a listener and
/// a waiter whose names live on the dead node ride the failover out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_node_dies_and_seeds_listeners_and_waiters_carry_on() {
    let mut cluster = tokio::task::spawn_blocking(|| {
        RedisCluster::builder()
            .primaries(3)
            .replicas_per_primary(1)
            .node_timeout(Duration::from_millis(1000))
            .start()
    })
    .await
    .unwrap();
    let seed = cluster.seed_url();
    let seed_port = cluster.nodes()[0].port();
    let others: Vec<String> = cluster
        .nodes()
        .iter()
        .filter(|n| n.port() != seed_port)
        .map(|n| n.url())
        .collect();
    let seeded = |first: String| {
        let builder = Client::builder(&first)
            .prefix("test:")
            .command_timeout(Duration::from_secs(1));
        others.iter().fold(builder, |b, url| b.seed(url))
    };
    // Names in a slot of the seed node itself.
    let tag = (0..)
        .map(|i| format!("seed-{i}"))
        .find(|t| cluster.primary_for_key(format!("{{{t}}}")).port() == seed_port)
        .unwrap();
    let (lock_name, signal_name) = (format!("{{{tag}}}:lock"), format!("{{{tag}}}:signal"));
    let listening = seeded(seed.clone()).connect().await.unwrap();
    let mut listener = listening.listen([&signal_name]).await.unwrap();
    let holder = listening.lock(&lock_name, Duration::from_secs(60)).unwrap();
    let held = holder.try_acquire().await.unwrap().unwrap();
    let waiter = holder.clone();
    let deadline = Instant::now() + Duration::from_secs(40);
    let waiting = tokio::spawn(async move { waiter.acquire_until(deadline).await.map(|_| ()) });

    cluster
        .nodes_mut()
        .iter_mut()
        .find(|n| n.port() == seed_port)
        .unwrap()
        .kill();
    // A new client given the dead node first connects through the others.
    let fresh = until_ok("a seeded connect", Duration::from_secs(20), || {
        seeded(seed.clone()).connect()
    })
    .await;
    // A single URL of a standalone server is not a cluster: refused as seeds.
    let standalone = latchkey_testkit::RedisServer::start();
    let refused = Client::builder(&standalone.url())
        .seed(&others[0])
        .connect()
        .await;
    assert!(
        matches!(refused, Err(Error::NotACluster { .. })),
        "{refused:?}"
    );

    let heard = async {
        latchkey_testkit::eventually("the listener hears at the new primary", || async {
            matches!(fresh.signal(&signal_name, b"after").await, Ok(n) if n >= 1)
        })
        .await;
        listener.recv().await
    };
    let signal = tokio::time::timeout(Duration::from_secs(30), heard)
        .await
        .expect("the listener went deaf");
    assert_eq!(&signal.payload[..], b"after");
    // (The hold may have been lost in the failover: then nothing to free.)
    let _ = held.release().await;
    tokio::time::timeout(Duration::from_secs(45), waiting)
        .await
        .expect("the waiter still waits")
        .unwrap()
        .expect("the waiter failed");
}
