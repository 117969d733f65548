//! Redlock: one lock over 3 or 5 private redis-servers. Majorities, dead and
//! slow instances, fencing across restarts, exclusion across processes, and
//! the watchdog's lost() signal.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use futures_util::StreamExt;
use latchkey::{Error, Fencing, Ownership, Redlock};
use redis::AsyncCommands;

/// A Redlock over these servers, through the test clients (prefix `test:`,
/// 500 ms command timeout).
async fn redlock(servers: &[RedisServer]) -> Redlock {
    let mut clients = Vec::new();
    for s in servers {
        clients.push(client(&s.url()).await);
    }
    Redlock::new(clients).unwrap()
}

/// Whether `key` exists on `server`, asked over a fresh connection.
fn has_key(server: &RedisServer, key: &str) -> bool {
    server.command(&["EXISTS", key]).unwrap() == "1"
}

/// Until every server holds `key`: an acquire returns at a majority, and
/// the rest of its requests run on in their own tasks.
async fn until_everywhere(servers: &[RedisServer], key: &str) {
    eventually(&format!("every instance holds {key}"), || async {
        servers.iter().all(|s| has_key(s, key))
    })
    .await;
}

#[tokio::test]
async fn five_instances_with_two_down_still_lock() {
    let mut servers = RedisServer::start_many(5);
    let redlock = redlock(&servers).await;
    assert_eq!((redlock.instances(), redlock.quorum()), (5, 3));
    servers[0].kill();
    servers[3].kill();
    let lock = redlock.lock("two-down", Duration::from_secs(5)).unwrap();
    let guard = lock
        .try_acquire()
        .await
        .unwrap()
        .expect("3 of 5 are a majority");
    for i in [1, 2, 4] {
        assert!(
            has_key(&servers[i], "test:two-down"),
            "no key on live instance {i}"
        );
    }
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "acquired twice"
    );
    assert_eq!(
        guard.extend(Duration::from_secs(5)).await.unwrap(),
        Ownership::Owned
    );
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    for i in [1, 2, 4] {
        assert!(
            !has_key(&servers[i], "test:two-down"),
            "key left on instance {i}"
        );
    }
}

#[tokio::test]
async fn without_a_majority_acquire_fails_with_no_quorum_at_the_deadline() {
    let mut servers = RedisServer::start_many(5);
    let redlock = redlock(&servers).await;
    for s in &mut servers[..3] {
        s.kill();
    }
    let lock = redlock.lock("three-down", Duration::from_secs(1)).unwrap();
    match lock.try_acquire().await {
        // (`answered` counts the answers in by the time the round could
        // stop: at most the 2 live ones.)
        Err(Error::NoQuorum {
            answered: 0..=2,
            needed: 3,
            instances: 5,
            ..
        }) => {}
        other => panic!("expected NoQuorum from try_acquire, got {other:?}"),
    }
    // Nothing may be left on the live minority after the failed attempt:
    // retracted within a few milliseconds (the round was decided by the
    // dead instances' errors, so the live ones may be undone in the
    // background), far sooner than the 1 s TTL would remove it.
    let failed_at = Instant::now();
    eventually("the failed attempt's keys are retracted", || async {
        !has_key(&servers[3], "test:three-down") && !has_key(&servers[4], "test:three-down")
    })
    .await;
    assert!(
        failed_at.elapsed() < Duration::from_millis(300),
        "the failed attempt left its key for {:?}",
        failed_at.elapsed()
    );

    let wait = Duration::from_millis(600);
    let started = Instant::now();
    let result = lock.acquire_until(wait).await;
    let took = started.elapsed();
    assert!(
        matches!(result, Err(Error::NoQuorum { .. })),
        "got {result:?}"
    );
    // It waits out its deadline, then gives up within one more attempt
    // (bounded by the 100 ms per-instance timeout) plus scheduling margin.
    assert!(
        took >= wait && took < wait + Duration::from_millis(700),
        "took {took:?}"
    );

    // All down: still a typed error, not "busy".
    for s in &mut servers[3..] {
        s.kill();
    }
    let all_down = lock.try_acquire().await;
    assert!(
        matches!(all_down, Err(Error::NoQuorum { answered: 0, .. })),
        "got {all_down:?}"
    );
}

#[tokio::test]
async fn connect_starts_with_a_majority_and_picks_up_the_rest() {
    let mut servers = RedisServer::start_many(3);
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();

    servers[1].kill();
    servers[2].kill();
    let err = Redlock::connect(&urls).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::NoQuorum {
                op: "connect",
                answered: 1,
                needed: 2,
                ..
            }
        ),
        "got {err:?}"
    );

    servers[1].restart();
    let redlock = Redlock::connect(&urls).await.unwrap();
    assert_eq!((redlock.instances(), redlock.connected()), (3, 2));
    let lock = redlock.lock("late", Duration::from_secs(5)).unwrap();
    let guard = lock
        .try_acquire()
        .await
        .unwrap()
        .expect("2 of 3 are a majority");
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);

    // The missing instance joins once it is back (background reconnect).
    servers[2].restart();
    eventually("the instance reconnected", || async {
        redlock.connected() == 3
    })
    .await;
    // It counts: with one of the original two gone, it makes the majority.
    servers[0].kill();
    let guard = lock
        .try_acquire()
        .await
        .unwrap()
        .expect("instances 1 and 2 are a majority");
    assert!(
        has_key(&servers[2], "latchkey:late"),
        "the reconnected instance is not used"
    );
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    assert!(
        !has_key(&servers[2], "latchkey:late"),
        "the reconnected instance was not released"
    );
}

#[tokio::test]
async fn bad_setups_are_typed_errors() {
    let servers = RedisServer::start_many(2);
    assert!(matches!(Redlock::new(vec![]), Err(Error::InvalidInput(_))));
    assert!(matches!(
        Redlock::connect(&[]).await,
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        Redlock::connect(&["not a url"]).await,
        Err(Error::InvalidInput(_))
    ));
    let a = client(&servers[0].url()).await;
    let twice = Redlock::new(vec![a.clone(), a.clone()]);
    assert!(
        matches!(twice, Err(Error::InvalidInput(_))),
        "same server twice accepted"
    );
    let other_prefix = latchkey::Client::connect(&servers[1].url()).await.unwrap();
    let mixed = Redlock::new(vec![a.clone(), other_prefix]);
    assert!(
        matches!(mixed, Err(Error::InvalidInput(_))),
        "mixed prefixes accepted"
    );
    let one = Redlock::new(vec![a]).unwrap();
    assert!(matches!(
        one.clone().with_instance_timeout(Duration::ZERO),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        one.lock("", Duration::from_secs(1)),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        one.lock("x", Duration::ZERO),
        Err(Error::InvalidTtl { .. })
    ));
}

#[tokio::test]
async fn a_slow_instance_costs_at_most_the_instance_timeout() {
    let servers = RedisServer::start_many(3);
    let proxy = Proxy::start(servers[2].addr()).await;
    let clients = vec![
        client(&servers[0].url()).await,
        client(&servers[1].url()).await,
        client(&proxy.url()).await,
    ];
    let redlock = Redlock::new(clients).unwrap();
    // TTL 1 s: the per-instance timeout is ttl/10 = 100 ms; the slow
    // instance would answer after 2 × 400 ms.
    let lock = redlock.lock("slow-one", Duration::from_secs(1)).unwrap();
    proxy.set_mode(ProxyMode::Delay(Duration::from_millis(400)));
    let started = Instant::now();
    let guard = lock
        .try_acquire()
        .await
        .unwrap()
        .expect("2 fast of 3 are a majority");
    let took = started.elapsed();
    // The two fast instances decide (typically in about a millisecond); the
    // bound is the 100 ms timeout plus margin for a loaded 2-core machine,
    // far below the slow instance's 800 ms round trip.
    assert!(took < Duration::from_millis(250), "took {took:?}");
    assert!(guard.deadline() > Instant::now() + Duration::from_millis(500));
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn a_slow_majority_is_not_acquired_and_leaves_no_key() {
    let servers = RedisServer::start_many(5);
    let mut clients = Vec::new();
    for s in &servers {
        let c = latchkey::Client::builder(&s.url())
            .prefix("test:")
            .command_timeout(Duration::from_secs(3))
            .connect()
            .await
            .unwrap();
        clients.push(c);
    }
    // Instances answer within the per-instance timeout, but so late that
    // the TTL is used up.
    let redlock = Redlock::new(clients)
        .unwrap()
        .with_instance_timeout(Duration::from_secs(2))
        .unwrap();
    let ttl = Duration::from_millis(300);
    let lock = redlock.lock("slow-majority", ttl).unwrap();
    // Keyspace events of our key: a retraction (the release undoing a failed
    // attempt) deletes it ("del"), proof that it was released, not left to
    // expire ("expired"). (The release publishes nothing: nobody waits.)
    let mut retractions = Vec::new();
    for s in &servers {
        s.command(&["CONFIG", "SET", "notify-keyspace-events", "Kgx"])
            .unwrap();
        let mut pubsub = redis::Client::open(s.url())
            .unwrap()
            .get_async_pubsub()
            .await
            .unwrap();
        pubsub
            .subscribe("__keyspace@0__:test:slow-majority")
            .await
            .unwrap();
        retractions.push(pubsub);
    }
    let mut servers = servers;
    let slow: Vec<RedisServer> = servers.drain(..3).collect();
    for s in &slow {
        s.pause();
    }
    let resumer = std::thread::spawn(move || {
        // Longer than the TTL: this is what makes the majority too slow.
        std::thread::sleep(Duration::from_millis(450));
        for s in &slow {
            s.resume();
        }
        slow
    });
    let started = Instant::now();
    let result = lock.try_acquire().await;
    let took = started.elapsed();
    servers.extend(resumer.join().unwrap());
    assert!(result.as_ref().is_ok_and(Option::is_none), "got {result:?}");
    assert!(
        took >= Duration::from_millis(450),
        "returned before the slow majority answered: {took:?}"
    );
    // The fast instances' keys expired long ago (TTL 300 ms); a slow
    // instance's key, granted after 450 ms, would live until about 750 ms.
    // None is left now: each slow instance granted the lock and had it
    // retracted (deleted by us: the retraction channel says so) before
    // try_acquire returned — also those whose answer the round no longer
    // needed (their acquire ran to the end, then was undone).
    for s in &servers {
        assert!(
            !has_key(s, "test:slow-majority"),
            "key left on port {}",
            s.port()
        );
    }
    for (i, pubsub) in retractions.iter_mut().enumerate().take(3) {
        // "expire" comes first: the SET's PX.
        let mut events = Vec::new();
        let mut stream = pubsub.on_message();
        while let Ok(Some(message)) =
            tokio::time::timeout(Duration::from_millis(500), stream.next()).await
        {
            let event = message.get_payload::<String>().unwrap();
            let last = event == "del" || event == "expired";
            events.push(event);
            if last {
                break;
            }
        }
        assert_eq!(
            events.last().map(String::as_str),
            Some("del"),
            "slow instance {i} was not retracted: {events:?}"
        );
    }
}

/// Sets the fencing counter of `name` on every server to `base + i`, far
/// ahead of any clock (5e15 µs is the year 2128), so only counters — not the
/// time floor — can make tokens increase.
fn seed_fences(servers: &[RedisServer], name: &str, offsets: &[u64]) -> u64 {
    let base = 5_000_000_000_000_000;
    for (s, off) in servers.iter().zip(offsets) {
        s.command(&[
            "SET",
            &format!("{{test:{name}}}:fence"),
            &(base + off).to_string(),
        ])
        .unwrap();
    }
    base
}

/// Until every instance answers a whole acquire + release again (after a
/// restart, a client's first command finds its connection dead and
/// reconnects): the strict-fencing guarantee is stated for acquisitions
/// that reached all N.
async fn until_all_answer(redlock: &Redlock, servers: &[RedisServer]) {
    let probe = redlock.lock("probe", Duration::from_secs(5)).unwrap();
    eventually("every instance answers again", || async {
        match probe.try_acquire().await {
            Ok(Some(guard)) => {
                let everywhere = servers.iter().all(|s| has_key(s, "test:probe"));
                let released = guard.release().await;
                let gone = servers.iter().all(|s| !has_key(s, "test:probe"));
                everywhere && gone && released.is_ok()
            }
            _ => false,
        }
    })
    .await;
}

#[tokio::test]
async fn strict_tokens_increase_across_minority_restarts() {
    let mut servers = RedisServer::start_many(5);
    let base = seed_fences(&servers, "restarts", &[0; 5]);
    let redlock = redlock(&servers).await;
    let lock = redlock.lock("restarts", Duration::from_secs(5)).unwrap();
    let mut last = 0;
    for round in 0..5 {
        until_all_answer(&redlock, &servers).await;
        let guard = lock.acquire_until(Duration::from_secs(5)).await.unwrap();
        let token = guard.fencing_token().await.unwrap();
        assert!(token > last, "round {round}: token {token} after {last}");
        assert!(
            token > base,
            "round {round}: token {token} did not come from the counters"
        );
        last = token;
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
        // A minority (2 of 5) restarts without persistence: their counters
        // are gone, and the time floor (~1.8e15) is far below the counters.
        servers[(2 * round) % 5].restart();
        servers[(2 * round + 1) % 5].restart();
    }
}

/// The paired demonstration of `docs/redlock.md`: with counters ahead of
/// the clocks, the first majority {i0, i1} issues i1's 5e15+51; the next
/// majority {i0, i2} avoids i1. The time-floor token goes backwards (i0's
/// 5e15+12); the strict one cannot, because i0 was raised to 5e15+51.
#[tokio::test]
async fn time_floor_tokens_can_go_backwards_where_strict_ones_cannot() {
    for (fencing, name) in [(Fencing::TimeFloor, "floor"), (Fencing::Strict, "strict")] {
        let mut servers = RedisServer::start_many(3);
        let base = seed_fences(&servers, name, &[10, 50, 5]);
        let redlock = redlock(&servers).await.with_fencing_mode(fencing);
        let lock = redlock.lock(name, Duration::from_secs(5)).unwrap();
        servers[2].kill();
        let first = lock.try_acquire().await.unwrap().expect("i0 and i1");
        let first_token = first.fencing_token().await.unwrap();
        assert_eq!(first_token, base + 51);
        assert_eq!(first.release().await.unwrap(), Ownership::Owned);
        servers[2].restart(); // without persistence: its counter is gone
        servers[1].kill();
        let second = lock.try_acquire().await.unwrap().expect("i0 and i2");
        let second_token = second.fencing_token().await.unwrap();
        match fencing {
            Fencing::TimeFloor => assert_eq!(second_token, base + 12, "the documented regression"),
            _ => assert_eq!(second_token, base + 52),
        }
        assert_eq!(second.release().await.unwrap(), Ownership::Owned);
    }
}

#[tokio::test]
async fn a_release_on_any_instance_wakes_waiters() {
    let mut servers = RedisServer::start_many(3);
    let redlock = redlock(&servers).await;
    // Another client's waiter: one behind a holder of its own client is
    // woken without pub/sub.
    let other = self::redlock(&servers).await;
    servers[0].kill(); // waiters cope with an instance they cannot subscribe on
    let ttl = Duration::from_secs(20);
    let lock = redlock.lock("handover", ttl).unwrap();
    let holder = lock.try_acquire().await.unwrap().unwrap();
    let waiter = tokio::spawn({
        let lock = other.lock("handover", ttl).unwrap();
        async move {
            let guard = lock.acquire_until(Duration::from_secs(10)).await.unwrap();
            let at = Instant::now();
            assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
            at
        }
    });
    // Until the waiter listens on the live instances and its attempt (a
    // second SET, after the holder's) was refused there: from then on only a
    // wake-up gets it the lock before the TTL.
    for live in &servers[1..] {
        until_subscribed(live, "{test:handover}:released", 1).await;
        eventually("the waiter's attempt was refused", || async {
            live.calls("set") >= 2
        })
        .await;
    }
    let released_at = Instant::now();
    assert_eq!(holder.release().await.unwrap(), Ownership::Owned);
    let acquired_at = waiter.await.unwrap();
    // Without a wake-up the waiter would sleep until the holder's TTL (20 s)
    // and miss its 10 s deadline.
    assert!(
        acquired_at - released_at < Duration::from_secs(2),
        "{:?}",
        acquired_at - released_at
    );
}

#[tokio::test]
async fn the_watchdog_loses_the_lock_when_a_majority_of_keys_is_deleted() {
    let servers = RedisServer::start_many(3);
    let redlock = redlock(&servers).await;
    // Renews every 333 ms, each instance allowed 100 ms (ttl/10): roomy
    // enough for a loaded 2-core machine.
    let ttl = Duration::from_secs(1);
    let lock = redlock.lock("watched", ttl).unwrap().with_watchdog();
    let guard = lock.try_acquire().await.unwrap().unwrap();
    until_everywhere(&servers, "test:watched").await;
    // Renewals keep it past its TTL, and past the loss of one key.
    servers[0].command(&["DEL", "test:watched"]).unwrap();
    tokio::time::sleep(ttl + Duration::from_millis(300)).await;
    assert!(
        guard.is_held(),
        "a minority loss (or the TTL) cost the lock"
    );
    assert!(
        has_key(&servers[1], "test:watched"),
        "the watchdog did not renew"
    );

    servers[1].command(&["DEL", "test:watched"]).unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(2), guard.lost()).await;
    assert!(
        lost.is_ok(),
        "lost() did not fire after a majority of keys was deleted"
    );
    assert!(!guard.is_held());
    assert_eq!(guard.release().await.unwrap(), Ownership::Expired);
}

#[tokio::test]
async fn extend_and_release_need_a_majority() {
    let servers = RedisServer::start_many(3);
    // Every instance must answer for the outcomes below; give them the
    // clients' whole command timeout (a loaded machine can stall one past
    // the default 250 ms, which would rightly make the outcome unprovable).
    let redlock = redlock(&servers)
        .await
        .with_instance_timeout(Duration::from_millis(500))
        .unwrap();
    let lock = redlock.lock("majority", Duration::from_secs(5)).unwrap();
    let guard = lock.try_acquire().await.unwrap().unwrap();
    // Someone else's key on two instances: not ours any more.
    for s in &servers[..2] {
        s.command(&["SET", "test:majority", "theirs"]).unwrap();
    }
    assert_eq!(
        guard.extend(Duration::from_secs(5)).await.unwrap(),
        Ownership::HeldByOther
    );
    // Decided by the two others' keys; our own third key is deleted too.
    assert_eq!(guard.release().await.unwrap(), Ownership::HeldByOther);
    let mut conn = raw(&servers[0].url()).await;
    let value: String = conn.get("test:majority").await.unwrap();
    assert_eq!(value, "theirs", "a non-owner deleted someone else's key");
}

// ---- No two holders: two processes, a minority instance restarting ----

const TASKS: usize = 6;
const ROUNDS: usize = 84; // 2 processes × 6 tasks × 84 ≈ 1,000 acquisitions

/// One process's side: TASKS tasks doing ROUNDS read-sleep-write increments
/// of a counter kept on a separate server, each under the Redlock.
async fn contend(lock_urls: &[String], counter_url: &str) {
    let mut clients = Vec::new();
    for url in lock_urls {
        clients.push(client(url).await);
    }
    let redlock = Redlock::new(clients).unwrap();
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let lock = redlock.lock("counted", Duration::from_millis(500)).unwrap();
        let counter_url = counter_url.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut conn = raw(&counter_url).await;
            for _ in 0..ROUNDS {
                let guard = lock.acquire_until(Duration::from_secs(20)).await.unwrap();
                let n: i64 = conn.get("count").await.unwrap_or(0);
                // Widens the window a second holder would need.
                tokio::time::sleep(Duration::from_millis(1)).await;
                let _: () = conn.set("count", n + 1).await.unwrap();
                // Released, or expired if a restart took keys: never someone else's.
                assert_ne!(guard.release().await.unwrap(), Ownership::HeldByOther);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

fn urls_from_env() -> (Vec<String>, String) {
    let locks = helper_env("LATCHKEY_REDLOCK_URLS");
    let counter = helper_env("LATCHKEY_COUNTER_URL");
    (locks.split(' ').map(str::to_owned).collect(), counter)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper process: run by its parent test"]
async fn child_redlock_contender() {
    let (locks, counter) = urls_from_env();
    contend(&locks, &counter).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_two_holders_across_processes_while_an_instance_restarts() {
    let servers = RedisServer::start_many(5);
    let counter = RedisServer::start();
    let lock_urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let mut child = spawn_child(
        concat!(module_path!(), "::child_redlock_contender"),
        &[
            ("LATCHKEY_REDLOCK_URLS", lock_urls.join(" ")),
            ("LATCHKEY_COUNTER_URL", counter.url()),
        ],
    );
    // Meanwhile, stop one instance at a time and restart it empty after
    // longer than the TTL (the persistence advice for Redlock).
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let restarter = std::thread::spawn(move || {
        let mut servers = servers;
        let mut restarts = 0;
        for i in 0.. {
            if done_rx.recv_timeout(Duration::from_millis(150)).is_ok() {
                break;
            }
            servers[i % 2].stop();
            std::thread::sleep(Duration::from_millis(600)); // > TTL (500 ms)
            servers[i % 2].restart();
            restarts += 1;
        }
        (servers, restarts)
    });
    contend(&lock_urls, &counter.url()).await;
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    done_tx.send(()).unwrap();
    let (_servers, restarts) = restarter.join().unwrap();
    assert!(status.success(), "child process failed: {status}");
    let mut conn = raw(&counter.url()).await;
    let count: usize = conn.get("count").await.unwrap();
    assert_eq!(
        count,
        2 * TASKS * ROUNDS,
        "lost updates: two holders at once"
    );
    assert!(restarts >= 1, "the run ended before any instance restarted");
}

/// A Redlock's token, like a single lock's, comes with the acquisition for
/// a lock `with_fencing`, else on request; either is refused once the lock
/// is someone else's.
#[tokio::test]
async fn tokens_on_request_or_with_the_acquisition() {
    let servers = RedisServer::start_many(3);
    let redlock = redlock(&servers).await;
    let eager = redlock
        .lock("when", Duration::from_secs(5))
        .unwrap()
        .with_fencing();
    let guard = eager.try_acquire().await.unwrap().expect("free");
    let first = guard
        .issued_fencing_token()
        .expect("issued with the acquisition");
    assert_eq!(guard.fencing_token().await.unwrap(), first);
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);

    let lazy = redlock.lock("when", Duration::from_millis(50)).unwrap();
    let stale = lazy.try_acquire().await.unwrap().expect("free");
    assert_eq!(stale.issued_fencing_token(), None);
    // Another holder once the stale one's keys expired (the TTL is the point).
    let fresh = eager.acquire_until(Duration::from_secs(5)).await.unwrap();
    let fresh_token = fresh.issued_fencing_token().expect("eager");
    assert!(fresh_token > first);
    assert!(matches!(
        stale.fencing_token().await,
        Err(latchkey::Error::NotHeld { .. })
    ));
    assert_eq!(fresh.release().await.unwrap(), Ownership::Owned);
    let later = lazy.try_acquire().await.unwrap().expect("free");
    assert!(later.fencing_token().await.unwrap() > fresh_token);
    assert_eq!(later.release().await.unwrap(), Ownership::Owned);
}

/// A Redlock token needs a majority that still holds our key: with three of
/// five instances gone, asking for it is `NoQuorum` (transient), not a token.
#[tokio::test]
async fn a_token_without_a_majority_is_no_quorum() {
    let mut servers = RedisServer::start_many(5);
    let redlock = redlock(&servers).await;
    let guard = redlock
        .lock("minority", Duration::from_secs(30))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    for s in &mut servers[..3] {
        s.kill();
    }
    match guard.fencing_token().await {
        Err(e @ Error::NoQuorum { .. }) => assert!(e.is_transient()),
        other => panic!("expected NoQuorum, got {other:?}"),
    }
    assert_eq!(guard.issued_fencing_token(), None);
}
