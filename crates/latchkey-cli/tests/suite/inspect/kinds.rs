//! `status`, `list` and the exporter know every kind: a lock, a fair lock
//! with a waiter queued, a semaphore, a read-write lock held by a reader, a
//! latch, a barrier with a party waiting and an election with a leader,
//! each made active by the real binary against a private redis-server. On
//! 0.3 (before `Client::describe`) `status` called all but the lock "free",
//! and `list` and the exporter showed none of them. No output prints an
//! owner token.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;
use latchkey_testkit::free_port;
use serde_json::Value;

const QUICK: Duration = Duration::from_secs(15);

/// Background holders and waiters; killed on drop (a failed test leaves none).
struct Actors(Vec<Child>);

impl Drop for Actors {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Polls Redis until `args` answers `want` (the actors' state is in Redis:
/// no other signal reaches the test), at most 10 s.
fn until_redis(redis: &RedisServer, args: &[&str], want: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = redis.command(args).unwrap_or_default();
        if got.trim() == want {
            return;
        }
        assert!(Instant::now() < deadline, "{args:?}: {got:?}, not {want:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `latchkey ARGS -- sh -c 'printf ok > FILE; exec sleep 60'`, once the
/// command runs (it holds then).
fn holding(redis: &RedisServer, scratch: &Scratch, args: &[&str], tag: &str) -> Child {
    let file = scratch.path(tag);
    let child = latchkey(redis)
        .args(args)
        .args(["--", "sh", "-c"])
        .arg(format!("printf ok > {}; exec sleep 60", file.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_text(&file, "ok", QUICK);
    child
}

fn spawn(redis: &RedisServer, args: &[&str]) -> Child {
    latchkey(redis)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn run_ok(redis: &RedisServer, args: &[&str]) -> String {
    let out = output(latchkey(redis).args(args), QUICK);
    assert_eq!(code(out.status), 0, "{args:?}: {}", stderr(&out));
    stdout(&out) + &stderr(&out)
}

/// The seven kinds, each active: `l` lock, `f` fair lock (one waiter
/// queued), `s` semaphore (2 permits), `rw` (one reader), `go` latch (2
/// left of 3), `meet` barrier (1 of 3 arrived), `e` election (led).
fn seven_kinds(redis: &RedisServer, scratch: &Scratch) -> Actors {
    let mut actors = Vec::new();
    run_ok(redis, &["acquire", "l", "--ttl", "60s"]);
    actors.push(holding(redis, scratch, &["run", "--fair", "f"], "f"));
    actors.push(spawn(
        redis,
        &["run", "--fair", "f", "--wait", "60s", "--", "true"],
    ));
    until_redis(redis, &["LLEN", "{test:f}:queue"], "1");
    actors.push(holding(
        redis,
        scratch,
        &["run", "--permits", "3", "s"],
        "s1",
    ));
    actors.push(holding(
        redis,
        scratch,
        &["run", "--permits", "3", "s"],
        "s2",
    ));
    actors.push(holding(redis, scratch, &["run", "--read", "rw"], "rw"));
    run_ok(redis, &["latch", "go", "--count", "3"]);
    run_ok(redis, &["latch", "go", "count-down"]);
    actors.push(spawn(
        redis,
        &["barrier", "meet", "--parties", "3", "--timeout", "60s"],
    ));
    until_redis(redis, &["HGET", "{test:meet}:barrier", "arrived"], "1");
    actors.push(holding(
        redis,
        scratch,
        &["elect", "e", "--value", "node-a"],
        "e",
    ));
    Actors(actors)
}

fn json(redis: &RedisServer, args: &[&str]) -> Value {
    let text = run_ok(redis, &[args, &["--json"]].concat());
    serde_json::from_str(text.lines().next().unwrap_or_default()).expect(&text)
}

#[test]
fn status_and_list_describe_every_kind_and_who_holds_it() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("inspect-kinds");
    let actors = seven_kinds(&redis, &scratch);

    let expect_text = [
        ("l", "held by "),
        ("f", "fair lock held by "),
        ("s", "2 semaphore permit(s) held"),
        ("rw", "read-write lock, read by 1"),
        ("go", "latch, count 2 left"),
        ("meet", "barrier, 1 of 3 arrived, generation 0"),
        ("e", "election, led by "),
    ];
    let mut outputs = Vec::new();
    for (name, want) in expect_text {
        let text = run_ok(&redis, &["status", name]);
        assert!(
            text.starts_with(&format!("{name}: {want}")),
            "status {name}: {text}"
        );
        assert!(!text.contains("free"), "status {name}: {text}");
        outputs.push(text);
    }
    let fair = &outputs[1];
    assert!(fair.contains("1 waiting, in order:\n  1. "), "{fair}");
    assert_eq!(
        outputs[2].lines().count(),
        3,
        "a line per permit: {}",
        outputs[2]
    );
    assert!(outputs[6].contains("value \"node-a\""), "{}", outputs[6]);

    let expect_kind = [
        ("l", "lock"),
        ("f", "fair-lock"),
        ("s", "semaphore"),
        ("rw", "rwlock"),
        ("go", "latch"),
        ("meet", "barrier"),
        ("e", "election"),
    ];
    for (name, kind) in expect_kind {
        let info = json(&redis, &["status", name]);
        assert_eq!(info["kind"], kind, "{info}");
        assert_eq!(info["kinds"], serde_json::json!([kind]), "{info}");
        let held = !matches!(kind, "latch" | "barrier");
        assert_eq!(info["held"], held, "{info}");
        outputs.push(info.to_string());
    }
    let s = json(&redis, &["status", "s"]);
    assert_eq!(s["permits"].as_array().unwrap().len(), 2, "{s}");
    assert!(s["permits"][0]["pid"].is_u64(), "{s}");
    let rw = &json(&redis, &["status", "rw"])["primitives"][0];
    assert_eq!(rw["readers"].as_array().unwrap().len(), 1, "{rw}");
    assert_eq!(rw["writer"], Value::Null, "{rw}");
    let go = &json(&redis, &["status", "go"])["primitives"][0];
    assert_eq!(
        (go["count"].as_u64(), go["open"].as_bool()),
        (Some(2), Some(false))
    );
    let meet = &json(&redis, &["status", "meet"])["primitives"][0];
    assert_eq!(
        (
            meet["arrived"].as_u64(),
            meet["parties"].as_u64(),
            meet["generation"].as_u64()
        ),
        (Some(1), Some(3), Some(0)),
        "{meet}"
    );
    let e = &json(&redis, &["status", "e"])["primitives"][0];
    assert_eq!(e["value"], "node-a", "{e}");
    assert!(
        e["leader"]["pid"].is_u64() && e["term"].as_u64() > Some(0),
        "{e}"
    );
    let f = &json(&redis, &["status", "f"])["primitives"][0];
    assert_eq!(f["queue"].as_array().unwrap().len(), 1, "{f}");
    assert!(f["queue"][0]["pid"].is_u64(), "{f}");

    let list = json(&redis, &["list"]);
    let rows: Vec<(String, String)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                r["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut want: Vec<(String, String)> = expect_kind
        .iter()
        .map(|(n, k)| (n.to_string(), k.to_string()))
        .collect();
    want.sort();
    assert_eq!(rows, want, "{list}");
    let text = run_ok(&redis, &["list"]);
    assert!(
        text.lines().next().unwrap().starts_with("NAME  KIND"),
        "{text}"
    );
    for (name, kind) in expect_kind {
        assert!(
            text.lines().any(|l| {
                let cells: Vec<&str> = l.split_whitespace().collect();
                cells.first() == Some(&name) && cells.get(1) == Some(&kind)
            }),
            "no {name} {kind} row: {text}"
        );
    }
    assert!(text.contains("2 permits"), "{text}");
    assert!(text.contains("count 2"), "{text}");
    assert!(text.contains("1/3 arrived"), "{text}");
    outputs.push(list.to_string());
    outputs.push(text);

    // No owner token anywhere: the random part of every token in Redis.
    let mut secrets = Vec::new();
    for key in ["test:l", "test:f", "{test:e}:leader"] {
        let token = redis.command(&["GET", key]).unwrap();
        secrets.push(
            token
                .trim()
                .split(':')
                .nth(1)
                .unwrap_or_default()
                .to_owned(),
        );
    }
    for key in ["{test:s}:permits", "{test:rw}:rw:readers"] {
        let members = redis.command(&["ZRANGE", key, "0", "-1"]).unwrap();
        for token in members.lines() {
            secrets.push(
                token
                    .trim()
                    .split(':')
                    .nth(1)
                    .unwrap_or_default()
                    .to_owned(),
            );
        }
    }
    assert!(secrets.len() >= 6, "{secrets:?}");
    for secret in &secrets {
        assert_eq!(secret.len(), 32, "{secrets:?}");
        for text in &outputs {
            assert!(
                !text.contains(secret.as_str()),
                "owner token printed: {text}"
            );
        }
    }
    drop(actors);
}

/// GET /metrics: every sample line.
fn scrape(port: u16) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response.split_once("\r\n\r\n")?.1.to_owned())
}

/// The value of the sample of `metric` whose labels include all of `labels`.
fn sample(text: &str, metric: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")))
        .find(|l| labels.iter().all(|label| l.contains(label)))
        .and_then(|l| l.rsplit_once(' ')?.1.parse().ok())
}

#[test]
fn the_exporter_has_series_per_kind() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("exporter-kinds");
    let actors = seven_kinds(&redis, &scratch);
    let port = free_port();
    let exporter = spawn(
        &redis,
        &[
            "exporter",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--scan-every",
            "100ms",
            "--long-held",
            "1ms",
        ],
    );
    let _reaper = Actors(vec![exporter]);
    let expect = [
        ("l", "lock", 1.0),
        ("f", "fair-lock", 1.0),
        ("s", "semaphore", 2.0),
        ("rw", "rwlock", 1.0),
        ("go", "latch", 2.0),
        ("meet", "barrier", 1.0),
        ("e", "election", 1.0),
    ];
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = scrape(port).unwrap_or_default();
        if text.contains("latchkey_primitive_holders{") && text.contains("kind=\"election\"") {
            break text;
        }
        assert!(Instant::now() < deadline, "no per-kind series: {text}");
        std::thread::sleep(Duration::from_millis(20));
    };
    for (name, kind, holders) in expect {
        let kind_label = format!("kind=\"{kind}\"");
        let name_label = format!("name=\"{name}\"");
        assert_eq!(
            sample(&text, "latchkey_primitives_active", &[&kind_label]),
            Some(1.0),
            "{kind}: {text}"
        );
        assert_eq!(
            sample(
                &text,
                "latchkey_primitive_holders",
                &[&kind_label, &name_label]
            ),
            Some(holders),
            "{name}: {text}"
        );
    }
    assert_eq!(
        sample(
            &text,
            "latchkey_primitive_waiting",
            &["kind=\"fair-lock\"", "name=\"f\""]
        ),
        Some(1.0),
        "{text}"
    );
    assert!(
        sample(
            &text,
            "latchkey_primitive_age_seconds",
            &["kind=\"semaphore\"", "name=\"s\""]
        )
        .is_some(),
        "{text}"
    );
    // Held longer than --long-held (1ms): listed with the holder's pid.
    for (kind, name) in [("semaphore", "s"), ("rwlock", "rw"), ("election", "e")] {
        let kind_label = format!("kind=\"{kind}\"");
        let name_label = format!("name=\"{name}\"");
        assert!(
            sample(
                &text,
                "latchkey_primitive_long_held_seconds",
                &[&kind_label, &name_label, "pid=\""]
            )
            .is_some(),
            "{kind}: {text}"
        );
    }
    drop(actors);
}

/// A name that is two kinds at once (their keys differ) is shown as both,
/// lock first: two lines in `status`, both in `kinds`, two rows in `list`.
#[test]
fn a_name_that_is_two_kinds_is_shown_as_both() {
    let redis = RedisServer::start();
    run_ok(&redis, &["acquire", "both", "--ttl", "60s"]);
    run_ok(&redis, &["latch", "both", "--count", "2"]);
    let text = run_ok(&redis, &["status", "both"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("both: held by "), "{text}");
    assert!(lines[1].starts_with("both: latch, count 2 left"), "{text}");
    let info = json(&redis, &["status", "both"]);
    assert_eq!(
        info["kinds"],
        serde_json::json!(["lock", "latch"]),
        "{info}"
    );
    assert_eq!(info["kind"], "lock", "{info}");
    assert_eq!(info["held"], true, "{info}");
    assert!(info["holder"]["pid"].is_u64(), "the lock's fields: {info}");
    let list = json(&redis, &["list", "both"]);
    let kinds: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["lock", "latch"], "{list}");
}
