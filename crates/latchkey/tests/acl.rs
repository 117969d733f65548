//! ACL users (`redis://user:pass@host`): a user granted exactly the rule of
//! `latchkey::acl` (and `docs/security.md`) passes the lock, watchdog,
//! waiting and signal paths on both its connections (commands and pub/sub);
//! a user without EVALSHA, or without a signal's channel, gets
//! `Error::NoPermission` saying what is missing.

mod common;

use std::time::{Duration, Instant};

use common::*;
use latchkey::acl::{rule, Use};
use latchkey::{Client, Error, Ownership};
use latchkey_testkit::PATIENCE;

/// Creates `user` (password `pw`) with nothing but `rule`.
fn create_user(server: &RedisServer, user: &str, rule: &str) {
    let mut args = vec!["ACL", "SETUSER", user, "reset", "on", ">pw"];
    args.extend(rule.split_whitespace());
    server.command(&args).expect("ACL SETUSER");
}

fn url(server: &RedisServer, user: &str) -> String {
    format!("redis://{user}:pw@127.0.0.1:{}/", server.port())
}

#[tokio::test]
async fn the_documented_rule_is_enough_for_locks_waiting_and_signals() {
    let server = RedisServer::start();
    create_user(&server, "app", &rule(&[Use::Locks, Use::Signals], "test:"));
    let a = client(&url(&server, "app")).await;
    let b = client(&url(&server, "app")).await;

    // Fenced acquisition (the acquire script), contention, a fencing token.
    let lock = a
        .lock("acl-job", Duration::from_secs(30))
        .unwrap()
        .with_fencing();
    let guard = lock.try_acquire().await.unwrap().expect("free lock");
    assert!(guard.fencing_token().await.unwrap() > 0);
    // A waiter on the other client: subscribes, marks, wakes at the release.
    let other = b.lock("acl-job", Duration::from_secs(30)).unwrap();
    let waiter = tokio::spawn(async move {
        let g = other
            .acquire_timeout(Duration::from_secs(20))
            .await
            .unwrap();
        (Instant::now(), g)
    });
    until_subscribed(&server, "{test:acl-job}:released", 1).await;
    let released_at = Instant::now();
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    let (acquired_at, g) = waiter.await.unwrap();
    // Woken by the release (APPEND and PUBLISH allowed), not the 30 s TTL.
    assert!(acquired_at - released_at < Duration::from_secs(5));
    assert_eq!(g.release().await.unwrap(), Ownership::Owned);

    // The watchdog renews (PEXPIRE through the extend script).
    let ttl = Duration::from_secs(1);
    let kept = a.lock("acl-kept", ttl).unwrap().with_watchdog();
    let guard = kept.try_acquire().await.unwrap().expect("free lock");
    tokio::select! {
        _ = guard.lost() => panic!("the watchdog could not renew as this user"),
        _ = tokio::time::sleep(ttl * 2) => {}
    }
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);

    // Signals: broadcast, to one waiter, and the count of waiters.
    let mut listener = b.listen(["acl-signal"]).await.unwrap();
    assert_eq!(a.waiters("acl-signal").await.unwrap(), 1);
    assert!(a.signal_one("acl-signal", b"one").await.unwrap());
    assert_eq!(
        listener.recv_timeout(PATIENCE).await.unwrap().payload,
        b"one"
    );
    assert_eq!(a.signal("acl-signal", b"all").await.unwrap(), 1);
    assert_eq!(
        listener.recv_timeout(PATIENCE).await.unwrap().payload,
        b"all"
    );
    // Inspection of a lock goes through the locks' rule too.
    assert!(!a.inspect("acl-job").await.unwrap().held);
}

#[tokio::test]
async fn a_user_without_evalsha_is_told_what_is_missing() {
    let server = RedisServer::start();
    let without = rule(&[Use::Locks, Use::Signals], "test:").replace("+evalsha ", "");
    create_user(&server, "noscript", &without);
    let c = client(&url(&server, "noscript")).await;
    let err = c
        .lock("acl-noscript", Duration::from_secs(5))
        .unwrap()
        .with_fencing()
        .try_acquire()
        .await
        .expect_err("no EVALSHA, no fenced lock");
    assert!(matches!(err, Error::NoPermission(_)), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("evalsha"), "{message}");
    assert!(message.contains("docs/security.md"), "{message}");
}

#[tokio::test]
async fn a_user_without_the_signal_channel_is_told_what_is_missing() {
    let server = RedisServer::start();
    // Keys and commands, but channels for nothing of ours.
    let no_channels: Vec<&str> = Vec::new();
    let rule = rule(&[Use::Locks, Use::Signals], "test:");
    let no_channels = rule
        .split_whitespace()
        .filter(|part| !part.starts_with('&'))
        .fold(no_channels, |mut parts, part| {
            parts.push(part);
            parts
        });
    create_user(&server, "nochannel", &no_channels.join(" "));
    let c = client(&url(&server, "nochannel")).await;
    let Err(err) = c.listen(["acl-deploy"]).await else {
        panic!("no channel, no listener");
    };
    assert!(matches!(err, Error::NoPermission(_)), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("channel"), "{message}");
    assert!(
        message.contains("test:signal:acl-deploy"),
        "names the channel: {message}"
    );
    let err = c
        .signal("acl-deploy", b"x")
        .await
        .expect_err("no channel, no signal");
    assert!(matches!(err, Error::NoPermission(_)), "{err:?}");
    assert!(err.to_string().contains("test:signal:acl-deploy"), "{err}");
}

#[tokio::test]
async fn the_signals_rule_alone_is_enough_for_signals() {
    let server = RedisServer::start();
    create_user(&server, "signals", &rule(&[Use::Signals], "test:"));
    let a = client(&url(&server, "signals")).await;
    let b = client(&url(&server, "signals")).await;
    let mut listener = b.listen(["acl-only"]).await.unwrap();
    assert_eq!(a.waiters("acl-only").await.unwrap(), 1);
    assert!(a.signal_one("acl-only", b"one").await.unwrap());
    assert_eq!(
        listener.recv_timeout(PATIENCE).await.unwrap().payload,
        b"one"
    );
    assert_eq!(a.signal("acl-only", b"all").await.unwrap(), 1);
    assert_eq!(
        listener.recv_timeout(PATIENCE).await.unwrap().payload,
        b"all"
    );
    // No keys: a lock is refused, and says so.
    let err = a
        .lock("acl-only", Duration::from_secs(5))
        .unwrap()
        .try_acquire()
        .await
        .expect_err("signals only: no lock keys");
    assert!(matches!(err, Error::NoPermission(_)), "{err:?}");
}

/// The rule in `docs/security.md` is the one the code derives.
#[test]
fn the_documented_rules_are_the_ones_in_the_code() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/security.md"
    ))
    .expect("docs/security.md");
    for uses in [
        &[Use::Locks][..],
        &[Use::Signals],
        &[Use::Locks, Use::Signals],
        &[Use::Locks, Use::Signals, Use::Inspection],
    ] {
        let rule = rule(uses, "latchkey:");
        assert!(
            doc.contains(&rule),
            "docs/security.md lacks the rule for {uses:?}: {rule}"
        );
    }
}

/// An ACL user's password reaches the subscriber connection too.
#[tokio::test]
async fn a_wrong_password_is_an_auth_error() {
    let server = RedisServer::start();
    create_user(&server, "app", &rule(&[Use::Locks], "test:"));
    let result = Client::builder(&format!("redis://app:wrong@127.0.0.1:{}/", server.port()))
        .connect()
        .await;
    assert!(
        matches!(result, Err(Error::Auth(_))),
        "{:?}",
        result.map(|_| ())
    );
}
