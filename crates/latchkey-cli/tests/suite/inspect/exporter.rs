//! `latchkey exporter`: the real binary against a private redis-server,
//! scraped over plain HTTP after known operations.

use crate::common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::*;
use latchkey_testkit::free_port;

const QUICK: Duration = Duration::from_secs(15);

/// One scrape: `name{sorted labels}` → value, plus the raw text.
struct Scrape {
    series: BTreeMap<String, f64>,
    text: String,
}

impl Scrape {
    fn get(&self, series: &str) -> Option<f64> {
        self.series.get(series).copied()
    }

    fn value(&self, series: &str) -> f64 {
        self.get(series)
            .unwrap_or_else(|| panic!("no {series} in\n{}", self.text))
    }

    /// Every series of metric `name`.
    fn all(&self, name: &str) -> Vec<(&str, f64)> {
        let prefix = format!("{name}{{");
        self.series
            .iter()
            .filter(|(s, _)| s.starts_with(&prefix) || s.as_str() == name)
            .map(|(s, v)| (s.as_str(), *v))
            .collect()
    }
}

/// GET /metrics over a plain TcpStream (HTTP/1.0: no chunked body).
fn scrape(port: u16) -> std::io::Result<Scrape> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no HTTP body in {response:?}")))?;
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    let mut series = BTreeMap::new();
    for line in body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (key, value) = line.rsplit_once(' ').expect("a sample line");
        series.insert(normalize(key), value.parse::<f64>().expect("a number"));
    }
    Ok(Scrape {
        series,
        text: body.to_owned(),
    })
}

/// `name{b="2",a="1"}` → `name{a="1",b="2"}` (label order is the exporter's choice).
fn normalize(key: &str) -> String {
    let Some((name, labels)) = key.split_once('{') else {
        return key.to_owned();
    };
    let mut labels: Vec<&str> = labels.trim_end_matches('}').split(',').collect();
    labels.sort();
    format!("{name}{{{}}}", labels.join(","))
}

/// Scrapes until `ready` holds for a scrape (the exporter scans in the
/// background: there is no other signal), at most 10 s.
fn scrape_until(port: u16, what: &str, ready: impl Fn(&Scrape) -> bool) -> Scrape {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let last = scrape(port);
        if let Ok(scrape) = &last {
            if ready(scrape) {
                return last.unwrap();
            }
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within 10 s; last scrape: {}",
            last.map_or_else(|e| e.to_string(), |s| s.text)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn start_exporter(redis: &RedisServer, port: u16, extra: &[&str]) -> Child {
    latchkey(redis)
        .args(["exporter", "--listen", &format!("127.0.0.1:{port}")])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the exporter")
}

/// Kills the exporter if a test fails half-way.
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

#[test]
fn server_side_gauges_follow_the_locks_and_the_long_held_one_is_listed() {
    let redis = RedisServer::start();
    for name in ["fresh-1", "fresh-2"] {
        let out = output(
            latchkey(&redis).args(["acquire", name, "--ttl", "60s"]),
            QUICK,
        );
        assert_eq!(code(out.status), 0, "{}", stderr(&out));
    }
    // A holder that took its lock ten minutes ago (the age is in its token).
    let old = format!("lk2:{:032x}:{}:4242:web-1", 7u128, now_ms() - 600_000);
    redis
        .command(&["SET", "test:old", &old, "PX", "60000"])
        .unwrap();
    // Another client's lock without a TTL (listed: a fencing counter exists).
    redis
        .command(&["SET", "test:foreign", "some-uuid"])
        .unwrap();
    redis
        .command(&["SET", "{test:foreign}:fence", "7"])
        .unwrap();
    // A free lock: listed by `list`, not held.
    redis.command(&["SET", "{test:free}:fence", "3"]).unwrap();

    let port = free_port();
    let exporter = Reaper(start_exporter(
        &redis,
        port,
        &["--scan-every", "100ms", "--long-held", "1m"],
    ));
    let s = scrape_until(port, "a first scan", |s| {
        s.get(r#"latchkey_exporter_scans_total{outcome="ok"}"#)
            .is_some()
    });

    assert_eq!(s.value(r#"latchkey_locks_held{prefix="test:"}"#), 4.0);
    assert_eq!(s.value(r#"latchkey_locks_long_held{prefix="test:"}"#), 1.0);
    assert_eq!(s.value("latchkey_long_held_threshold_seconds"), 60.0);
    assert_eq!(s.value("latchkey_exporter_up"), 1.0);
    let listed = s.all("latchkey_lock_long_held_seconds");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        listed[0].0,
        r#"latchkey_lock_long_held_seconds{host="web-1",lock="old",pid="4242",prefix="test:"}"#
    );
    // Ten minutes, plus however long the test took to get here.
    assert!((600.0..660.0).contains(&listed[0].1), "{listed:?}");

    for name in ["fresh-1", "fresh-2"] {
        let ttl = s.value(&format!(
            r#"latchkey_lock_ttl_seconds{{lock="{name}",prefix="test:"}}"#
        ));
        assert!(ttl > 30.0 && ttl <= 60.0, "{name}: ttl {ttl}");
        let age = s.value(&format!(
            r#"latchkey_lock_age_seconds{{lock="{name}",prefix="test:"}}"#
        ));
        assert!((0.0..30.0).contains(&age), "{name}: age {age}");
    }
    assert_eq!(
        s.value(r#"latchkey_lock_ttl_seconds{lock="foreign",prefix="test:"}"#),
        -1.0
    );
    assert_eq!(
        s.get(r#"latchkey_lock_age_seconds{lock="foreign",prefix="test:"}"#),
        None
    );
    assert_eq!(
        s.all("latchkey_lock_ttl_seconds").len(),
        4,
        "the free lock has no TTL gauge"
    );
    assert!(
        s.text.contains("# HELP latchkey_locks_long_held "),
        "described"
    );

    // The long-held lock is released: its series goes (after the idle
    // timeout of two scans plus a second) and the count drops.
    redis.command(&["DEL", "test:old"]).unwrap();
    let s = scrape_until(port, "the old lock gone", |s| {
        s.all("latchkey_lock_long_held_seconds").is_empty()
            && s.get(r#"latchkey_lock_ttl_seconds{lock="old",prefix="test:"}"#)
                .is_none()
    });
    assert_eq!(s.value(r#"latchkey_locks_held{prefix="test:"}"#), 3.0);
    assert_eq!(s.value(r#"latchkey_locks_long_held{prefix="test:"}"#), 0.0);

    // Redis goes away: the exporter stays up, says so, and serves the
    // process's own latchkey metrics (its failed commands).
    let mut redis = redis;
    redis.kill();
    let s = scrape_until(port, "scans failing", |s| {
        s.get("latchkey_exporter_up") == Some(0.0)
            && s.get(r#"latchkey_exporter_scans_total{outcome="error"}"#)
                .is_some()
    });
    let errors: f64 = s
        .all("latchkey_redis_errors_total")
        .iter()
        .map(|(_, n)| n)
        .sum();
    assert!(errors >= 1.0, "{}", s.text);

    let mut exporter = exporter;
    send_signal(&exporter.0, libc::SIGTERM);
    assert_eq!(code(wait_exit(&mut exporter.0, QUICK)), 0);
}

#[test]
fn a_listen_address_in_use_is_one_line_and_exit_2() {
    let redis = RedisServer::start();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let out = output(
        latchkey(&redis).args(["exporter", "--listen", &format!("127.0.0.1:{port}")]),
        QUICK,
    );
    assert_eq!(code(out.status), 2, "{}", stderr(&out));
    assert_one_error_line(&out);
    assert!(
        stderr(&out).contains("cannot serve metrics on"),
        "{}",
        stderr(&out)
    );
}

/// The lines a child writes to `stream`, as they come.
fn lines_of(stream: impl Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stream)) {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// The next line containing `needle`, within [`QUICK`].
fn line_with(lines: &std::sync::mpsc::Receiver<String>, needle: &str) -> String {
    let deadline = Instant::now() + QUICK;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return line,
            Ok(_) => {}
            Err(e) => panic!("no line with {needle:?}: {e}"),
        }
    }
}

#[test]
fn port_0_prints_the_bound_port_and_a_bad_counter_is_logged_not_fatal() {
    let redis = RedisServer::start();
    for name in ["good", "wg"] {
        let out = output(
            latchkey(&redis).args(["acquire", name, "--ttl", "60s"]),
            QUICK,
        );
        assert_eq!(code(out.status), 0, "{}", stderr(&out));
    }
    redis.command(&["SET", "{test:wg}:fence", "hello"]).unwrap();

    let mut child = latchkey(&redis)
        .args([
            "exporter",
            "--listen",
            "127.0.0.1:0",
            "--scan-every",
            "100ms",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the exporter");
    let out = lines_of(child.stdout.take().unwrap());
    let err = lines_of(child.stderr.take().unwrap());
    let exporter = Reaper(child);

    let serving = line_with(&out, "serving Prometheus metrics on");
    let port: u16 = serving
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.strip_suffix("/metrics"))
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("no port in {serving:?}"));
    assert_ne!(port, 0, "{serving}");

    let s = scrape_until(port, "a scan with both locks", |s| {
        s.get("latchkey_exporter_up") == Some(1.0)
            && s.get(r#"latchkey_locks_held{prefix="test:"}"#) == Some(2.0)
    });
    assert!(
        s.get(r#"latchkey_lock_ttl_seconds{lock="wg",prefix="test:"}"#)
            .is_some(),
        "{}",
        s.text
    );
    let warning = line_with(&err, "fencing counter");
    assert!(
        warning.contains("\"{test:wg}:fence\" holds \"hello\""),
        "{warning}"
    );

    // A scan error reaches stderr too.
    let mut redis = redis;
    redis.kill();
    line_with(&err, "exporter scan failed");

    let mut exporter = exporter;
    send_signal(&exporter.0, libc::SIGTERM);
    assert_eq!(code(wait_exit(&mut exporter.0, QUICK)), 0);
}
