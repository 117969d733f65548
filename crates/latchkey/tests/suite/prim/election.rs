//! Leader election: one leader among candidates, fast hand-over on resign
//! and within the TTL after a kill, terms that increase (also across a
//! restart) and fence, observers that see every change in order.

use crate::common;

use std::future::Future;
use std::time::{Duration, Instant};

use common::*;
use latchkey::{FencedWrite, Leader, Ownership};
use redis::AsyncCommands;

const CHANGES: &str = "{test:e}:election:changes";

async fn next(observer: &mut latchkey::Observer) -> Option<Leader> {
    tokio::time::timeout(Duration::from_secs(10), observer.next())
        .await
        .expect("a change within 10 s")
        .expect("observer read")
}

#[tokio::test]
async fn two_candidates_one_leader_and_resign_hands_over_in_round_trips() {
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let ea = a.election("e", Duration::from_secs(5)).unwrap();
    let eb = b.election("e", Duration::from_secs(5)).unwrap();

    let leader = ea.campaign("a").await.unwrap();
    assert!(eb.try_campaign("b").await.unwrap().is_none(), "two leaders");
    let waiting = tokio::spawn(async move {
        let l = eb.campaign("b").await.unwrap();
        (Instant::now(), l)
    });
    until_subscribed(&server, CHANGES, 1).await;
    // Still one leader while the candidate waits.
    assert_eq!(ea.leader().await.unwrap().unwrap().value, b"a");
    assert!(!waiting.is_finished());

    let resigned_at = Instant::now();
    assert_eq!(leader.resign().await.unwrap(), Ownership::Owned);
    let (elected_at, successor) = waiting.await.unwrap();
    let handover = elected_at - resigned_at;
    println!("election hand-over after resign: {handover:?}");
    assert!(
        handover < Duration::from_millis(500),
        "resign → new leader took {handover:?}"
    );
    let now = ea.leader().await.unwrap().unwrap();
    assert_eq!((now.value, now.term), (b"b".to_vec(), successor.term()));
    assert_eq!(successor.resign().await.unwrap(), Ownership::Owned);
    assert_eq!(ea.leader().await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper process: run by its parent test"]
async fn child_leader() {
    let c = client(&helper_env("LATCHKEY_TEST_URL")).await;
    let election = c.election("e", Duration::from_secs(1)).unwrap();
    let _leader = election.campaign("child").await.unwrap();
    std::future::pending::<()>().await;
}

#[tokio::test]
async fn kill_of_the_leader_process_elects_another_within_the_ttl() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let election = c.election("e", Duration::from_secs(1)).unwrap();
    let mut child = spawn_child(
        concat!(module_path!(), "::child_leader"),
        &[("LATCHKEY_TEST_URL", server.url())],
    );
    let first = eventually("the child leads", || async {
        election
            .leader()
            .await
            .unwrap()
            .filter(|l| l.value == b"child")
    })
    .await;
    let mut observer = election.observe().await.unwrap();
    assert_eq!(next(&mut observer).await.map(|l| l.term), Some(first.term));

    let candidate = election.clone();
    let waiting = tokio::spawn(async move {
        let l = candidate.campaign("parent").await.unwrap();
        (Instant::now(), l)
    });
    until_subscribed(&server, CHANGES, 1).await;
    child.kill().unwrap(); // SIGKILL: no resign
    let killed_at = Instant::now();
    child.wait().unwrap();
    let (elected_at, leader) = waiting.await.unwrap();
    let failover = elected_at - killed_at;
    println!("election failover after kill -9 (TTL 1 s): {failover:?}");
    assert!(
        failover <= Duration::from_millis(1000 + 150),
        "kill → new leader took {failover:?}, more than TTL + a round trip"
    );
    assert!(leader.term() > first.term);
    // The observer saw the lease run out, then the new leader; it may have
    // seen "no leader" by message or by reading at the lease's end, or (when
    // the candidate won before its re-read) counted that change as missed.
    let mut states = Vec::new();
    loop {
        let state = next(&mut observer).await;
        let done = state.as_ref().is_some_and(|l| l.value == b"parent");
        states.push(state.map(|l| (l.value, l.term)));
        if done {
            break;
        }
    }
    assert_eq!(
        states.last(),
        Some(&Some((b"parent".to_vec(), leader.term())))
    );
    assert_eq!(
        states.len() as u64 + observer.missed(),
        2,
        "a vacancy then the new leader: {states:?}, missed {}",
        observer.missed()
    );
    assert_eq!(leader.resign().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn terms_strictly_increase_across_leaders_and_a_restart_without_persistence() {
    let mut server = RedisServer::start();
    let mut terms = Vec::new();
    for round in 0..10 {
        let c = client(&server.url()).await;
        let e = c.election("e", Duration::from_secs(5)).unwrap();
        let l = e.campaign(format!("round {round}")).await.unwrap();
        terms.push(l.term());
        assert_eq!(l.resign().await.unwrap(), Ownership::Owned);
    }
    server.restart();
    let mut conn = raw(&server.url()).await;
    let kept: Option<String> = conn.hget("{test:e}:election", "last_term").await.unwrap();
    assert_eq!(kept, None, "the restart kept data; this test needs it lost");
    let c = client(&server.url()).await;
    let l = c
        .election("e", Duration::from_secs(5))
        .unwrap()
        .campaign("after restart")
        .await
        .unwrap();
    terms.push(l.term());
    for pair in terms.windows(2) {
        assert!(pair[0] < pair[1], "terms went {} → {}", pair[0], pair[1]);
    }
    assert_eq!(l.resign().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn a_deposed_leaders_term_is_refused_after_the_successor_wrote() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let e = c.election("e", Duration::from_secs(5)).unwrap();
    let resource = c.fenced("e-output").unwrap();
    let old = e.campaign("old").await.unwrap();
    assert_eq!(
        resource.write(old.term(), b"old 1").await.unwrap(),
        FencedWrite::Accepted
    );
    // The old leader is paused past its lease: as far as Redis knows, gone.
    let mut conn = raw(&server.url()).await;
    let _: () = conn.del("{test:e}:leader").await.unwrap();
    let new = e.campaign("new").await.unwrap();
    assert!(new.term() > old.term());
    assert_eq!(
        resource.write(new.term(), b"new").await.unwrap(),
        FencedWrite::Accepted
    );
    assert_eq!(
        resource.write(old.term(), b"old 2").await.unwrap(),
        FencedWrite::Rejected { seen: new.term() }
    );
    assert_eq!(resource.read().await.unwrap().unwrap().0, b"new");
    // The deposed leader cannot resign the new one, nor proclaim.
    assert_eq!(old.proclaim("x").await.unwrap(), Ownership::HeldByOther);
    assert!(!old.is_leader());
    assert_eq!(old.resign().await.unwrap(), Ownership::HeldByOther);
    assert_eq!(e.leader().await.unwrap().unwrap().value, b"new");
    assert_eq!(new.resign().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn observers_see_every_change_in_order() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let e = c.election("e", Duration::from_secs(5)).unwrap();
    let mut observer = e.observe().await.unwrap();
    assert_eq!(next(&mut observer).await, None, "nobody leads yet");

    let a = e.campaign("a1").await.unwrap();
    assert_eq!(a.proclaim("a2").await.unwrap(), Ownership::Owned);
    assert_eq!(a.proclaim("a3").await.unwrap(), Ownership::Owned);
    let a_term = a.term();
    assert_eq!(a.resign().await.unwrap(), Ownership::Owned);
    let b = e.campaign("b1").await.unwrap();
    let b_term = b.term();
    assert_eq!(b.resign().await.unwrap(), Ownership::Owned);

    let mut seen = Vec::new();
    for _ in 0..6 {
        seen.push(next(&mut observer).await.map(|l| (l.value, l.term)));
    }
    let expected = vec![
        Some((b"a1".to_vec(), a_term)),
        Some((b"a2".to_vec(), a_term)),
        Some((b"a3".to_vec(), a_term)),
        None,
        Some((b"b1".to_vec(), b_term)),
        None,
    ];
    assert_eq!(seen, expected);
    assert_eq!(observer.missed(), 0);
}

#[tokio::test]
async fn an_observer_catches_up_after_its_connection_drops() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr()).await;
    let watcher = client(&proxy.url()).await;
    let c = client(&server.url()).await;
    let e = c.election("e", Duration::from_secs(5)).unwrap();
    let mut observer = watcher
        .election("e", Duration::from_secs(5))
        .unwrap()
        .observe()
        .await
        .unwrap();
    assert_eq!(next(&mut observer).await, None);
    proxy.reset_connections();
    let a = e.campaign("a").await.unwrap();
    // Missed or not, the observer gets to the current leader.
    let seen = next(&mut observer).await.expect("the leader");
    assert_eq!((seen.value, seen.term), (b"a".to_vec(), a.term()));
    assert_eq!(a.resign().await.unwrap(), Ownership::Owned);
    assert_eq!(next(&mut observer).await, None);
}

#[tokio::test]
async fn a_new_observer_sees_the_current_leader_at_once() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let e = c.election("e", Duration::from_secs(5)).unwrap();
    let l = e.campaign("current").await.unwrap();
    let mut observer = e.observe().await.unwrap();
    // No change happens: the first `next` is the state read by `observe`.
    let seen = tokio::time::timeout(Duration::from_millis(50), observer.next())
        .await
        .expect("at once")
        .unwrap()
        .expect("a leader");
    assert_eq!((seen.value, seen.term), (b"current".to_vec(), l.term()));
    assert_eq!(l.resign().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn lost_fires_when_the_lease_is_deleted() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let ttl = Duration::from_millis(600);
    let e = c.election("e", ttl).unwrap();
    let l = e.campaign("v").await.unwrap();
    let signal = l.lost_signal();
    assert!(l.is_leader() && !signal.is_lost());
    let mut conn = raw(&server.url()).await;
    let _: () = conn.del("{test:e}:leader").await.unwrap();
    let deleted_at = Instant::now();
    tokio::time::timeout(ttl, l.lost())
        .await
        .expect("lost() before the TTL");
    println!(
        "lost() after the lease was deleted: {:?}",
        deleted_at.elapsed()
    );
    assert!(signal.is_lost() && !l.is_leader());
}

#[tokio::test]
async fn a_dropped_leadership_and_a_cancelled_campaign_leave_no_leader() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let e = c.election("e", Duration::from_secs(30)).unwrap();
    drop(e.campaign("dropped").await.unwrap());
    assert!(c.flush(Duration::from_secs(5)).await);
    assert_eq!(e.leader().await.unwrap(), None);
    // Cancelled at every await point in turn: whatever it got, it gives back.
    for polls in 1..20 {
        let mut campaign = Box::pin(e.campaign("cancelled"));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let mut done = None;
        for _ in 0..polls {
            if let std::task::Poll::Ready(r) = campaign.as_mut().poll(&mut cx) {
                done = Some(r);
                break;
            }
            tokio::task::yield_now().await;
        }
        drop(campaign);
        if let Some(leadership) = done {
            assert_eq!(
                leadership.unwrap().resign().await.unwrap(),
                Ownership::Owned
            );
        }
        assert!(c.flush(Duration::from_secs(5)).await);
        assert_eq!(e.leader().await.unwrap(), None, "after {polls} polls");
    }
}

#[tokio::test]
async fn bad_input_is_a_typed_error() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    assert!(matches!(
        c.election("", Duration::from_secs(1)),
        Err(latchkey::Error::InvalidName { .. })
    ));
    assert!(matches!(
        c.election("e", Duration::ZERO),
        Err(latchkey::Error::InvalidTtl { .. })
    ));
    let mut conn = raw(&server.url()).await;
    let _: () = conn.set("{test:e}:election", "not a hash").await.unwrap();
    let e = c.election("e", Duration::from_secs(1)).unwrap();
    assert!(matches!(
        e.campaign("v").await,
        Err(latchkey::Error::WrongType { .. })
    ));
    let _: () = conn.del("{test:e}:election").await.unwrap();
    let _: () = conn
        .hset("{test:e}:election", "last_term", "garbage")
        .await
        .unwrap();
    assert!(matches!(
        e.try_campaign("v").await,
        Err(latchkey::Error::BadFencingCounter { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_candidates_and_observers_are_woken_by_sharded_messages() {
    let cluster = tokio::task::spawn_blocking(|| {
        latchkey_testkit::RedisCluster::builder()
            .primaries(3)
            .replicas_per_primary(0)
            .start()
    })
    .await
    .unwrap();
    let connect = || async {
        latchkey::Client::builder(&cluster.seed_url())
            .prefix("test:")
            .command_timeout(Duration::from_secs(2))
            .connect()
            .await
            .expect("connect to the cluster")
    };
    // Three clients: three subscriber connections to count.
    let (a, b, c) = (connect().await, connect().await, connect().await);
    assert!(a.connection().is_cluster());
    let ttl = Duration::from_secs(5);
    let ea = a.election("e", ttl).unwrap();
    let mut observer = b.election("e", ttl).unwrap().observe().await.unwrap();
    assert_eq!(next(&mut observer).await, None);
    let leader = ea.campaign("a").await.unwrap();
    let a_term = leader.term();
    let seen = next(&mut observer).await.expect("a leads");
    assert_eq!((seen.value, seen.term), (b"a".to_vec(), a_term));

    let ec = c.election("e", ttl).unwrap();
    let waiting = tokio::spawn(async move {
        let l = ec.campaign("c").await.unwrap();
        (Instant::now(), l)
    });
    let node = cluster.primary_for_key("{test:e}:leader").server();
    eventually(
        "the candidate subscribed at the election's shard",
        || async { node.shard_subscribers(CHANGES) >= 2 },
    )
    .await;
    let resigned_at = Instant::now();
    assert_eq!(leader.resign().await.unwrap(), Ownership::Owned);
    let (elected_at, successor) = waiting.await.unwrap();
    let handover = elected_at - resigned_at;
    println!("election hand-over after resign on a cluster: {handover:?}");
    assert!(
        handover < Duration::from_millis(500),
        "the candidate was not woken by the SPUBLISHed resign: {handover:?}"
    );
    assert!(successor.term() > a_term);
    assert_eq!(next(&mut observer).await, None);
    let seen = next(&mut observer).await.expect("c leads");
    assert_eq!((seen.value, seen.term), (b"c".to_vec(), successor.term()));
    assert_eq!(observer.missed(), 0);
    assert_eq!(successor.resign().await.unwrap(), Ownership::Owned);
}

/// A campaign against a leader fails with `Err(WaitTimedOut)` when its
/// wait is bounded (`campaign_timeout`, `campaign_until`).
#[tokio::test]
async fn a_bounded_campaign_times_out() {
    let server = RedisServer::start();
    let client = client(&server.url()).await;
    let election = client.election("bounded", Duration::from_secs(60)).unwrap();
    let leader = election.campaign("a").await.unwrap();
    let short = Duration::from_millis(50);
    assert!(matches!(
        election.campaign_until("b", short).await,
        Err(latchkey::Error::WaitTimedOut { .. })
    ));
    assert!(matches!(
        election.campaign_until("b", Instant::now() + short).await,
        Err(latchkey::Error::WaitTimedOut { .. })
    ));
    assert_eq!(leader.resign().await.unwrap(), Ownership::Owned);
}

/// `with_renewal_every` sets how often a leadership renews its lease: with
/// a 3 s TTL renewed every 100 ms, the lease never falls below 2.5 s (the
/// default, every second, lets it fall to 2 s); a bad interval is typed.
#[tokio::test]
async fn renewal_every_sets_the_leaderships_renewal() {
    let server = RedisServer::start();
    let client = client(&server.url()).await;
    let ttl = Duration::from_secs(3);
    let election = client
        .election("renewed", ttl)
        .unwrap()
        .with_renewal_every(Duration::from_millis(100))
        .unwrap();
    let leader = election.campaign("a").await.unwrap();
    let mut raw = raw(&server.url()).await;
    let started = Instant::now();
    let mut lowest = i64::MAX;
    while started.elapsed() < Duration::from_millis(950) {
        let pttl: i64 = raw.pttl("{test:renewed}:leader").await.unwrap();
        lowest = lowest.min(pttl);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(lowest > 2500, "the lease fell to {lowest} ms");
    assert_eq!(leader.resign().await.unwrap(), Ownership::Owned);
    for bad in [Duration::ZERO, ttl] {
        let election = client.election("renewed", ttl).unwrap();
        assert!(matches!(
            election.with_renewal_every(bad),
            Err(latchkey::Error::InvalidInput(_))
        ));
    }
}
