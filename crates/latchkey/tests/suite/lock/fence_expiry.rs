//! Fencing counters expire an hour after the instant their last token
//! names (`docs/protocol.md`, "Fencing counters expire"), whichever script
//! wrote them, so locking per entity leaves no key behind for ever; and a
//! counter gone (expired, or lost) never lets a token go backwards: the
//! next is at least the server's clock, which the expiry instant put past
//! every token the counter held. The model checker adds the hour itself
//! (`latchkey-sim`, `model_lock`, "long idle").

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::Ownership;
use latchkey_testkit::RedisServer;

const TTL: Duration = Duration::from_secs(10);
const KEEP_MS: u64 = 3_600_000;

/// The counter's value and its expiry instant (`PEXPIRETIME`, ms).
fn counter(server: &RedisServer, key: &str) -> (u64, i64) {
    let value = server.command(&["GET", key]).expect("GET the counter");
    let value = value
        .parse()
        .unwrap_or_else(|_| panic!("{key} holds {value:?}"));
    let at = server
        .command(&["PEXPIRETIME", key])
        .expect("PEXPIRETIME")
        .parse()
        .expect("an integer");
    (value, at)
}

/// The counter holds `token` and expires an hour after its instant: never
/// sooner, and later only by the time the script took between issuing the
/// token and storing it (the store reads the clock again: an hour from
/// then, if later), well under a second even on a loaded machine.
fn expires_after_its_token(server: &RedisServer, key: &str, token: u64) {
    let (value, at) = counter(server, key);
    assert_eq!(value, token, "{key}");
    let after_token = at - (token / 1000 + KEEP_MS) as i64;
    assert!(
        (0..1000).contains(&after_token),
        "{key}: expires {after_token} ms after an hour past its token"
    );
}

#[tokio::test]
async fn every_kind_of_counter_expires_an_hour_after_its_token() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;

    let lock = c.lock("a", TTL).unwrap().with_fencing();
    let g = lock.try_acquire().await.unwrap().expect("free");
    let token = g.issued_fencing_token().expect("issued with the hold");
    expires_after_its_token(&server, "{test:a}:fence", token);
    assert_eq!(g.release().await.unwrap(), Ownership::Owned);

    // Issued later, on request (issue_fence.lua).
    let g = c
        .lock("b", TTL)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    let token = g.fencing_token().await.unwrap();
    expires_after_its_token(&server, "{test:b}:fence", token);
    assert_eq!(g.release().await.unwrap(), Ownership::Owned);

    let fair = c.lock("f", TTL).unwrap().fair().unwrap().with_fencing();
    let g = fair.try_acquire().await.unwrap().expect("free");
    let token = g.fencing_token().await.unwrap();
    expires_after_its_token(&server, "{test:f}:fence", token);
    assert_eq!(g.release().await.unwrap(), Ownership::Owned);

    let sem = c.semaphore("pool", 2, TTL).unwrap().with_fencing();
    let permit = sem.try_acquire().await.unwrap().expect("free");
    let token = permit.fencing_token().await.unwrap();
    expires_after_its_token(&server, "{test:pool}:permits:fence", token);
    assert_eq!(permit.release().await.unwrap(), Ownership::Owned);

    let rw = c.rwlock("doc", TTL).unwrap().with_fencing();
    let writer = rw.try_write().await.unwrap().expect("free");
    let token = writer.fencing_token().await.unwrap();
    expires_after_its_token(&server, "{test:doc}:rw:fence", token);
    assert_eq!(writer.release().await.unwrap(), Ownership::Owned);

    let both = c.lock_all(&["m1", "m2"], TTL).unwrap().with_fencing();
    let g = both.try_acquire().await.unwrap().expect("free");
    let tokens = g.issued_fencing_tokens().expect("issued with the holds");
    expires_after_its_token(&server, "{test:m1}:fence", tokens[0]);
    expires_after_its_token(&server, "{test:m2}:fence", tokens[1]);
    assert_eq!(g.release().await.unwrap(), Ownership::Owned);

    // A revocation raises the counter as an issue does.
    let held = lock.try_acquire().await.unwrap().expect("free");
    let revoked = c.revoke("a").await.unwrap();
    let token = revoked
        .iter()
        .find_map(|r| r.fencing_token)
        .expect("the revocation's token");
    expires_after_its_token(&server, "{test:a}:fence", token);
    drop(held);
}

#[tokio::test]
async fn a_counter_raised_above_the_clock_expires_an_hour_after_the_raise() {
    // Redlock's strict fencing raises a counter to a token from another
    // instance, whose clock may be ahead: the expiry follows the token,
    // not this server's clock, so the counter outlives it by the hour.
    let server = RedisServer::start();
    let now_ms: u64 = server
        .command(&[
            "EVAL",
            "local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000)",
            "0",
        ])
        .unwrap()
        .parse()
        .unwrap();
    let ahead = (now_ms + 2 * KEEP_MS) * 1000;
    let script = latchkey::protocol::script_text("raise_fence.lua").expect("the script");
    let key = "{test:r}:fence";
    let raised = server
        .command(&["EVAL", script, "1", key, &ahead.to_string()])
        .unwrap();
    assert_eq!(raised, ahead.to_string());
    expires_after_its_token(&server, key, ahead);
    // A lower raise changes nothing, the expiry included.
    server
        .command(&["EVAL", script, "1", key, &(ahead - 5).to_string()])
        .unwrap();
    expires_after_its_token(&server, key, ahead);
    // A raise to a value that names no instant (below the clock) keeps
    // the counter an hour from now: it never goes down within the hour.
    let small = "{test:small}:fence";
    server.command(&["EVAL", script, "1", small, "42"]).unwrap();
    let (value, at) = counter(&server, small);
    assert_eq!(value, 42);
    assert!(at >= (now_ms + KEEP_MS) as i64, "expires at {at}");
    assert!(at <= (now_ms + KEEP_MS + 60_000) as i64, "expires at {at}");
}

#[tokio::test]
async fn a_counter_gone_after_a_restart_never_lets_a_token_go_backwards() {
    // With AOF the counter and its expiry instant survive a crash; once it
    // is gone (deleted here, as its expiry would, only sooner: the next
    // token's clock floor is then lower than at the expiry), the next
    // token is still above every one before.
    let mut server = RedisServer::builder().aof(true).start();
    let c = client(&server.url()).await;
    let lock = c.lock("r", TTL).unwrap().with_fencing();
    let mut last = 0;
    for _ in 0..3 {
        let g = lock.try_acquire().await.unwrap().expect("free");
        let token = g.issued_fencing_token().expect("issued");
        assert!(token > last);
        last = token;
        assert_eq!(g.release().await.unwrap(), Ownership::Owned);
    }
    drop(lock);
    c.close(Duration::from_secs(5)).await;
    server.kill();
    server.restart();
    expires_after_its_token(&server, "{test:r}:fence", last);
    server.command(&["DEL", "{test:r}:fence"]).unwrap();
    let c = client(&server.url()).await;
    let g = c
        .lock("r", TTL)
        .unwrap()
        .with_fencing()
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    let after = g.issued_fencing_token().expect("issued");
    assert!(after > last, "token went back from {last} to {after}");
    expires_after_its_token(&server, "{test:r}:fence", after);
}
