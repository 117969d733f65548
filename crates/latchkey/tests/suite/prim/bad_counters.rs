//! A semaphore's and a read-write lock's fencing counters that hold no
//! token (garbage, a negative or fractional number, 2^53 and more, a list)
//! are refused with `Error::BadFencingCounter` naming the counter, at
//! acquisition and on request, take nothing and are never overwritten.

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::Error;

const TTL: Duration = Duration::from_secs(10);
const GARBAGE: [&str; 4] = ["hello", "-5", "12.5", "9007199254740993"];

fn bad_counter(result: latchkey::Result<impl std::fmt::Debug>, counter: &str) {
    match result {
        Err(Error::BadFencingCounter { key }) => assert_eq!(key, counter),
        other => panic!("expected BadFencingCounter for {counter}: {other:?}"),
    }
}

#[tokio::test]
async fn a_semaphore_refuses_a_bad_counter_and_keeps_it() {
    let server = RedisServer::start();
    let client = client(&server.url()).await;
    let counter = "{test:pool}:permits:fence";
    let fenced = client.semaphore("pool", 2, TTL).unwrap().with_fencing();
    for garbage in GARBAGE {
        server.command(&["SET", counter, garbage]).unwrap();
        bad_counter(fenced.try_acquire().await, counter);
        assert_eq!(server.command(&["GET", counter]).unwrap(), garbage);
        assert!(
            fenced.holders().await.unwrap().is_empty(),
            "{garbage}: a permit was taken"
        );
    }
    // Issued on request: the permit stays held, the counter untouched.
    let plain = client.semaphore("pool", 2, TTL).unwrap();
    let permit = plain.try_acquire().await.unwrap().expect("a free permit");
    bad_counter(permit.fencing_token().await, counter);
    assert_eq!(server.command(&["GET", counter]).unwrap(), GARBAGE[3]);
    server.command(&["DEL", counter]).unwrap();
    server.command(&["RPUSH", counter, "x"]).unwrap();
    bad_counter(permit.fencing_token().await, counter);
    server.command(&["DEL", counter]).unwrap();
    let token = permit.fencing_token().await.unwrap();
    assert_eq!(
        server.command(&["GET", counter]).unwrap(),
        token.to_string()
    );
    assert_eq!(permit.release().await.unwrap(), latchkey::Ownership::Owned);
}

#[tokio::test]
async fn a_read_write_lock_refuses_a_bad_counter_and_keeps_it() {
    let server = RedisServer::start();
    let client = client(&server.url()).await;
    let counter = "{test:doc}:rw:fence";
    let writer_key = "{test:doc}:rw:writer";
    let fenced = client.rwlock("doc", TTL).unwrap().with_fencing();
    for garbage in GARBAGE {
        server.command(&["SET", counter, garbage]).unwrap();
        bad_counter(fenced.try_write().await, counter);
        assert_eq!(server.command(&["GET", counter]).unwrap(), garbage);
        assert_eq!(
            server.command(&["EXISTS", writer_key]).unwrap(),
            "0",
            "{garbage}: taken"
        );
    }
    server.command(&["DEL", counter]).unwrap();
    let writer = fenced.try_write().await.unwrap().expect("a free lock");
    let token = writer.issued_fencing_token().expect("issued with the hold");
    assert_eq!(
        server.command(&["GET", counter]).unwrap(),
        token.to_string()
    );
    assert_eq!(writer.release().await.unwrap(), latchkey::Ownership::Owned);
}
