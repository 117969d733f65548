//! `GET /metrics` on `latchkey serve`: the exporter's Prometheus text on the
//! door's listener, behind its bearer tokens.

use latchkey_testkit::eventually_blocking;
use serde_json::json;

use super::http_client::*;
use super::session::text;
use crate::common::*;

/// The value of the series `series` (name and labels as printed) in `text`.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

#[test]
fn metrics_are_the_exporters_text_behind_the_same_tokens() {
    let redis = RedisServer::start();
    let served = Served::start(
        &redis,
        &["--scan-every", "50ms"],
        &[("LATCHKEY_SERVE_TOKENS", "s3cret")],
    );
    let (status, refused) = get_text(&served.addr, "/metrics", None);
    assert_eq!(status, 401, "{refused}");
    assert!(!refused.contains("latchkey_"), "{refused}");

    let (status, held) = served.request(
        "POST",
        "/v1/locks/metered/acquire",
        Some("s3cret"),
        r#"{"ttl": "1m"}"#,
    );
    assert_eq!((status, &held["acquired"]), (200, &json!(true)), "{held}");
    // This process's client took it: the library's counter says so at once.
    let (status, text_now) = get_text(&served.addr, "/metrics", Some("s3cret"));
    assert_eq!(status, 200);
    assert!(
        text_now.contains("latchkey_acquisitions_total"),
        "{text_now}"
    );
    // The scan sees it held, as `latchkey exporter` would.
    eventually_blocking("the scan counts the held lock", || {
        let (_, text) = get_text(&served.addr, "/metrics", Some("s3cret"));
        value(&text, r#"latchkey_locks_held{prefix="test:"}"#) == Some(1.0)
            && value(&text, "latchkey_exporter_up") == Some(1.0)
    });

    let (status, _) = served.request(
        "POST",
        "/v1/locks/metered/release",
        Some("s3cret"),
        &json!({"token": text(&held, "token")}).to_string(),
    );
    assert_eq!(status, 200);
    eventually_blocking("the scan sees it released", || {
        let (_, text) = get_text(&served.addr, "/metrics", Some("s3cret"));
        value(&text, r#"latchkey_locks_held{prefix="test:"}"#) == Some(0.0)
    });
}

#[test]
fn a_scan_interval_too_short_is_a_usage_error() {
    let redis = RedisServer::start();
    let out = output(
        latchkey(&redis).args(["serve", "--listen", "127.0.0.1:0", "--scan-every", "1ms"]),
        std::time::Duration::from_secs(15),
    );
    assert_eq!(code(out.status), 2, "{}", stderr(&out));
    assert_one_error_line(&out);
}
