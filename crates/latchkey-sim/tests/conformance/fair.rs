//! The fair lock's operations, driven through the real library against a
//! real server; every request sent on its keys is recorded, to be compared
//! with the fair lock model's (`models::check`).

use std::time::Duration;

use latchkey::{Client, Ownership};
use latchkey_sim::model::conform::{Roles, Scripts, Sent, Shape};
use latchkey_testkit::RedisServer;

use crate::lock::TTL;
use crate::monitor::Recorder;
use crate::others::{ms, Log, GIVE_UP};

/// A fair lock's waiter lease: its waiters' process renews it every third.
pub const LEASE: Duration = Duration::from_millis(300);

/// A watched fair hold's TTL: its watchdog renews every `ttl/3`, soon.
/// Not the lease, so that the two are told apart by value.
const WATCHED_TTL: Duration = Duration::from_millis(450);

/// Whether a `fair_acquire.lua` call is in `mode` (its fifth argument).
fn mode(mode: &'static str) -> impl Fn(&Sent) -> bool {
    move |sent| sent.argv.get(4) == Some(&Shape::Literal(mode.into()))
}

/// A fair lock: taken free, a waiter of another client queued, its lease
/// renewed, looking again after its subscriber reconnects, handed the lock
/// by the release; a waiter that gives up and
/// leaves the queue; a watched hold renewed by its watchdog.
pub async fn record<'a>(
    scripts: &'a Scripts,
    recorder: &'a mut Recorder,
    server: &RedisServer,
    a: &Client,
    b: &Client,
) -> Log<'a> {
    let name = "conform-fair";
    let fair = |c: &Client, ttl| {
        let lock = c.lock(name, ttl).expect("a lock");
        lock.fair_with_lease(LEASE).expect("a fair lock")
    };
    let held = fair(a, TTL);
    let roles = Roles::fair(held.key(), ms(TTL), ms(LEASE));
    let mut log = Log {
        scripts,
        recorder,
        keys: vec![held.key().to_vec()],
        roles,
        sent: Vec::new(),
    };

    let guard = held.try_acquire().await.expect("try").expect("free");
    log.until("fair_acquire.lua", mode("try"), "a fair first try")
        .await;
    let waiting = fair(b, TTL);
    let wait = tokio::spawn(async move { waiting.acquire_until(Duration::from_secs(20)).await });
    log.until("fair_acquire.lua", mode("wait"), "a waiter queued")
        .await;
    log.until_any("fair_renew.lua", "a waiter's lease renewal")
        .await;
    // Its subscriber reconnects (a hand-off message may have been missed):
    // the waiter looks for itself, in mode `renew`.
    let killed = server.command(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert_ne!(
        killed.expect("CLIENT KILL").trim(),
        "0",
        "a subscriber killed"
    );
    log.until("fair_acquire.lua", mode("renew"), "a waiter looking again")
        .await;
    assert_eq!(guard.release().await.expect("release"), Ownership::Owned);
    log.until_any("fair_release.lua", "the release that hands on")
        .await;
    let handed = wait
        .await
        .expect("the waiting task")
        .expect("handed the lock");
    assert_eq!(handed.release().await.expect("release"), Ownership::Owned);
    log.until_any("fair_release.lua", "the handed hold's release")
        .await;

    let guard = held.try_acquire().await.expect("try").expect("free");
    log.until("fair_acquire.lua", mode("try"), "a fair first try")
        .await;
    // Long enough to queue (which it leaves when it gives up).
    let leaving = fair(b, TTL).acquire_until(GIVE_UP).await;
    assert!(
        leaving.is_err(),
        "a fair waiter gives up while the lock is held"
    );
    log.until_any("fair_leave.lua", "a waiter leaving").await;
    assert_eq!(guard.release().await.expect("release"), Ownership::Owned);
    log.until_any("fair_release.lua", "the release").await;

    // The watchdog renews a watched fair hold every ttl/3, as a plain
    // lock's (`extend.lua` on the lock key).
    let watched = fair(a, WATCHED_TTL).with_watchdog();
    log.roles = Roles::fair(watched.key(), ms(WATCHED_TTL), ms(LEASE));
    let guard = watched.try_acquire().await.expect("try").expect("free");
    log.until("fair_acquire.lua", mode("try"), "a watched first try")
        .await;
    log.until_any("extend.lua", "the watchdog's renewal").await;
    assert_eq!(guard.release().await.expect("release"), Ownership::Owned);
    log.until_any("fair_release.lua", "the watched hold's release")
        .await;
    log
}
