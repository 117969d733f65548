//! Leases that heal: the watchdog keeps a lock alive, and `lost()` fires at
//! once when the lock is taken away, and before the deadline when renewals
//! cannot get through.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use latchkey::Ownership;
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(1);

#[tokio::test]
async fn the_watchdog_keeps_a_short_lock_for_five_seconds() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let lock = c.lock("kept", TTL).unwrap().with_watchdog();
    let guard = lock.try_acquire().await.unwrap().unwrap();
    // Five TTLs: without renewal the lock would be gone after one.
    tokio::select! {
        _ = guard.lost() => panic!("lost a lock the watchdog should keep"),
        _ = tokio::time::sleep(Duration::from_secs(5)) => {}
    }
    assert!(guard.is_held());
    let mut raw = raw(&server.url()).await;
    let holder: String = raw.get("test:kept").await.unwrap();
    assert_eq!(holder, guard.token());
    assert!(lock.try_acquire().await.unwrap().is_none());
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

/// Acquires `name` with the watchdog, lets `sabotage` act on the key, and
/// returns how long `lost()` took to fire afterwards.
async fn time_to_lost(server: &RedisServer, name: &str, sabotage: &[&str]) -> Duration {
    let c = client(&server.url()).await;
    let guard = c
        .lock(name, TTL)
        .unwrap()
        .with_watchdog()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    server.command(sabotage).unwrap();
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("lost() never fired");
    assert!(!guard.is_held());
    started.elapsed()
}

#[tokio::test]
async fn lost_fires_within_a_renewal_interval_when_the_key_is_deleted() {
    let server = RedisServer::start();
    let took = time_to_lost(&server, "deleted", &["DEL", "test:deleted"]).await;
    // Renewal every TTL/3 = 333 ms; margin for scheduling on a busy CI box.
    assert!(took < TTL / 3 + Duration::from_millis(300), "took {took:?}");
}

#[tokio::test]
async fn lost_fires_within_a_renewal_interval_when_the_key_is_overwritten() {
    let server = RedisServer::start();
    let took = time_to_lost(
        &server,
        "stolen",
        &["SET", "test:stolen", "someone-else", "PX", "60000"],
    )
    .await;
    assert!(took < TTL / 3 + Duration::from_millis(300), "took {took:?}");
}

#[tokio::test]
async fn lost_fires_before_the_ttl_when_the_link_is_blackholed() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr()).await;
    let c = client(&proxy.url()).await;
    let guard = c
        .lock("cut", TTL)
        .unwrap()
        .with_watchdog()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let deadline_before = guard.deadline();
    proxy.set_mode(ProxyMode::Blackhole);
    tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("lost() never fired");
    // At the moment we learn of the loss the key must still be ours on the
    // server: we stopped before anyone else could have taken the lock.
    let mut raw = raw(&server.url()).await;
    let holder: Option<String> = raw.get("test:cut").await.unwrap();
    let pttl: i64 = raw.pttl("test:cut").await.unwrap();
    assert_eq!(
        holder.as_deref(),
        Some(guard.token()),
        "lost() fired after the key expired"
    );
    assert!(pttl > 0, "lost() fired after the key expired (pttl {pttl})");
    // The stop margin (a fifth of the TTL by default) before the deadline
    // the last answered request proved: not sooner, and not at the deadline.
    let now = Instant::now();
    assert!(
        now + TTL / 5 >= deadline_before,
        "lost() fired although renewals could still succeed"
    );
    assert!(
        now + TTL / 10 <= deadline_before,
        "lost() fired at the deadline, leaving the holder no time to stop"
    );
    assert_eq!(guard.lost_reason(), Some(latchkey::LostReason::Unreachable));
}

#[tokio::test]
async fn lost_fires_before_the_ttl_when_redis_stops() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let guard = c
        .lock("stopped", TTL)
        .unwrap()
        .with_watchdog()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    server.pause(); // SIGSTOP: no answers, no resets
    let paused_at = Instant::now();
    tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("lost() never fired");
    let took = paused_at.elapsed();
    server.resume();
    // The last renewal sent before the pause gives at most TTL − drift of
    // validity from the moment it was sent, which was before `paused_at`.
    assert!(
        took < TTL,
        "lost() fired {took:?} after the pause: past the TTL"
    );
    assert!(!guard.is_held());
}

#[tokio::test]
async fn without_a_watchdog_lost_fires_the_stop_margin_before_the_deadline() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let margin = Duration::from_millis(100);
    let ttl = Duration::from_millis(500);
    let lock = c
        .lock("plain", ttl)
        .unwrap()
        .with_stop_margin(margin)
        .unwrap();
    let sent = Instant::now();
    let guard = lock.try_acquire().await.unwrap().unwrap();
    // The deadline counts from when the acquire was sent, less the drift
    // allowance: the key outlives it by up to that and the round trip.
    let early = margin + latchkey::protocol::drift(ttl) + sent.elapsed();
    let signal = guard.lost_signal();
    assert!(!signal.is_lost());
    tokio::time::timeout(Duration::from_secs(2), signal.lost())
        .await
        .expect("token never cancelled");
    let now = Instant::now();
    assert!(now + margin >= guard.deadline(), "fired before the margin");
    assert!(!guard.is_held());
    assert_eq!(guard.lost_reason(), Some(latchkey::LostReason::Expired));
    // The key is still there for about the margin: time to stop.
    let mut raw = raw(&server.url()).await;
    let pttl: i64 = raw.pttl("test:plain").await.unwrap();
    assert!(
        pttl >= 50,
        "the guard gave up only {pttl} ms before the key expired"
    );
    // The watch's one check (without a watchdog, a renewal to the expiry
    // the hold already has) moves the expiry later by its own one-way
    // delay, which a loaded machine makes tens of ms: allowed for, while a
    // guard giving up a renewal interval early still fails.
    assert!(
        pttl <= early.as_millis() as i64 + 50,
        "the guard gave up {pttl} ms early (margin, drift and round trip: {early:?})"
    );
}

#[tokio::test]
async fn a_stop_margin_above_half_the_ttl_is_refused() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let lock = c.lock("margin", Duration::from_secs(1)).unwrap();
    assert!(matches!(
        lock.clone().with_stop_margin(Duration::from_millis(501)),
        Err(latchkey::Error::InvalidInput(_))
    ));
    assert!(lock.with_stop_margin(Duration::from_millis(500)).is_ok());
}

#[tokio::test]
async fn release_stops_the_watchdog() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let lock = c
        .lock("stopping", Duration::from_millis(300))
        .unwrap()
        .with_watchdog();
    let guard = lock.try_acquire().await.unwrap().unwrap();
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    let before = server.calls("evalsha");
    // The scenario: time for 3 renewals (one every 100 ms) that must not come.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(server.calls("evalsha"), before, "scripts ran after release");
}

/// A holder whose process was stopped past its TTL (SIGSTOP, a swap storm)
/// is told it lost the hold because it ran out of time, not that Redis did
/// not answer: Redis answered every renewal it was sent.
#[tokio::test]
async fn a_holder_paused_past_its_ttl_is_told_it_expired_not_that_redis_was_unreachable() {
    use std::io::{BufRead, Write};
    let server = RedisServer::start();
    let helper = concat!(module_path!(), "::child_paused_watchdog_holder");
    let (mut child, out, _) = child_talking(helper, &server.url(), "holding");
    let pid = child.id() as libc::pid_t;
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    // Stopped past its 1 s TTL: time passing is what is tested.
    eventually("the stopped holder's key expired", || async {
        server.command(&["EXISTS", "test:paused"]).unwrap().trim() == "0"
    })
    .await;
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut rest = String::new();
    for l in out.lines() {
        rest.push_str(&l.unwrap());
        rest.push('\n');
    }
    assert!(child.wait().unwrap().success(), "{rest}");
    assert!(rest.contains("lost expired"), "{rest}");
}

#[tokio::test]
#[ignore = "helper process: run by its parent test"]
async fn child_paused_watchdog_holder() {
    use std::io::BufRead;
    let c = client(&helper_env("LATCHKEY_TEST_URL")).await;
    let lock = c
        .lock("paused", Duration::from_secs(1))
        .unwrap()
        .with_watchdog();
    let guard = lock.acquire().await.unwrap();
    println!("holding");
    let mut go = String::new();
    std::io::stdin().lock().read_line(&mut go).unwrap();
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("lost fired");
    let reason = guard.lost_reason().map(|r| r.as_str()).unwrap_or("none");
    println!("lost {reason}");
}
