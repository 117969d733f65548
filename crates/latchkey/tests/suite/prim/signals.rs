//! Signals over pub/sub: broadcast, unicast, any/all, patterns, replicas,
//! and no leak of subscriptions on the server.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::*;
use futures_util::future::join_all;
use futures_util::FutureExt;
use latchkey::{Client, Error, Listener, Signal};
use redis::AsyncCommands;

/// Generous bound for things that take milliseconds: the CI machine is small
/// and shared, and a slow pass is not what these tests look for.
const PATIENCE: Duration = Duration::from_secs(5);

async fn numsub(conn: &mut redis::aio::MultiplexedConnection, channel: &str) -> i64 {
    let reply: Vec<(String, i64)> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(conn)
        .await
        .unwrap();
    reply[0].1
}

async fn channels(conn: &mut redis::aio::MultiplexedConnection, pattern: &str) -> Vec<String> {
    redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .arg(pattern)
        .query_async(conn)
        .await
        .unwrap()
}

async fn numpat(conn: &mut redis::aio::MultiplexedConnection) -> i64 {
    redis::cmd("PUBSUB")
        .arg("NUMPAT")
        .query_async(conn)
        .await
        .unwrap()
}

/// Returns once every subscription change `client` asked for before has
/// reached the server: its subscriber handles requests in order, and a
/// subscribe to a fresh name is confirmed only after all earlier ones.
/// (Waiters unsubscribe in the background when dropped.)
async fn settle(client: &Client) {
    static FRESH: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = FRESH.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    drop(client.listen([format!("settle-{n}")]).await.unwrap());
}

async fn listeners(client: &Client, name: &str, n: usize) -> Vec<Listener> {
    join_all((0..n).map(|_| client.listen([name])))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect()
}

/// Everything a listener has heard: waits for the broadcast `fence` on its
/// name (sent after everything else), then drains what is buffered. Pub/sub
/// keeps the order of one connection, so nothing sent before the fence can
/// arrive after it.
async fn heard_until_fence(listener: &mut Listener) -> Vec<Signal> {
    let mut heard = Vec::new();
    loop {
        let signal = listener
            .recv_timeout(PATIENCE)
            .await
            .expect("the fence arrives");
        if signal.payload == b"fence" {
            break;
        }
        heard.push(signal);
    }
    while let Some(signal) = listener.try_recv() {
        heard.push(signal);
    }
    heard
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcast_reaches_every_waiter_and_counts_them() {
    let server = RedisServer::start();
    // Two processes' worth of connections: 60 waiters share one, 40 the other.
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let mut all = listeners(&a, "deploy", 60).await;
    all.extend(listeners(&b, "deploy", 40).await);
    // And a program that is not latchkey, subscribed to the channel.
    let mut foreign = redis::Client::open(server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    foreign.subscribe("test:signal:deploy").await.unwrap();

    assert_eq!(a.waiters("deploy").await.unwrap(), 100);
    // PUBLISH counts connections: two of latchkey's and the other program.
    assert_eq!(a.signal("deploy", b"v42").await.unwrap(), 3);
    for listener in &mut all {
        let signal = listener
            .recv_timeout(PATIENCE)
            .await
            .expect("every waiter hears it");
        assert_eq!(
            (signal.name.as_slice(), signal.payload.as_slice()),
            (&b"deploy"[..], &b"v42"[..])
        );
        assert!(!signal.unicast);
    }
    // The other program sees the documented envelope.
    let message = futures_util::StreamExt::next(&mut foreign.on_message())
        .await
        .unwrap();
    let raw = message.get_payload_bytes();
    assert!(raw.starts_with(b"lksig1:") && raw.ends_with(b":v42") && raw.len() == 7 + 16 + 1 + 3);

    // A plain message from another program reaches waiters as it is.
    let mut conn = raw_conn(&server).await;
    let _: i64 = conn.publish("test:signal:deploy", "plain").await.unwrap();
    let signal = all[99].recv_timeout(PATIENCE).await.unwrap();
    assert_eq!(signal.payload, b"plain");

    drop(all);
    drop(foreign);
    eventually("the waiters are gone", || {
        let (a, mut conn) = (a.clone(), conn.clone());
        async move {
            numsub(&mut conn, "test:signal:deploy").await == 0
                && a.waiters("deploy").await.unwrap() == 0
        }
    })
    .await;
}

async fn raw_conn(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    raw(&server.url()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unicast_reaches_exactly_one_waiter_at_random() {
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    assert!(
        !a.signal_one("work", b"lost").await.unwrap(),
        "nobody waits yet"
    );

    let mut all = listeners(&a, "work", 5).await;
    all.extend(listeners(&b, "work", 5).await);
    assert_eq!(b.waiters("work").await.unwrap(), 10);
    // Receivers report (which waiter, what payload) as they hear.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let tasks: Vec<_> = all
        .into_iter()
        .enumerate()
        .map(|(i, mut listener)| {
            let tx = tx.clone();
            tokio::spawn(async move {
                loop {
                    let signal = listener.recv().await;
                    if signal.payload == b"fence" {
                        // Anything sent before the fence is buffered by now.
                        while let Some(signal) = listener.try_recv() {
                            tx.send((i, signal)).unwrap();
                        }
                        return;
                    }
                    tx.send((i, signal)).unwrap();
                }
            })
        })
        .collect();

    let mut chosen = BTreeMap::<usize, usize>::new();
    for n in 0..60 {
        assert!(a.signal_one("work", n.to_string()).await.unwrap());
        // One at a time: each must be heard before the next is sent.
        let (i, signal) = tokio::time::timeout(PATIENCE, rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert!(signal.unicast);
        assert_eq!(signal.payload, n.to_string().as_bytes());
        *chosen.entry(i).or_default() += 1;
    }
    assert_eq!(
        a.signal("work", b"fence").await.unwrap(),
        2,
        "two connections"
    );
    for task in tasks {
        task.await.unwrap();
    }
    drop(tx);
    let extra: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    assert!(
        extra.is_empty(),
        "a unicast reached a second waiter: {extra:?}"
    );
    // 60 uniform picks among 10 leave fewer than 4 waiters unpicked with
    // overwhelming probability; a fixed pick would hit one waiter only.
    assert!(chosen.len() >= 4, "picks are not spread: {chosen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_sharing_a_prefix_or_glob_characters_stay_apart() {
    let server = RedisServer::start();
    // A prefix with glob characters too, to check it is escaped.
    let client = Client::builder(&server.url())
        .prefix("t[1]*:")
        .connect()
        .await
        .unwrap();
    let names = [
        "job", "jobs", "job:x", "j*b", "job?", "[job]", "jo\\b", "job:", "3:job",
    ];
    let mut all = Vec::new();
    for name in names {
        all.push(client.listen([name]).await.unwrap());
    }
    // A client whose prefix the escaped glob must not match.
    let other = Client::builder(&server.url())
        .prefix("t1zz:")
        .connect()
        .await
        .unwrap();
    let _bystander = other.listen(["job"]).await.unwrap();

    for name in names {
        assert_eq!(client.signal(name, name).await.unwrap(), 1, "{name}");
        assert!(client.signal_one(name, name).await.unwrap(), "{name}");
    }
    for name in names {
        assert_eq!(client.signal(name, b"fence").await.unwrap(), 1);
    }
    for (name, listener) in names.iter().zip(&mut all) {
        let heard: BTreeSet<(Vec<u8>, Vec<u8>, bool)> = heard_until_fence(listener)
            .await
            .into_iter()
            .map(|s| (s.name, s.payload, s.unicast))
            .collect();
        let n = name.as_bytes().to_vec();
        let expected = BTreeSet::from([(n.clone(), n.clone(), false), (n.clone(), n, true)]);
        assert_eq!(heard, expected, "listener on {name:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_time_out_and_bad_input_is_refused() {
    let server = RedisServer::start();
    let client = client(&server.url()).await;
    let started = Instant::now();
    assert!(matches!(
        client.wait("nobody", Duration::from_millis(50)).await,
        Err(latchkey::Error::WaitTimedOut { .. })
    ));
    // The timeout is the point: at least 50 ms, and not wildly more.
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(50) && waited < PATIENCE,
        "{waited:?}"
    );
    assert!(matches!(
        client.wait_all(["x", "y"], Duration::from_millis(20)).await,
        Err(latchkey::Error::WaitTimedOut { .. })
    ));
    assert!(matches!(
        client.wait_pattern("x*", Duration::from_millis(20)).await,
        Err(latchkey::Error::WaitTimedOut { .. })
    ));

    for bad in ["", "lock:released"] {
        assert!(
            matches!(
                client.signal(bad, b"").await,
                Err(Error::InvalidName { .. })
            ),
            "{bad:?}"
        );
        assert!(matches!(
            client.signal_one(bad, b"").await,
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            client.listen([bad]).await,
            Err(Error::InvalidName { .. })
        ));
    }
    let long = "x".repeat(latchkey::limits::MAX_NAME_LEN + 1);
    assert!(matches!(
        client.signal(&long, b"").await,
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        client.listen(Vec::<&str>::new()).await,
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        client.listen(["a", "a"]).await,
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        client.listen_patterns([""]).await,
        Err(Error::InvalidName { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_any_returns_the_first_and_wait_all_every_name() {
    let server = RedisServer::start();
    let client = client(&server.url()).await;
    let conn = raw_conn(&server).await;

    let waiter = client.clone();
    let any = tokio::spawn(async move { waiter.wait_any(["a", "b", "c"], PATIENCE).await });
    eventually("wait_any is subscribed", || {
        let mut conn = conn.clone();
        async move { numsub(&mut conn, "test:signal:c").await == 1 }
    })
    .await;
    assert_eq!(client.signal("b", b"bee").await.unwrap(), 1);
    let signal = any.await.unwrap().expect("a signal");
    assert_eq!(
        (signal.name, signal.payload),
        (b"b".to_vec(), b"bee".to_vec())
    );
    settle(&client).await;

    let waiter = client.clone();
    let all = tokio::spawn(async move { waiter.wait_all(["a", "b"], PATIENCE).await });
    eventually("wait_all is subscribed", || {
        let mut conn = conn.clone();
        async move { numsub(&mut conn, "test:signal:b").await == 1 }
    })
    .await;
    assert_eq!(client.signal("a", b"first a").await.unwrap(), 1);
    // A name that got its signal stops listening at once.
    eventually("\"a\" is given up", || {
        let mut conn = conn.clone();
        async move {
            numsub(&mut conn, "test:signal:a").await == 0
                && channels(&mut conn, "test:signal-one:1:a:*")
                    .await
                    .is_empty()
        }
    })
    .await;
    assert_eq!(client.signal("a", b"second a").await.unwrap(), 0);
    assert!(
        !client.signal_one("a", b"").await.unwrap(),
        "no longer a unicast candidate"
    );
    assert!(client.signal_one("b", b"bee").await.unwrap());
    let got = all.await.unwrap().expect("all signals");
    let got: Vec<_> = got
        .into_iter()
        .map(|s| (s.name, s.payload, s.unicast))
        .collect();
    assert_eq!(
        got,
        [
            (b"a".to_vec(), b"first a".to_vec(), false),
            (b"b".to_vec(), b"bee".to_vec(), true)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patterns_hear_matching_names_only() {
    let server = RedisServer::start();
    let client = client(&server.url()).await;
    let mut listener = client.listen_patterns(["job.*"]).await.unwrap();
    let mut everything = client.listen_patterns(["*"]).await.unwrap();

    assert_eq!(
        client.signal("other", b"no").await.unwrap(),
        1,
        "only `*` matches"
    );
    assert!(
        !client.signal_one("job.1", b"no").await.unwrap(),
        "patterns are not unicast candidates"
    );
    // A lock called "signal:x" (keys and channel under "{test:signal:x}")
    // is not a signal and must not show up.
    let lock = client.lock("signal:x", Duration::from_secs(5)).unwrap();
    let released = lock
        .try_acquire()
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();
    assert_eq!(released, latchkey::Ownership::Owned);
    assert_eq!(client.signal("job.1", b"yes").await.unwrap(), 2);

    let signal = listener.recv_timeout(PATIENCE).await.unwrap();
    assert_eq!(
        (signal.name, signal.payload),
        (b"job.1".to_vec(), b"yes".to_vec())
    );
    let names: Vec<_> = [everything.recv().await, everything.recv().await]
        .into_iter()
        .map(|s| (s.name, s.payload))
        .collect();
    assert_eq!(
        names,
        [
            (b"other".to_vec(), b"no".to_vec()),
            (b"job.1".to_vec(), b"yes".to_vec())
        ]
    );

    // wait_all over patterns: one signal matching both satisfies both.
    let mut both = client.listen_patterns(["a*", "*z"]).await.unwrap();
    client.signal("abz", b"1").await.unwrap();
    let got: Vec<_> = both.recv_all().await.into_iter().map(|s| s.name).collect();
    assert_eq!(got, [b"abz".to_vec(), b"abz".to_vec()]);
    let conn = raw_conn(&server).await;
    eventually("recv_all gave up the patterns it is done with", || {
        let mut conn = conn.clone();
        async move { numpat(&mut conn).await == 2 }
    })
    .await;

    let waiter = client.clone();
    let pattern = tokio::spawn(async move { waiter.wait_pattern("q?", PATIENCE).await });
    eventually("the pattern is subscribed", || {
        let mut conn = conn.clone();
        async move { numpat(&mut conn).await == 3 }
    })
    .await;
    client.signal("qq", b"").await.unwrap();
    assert_eq!(pattern.await.unwrap().unwrap().name, b"qq");
}

/// A client on `primary` that also listens on `replica`, checking its
/// subscriber connections every `ping`.
async fn replicated_client(primary: &str, replica: &RedisServer, ping: Duration) -> Client {
    Client::builder(primary)
        .prefix("test:")
        .replica(&replica.url())
        .command_timeout(Duration::from_millis(500))
        .pubsub_ping_every(ping)
        .connect()
        .await
        .unwrap()
}

async fn start_replica(primary: &RedisServer) -> RedisServer {
    let replica = RedisServer::builder().replica_of(primary.port()).start();
    let conn = raw_conn(&replica).await;
    eventually("replication is up", || {
        let mut conn = conn.clone();
        async move {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query_async(&mut conn)
                .await
                .unwrap();
            info.contains("master_link_status:up")
        }
    })
    .await;
    replica
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_primary_connection_is_killed_hears_via_the_replica_once() {
    let primary = RedisServer::start();
    let replica = start_replica(&primary).await;
    let client = replicated_client(&primary.url(), &replica, Duration::from_millis(100)).await;
    let mut listener = client.listen(["r"]).await.unwrap();
    let (on_primary, on_replica) = (raw_conn(&primary).await, raw_conn(&replica).await);
    eventually("the waiter listens on both servers", || {
        let (mut p, mut r) = (on_primary.clone(), on_replica.clone());
        async move {
            numsub(&mut p, "test:signal:r").await == 1 && numsub(&mut r, "test:signal:r").await == 1
        }
    })
    .await;

    // Both copies arrive (one per server); the waiter passes on one.
    assert_eq!(client.signal("r", b"before").await.unwrap(), 1);
    assert_eq!(
        listener.recv_timeout(PATIENCE).await.unwrap().payload,
        b"before"
    );

    let killed = primary
        .command(&["CLIENT", "KILL", "TYPE", "pubsub"])
        .unwrap();
    assert_eq!(
        killed, "1",
        "the waiter's primary subscriber connection was killed"
    );
    client.signal("r", b"during").await.unwrap();
    assert_eq!(
        listener.recv_timeout(PATIENCE).await.unwrap().payload,
        b"during"
    );

    // The primary subscriber comes back; still one delivery per signal.
    eventually("the primary subscription is back", || {
        let mut p = on_primary.clone();
        async move { numsub(&mut p, "test:signal:r").await == 1 }
    })
    .await;
    client.signal("r", b"after").await.unwrap();
    client.signal("r", b"fence").await.unwrap();
    let heard: Vec<_> = heard_until_fence(&mut listener)
        .await
        .into_iter()
        .map(|s| s.payload)
        .collect();
    assert_eq!(heard, [b"after".to_vec()], "each signal exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_cut_off_from_the_primary_still_hears_signals() {
    let primary = RedisServer::start();
    let replica = start_replica(&primary).await;
    // The waiter reaches the primary through a proxy we can cut; the sender
    // goes directly.
    let proxy = Proxy::start(primary.addr()).await;
    // No health-check pings: the cut connection must stay subscribed on the
    // primary for the signals below to be sent to it (and lost).
    let waiter = replicated_client(&proxy.url(), &replica, Duration::from_secs(3600)).await;
    let sender = client(&primary.url()).await;
    let mut listener = waiter.listen(["cut"]).await.unwrap();
    let (on_primary, on_replica) = (raw_conn(&primary).await, raw_conn(&replica).await);
    eventually("the waiter listens on both servers", || {
        let (mut p, mut r) = (on_primary.clone(), on_replica.clone());
        async move {
            numsub(&mut p, "test:signal:cut").await == 1
                && numsub(&mut r, "test:signal:cut").await == 1
        }
    })
    .await;

    proxy.set_mode(ProxyMode::Blackhole);
    // The primary delivers to the blackholed connection (its copy never
    // arrives), so it counts the waiter; the replica's copy gets through.
    assert_eq!(sender.signal("cut", b"via replica").await.unwrap(), 1);
    let signal = listener
        .recv_timeout(PATIENCE)
        .await
        .expect("heard through the replica");
    assert_eq!(signal.payload, b"via replica");
    // Unicast goes to waiters the primary lists; its copy is replicated too.
    assert!(sender.signal_one("cut", b"one").await.unwrap());
    let signal = listener
        .recv_timeout(PATIENCE)
        .await
        .expect("unicast through the replica");
    assert!(signal.unicast && signal.payload == b"one");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_timed_out_waits_leave_no_subscription_behind() {
    let server = RedisServer::start();
    let client = client(&server.url()).await;
    let mut conn = raw_conn(&server).await;
    // Timeouts from 0 to 9 ms: some end before their SUBSCRIBE was even
    // sent or confirmed, the rest while waiting.
    let waits = (0..1000u64).map(|i| {
        let client = client.clone();
        async move {
            let timeout = Duration::from_millis(i % 10);
            let name = format!("n{}", i % 20);
            if i % 10 == 9 {
                client.wait_pattern(format!("{name}*"), timeout).await
            } else {
                client.wait(name, timeout).await
            }
        }
    });
    for outcome in join_all(waits).await {
        assert!(matches!(outcome, Err(latchkey::Error::WaitTimedOut { .. })));
    }
    settle(&client).await;
    let mut left = channels(&mut conn, "test:*").await;
    // (Those of `settle` itself may still be on their way out.)
    left.retain(|c| !c.contains("settle-"));
    assert_eq!(left, Vec::<String>::new(), "channels leaked");
    assert_eq!(numpat(&mut conn).await, 0, "patterns leaked");
    // The subscriber still works after all that.
    let mut listener = client.listen(["n1"]).await.unwrap();
    assert_eq!(client.signal("n1", b"ok").await.unwrap(), 1);
    assert_eq!(
        listener.recv_timeout(PATIENCE).await.unwrap().payload,
        b"ok"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_channel_fails_only_its_own_waiter() {
    let server = RedisServer::start();
    // This user may use the channels of signal "a" only.
    server
        .command(&[
            "ACL",
            "SETUSER",
            "limited",
            "on",
            ">pw",
            "~*",
            "+@all",
            "resetchannels",
            "&test:signal:a",
            "&test:signal-one:1:a:*",
        ])
        .unwrap();
    let client = client(&format!("redis://limited:pw@127.0.0.1:{}/", server.port())).await;
    // Asked for together, so that the subscriber sends them in one batch:
    // the refusal of "b" must not take "a" down with it.
    let (a, b) = tokio::join!(client.listen(["a"]), client.listen(["b"]));
    assert!(matches!(b, Err(Error::NoPermission(_))), "{b:?}");
    let mut a = a.unwrap();
    assert_eq!(client.signal("a", b"allowed").await.unwrap(), 1);
    assert_eq!(a.recv_timeout(PATIENCE).await.unwrap().payload, b"allowed");
}

/// `Listener::recv` and `recv_timeout` are cancel safe: a future dropped
/// while it waited (here after one poll; a lost `select!` branch is the
/// same) loses the signal that arrived meanwhile to nobody, and the
/// listener stays usable. Once with one name (a name's two channels, read
/// with a biased `select!`) and once with two (`select_all` over four).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_recv_loses_no_signal() {
    let server = RedisServer::start();
    let client = client(&server.url()).await;
    for names in [&["cs"][..], &["cs", "cs-other"][..]] {
        let mut listener = client.listen(names.iter().copied()).await.unwrap();
        // Same client, same topic: one shared buffer per topic, so once the
        // observer has the signal, the listener's buffer has it too.
        let mut observer = client.listen(["cs"]).await.unwrap();

        // Nothing yet: a timeout passes, the listener is still subscribed.
        assert!(matches!(
            listener.recv_timeout(Duration::from_millis(1)).await,
            Err(latchkey::Error::WaitTimedOut { .. })
        ));
        assert!(listener.is_subscribed());

        {
            let mut waiting = std::pin::pin!(listener.recv());
            assert!(
                waiting.as_mut().now_or_never().is_none(),
                "nothing to receive yet"
            );
            assert_eq!(client.signal("cs", b"one").await.unwrap(), 1);
            let seen = observer.recv_timeout(PATIENCE).await.expect("delivered");
            assert_eq!(seen.payload, b"one");
            // Dropped here, after the signal reached its buffer, unpolled.
        }
        let signal = listener.try_recv().expect("kept for the next call");
        assert_eq!(
            (signal.name, signal.payload),
            (b"cs".to_vec(), b"one".to_vec())
        );

        // The same through a `select!` whose other branch wins, then
        // `recv_timeout`: the signal is still there.
        assert_eq!(client.signal("cs", b"two").await.unwrap(), 1);
        observer.recv_timeout(PATIENCE).await.expect("delivered");
        tokio::select! {
            biased;
            () = std::future::ready(()) => {}
            _ = listener.recv() => unreachable!("the first branch is ready"),
        }
        let signal = listener.recv_timeout(PATIENCE).await.expect("not lost");
        assert_eq!(signal.payload, b"two");
        assert!(listener.try_recv().is_none(), "each signal once");
    }
}

/// `Listener::recv_all` is cancel safe: what a dropped call collected is
/// kept (and its name given up at once), a later call finishes the set, and
/// a finished listener hears nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_recv_all_keeps_what_it_collected() {
    let server = RedisServer::start();
    let client = client(&server.url()).await;
    let mut listener = client.listen(["ra", "rb"]).await.unwrap();
    let mut observer = client.listen(["ra", "rb"]).await.unwrap();
    assert_eq!(client.waiters("ra").await.unwrap(), 2);

    assert_eq!(client.signal("ra", b"first").await.unwrap(), 1);
    observer.recv_timeout(PATIENCE).await.expect("delivered");
    {
        // One poll takes "first" from the buffer; then it waits for "rb".
        let mut collecting = std::pin::pin!(listener.recv_all());
        assert!(
            collecting.as_mut().now_or_never().is_none(),
            "rb is missing"
        );
    }
    // "ra" was given up by the dropped call: only the observer waits on it.
    eventually("the dropped recv_all gave \"ra\" up", || {
        let client = client.clone();
        async move { client.waiters("ra").await.unwrap() == 1 }
    })
    .await;
    assert_eq!(client.signal("ra", b"second").await.unwrap(), 1);
    observer.recv_timeout(PATIENCE).await.expect("delivered");
    assert_eq!(client.signal("rb", b"bee").await.unwrap(), 1);
    let got: Vec<_> = tokio::time::timeout(PATIENCE, listener.recv_all())
        .await
        .expect("rb arrives")
        .into_iter()
        .map(|s| (s.name, s.payload))
        .collect();
    let expected = [
        (b"ra".to_vec(), b"first".to_vec()),
        (b"rb".to_vec(), b"bee".to_vec()),
    ];
    assert_eq!(got, expected);

    // Done: a later signal reaches the observer, not the listener.
    observer.recv_timeout(PATIENCE).await.expect("delivered");
    assert_eq!(client.signal("rb", b"late").await.unwrap(), 1);
    let seen = observer.recv_timeout(PATIENCE).await.expect("delivered");
    assert_eq!(seen.payload, b"late");
    assert!(
        listener.try_recv().is_none(),
        "a finished listener hears nothing"
    );
    let again = listener.recv_all().now_or_never().expect("without waiting");
    let again: Vec<_> = again.into_iter().map(|s| (s.name, s.payload)).collect();
    assert_eq!(again, expected);
}
