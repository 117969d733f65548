//! Helpers of the Sentinel tests (`tests/suite/deploy/sentinel.rs`, `tests/suite/deploy/sentinel_tls.rs`):
//! the kit's blocking calls from async tests, and how long a client takes
//! to be served by a new primary.

use std::time::{Duration, Instant};

use latchkey::Client;
use latchkey_testkit::{SentinelBuilder, SentinelSet};

/// How long after the Sentinels announce a new primary a client may take to
/// run commands there: the client asks the Sentinels every pub/sub ping
/// interval (200 ms here), then reconnects. Measured: well under 1 s.
pub const FOLLOW_BOUND: Duration = Duration::from_secs(2);

/// Starts the set `builder` describes on a blocking thread.
pub async fn start_set(builder: SentinelBuilder) -> SentinelSet {
    tokio::task::spawn_blocking(move || builder.start())
        .await
        .expect("start the Sentinel set")
}

/// Runs `f` on the set on a blocking thread (the kit's calls block).
pub async fn blocking<T: Send + 'static>(
    set: SentinelSet,
    f: impl FnOnce(&mut SentinelSet) -> T + Send + 'static,
) -> (SentinelSet, T) {
    tokio::task::spawn_blocking(move || {
        let mut set = set;
        let value = f(&mut set);
        (set, value)
    })
    .await
    .expect("the kit's call")
}

/// Takes fresh locks until one lands on the new primary `port`; returns
/// how long after the call that was. Until the client learns of the
/// failover, its commands fail (a dead primary) or go on landing on the old
/// primary (Sentinel demotes a live one only seconds later).
pub async fn until_served(client: &Client, set: &SentinelSet, port: u16, tag: &str) -> Duration {
    let started = Instant::now();
    for attempt in 0.. {
        assert!(
            started.elapsed() < FOLLOW_BOUND * 5,
            "not on the new primary yet"
        );
        let name = format!("probe-{tag}-{attempt}");
        let lock = client.lock(&name, Duration::from_secs(5)).unwrap();
        match lock.try_acquire().await {
            Ok(Some(guard)) => {
                let took = started.elapsed();
                let stored = set.server(port).command(&["GET", &format!("test:{name}")]);
                let landed = stored.unwrap() == guard.token();
                let _ = guard.release().await;
                if landed {
                    return took;
                }
            }
            Ok(None) => panic!("{name} is busy"),
            Err(e) => assert!(e.is_transient(), "not an outage: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    unreachable!()
}

/// Signals `payload` on "deploy" until `listener` hears it, within
/// [`FOLLOW_BOUND`]: signals are fire-and-forget, and a listener that
/// re-subscribes on a new primary misses those sent before.
pub async fn signal_until_heard(
    client: &Client,
    listener: &mut latchkey::Listener,
    payload: &str,
) -> latchkey::Signal {
    let sent = Instant::now();
    loop {
        client.signal("deploy", payload).await.unwrap();
        if let Ok(signal) = listener.recv_timeout(Duration::from_millis(100)).await {
            return signal;
        }
        assert!(
            sent.elapsed() < FOLLOW_BOUND,
            "no signal heard after the failover"
        );
    }
}
