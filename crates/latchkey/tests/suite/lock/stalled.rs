//! A bounded wait against a Redis that stopped answering ends at the
//! caller's deadline (plus a short grace for a request in flight), not at
//! the command timeout and its retry, and says it is an outage (`Timeout`,
//! transient), not a conflict; what its unanswered requests took is given
//! back once Redis answers again.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use latchkey::{Error, Ownership};

/// Far longer than the waits: a wait that ends before it was bounded by
/// its own deadline, not by the command timeout.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(20);
const WAIT: Duration = Duration::from_millis(300);

fn is_outage<T: std::fmt::Debug>(r: &latchkey::Result<T>) -> bool {
    matches!(r, Err(e @ Error::Timeout { .. }) if e.is_transient())
}

#[tokio::test]
async fn bounded_waits_on_a_stalled_redis_end_at_their_deadline() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr()).await;
    let c = latchkey::Client::builder(&proxy.url())
        .prefix("test:")
        .command_timeout(COMMAND_TIMEOUT)
        .connect()
        .await
        .unwrap();
    let lock = c.lock("stalled", Duration::from_secs(30)).unwrap();
    let pool = c
        .semaphore("stalled-pool", 2, Duration::from_secs(30))
        .unwrap();
    let rw = c.rwlock("stalled-rw", Duration::from_secs(30)).unwrap();
    // Scripts loaded and connections made while Redis answers.
    let _ = lock.acquire().await.unwrap().release().await.unwrap();
    let _ = pool.acquire().await.unwrap().release().await.unwrap();
    let _ = rw.read().await.unwrap().release().await.unwrap();

    proxy.set_mode(ProxyMode::Blackhole);
    let started = Instant::now();
    let (a, b, r) = tokio::join!(
        lock.acquire_until(WAIT),
        pool.acquire_until(WAIT),
        rw.read_until(WAIT)
    );
    let took = started.elapsed();
    assert!(is_outage(&a), "{a:?}");
    assert!(is_outage(&b), "{b:?}");
    assert!(is_outage(&r), "{r:?}");
    assert!(
        took < COMMAND_TIMEOUT / 4,
        "waited {took:?} for a {WAIT:?} wait"
    );

    // Redis answers again: what the unanswered requests took goes back.
    proxy.set_mode(ProxyMode::Pass);
    assert!(c.flush(Duration::from_secs(10)).await);
    let guard = lock.try_acquire().await.unwrap().expect("the lock is free");
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    assert!(pool.holders().await.unwrap().is_empty());
}
