//! Locks, waiting, signals and fencing over a Sentinel connection (a
//! primary, a replica and 3 Sentinels from the test kit), across
//! `SENTINEL FAILOVER` and `kill -9` of the primary; and replicated
//! acquisition (`Lock::with_replicas`).
//!
//! The figures these tests print (`--nocapture`) are the ones in
//! `docs/reliability.md`, "Sentinel".

use crate::common;

use std::time::{Duration, Instant};

use common::sentinel::{blocking, signal_until_heard, start_set, until_served, FOLLOW_BOUND};
use latchkey::{Client, Error, FencedWrite, Ownership};
use latchkey_testkit::{eventually, RedisServer, SentinelSet};

async fn sentinel_client(set: &SentinelSet) -> Client {
    Client::builder_sentinel(set.sentinel_addrs(), set.master_name())
        .prefix("test:")
        .command_timeout(Duration::from_millis(1000))
        .pubsub_ping_every(Duration::from_millis(200))
        .connect()
        .await
        .expect("connect through the Sentinels")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_sentinel_failover_with_locks_held_waited_on_and_signals() {
    let set = start_set(SentinelSet::builder()).await;
    let client = sentinel_client(&set).await;
    let other = sentinel_client(&set).await;
    // Polls the Sentinels only every 30 s: only their `+switch-master`
    // announcement can move it within the bound.
    let announced_only = Client::builder_sentinel(set.sentinel_addrs(), set.master_name())
        .prefix("test:")
        .pubsub_ping_every(Duration::from_secs(30))
        .connect()
        .await
        .unwrap();
    let first = set.primary_port();
    assert!(client.server().ends_with(&format!(":{first}")));

    let lock = client
        .lock("report", Duration::from_secs(6))
        .unwrap()
        .with_watchdog();
    let guard = lock.try_acquire().await.unwrap().expect("free");
    let waiter = other.lock("report", Duration::from_secs(6)).unwrap();
    let waiting = tokio::spawn(async move {
        let guard = waiter.acquire_until(Duration::from_secs(15)).await?;
        Ok::<_, Error>((Instant::now(), guard))
    });
    let mut listener = other.listen(["deploy"]).await.unwrap();
    let set = tokio::task::spawn_blocking(move || {
        set.wait_replicas_synced();
        set
    })
    .await
    .unwrap();

    let (set, second) = blocking(set, |set| set.failover()).await;
    assert_ne!(second, first);
    let took = until_served(&client, &set, second, "client").await;
    eprintln!(
        "SENTINEL FAILOVER: commands served by the new primary {took:?} after the announcement"
    );
    assert!(took < FOLLOW_BOUND, "took {took:?}");
    assert!(client.server().ends_with(&format!(":{second}")));
    let told = until_served(&announced_only, &set, second, "announced").await;
    eprintln!("SENTINEL FAILOVER: a client that polls every 30 s served there {told:?} after the announcement");
    assert!(told < FOLLOW_BOUND, "took {told:?}");

    // The held lock was replicated: it is still ours on the new primary.
    assert_eq!(
        guard.extend(Duration::from_secs(6)).await.unwrap(),
        Ownership::Owned
    );
    assert!(!guard.lost_signal().is_lost());

    // The listener re-subscribed on the new primary and hears signals there.
    // (Signals are fire-and-forget: resend until one arrives, bounded.)
    let heard = signal_until_heard(&client, &mut listener, "v2").await;
    assert_eq!(heard.payload, b"v2");

    // The waiter is handed the lock on the new primary when it is released.
    let released = Instant::now();
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    let (got, handed) = waiting.await.unwrap().expect("the waiter gets the lock");
    let handover = got.duration_since(released);
    eprintln!("hand-over after the failover: {handover:?}");
    assert!(handover < Duration::from_secs(2), "took {handover:?}");
    let stored = set.server(second).command(&["GET", "test:report"]).unwrap();
    assert_eq!(stored, handed.token());
    assert_eq!(handed.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_an_unreplicated_lock_and_lost_says_so() {
    let set = start_set(SentinelSet::builder()).await;
    let client = sentinel_client(&set).await;
    let other = sentinel_client(&set).await;
    let first = set.primary_port();
    let replica = replica_port(&set, first);

    // Cut the replica off (paused, so it cannot reconnect) before the lock
    // is taken: the key never reaches it.
    set.server(replica).pause();
    set.server(first)
        .command(&["CLIENT", "KILL", "TYPE", "replica"])
        .unwrap();
    let lock = client
        .lock("ledger", Duration::from_secs(15))
        .unwrap()
        .with_renewal_every(Duration::from_millis(500))
        .unwrap();
    let guard = lock.try_acquire().await.unwrap().expect("free");
    // Another client waits for it (subscribed on the old primary).
    let theirs = other.lock("ledger", Duration::from_secs(5)).unwrap();
    let waiting = tokio::spawn(async move {
        let guard = theirs.acquire_until(Duration::from_secs(20)).await?;
        Ok::<_, Error>((Instant::now(), guard))
    });
    eventually("the waiter is subscribed", || async {
        let channels = set
            .server(first)
            .command(&["PUBSUB", "CHANNELS", "*ledger*"]);
        !channels.unwrap().is_empty()
    })
    .await;
    let killed = Instant::now();
    let mut set = set;
    set.server_mut(first).kill();
    set.server(replica).resume();

    let (set, second) = blocking(set, move |set| {
        // `kill_primary` would kill again; the primary is dead already.
        poll_new_primary(set, first)
    })
    .await;
    let announced = killed.elapsed();
    // The waiter may have taken the lock there already; the holder's key
    // never reached it.
    assert_ne!(
        set.server(second).command(&["GET", "test:ledger"]).unwrap(),
        guard.token(),
        "the promoted replica never saw the holder's key"
    );

    // The holder is told at its next renewal, long before its TTL (15 s).
    tokio::time::timeout(FOLLOW_BOUND, guard.lost())
        .await
        .expect("lost() fires after the failover");
    let lost_after = killed.elapsed();
    let served = until_served(&client, &set, second, "client").await;
    eprintln!("kill -9: new primary announced after {announced:?}, holder told after {lost_after:?}, commands served there {served:?} after the announcement");
    assert!(served < FOLLOW_BOUND, "took {served:?}");
    // And the waiter, on the new primary, gets it: the holder is told,
    // but for a moment both believed they held it (asynchronous
    // replication; `with_replicas` narrows this, fencing guards the data).
    let (got, taken) = waiting.await.unwrap().expect("the waiter gets the lock");
    let waited = got
        .saturating_duration_since(killed)
        .saturating_sub(announced);
    eprintln!("kill -9: the waiter got the lost lock {waited:?} after the announcement");
    assert!(waited < FOLLOW_BOUND, "took {waited:?}");
    assert_eq!(
        set.server(second).command(&["GET", "test:ledger"]).unwrap(),
        taken.token()
    );
    assert_eq!(taken.release().await.unwrap(), Ownership::Owned);
}

fn replica_port(set: &SentinelSet, primary: u16) -> u16 {
    set.servers()
        .iter()
        .find(|s| s.port() != primary)
        .unwrap()
        .port()
}

/// Waits until the Sentinels announce a primary other than `old`.
fn poll_new_primary(set: &SentinelSet, old: u16) -> u16 {
    latchkey_testkit::eventually_blocking("a new primary is announced", || {
        let port = set.primary_port();
        (port != old
            && set
                .server(port)
                .command(&["ROLE"])
                .is_ok_and(|r| r.starts_with("master")))
        .then_some(port)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_rejects_a_stale_write_after_kill_9() {
    let set = start_set(SentinelSet::builder()).await;
    let stale_client = sentinel_client(&set).await;
    let client = sentinel_client(&set).await;
    let resource = client.fenced("ledger-data").unwrap();
    let stale_resource = stale_client.fenced("ledger-data").unwrap();

    // A holds first; its lease runs out (a pause, say); B holds now.
    let stale = stale_client
        .lock("ledger", Duration::from_millis(300))
        .unwrap()
        .with_fencing();
    let a = stale.try_acquire().await.unwrap().expect("free");
    let a_token = a.issued_fencing_token().unwrap();
    assert_eq!(
        stale_resource.write(a_token, "from A").await.unwrap(),
        FencedWrite::Accepted
    );
    let fresh = client
        .lock("ledger", Duration::from_secs(10))
        .unwrap()
        .with_fencing()
        .with_replicas(1)
        .unwrap();
    let b = eventually("A's lease ran out and B holds", || async {
        fresh.try_acquire().await.unwrap()
    })
    .await;
    let b_token = b.issued_fencing_token().unwrap();
    assert!(b_token > a_token);
    assert_eq!(
        resource.write(b_token, "from B").await.unwrap(),
        FencedWrite::Accepted
    );
    let set = tokio::task::spawn_blocking(move || {
        set.wait_replicas_synced();
        set
    })
    .await
    .unwrap();

    let (set, _second) = blocking(set, |set| set.kill_primary()).await;
    // Once both clients are on the new primary, A's stale write is refused
    // there, and B's goes on being accepted.
    let refused = eventually("A's stale write reaches the new primary", || async {
        stale_resource.write(a_token, "from A, late").await.ok()
    })
    .await;
    assert_eq!(refused, FencedWrite::Rejected { seen: b_token });
    let accepted = eventually("B's write reaches the new primary", || async {
        resource.write(b_token, "from B, again").await.ok()
    })
    .await;
    assert_eq!(accepted, FencedWrite::Accepted);
    assert_eq!(
        resource.read().await.unwrap(),
        Some((b"from B, again".to_vec(), b_token))
    );
    assert_eq!(
        b.extend(Duration::from_secs(10)).await.unwrap(),
        Ownership::Owned
    );
    drop(set);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_replicas_1_a_lock_survives_the_primary_death() {
    let set = start_set(SentinelSet::builder()).await;
    let client = sentinel_client(&set).await;
    let other = sentinel_client(&set).await;
    let lock = client
        .lock("payroll", Duration::from_secs(15))
        .unwrap()
        .with_fencing()
        .with_replicas(1)
        .unwrap();
    let guard = lock.try_acquire().await.unwrap().expect("free");
    let token = guard.issued_fencing_token().unwrap();
    // No wait for the replica: the acquisition itself waited for it.
    let (set, second) = blocking(set, |set| set.kill_primary()).await;
    assert_eq!(
        set.server(second)
            .command(&["GET", "test:payroll"])
            .unwrap(),
        guard.token()
    );
    let counter = latchkey::protocol::fence_key(b"test:payroll");
    let counter = String::from_utf8(counter).unwrap();
    assert_eq!(
        set.server(second).command(&["GET", &counter]).unwrap(),
        token.to_string()
    );
    let busy = eventually("the other client reaches the new primary", || async {
        other
            .lock("payroll", Duration::from_secs(5))
            .unwrap()
            .try_acquire()
            .await
            .ok()
    })
    .await;
    assert!(busy.is_none(), "the lock survived: still ours");
    let extended = eventually("the holder reaches the new primary", || async {
        guard.extend(Duration::from_secs(15)).await.ok()
    })
    .await;
    assert_eq!(extended, Ownership::Owned);
    assert!(!guard.lost_signal().is_lost());
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_replicas_is_a_typed_error_and_the_lock_is_released() {
    let primary = RedisServer::start();
    let replica = RedisServer::builder().replica_of(primary.port()).start();
    let client = Client::builder(&primary.url())
        .prefix("test:")
        .command_timeout(Duration::from_secs(1))
        .connect()
        .await
        .unwrap();
    let lock = client
        .lock("audit", Duration::from_secs(10))
        .unwrap()
        .with_fencing();

    let one = lock.clone().with_replicas(1).unwrap();
    let guard = eventually("the replica is linked", || async {
        one.try_acquire().await.ok().flatten()
    })
    .await;
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);

    // Two asked, one there: refused after the timeout, and released.
    let two = lock
        .clone()
        .with_replicas_within(2, Duration::from_millis(200))
        .unwrap();
    let started = Instant::now();
    match two.try_acquire().await {
        Err(Error::TooFewReplicas {
            wanted: 2,
            acked: 1,
            ..
        }) => {}
        other => panic!("expected TooFewReplicas, got {other:?}"),
    }
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(primary.command(&["EXISTS", "test:audit"]).unwrap(), "0");
    // A waiting acquire retries it until its deadline, then says why.
    match two.acquire_until(Duration::from_millis(700)).await {
        Err(Error::TooFewReplicas { .. }) => {}
        other => panic!("expected TooFewReplicas, got {other:?}"),
    }

    // The replica paused: none acknowledges.
    replica.pause();
    match one.try_acquire().await {
        Err(Error::TooFewReplicas { acked: 0, .. }) => {}
        other => panic!("expected TooFewReplicas, got {other:?}"),
    }
    assert_eq!(primary.command(&["EXISTS", "test:audit"]).unwrap(), "0");
    replica.resume();

    // Bad options are typed errors.
    assert!(matches!(
        lock.clone().with_replicas_within(1, Duration::ZERO),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        lock.clone()
            .with_replicas_within(1, Duration::from_secs(60)),
        Err(Error::InvalidInput(_))
    ));
    assert!(lock.with_replicas(0).is_ok(), "0 turns it off");
}

#[tokio::test]
async fn bad_sentinel_input_is_a_typed_error() {
    for url in [
        "redis+sentinel://127.0.0.1:1",
        "redis+sentinel:///m",
        "redis+sentinel://127.0.0.1:1/m/x",
    ] {
        match Client::connect(url).await {
            Err(Error::InvalidInput(_)) => {}
            other => panic!("{url}: expected InvalidInput, got {other:?}"),
        }
    }
    assert!(matches!(
        Client::builder_sentinel(["127.0.0.1:notaport"], "m")
            .connect()
            .await,
        Err(Error::InvalidInput(_))
    ));
    let empty: [&str; 0] = [];
    assert!(matches!(
        Client::builder_sentinel(empty, "m").connect().await,
        Err(Error::InvalidInput(_))
    ));
    // Nobody listens there: unreachable, not a panic.
    let port = latchkey_testkit::free_port();
    let result = Client::builder_sentinel([format!("127.0.0.1:{port}")], "m")
        .command_timeout(Duration::from_millis(300))
        .connect()
        .await;
    assert!(matches!(result, Err(e) if e.is_transient()));
}
