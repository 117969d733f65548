//! `latchkey demo`: starts its own redis-server and shows no lost updates
//! under the lock.

use crate::common;

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

#[test]
fn an_interrupted_demo_leaves_no_keys_behind() {
    let redis = RedisServer::start();
    let counter = format!("{PREFIX}demo-counter");
    // Long enough to be interrupted mid-way: 64 × 1000 increments of 1 ms.
    let mut demo = latchkey(&redis)
        .args(["demo", "--workers", "64", "--increments", "1000"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the demo");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while redis.command(&["EXISTS", &counter]).unwrap() != "1" {
        assert!(
            std::time::Instant::now() < deadline,
            "the demo never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Even a demo killed outright cannot leave the counter for good.
    let pttl: i64 = redis.command(&["PTTL", &counter]).unwrap().parse().unwrap();
    assert!(pttl > 0, "the counter has no TTL ({pttl})");

    send_signal(&demo, libc::SIGINT);
    assert_eq!(code(wait_exit(&mut demo, Duration::from_secs(15))), 130);
    for key in [counter.clone(), format!("{{{PREFIX}demo-lock}}:fence")] {
        assert_eq!(
            redis.command(&["EXISTS", &key]).unwrap(),
            "0",
            "{key} left behind"
        );
    }
}
