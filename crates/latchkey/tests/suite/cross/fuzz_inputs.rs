//! Bad input, fuzzed: arbitrary names, TTLs, renewal intervals, payloads,
//! fencing tokens, owner tokens, and whatever foreign or corrupted values
//! Redis may hold under our keys. Against a real redis-server, every call
//! must return a value or a typed error, never panic, and the answers that
//! have a rule (which names and TTLs are valid, which fenced writes win)
//! must follow it.
//!
//! Case counts are modest (the whole file runs in a few seconds): this is a
//! net for regressions in CI, not an exhaustive search; raise
//! `PROPTEST_CASES` for a longer hunt.

use crate::common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use latchkey::inspect::Holder;
use latchkey::limits::{MAX_NAME_LEN, MAX_TTL, MIN_TTL};
use latchkey::{Client, Error, FencedWrite};
use proptest::prelude::*;
use proptest::test_runner::Config;

use common::RedisServer;

struct Fixture {
    runtime: tokio::runtime::Runtime,
    server: RedisServer,
    client: Client,
}

/// One server, runtime and client for every case of every test: starting a
/// server per case would cost more than the cases.
fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = RedisServer::start();
        let client = runtime.block_on(common::client(&server.url()));
        Fixture {
            runtime,
            server,
            client,
        }
    })
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    fixture().runtime.block_on(f)
}

/// A name no other case uses.
fn unique(what: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("fuzz:{what}:{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

fn config(cases: u32) -> Config {
    Config {
        cases,
        // No regression files in the source tree: a failure prints its input.
        failure_persistence: None,
        ..Config::default()
    }
}

/// A server that is up gives answers, not transport errors.
fn assert_not_transport(e: &Error) {
    assert!(!e.is_transient(), "the server is up, yet: {e}");
    assert!(!e.to_string().is_empty());
}

/// Durations from nothing to absurd: nanoseconds, the edges, whole days.
fn any_duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        any::<u64>().prop_map(Duration::from_nanos),
        (0u64..200_000).prop_map(Duration::from_millis),
        Just(Duration::ZERO),
        Just(MIN_TTL),
        Just(MIN_TTL - Duration::from_nanos(1)),
        Just(MAX_TTL),
        Just(MAX_TTL + Duration::from_nanos(1)),
        Just(Duration::MAX),
        any::<u64>().prop_map(Duration::from_secs),
    ]
}

/// Values a foreign program (or an operator) might leave in a counter.
fn garbage_number() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"abc".to_vec()),
        Just(b"1e400".to_vec()),
        Just(b"-5".to_vec()),
        Just(b"inf".to_vec()),
        Just(b"nan".to_vec()),
        Just(b"".to_vec()),
        Just(b"18446744073709551616".to_vec()),
        Just(b"9007199254740993".to_vec()),
        Just(b"0x10".to_vec()),
        prop::collection::vec(any::<u8>(), 0..40),
    ]
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn names_are_accepted_exactly_by_the_rule(name in prop::collection::vec(any::<u8>(), 0..MAX_NAME_LEN + 80)) {
        let f = fixture();
        let valid = !name.is_empty() && name.len() <= MAX_NAME_LEN && !name.ends_with(b":fence");
        match f.client.lock(&name, Duration::from_secs(5)) {
            Ok(lock) => {
                prop_assert!(valid, "accepted an invalid name");
                block_on(async {
                    if let Some(guard) = lock.try_acquire().await.unwrap() {
                        let _ = guard.release().await.unwrap();
                    }
                });
            }
            Err(Error::InvalidName { .. }) => prop_assert!(!valid, "refused a valid name"),
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
        match f.client.fenced(&name) {
            Ok(_) => prop_assert!(valid),
            Err(e) => {
                let refused_right = matches!(e, Error::InvalidName { .. }) && !valid;
                prop_assert!(refused_right, "fenced({:?}): {}", name, e);
            }
        }
    }

    #[test]
    fn ttls_and_renewal_intervals_are_accepted_exactly_by_the_rule(ttl in any_duration(), every in any_duration()) {
        let f = fixture();
        let name = unique("ttl");
        match f.client.lock(&name, ttl) {
            Ok(lock) => {
                prop_assert!((MIN_TTL..=MAX_TTL).contains(&ttl));
                let renewal_ok = !every.is_zero() && every < ttl - latchkey::protocol::drift(ttl);
                match lock.clone().with_renewal_every(every) {
                    Ok(_) => prop_assert!(renewal_ok),
                    Err(e) => prop_assert!(matches!(e, Error::InvalidInput(_)) && !renewal_ok, "{e}"),
                }
                block_on(async {
                    let guard = lock.try_acquire().await.unwrap().expect("a fresh name is free");
                    match guard.fencing_token().await {
                        Ok(token) => assert!(token > 0),
                        // A TTL of a few ms can run out before the second
                        // round trip on a loaded machine: the hold is gone,
                        // and saying so is right. A TTL of a second cannot.
                        Err(Error::NotHeld { .. }) => assert!(ttl < Duration::from_secs(1), "{ttl:?}"),
                        Err(e) => panic!("{e}"),
                    }
                    match guard.extend(every).await {
                        Ok(_) => assert!((MIN_TTL..=MAX_TTL).contains(&every)),
                        Err(e) => assert!(matches!(e, Error::InvalidTtl { .. }), "{e}"),
                    }
                    let _ = guard.release().await.unwrap();
                });
            }
            Err(e) => {
                prop_assert!(matches!(e, Error::InvalidTtl { .. }), "{e}");
                prop_assert!(!(MIN_TTL..=MAX_TTL).contains(&ttl));
            }
        }
    }

    #[test]
    fn fenced_writes_follow_the_highest_token_rule(
        writes in prop::collection::vec((any::<u64>(), prop::collection::vec(any::<u8>(), 0..512)), 1..16)
    ) {
        let f = fixture();
        let resource = f.client.fenced(unique("resource")).unwrap();
        let mut highest: Option<u64> = None;
        let mut stored: Option<Vec<u8>> = None;
        for (token, value) in &writes {
            let outcome = block_on(resource.write(*token, value)).unwrap();
            match highest {
                Some(seen) if *token < seen => prop_assert_eq!(outcome, FencedWrite::Rejected { seen }),
                _ => {
                    prop_assert_eq!(outcome, FencedWrite::Accepted);
                    highest = Some(*token);
                    stored = Some(value.clone());
                }
            }
        }
        let read = block_on(resource.read()).unwrap();
        prop_assert_eq!(read, stored.zip(highest));
    }

    #[test]
    fn foreign_values_under_our_keys_give_answers_or_typed_errors(
        kind in 0usize..6,
        garbage in garbage_number(),
        token in any::<u64>(),
    ) {
        let f = fixture();
        let name = unique("foreign");
        let lock = f.client.lock(&name, Duration::from_secs(5)).unwrap();
        let key = String::from_utf8_lossy(lock.key()).into_owned();
        let fence_key = format!("{key}:fence");
        let garbage_text = String::from_utf8_lossy(&garbage).into_owned();
        // Put something that is not ours where latchkey keeps its state.
        let setup: Vec<Vec<&str>> = match kind {
            0 => vec![vec!["RPUSH", &key, "x"]],
            1 => vec![vec!["HSET", &key, "f", "v"]],
            2 => vec![vec!["SET", &key, &garbage_text]],
            3 => vec![vec!["SET", &fence_key, &garbage_text]],
            4 => vec![vec!["SADD", &fence_key, "x"]],
            _ => vec![vec!["SET", &key, &garbage_text], vec!["SET", &fence_key, &garbage_text]],
        };
        for args in &setup {
            f.server.command(args).unwrap();
        }
        block_on(async {
            match lock.try_acquire().await {
                Ok(Some(guard)) => {
                    if let Err(e) = guard.fencing_token().await {
                        assert_not_transport(&e);
                    }
                    match guard.release().await {
                        Ok(_) => {}
                        Err(e) => assert_not_transport(&e),
                    }
                }
                Ok(None) => assert!(kind == 2 || kind == 5, "a free lock was reported busy"),
                Err(e) => assert_not_transport(&e),
            }
            match f.client.inspect(&name).await {
                Ok(_) => {}
                Err(e) => assert_not_transport(&e),
            }
            match lock.acquire_until(Duration::from_millis(20)).await {
                Ok(guard) => { let _ = guard.release().await; }
                Err(e) => assert_not_transport(&e),
            }
        });

        // The same for a fenced resource whose hash holds garbage.
        let resource = f.client.fenced(unique("foreign-resource")).unwrap();
        let rkey = String::from_utf8_lossy(resource.key()).into_owned();
        if kind % 2 == 0 {
            f.server.command(&["HSET", &rkey, "fence", &garbage_text, "value", "v"]).unwrap();
        } else {
            f.server.command(&["RPUSH", &rkey, "x"]).unwrap();
        }
        block_on(async {
            match resource.write(token, b"payload").await {
                Ok(_) => {}
                Err(e) => assert_not_transport(&e),
            }
            match resource.read().await {
                Ok(_) => {}
                Err(e) => assert_not_transport(&e),
            }
        });
    }

    #[test]
    fn owner_tokens_parse_or_are_foreign(bytes in prop::collection::vec(any::<u8>(), 0..200), pid in any::<u32>(), millis in any::<u64>()) {
        // Arbitrary bytes: a holder or nothing, never a panic.
        let _ = Holder::from_token(&bytes);
        // A well-formed token parses back to what it says.
        let token = format!("lk2:{:032x}:{millis}:{pid}:host-a", u128::from(pid) << 64 | u128::from(millis));
        let holder = Holder::from_token(token.as_bytes()).expect("well-formed token");
        prop_assert_eq!(holder.pid, pid);
        prop_assert_eq!(holder.host, "host-a");
    }
}

#[tokio::test]
async fn a_bad_url_is_reported_without_its_password() {
    let bad = [
        "redis://user:s3cret@127.0.0.1:notaport/",
        "rediss://user:s3cret@[::1/",
    ];
    for url in bad {
        let error = latchkey::Client::connect(url).await.expect_err(url);
        assert!(
            matches!(error, latchkey::Error::InvalidInput(_)),
            "{error:?}"
        );
        assert!(!error.to_string().contains("s3cret"), "{error}");
        let error = latchkey::Redlock::connect(&[url, "redis://127.0.0.1:1/"])
            .await
            .expect_err(url);
        assert!(!error.to_string().contains("s3cret"), "{error}");
    }
}
