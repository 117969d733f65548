//! ACL users (`redis://user:pass@host`): a user granted exactly the rule of
//! `latchkey::acl` (and `docs/security.md`) passes the lock, watchdog,
//! waiting and signal paths on both its connections (commands and pub/sub);
//! a user without EVALSHA, or without a signal's channel, gets
//! `Error::NoPermission` saying what is missing. The primitives under the
//! locks' and primitives' rules: `tests/suite/cross/acl_primitives.rs`.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use latchkey::acl::{rule, Use};
use latchkey::{Client, Error, Ownership};
use latchkey_testkit::PATIENCE;

#[tokio::test]
async fn the_documented_rule_is_enough_for_locks_waiting_and_signals() {
    let server = RedisServer::start();
    create_user(&server, "app", &rule(&[Use::Locks, Use::Signals], "test:"));
    let a = client(&user_url(&server, "app")).await;
    let b = client(&user_url(&server, "app")).await;

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
        let g = other.acquire_until(Duration::from_secs(20)).await.unwrap();
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
    let c = client(&user_url(&server, "noscript")).await;
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

    // A plain lock's first try too: refused before it takes a key it could
    // neither renew nor release (a bare SET would have taken it).
    for acquired in [
        c.lock("acl-plain", Duration::from_secs(5))
            .unwrap()
            .try_acquire()
            .await
            .map(|g| g.is_some()),
        c.lock("acl-plain", Duration::from_secs(5))
            .unwrap()
            .with_watchdog()
            .acquire()
            .await
            .map(|_| true),
    ] {
        assert!(
            matches!(acquired, Err(Error::NoPermission(_))),
            "{acquired:?}"
        );
    }
    assert!(
        server
            .command(&["GET", "test:acl-plain"])
            .unwrap()
            .trim()
            .is_empty(),
        "the key was taken"
    );
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
    let c = client(&user_url(&server, "nochannel")).await;
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
    let a = client(&user_url(&server, "signals")).await;
    let b = client(&user_url(&server, "signals")).await;
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
        &[Use::Locks, Use::Primitives],
        &[Use::Locks, Use::Signals, Use::Primitives],
        &[Use::Locks, Use::Signals, Use::Inspection],
        &[Use::Locks, Use::Primitives, Use::Inspection, Use::Revoke],
    ] {
        let rule = rule(uses, "latchkey:");
        assert!(
            doc.contains(&rule),
            "docs/security.md lacks the rule for {uses:?}: {rule}"
        );
    }
}

/// `with_replicas` sends `WAIT`, which is in the locks' rule (replicated
/// acquisition is a lock option, and `WAIT` touches no key); without it the
/// acquisition is refused by name and leaves no lock behind.
#[tokio::test]
async fn the_locks_rule_is_enough_for_replicated_acquisition() {
    let primary = RedisServer::start();
    let _replica = RedisServer::builder().replica_of(primary.port()).start();
    let locks = rule(&[Use::Locks], "test:");
    create_user(&primary, "app", &locks);
    create_user(&primary, "nowait", &locks.replace(" +wait ", " "));
    let connect = |user: &str| {
        Client::builder(&user_url(&primary, user))
            .prefix("test:")
            .command_timeout(Duration::from_secs(1))
            .connect()
    };
    let lock = |c: &Client| {
        c.lock("acl-replicated", Duration::from_secs(10))
            .unwrap()
            .with_fencing()
            .with_replicas(1)
            .unwrap()
    };
    let app = connect("app").await.unwrap();
    let replicated = lock(&app);
    // Too few replicas acknowledge until the replica is linked; nothing
    // else may go wrong.
    let guard = eventually("the replica is linked", || async {
        match replicated.try_acquire().await {
            Ok(guard) => guard,
            Err(Error::TooFewReplicas { .. }) => None,
            Err(e) => panic!("as the locks' rule: {e:?}"),
        }
    })
    .await;
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);

    let nowait = connect("nowait").await.unwrap();
    let err = lock(&nowait)
        .try_acquire()
        .await
        .expect_err("no WAIT, no replicated acquisition");
    assert!(matches!(err, Error::NoPermission(_)), "{err:?}");
    assert!(err.to_string().contains("'wait' command"), "{err}");
    eventually("the refused acquisition is released", || async {
        primary.command(&["EXISTS", "test:acl-replicated"]).unwrap() == "0"
    })
    .await;
}

/// The primitives need more than the locks' rule: a user with only that is
/// refused a semaphore, by a typed error naming a command of
/// `Use::Primitives`, and still takes plain locks.
#[tokio::test]
async fn the_locks_rule_alone_refuses_a_semaphore_saying_what_is_missing() {
    let server = RedisServer::start();
    create_user(&server, "locks", &rule(&[Use::Locks], "test:"));
    let c = client(&user_url(&server, "locks")).await;
    let err = c
        .semaphore("acl-pool", 2, Duration::from_secs(5))
        .unwrap()
        .try_acquire()
        .await
        .expect_err("no sorted-set commands, no semaphore");
    assert!(matches!(err, Error::NoPermission(_)), "{err:?}");
    let message = err.to_string();
    let named = Use::Primitives
        .commands()
        .iter()
        .find(|c| message.contains(&format!("'{c}' command")));
    assert!(named.is_some(), "names a primitives' command: {message}");
    assert!(message.contains("docs/security.md"), "{message}");
    let lock = c.lock("acl-plain", Duration::from_secs(5)).unwrap();
    let guard = lock.try_acquire().await.unwrap().expect("a free lock");
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

/// Every command a script calls is in the rules: the scripts run with the
/// user's permissions, so one missing here is a NOPERM for everyone who
/// grants exactly the documented rule. And no primitives' command is
/// granted for nothing.
#[test]
fn every_command_the_scripts_call_is_in_the_rules() {
    // Inspection too: `inspect_any.lua` runs for `status`, `list` and `top`.
    let all = rule(
        &[
            Use::Locks,
            Use::Signals,
            Use::Primitives,
            Use::Inspection,
            Use::Revoke,
        ],
        "p:",
    );
    let granted: Vec<&str> = all.split_whitespace().collect();
    let is_granted = |name: &str| {
        let plus = format!("+{name}");
        granted
            .iter()
            .any(|g| *g == plus || g.starts_with(&format!("{plus}|")))
    };
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/scripts");
    let mut called: Vec<String> = Vec::new();
    // The shared preludes too: their calls run in every script they join
    // (a fair lock's hand-on pops its queue there and nowhere else).
    let shared = std::fs::read_dir(format!("{dir}/shared")).expect("the preludes");
    for entry in std::fs::read_dir(dir).expect("the scripts").chain(shared) {
        let path = entry.expect("a script").path();
        if path.is_dir() {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a script's text");
        // `redis.call('NAME', …)` and `redis.pcall(…)`; a command named
        // by a variable or ARGV is PUBLISH or SPUBLISH (checked below).
        for call in text.split("call(").skip(1) {
            let Some(quoted) = call.strip_prefix(['\'', '"']) else {
                continue;
            };
            let name = quoted
                .split(['\'', '"'])
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase();
            assert!(
                is_granted(&name),
                "{}: {name} is not in {all}",
                path.display()
            );
            called.push(name);
        }
    }
    assert!(called.len() > 100, "found only {} calls", called.len());
    assert!(is_granted("publish") && is_granted("spublish"));
    // And the primitives' rule grants nothing they do not call, but for
    // what the Rust code sends plainly (`Semaphore::holders`).
    for command in Use::Primitives.commands() {
        assert!(
            called.iter().any(|c| c == command) || *command == "zrangebyscore",
            "{command} is granted but no script calls it"
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
