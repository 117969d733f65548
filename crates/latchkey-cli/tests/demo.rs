//! `latchkey demo`: starts its own redis-server and shows no lost updates
//! under the lock.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;

#[test]
fn the_demo_loses_no_update_with_the_lock() {
    let out = output(
        Command::new(env!("CARGO_BIN_EXE_latchkey"))
            .args(["demo", "--workers", "4", "--increments", "10"])
            .env_remove("LATCHKEY_REDIS_URL")
            .env_remove("LATCHKEY_PREFIX"),
        Duration::from_secs(30),
    );
    let text = stdout(&out);
    assert_eq!(code(out.status), 0, "{text}{}", stderr(&out));
    let with_lock = text.split("With latchkey").nth(1).expect(&text);
    assert!(
        with_lock.contains("expected 40, got 40: 0 updates lost"),
        "{text}"
    );
    assert!(with_lock.contains("acquisitions    40"), "{text}");
    assert!(with_lock.contains("strictly increasing"), "{text}");
    assert!(
        text.contains("private redis-server") && text.contains("Stopped"),
        "{text}"
    );
}

#[test]
fn the_demo_uses_a_given_server_and_cleans_up() {
    let redis = RedisServer::start();
    let out = output(
        latchkey(&redis).args(["demo", "--workers", "2", "--increments", "5"]),
        Duration::from_secs(30),
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("expected 10, got 10: 0 updates lost"),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        redis.command(&["DBSIZE"]).unwrap(),
        "0",
        "nothing left behind"
    );
}
