//! The plain lock's operations, driven through the real library against a
//! real server, each recorded as the server received it.

use std::collections::BTreeMap;
use std::time::Duration;

use latchkey::{Client, Lock, Ownership};
use latchkey_sim::model::conform::Roles;
use latchkey_testkit::{Proxy, ProxyMode, RedisServer};

use crate::monitor::Recorder;

/// A lock's TTL in the library's operations (long: nothing expires).
pub const TTL: Duration = Duration::from_secs(10);
/// A watched lock's TTL: its watchdog renews every `ttl/3`, soon.
pub const WATCHED_TTL: Duration = Duration::from_millis(300);

/// What the library sent for one operation: the command's words and the
/// roles to read them with.
pub struct Recorded {
    pub words: Vec<Vec<u8>>,
    pub roles: Roles,
}

/// The lock `name` of `client`, made `with_fencing` when `fenced`.
fn lock(client: &Client, name: &str, ttl: Duration, fenced: bool) -> Lock {
    let lock = client.lock(name, ttl).expect("a valid lock name and TTL");
    match fenced {
        true => lock.with_fencing(),
        false => lock,
    }
}

fn roles(lock: &Lock) -> Roles {
    let ttl = i64::try_from(lock.ttl().as_millis()).expect("a TTL in i64 ms");
    Roles::lock(lock.key(), ttl)
}

/// Runs every operation of the plain lock (fenced or not) with two
/// clients, `holder` and `waiter`, whose sessions have run a script
/// already (so that a first try is what it is on a used client), and
/// returns what each operation sent, by the model's operation names.
pub async fn record(
    recorder: &mut Recorder,
    holder: &Client,
    waiter: &Client,
    fenced: bool,
) -> BTreeMap<&'static str, Vec<Recorded>> {
    let mut out: BTreeMap<&'static str, Vec<Recorded>> = BTreeMap::new();
    let name = if fenced {
        "conform-fenced"
    } else {
        "conform-plain"
    };
    let held = lock(holder, name, TTL, fenced);
    let key = held.key().to_vec();
    let mut note = |op, words| {
        out.entry(op).or_default().push(Recorded {
            words,
            roles: roles(&held),
        })
    };

    let guard = held
        .try_acquire()
        .await
        .expect("the first try")
        .expect("a free lock is taken");
    note("first try", recorder.next_on(&key, "the first try").await);
    if !fenced {
        guard.fencing_token().await.expect("a token is issued");
        note(
            "issue fencing token",
            recorder.next_on(&key, "issuing a token").await,
        );
    }

    // A waiter of another client: its first try finds the lock busy, its
    // next tries mark the holder and ask its TTL.
    let waiting = lock(waiter, name, TTL, fenced);
    let wait = tokio::spawn(async move { waiting.acquire_until(Duration::from_secs(20)).await });
    note(
        "first try",
        recorder.next_on(&key, "the waiter's first try").await,
    );
    note(
        "waiter's try",
        recorder.next_on(&key, "the waiter's try").await,
    );

    // Its release wakes the waiter (the token is marked), which takes it.
    assert_eq!(guard.release().await.expect("release"), Ownership::Owned);
    note("release", recorder.next_on(&key, "the release").await);
    let taken = wait
        .await
        .expect("the waiting task")
        .expect("the woken waiter takes the lock");
    note(
        "waiter's try",
        recorder.next_on(&key, "the woken waiter's try").await,
    );
    assert_eq!(taken.release().await.expect("release"), Ownership::Owned);
    note(
        "release",
        recorder.next_on(&key, "the waiter's release").await,
    );

    // The watchdog renews a watched hold every ttl/3.
    let watched = lock(holder, &format!("{name}-watched"), WATCHED_TTL, fenced).with_watchdog();
    let watched_key = watched.key().to_vec();
    let guard = watched.try_acquire().await.expect("try").expect("free");
    recorder
        .next_on(&watched_key, "the watched lock's first try")
        .await;
    let renewal = recorder
        .next_on(&watched_key, "the watchdog's renewal")
        .await;
    out.entry("renew").or_default().push(Recorded {
        words: renewal.clone(),
        roles: roles(&watched),
    });
    assert_eq!(guard.release().await.expect("release"), Ownership::Owned);
    // Past the renewals the watchdog may have sent since (a loaded machine
    // can be slow to release).
    let release = loop {
        let next = recorder
            .next_on(&watched_key, "the watched lock's release")
            .await;
        if next.get(1) != renewal.get(1) {
            break next;
        }
    };
    out.entry("release").or_default().push(Recorded {
        words: release,
        roles: roles(&watched),
    });
    out
}

/// A first try whose reply is lost (the test kit's proxy drops every
/// reply): the library's armed guard releases what it may have taken, in
/// the background, as the whole script (`EVAL`). Returns that release
/// under the model's name for it.
pub async fn record_lost_reply(
    recorder: &mut Recorder,
    server: &RedisServer,
    fenced: bool,
) -> BTreeMap<&'static str, Vec<Recorded>> {
    let proxy = Proxy::start(server.addr()).await;
    // The lost reply is a timeout: short, but long enough that the
    // warm-up answers in time on a loaded machine.
    let client = Client::builder(&proxy.url())
        .command_timeout(Duration::from_millis(500))
        .connect()
        .await
        .expect("connect through the proxy");
    let name = if fenced {
        "conform-lost-fenced"
    } else {
        "conform-lost"
    };
    let lost = lock(&client, name, TTL, fenced);
    let key = lost.key().to_vec();
    // A script run first, so the first try is what it is on a used client.
    let warm = lost.try_acquire().await.expect("try").expect("free");
    recorder.next_on(&key, "the warm-up's try").await;
    assert_eq!(warm.release().await.expect("release"), Ownership::Owned);
    recorder.next_on(&key, "the warm-up's release").await;

    proxy.set_mode(ProxyMode::DropReplies);
    let attempt = lost.try_acquire().await;
    assert!(
        matches!(&attempt, Err(e) if e.is_transient()),
        "a try whose reply is lost fails as a timeout: {attempt:?}"
    );
    recorder.next_on(&key, "the try whose reply is lost").await;
    let cleanup = recorder.next_on(&key, "the armed guard's release").await;
    // Not flushed: its reply was lost too, and the connection with it;
    // dropping the proxy ends the background retries fast.
    drop(proxy);
    BTreeMap::from([(
        "release after a lost reply",
        vec![Recorded {
            words: cleanup,
            roles: roles(&lost),
        }],
    )])
}
