//! `latchkey status` and `latchkey list`: the JSON fields, for held, free,
//! foreign and non-lock keys, and errors when Redis is down.

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::Value;

const QUICK: Duration = Duration::from_secs(15);

fn json(redis: &RedisServer, args: &[&str]) -> Value {
    let out = output(latchkey(redis).args(args).arg("--json"), QUICK);
    assert_eq!(code(out.status), 0, "{args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

/// Acquires `name` with `latchkey acquire`; returns its pid and fencing token.
fn acquire(redis: &RedisServer, name: &str) -> (u32, u64) {
    let child = latchkey(redis)
        .args(["acquire", name, "--ttl", "30s"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let fence = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    (pid, fence)
}

#[test]
fn status_reports_holder_ttl_age_and_fencing_token() {
    let redis = RedisServer::start();
    let (pid, fence) = acquire(&redis, "report");

    let info = json(&redis, &["status", "report"]);
    assert_eq!(info["name"], "report");
    assert_eq!(info["held"], true);
    let ttl = info["ttl_ms"].as_u64().expect("ttl_ms");
    assert!(ttl > 0 && ttl <= 30_000, "{ttl}");
    assert_eq!(info["holder"]["pid"], pid, "the acquiring process");
    assert_eq!(
        info["holder"]["host"].as_str().unwrap(),
        gethostname().as_str(),
        "this machine"
    );
    // The age is measured against our own clock: bounded, not exact.
    let age = info["age_ms"].as_u64().expect("age_ms");
    assert!(age < 15_000, "{age}");
    assert_eq!(info["fencing_token"], fence);

    // Released: free, with the last fencing token kept.
    redis.command(&["DEL", &format!("{PREFIX}report")]).unwrap();
    let info = json(&redis, &["status", "report"]);
    assert_eq!(info["held"], false);
    assert_eq!(info["ttl_ms"], Value::Null);
    assert_eq!(info["holder"], Value::Null);
    assert_eq!(info["age_ms"], Value::Null);
    assert_eq!(info["fencing_token"], fence);

    let info = json(&redis, &["status", "never-used"]);
    assert_eq!(info["held"], false);
    assert_eq!(info["fencing_token"], Value::Null);
}

#[test]
fn status_shows_another_clients_lock_by_its_raw_value() {
    let redis = RedisServer::start();
    redis
        .command(&[
            "SET",
            &format!("{PREFIX}shared"),
            "uuid-from-redis-py",
            "PX",
            "20000",
        ])
        .unwrap();
    let info = json(&redis, &["status", "shared"]);
    assert_eq!(info["held"], true);
    assert_eq!(info["holder"]["value"], "uuid-from-redis-py");
    assert_eq!(info["age_ms"], Value::Null);
    assert!(info["ttl_ms"].as_u64().unwrap() <= 20_000);

    // A held key without a TTL: held, but no ttl_ms.
    redis
        .command(&["SET", &format!("{PREFIX}forever"), "x"])
        .unwrap();
    let info = json(&redis, &["status", "forever"]);
    assert_eq!(info["held"], true);
    assert_eq!(info["ttl_ms"], Value::Null);

    // A key of another type is not a lock: one error line, not a crash.
    redis
        .command(&["HSET", &format!("{PREFIX}hash"), "f", "v"])
        .unwrap();
    let out = output(latchkey(&redis).args(["status", "hash"]), QUICK);
    assert_ne!(code(out.status), 0);
    assert_one_error_line(&out);
}

#[test]
fn list_matches_the_pattern_and_skips_what_is_not_a_lock() {
    let redis = RedisServer::start();
    acquire(&redis, "app-a");
    acquire(&redis, "app-b");
    acquire(&redis, "other");
    // Free, but used before: listed through its fencing counter.
    redis
        .command(&["SET", &format!("{{{PREFIX}app-free}}:fence"), "7"])
        .unwrap();
    // Not locks: a plain string and a hash under the prefix, and a key
    // outside it that would match the bare pattern.
    redis
        .command(&["SET", &format!("{PREFIX}app-config"), "v"])
        .unwrap();
    redis
        .command(&["HSET", &format!("{PREFIX}app-hash"), "f", "v"])
        .unwrap();
    redis
        .command(&[
            "SET",
            "app-outside",
            "lk2:00000000000000000000000000000000:0:1:h",
        ])
        .unwrap();

    let list = json(&redis, &["list", "app-*"]);
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["app-a", "app-b", "app-free"]);
    let free = &list[2];
    assert_eq!(free["held"], false);
    assert_eq!(free["fencing_token"], 7);
    for held in &list.as_array().unwrap()[..2] {
        assert_eq!(held["held"], true);
        assert!(held["holder"]["pid"].is_u64());
        for field in ["ttl_ms", "age_ms", "fencing_token"] {
            assert!(held[field].is_u64(), "{field} in {held}");
        }
    }

    let all = json(&redis, &["list"]);
    assert_eq!(all.as_array().unwrap().len(), 4);
    assert_eq!(json(&redis, &["list", "nothing*"]), Value::Array(vec![]));

    // The text form has a header and one row per lock.
    let out = output(latchkey(&redis).args(["list", "app-*"]), QUICK);
    assert_eq!(stdout(&out).lines().count(), 4, "{}", stdout(&out));
}

#[test]
fn redis_down_exits_69_with_one_line() {
    let mut redis = RedisServer::start();
    let url = redis.url();
    redis.kill();
    for args in [
        &["status", "x"][..],
        &["list"],
        // Bounded: without --wait they ride out an outage of up to 30 s.
        &["acquire", "x", "--ttl", "1s", "--wait", "1s"],
        &["run", "x", "--wait", "1s", "--", "true"],
        &["doctor"],
    ] {
        let out = output(latchkey_at(&url).args(args), QUICK);
        assert_eq!(code(out.status), 69, "{args:?}: {}", stderr(&out));
        assert_one_error_line(&out);
        assert!(stderr(&out).contains("unreachable"), "{}", stderr(&out));
    }
}

fn gethostname() -> String {
    let out = std::process::Command::new("hostname").output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .replace(':', "_")
}

#[test]
fn a_malformed_fencing_counter_is_flagged_and_every_other_lock_listed() {
    let redis = RedisServer::start();
    acquire(&redis, "good");
    acquire(&redis, "wg");
    redis
        .command(&["SET", &format!("{{{PREFIX}wg}}:fence"), "hello"])
        .unwrap();

    let out = output(latchkey(&redis).args(["list"]), QUICK);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.lines().any(|l| l.starts_with("good ")), "{text}");
    let wg = text.lines().find(|l| l.starts_with("wg ")).expect(&text);
    assert!(wg.contains("yes") && wg.ends_with("invalid"), "{wg}");
    // Logged: which key holds what.
    assert_one_error_line(&out);
    assert!(
        stderr(&out).contains("fencing counter \"{test:wg}:fence\" holds \"hello\""),
        "{}",
        stderr(&out)
    );

    let list = json(&redis, &["list"]);
    assert_eq!(list.as_array().unwrap().len(), 2, "{list}");
    assert_eq!(list[1]["name"], "wg");
    assert_eq!(list[1]["held"], true);
    assert_eq!(list[1]["fencing_token"], Value::Null);

    let out = output(latchkey(&redis).args(["status", "wg"]), QUICK);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("fencing counter invalid"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn names_that_would_forge_rows_or_reach_the_terminal_are_escaped() {
    let redis = RedisServer::start();
    acquire(&redis, "evil\nforged  yes  1s");
    acquire(&redis, "esc\u{1b}[2Jname");

    let out = output(latchkey(&redis).args(["list"]), QUICK);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 3, "a header and two rows: {text}");
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(text.contains("evil\\nforged"), "{text}");
    assert!(text.contains("esc\\e[2Jname"), "{text}");

    let out = output(latchkey(&redis).args(["status", "esc\u{1b}[2Jname"]), QUICK);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert!(!stdout(&out).contains('\u{1b}'), "{:?}", stdout(&out));
    assert_eq!(stdout(&out).lines().count(), 1);

    // JSON keeps the name as it is (the encoder escapes it).
    let list = json(&redis, &["list"]);
    assert_eq!(list[1]["name"], "evil\nforged  yes  1s");
}

#[test]
fn status_of_a_name_no_lock_can_have_is_a_usage_error() {
    let redis = RedisServer::start();
    let long = "n".repeat(2000);
    for name in ["", long.as_str(), "x:fence"] {
        let out = output(latchkey(&redis).args(["status", name]), QUICK);
        assert_eq!(code(out.status), 2, "{}", stderr(&out));
        assert_one_error_line(&out);
        assert!(stderr(&out).contains("invalid name"), "{}", stderr(&out));
    }
}

#[test]
fn no_output_of_status_or_list_prints_a_permit_holders_owner_token() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("permit-token");
    let token_file = scratch.path("token");
    let mut holder = latchkey(&redis)
        .args(["run", "--permits", "2", "sem", "--", "sh", "-c"])
        .arg(format!(
            "printf '%s\\n' \"$LATCHKEY_TOKEN\" > {}; exec sleep 60",
            token_file.display()
        ))
        .spawn()
        .unwrap();
    let token = wait_for_text(&token_file, "\n", QUICK).trim().to_owned();
    assert!(token.len() > 8, "token {token:?}");

    let info = json(&redis, &["status", "sem"]);
    let permits = info["permits"].as_array().expect("a permits array");
    assert_eq!(permits.len(), 1, "{info}");
    assert_eq!(permits[0]["pid"], holder.id(), "{info}");
    assert!(permits[0]["ttl_ms"].is_u64(), "{info}");
    let mut outputs = vec![info.to_string()];
    for args in [
        &["status", "sem"][..],
        &["list"],
        &["list", "--json"],
        &["status", "sem", "-v"],
    ] {
        let out = output(latchkey(&redis).args(args), QUICK);
        assert_eq!(code(out.status), 0, "{args:?}: {}", stderr(&out));
        outputs.push(stdout(&out) + &stderr(&out));
    }
    assert!(
        outputs[1].contains("1 semaphore permit(s) held"),
        "{}",
        outputs[1]
    );
    // `lk2:<32 hex digits>:…`: the random part alone must not appear either.
    let secret = token.split(':').nth(1).expect("a latchkey token");
    assert_eq!(secret.len(), 32, "token {token:?}");
    for text in &outputs {
        assert!(!text.contains(secret), "owner token printed: {text}");
    }

    send_signal(&holder, libc::SIGTERM);
    wait_exit(&mut holder, QUICK);
}

#[test]
fn list_cuts_long_names_instead_of_padding_every_row() {
    let redis = RedisServer::start();
    let long = "n".repeat(1024);
    acquire(&redis, &long);
    acquire(&redis, "short");
    let out = output(latchkey(&redis).arg("list"), QUICK);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 3, "{text}");
    for line in text.lines() {
        assert!(
            line.chars().count() <= 150,
            "a row of {} columns: {line}",
            line.chars().count()
        );
    }
    assert!(text.contains("nnnn…"), "{text}");
    // JSON keeps the name whole.
    let list = json(&redis, &["list"]);
    assert!(list
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["name"] == long.as_str()));
}

/// `total_connections_received` of the server's INFO (this query counts one).
fn connections_received(redis: &RedisServer) -> u64 {
    let info = redis.command(&["INFO", "stats"]).expect("INFO stats");
    info.lines()
        .find_map(|line| line.strip_prefix("total_connections_received:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("total_connections_received in INFO stats")
}

/// One connected client per invocation: the holder of a busy lock is
/// described over the connection that found it busy (it used to open a
/// second client), so a busy `run --no-wait` connects as often as `status`.
#[test]
fn a_busy_run_connects_no_more_often_than_status() {
    let redis = RedisServer::start();
    acquire(&redis, "one-client");

    let before = connections_received(&redis);
    let out = output(latchkey(&redis).args(["status", "one-client"]), QUICK);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    let by_status = connections_received(&redis) - before;

    let before = connections_received(&redis);
    let out = output(
        latchkey(&redis).args(["run", "one-client", "--no-wait", "--", "true"]),
        QUICK,
    );
    assert_eq!(code(out.status), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("held by"), "{}", stderr(&out));
    let by_run = connections_received(&redis) - before;

    assert_eq!(
        by_run, by_status,
        "a busy run opened {by_run} connections (with this INFO), status {by_status}"
    );
}

#[test]
fn status_shows_a_hold_kept_while_idle_as_such() {
    let redis = RedisServer::start();
    // A token as a `Lock::with_caching` holder writes it (docs/protocol.md,
    // "Held while idle"): the caching mark ':c' after the host.
    let token = format!("lk2:{}:1700000000000:4242:web-1:c", "ab".repeat(16));
    redis
        .command(&["SET", &format!("{PREFIX}tenant"), &token, "PX", "20000"])
        .unwrap();
    let info = json(&redis, &["status", "tenant"]);
    assert_eq!(info["holder"]["host"], "web-1");
    assert_eq!(info["holder"]["pid"], 4242);
    assert_eq!(info["holder"]["caching"], true);
    let out = output(latchkey(&redis).args(["status", "tenant"]), QUICK);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("web-1 pid 4242 (kept while idle)"), "{text}");
    // Marked by a waiter too: still parsed, still kept while idle.
    redis
        .command(&["APPEND", &format!("{PREFIX}tenant"), "+w"])
        .unwrap();
    let info = json(&redis, &["status", "tenant"]);
    assert_eq!(info["holder"]["caching"], true);
}
