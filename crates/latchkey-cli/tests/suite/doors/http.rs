//! `latchkey serve`: the verbs over HTTP/JSON, bearer tokens, the loopback
//! rule, bad input, a long wait woken by a release, and the CLI on the same
//! names.

use std::time::{Duration, Instant};

use serde_json::json;

use super::http_client::*;
use super::session::{dbsize, exists, key, num, text};
use crate::common::*;

#[test]
fn a_lock_over_http_is_busy_for_the_cli_and_other_callers_until_released() {
    let redis = RedisServer::start();
    let served = Served::start(&redis, &[], &[]);
    let (status, held) = served.post("/v1/locks/deploy/acquire", r#"{"ttl": "1m"}"#);
    assert_eq!(status, 200, "{held}");
    assert_eq!(held["acquired"], true);
    let token = text(&held, "token");
    assert_eq!(redis.command(&["GET", &key("deploy")]).unwrap(), token);

    let cli = output(
        latchkey(&redis).args(["acquire", "deploy", "--ttl", "10s", "--no-wait"]),
        Duration::from_secs(15),
    );
    assert_eq!(code(cli.status), 1, "busy for the CLI: {}", stderr(&cli));
    let run = output(
        latchkey(&redis).args(["run", "deploy", "--no-wait", "--", "true"]),
        Duration::from_secs(15),
    );
    assert_eq!(code(run.status), 1, "busy for `run`: {}", stderr(&run));

    let (status, busy) = served.post("/v1/locks/deploy/acquire", r#"{"ttl": "1m"}"#);
    assert_eq!(status, 200);
    assert_eq!(busy["acquired"], false);
    assert_eq!(num(&busy["holder"], "pid"), u64::from(served.pid()));

    let (status, shown) = served.request("GET", "/v1/locks/deploy", None, "");
    assert_eq!((status, &shown["held"]), (200, &json!(true)), "{shown}");
    let (status, _) = served.post(
        "/v1/locks/deploy/extend",
        &json!({"token": token, "ttl": "2m"}).to_string(),
    );
    assert_eq!(status, 200);
    let (status, released) = served.post(
        "/v1/locks/deploy/release",
        &json!({"token": token}).to_string(),
    );
    assert_eq!((status, &released["released"]), (200, &json!(true)));
    let (status, again) = served.post(
        "/v1/locks/deploy/release",
        &json!({"token": token}).to_string(),
    );
    assert_eq!((status, text(&again, "code")), (409, "NOT_HELD".to_owned()));

    let (status, listed) = served.request("GET", "/v1/locks?pattern=dep*&limit=5", None, "");
    assert_eq!(status, 200, "{listed}");
    // Released: free, its fencing counter kept for the next holder.
    assert_eq!(listed["primitives"][0]["name"], "deploy", "{listed}");
    assert_eq!(listed["primitives"][0]["held"], false, "{listed}");
    assert_eq!(
        listed["primitives"][0]["fencing_token"],
        held["fencing_token"]
    );
}

#[test]
fn a_caller_without_the_bearer_token_is_refused_and_takes_nothing() {
    let redis = RedisServer::start();
    let served = Served::start(&redis, &[], &[("LATCHKEY_SERVE_TOKENS", "s3cret,other")]);
    let body = r#"{"ttl": "1m"}"#;
    for token in [None, Some("wrong"), Some("s3cre")] {
        let (status, refused) = served.request("POST", "/v1/locks/x/acquire", token, body);
        assert_eq!(status, 401, "{token:?}: {refused}");
        assert_eq!(text(&refused, "code"), "AUTH");
    }
    assert_eq!(dbsize(&redis), 0, "nothing taken");
    let (status, held) = served.request("POST", "/v1/locks/x/acquire", Some("other"), body);
    assert_eq!((status, &held["acquired"]), (200, &json!(true)), "{held}");
}

#[test]
fn without_tokens_only_a_loopback_listener_is_accepted() {
    let redis = RedisServer::start();
    let out = output(
        latchkey(&redis)
            .args(["serve", "--listen", "0.0.0.0:0"])
            .env_remove("LATCHKEY_SERVE_TOKENS"),
        Duration::from_secs(15),
    );
    assert_eq!(code(out.status), 2);
    assert_one_error_line(&out);
    assert!(
        stderr(&out).contains("not a loopback address"),
        "{}",
        stderr(&out)
    );

    let scratch = Scratch::new("serve-tokens");
    let file = scratch.path("tokens");
    std::fs::write(&file, "# callers\n\nfile-token\n").expect("write tokens");
    let file = file.to_string_lossy().into_owned();
    let served = Served::start(&redis, &["--tokens-file", &file], &[]);
    let (status, _) = served.request("GET", "/v1/locks/x", Some("file-token"), "");
    assert_eq!(status, 200);
    let (status, _) = served.request("GET", "/v1/locks/x", None, "");
    assert_eq!(status, 401);
}

#[test]
fn bad_input_over_http_is_a_4xx_with_the_code_and_takes_nothing() {
    let redis = RedisServer::start();
    let served = Served::start(&redis, &[], &[]);
    let cases = [
        (
            "/v1/locks/x/acquire",
            r#"{"ttl": "-5s"}"#,
            400,
            "INVALID_TTL",
        ),
        ("/v1/locks/x/acquire", r#"{"ttl": 0}"#, 400, "INVALID_INPUT"),
        ("/v1/locks/x/acquire", r#"{}"#, 400, "INVALID_INPUT"),
        (
            "/v1/locks/x/acquire",
            r#"{"ttl": "1m", "force": true}"#,
            400,
            "INVALID_INPUT",
        ),
        (
            "/v1/locks/x/acquire",
            r#"{"name": "y", "ttl": "1m"}"#,
            400,
            "INVALID_INPUT",
        ),
        ("/v1/locks/x/acquire", "not json", 400, "INVALID_INPUT"),
        ("/v1/locks/x/acquire", "[1]", 400, "INVALID_INPUT"),
        ("/v1/locks/x/revoke", "", 404, "NOT_FOUND"),
        ("/v1/nothing", "", 404, "NOT_FOUND"),
    ];
    for (path, body, status, code) in cases {
        let (got, error) = served.post(path, body);
        assert_eq!(
            (got, text(&error, "code")),
            (status, code.to_owned()),
            "{path} {body}: {error}"
        );
        assert!(!text(&error, "message").contains('\n'));
    }
    assert!(!exists(&redis, "x"));
    assert_eq!(dbsize(&redis), 0, "nothing taken");
}

#[test]
fn a_long_wait_over_http_is_woken_by_a_release() {
    let redis = RedisServer::start();
    let served = Served::start(&redis, &[], &[]);
    let (_, held) = served.post("/v1/locks/q/acquire", r#"{"ttl": "1m"}"#);
    let token = text(&held, "token");
    let addr = served.addr.clone();
    let waiter = std::thread::spawn(move || {
        request(
            &addr,
            "POST",
            "/v1/locks/q/acquire",
            None,
            r#"{"ttl": "1m", "wait": "30s"}"#,
        )
    });
    latchkey_testkit::eventually_blocking("the waiter waits", || {
        redis.command(&["GET", &key("q")]).unwrap() != token
    });
    let released_at = Instant::now();
    let (status, _) = served.post("/v1/locks/q/release", &json!({"token": token}).to_string());
    assert_eq!(status, 200);
    let (status, woken) = waiter.join().expect("the waiter");
    assert!(
        released_at.elapsed() < Duration::from_secs(5),
        "woken, not timed out"
    );
    assert_eq!((status, &woken["acquired"]), (200, &json!(true)), "{woken}");
    assert!(num(&woken, "fencing_token") > num(&held, "fencing_token"));
}

#[test]
fn a_path_or_body_axum_refuses_is_a_json_error_too_and_names_may_hold_slashes() {
    let redis = RedisServer::start();
    let served = Served::start(&redis, &[], &[]);
    let big = format!(r#"{{"ttl": "1m", "wait": "{}"}}"#, "9".repeat(70 * 1024));
    let (status, error) = served.post("/v1/locks/x/acquire", &big);
    assert_eq!(
        (status, text(&error, "code")),
        (413, "INVALID_INPUT".to_owned()),
        "{error}"
    );
    let (status, error) = served.post("/v1/locks/%FF/acquire", r#"{"ttl": "1m"}"#);
    assert_eq!(
        (status, text(&error, "code")),
        (400, "INVALID_INPUT".to_owned()),
        "{error}"
    );
    assert_eq!(dbsize(&redis), 0, "nothing taken");

    // A name is one segment, percent-encoded: slashes and all.
    let (status, held) = served.post("/v1/locks/repo%2Fsrc%2Fmain.rs/acquire", r#"{"ttl": "1m"}"#);
    assert_eq!((status, &held["acquired"]), (200, &json!(true)), "{held}");
    assert_eq!(text(&held, "name"), "repo/src/main.rs");
    assert!(exists(&redis, "repo/src/main.rs"));
}

#[test]
fn a_caller_that_hangs_up_drops_its_wait_and_never_takes_the_lock() {
    use std::io::Write;
    let redis = RedisServer::start();
    let served = Served::start(&redis, &[], &[]);
    let (_, held) = served.post("/v1/locks/gone/acquire", r#"{"ttl": "1m"}"#);
    let released_channel = format!("{{{PREFIX}gone}}:released");

    let body = r#"{"ttl": "1m", "wait": "30s"}"#;
    let mut caller = std::net::TcpStream::connect(&served.addr).expect("connect");
    write!(
        caller,
        "POST /v1/locks/gone/acquire HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    latchkey_testkit::eventually_blocking("the caller waits", || {
        redis.subscribers(&released_channel) >= 1
    });
    drop(caller);
    latchkey_testkit::eventually_blocking("the hung-up wait is dropped", || {
        redis.subscribers(&released_channel) == 0
    });
    let (status, _) = served.post(
        "/v1/locks/gone/release",
        &json!({"token": held["token"]}).to_string(),
    );
    assert_eq!(status, 200);
    assert!(
        !exists(&redis, "gone"),
        "nobody took it for a caller that hung up"
    );
}

#[test]
fn the_api_describes_itself_as_openapi_behind_the_same_tokens() {
    let redis = RedisServer::start();
    let served = Served::start(&redis, &[], &[("LATCHKEY_SERVE_TOKENS", "t")]);
    let (status, _) = served.request("GET", "/v1/openapi.json", None, "");
    assert_eq!(status, 401);
    let (status, doc) = served.request("GET", "/v1/openapi.json", Some("t"), "");
    assert_eq!(status, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    for path in [
        "/v1/locks/{name}/acquire",
        "/v1/locks/{name}/release",
        "/v1/signals/wait",
        "/v1/elections/{name}/leader",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} described");
    }
    assert!(
        doc["paths"].get("/v1/locks/{name}/revoke").is_none(),
        "not served, not described"
    );
}

#[test]
fn the_leader_of_an_election_is_read_over_http() {
    let redis = RedisServer::start();
    let served = Served::start(&redis, &[], &[]);
    let (status, none) = served.request("GET", "/v1/elections/scheduler/leader", None, "");
    assert_eq!(status, 200, "{none}");
    assert_eq!(
        (&none["name"], &none["leader"]),
        (&json!("scheduler"), &json!(false))
    );
    // A leader whose campaign value is known: the CLI's `elect`.
    let mut elected = latchkey(&redis)
        .args([
            "elect",
            "scheduler",
            "--value",
            "node-3",
            "--",
            "sleep",
            "60",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn latchkey elect");
    latchkey_testkit::eventually_blocking("someone leads", || {
        served
            .request("GET", "/v1/elections/scheduler/leader", None, "")
            .1["leader"]
            == true
    });
    let (_, led) = served.request("GET", "/v1/elections/scheduler/leader", None, "");
    let _ = elected.kill();
    let _ = elected.wait();
    assert_eq!(led["value"], "node-3", "{led}");
    assert!(num(&led, "term") > 0);
}

#[test]
fn a_leader_and_a_writer_over_http_are_seen_and_excluded_by_the_cli() {
    let redis = RedisServer::start();
    let served = Served::start(&redis, &[], &[]);
    let (status, led) = served.post(
        "/v1/elections/cron/elect",
        r#"{"value": "host-a", "ttl": "1m"}"#,
    );
    assert_eq!((status, &led["elected"]), (200, &json!(true)), "{led}");
    let cli = output(
        latchkey(&redis).args(["leader", "cron"]),
        Duration::from_secs(15),
    );
    assert!(stdout(&cli).contains("host-a"), "{}", stderr(&cli));
    let (status, other) = served.post("/v1/elections/cron/elect", r#"{"ttl": "1m"}"#);
    assert_eq!((status, &other["elected"]), (200, &json!(false)));
    assert_eq!(other["leader"]["value"], "host-a", "{other}");
    let resign = json!({"token": led["token"], "kind": "leader"}).to_string();
    let (status, _) = served.post("/v1/locks/cron/release", &resign);
    assert_eq!(status, 200);
    let (_, shown) = served.request("GET", "/v1/elections/cron/leader", None, "");
    assert_eq!(shown["leader"], false, "{shown}");

    let (status, writing) = served.post(
        "/v1/locks/books/acquire",
        r#"{"ttl": "1m", "access": "write"}"#,
    );
    assert_eq!(
        (status, &writing["kind"]),
        (200, &json!("write")),
        "{writing}"
    );
    let reader = output(
        latchkey(&redis).args(["run", "--read", "books", "--no-wait", "--", "true"]),
        Duration::from_secs(15),
    );
    assert_eq!(
        code(reader.status),
        1,
        "busy for a reader: {}",
        stderr(&reader)
    );
    // Released as what it is; the wrong kind is refused and changes nothing.
    let (status, wrong) = served.post(
        "/v1/locks/books/release",
        &json!({"token": writing["token"], "kind": "semaphore"}).to_string(),
    );
    assert_eq!((status, text(&wrong, "code")), (409, "NOT_HELD".to_owned()));
    let (status, unknown) = served.post(
        "/v1/locks/books/release",
        &json!({"token": writing["token"], "kind": "mutex"}).to_string(),
    );
    assert_eq!(
        (status, text(&unknown, "code")),
        (400, "INVALID_INPUT".to_owned())
    );
    let (status, _) = served.post(
        "/v1/locks/books/release",
        &json!({"token": writing["token"], "kind": "write"}).to_string(),
    );
    assert_eq!(status, 200);
    let reader = output(
        latchkey(&redis).args(["run", "--read", "books", "--no-wait", "--", "true"]),
        Duration::from_secs(15),
    );
    assert_eq!(code(reader.status), 0, "free: {}", stderr(&reader));
}
