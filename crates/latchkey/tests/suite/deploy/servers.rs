//! The servers latchkey runs on: the one under test is the one
//! `LATCHKEY_TEST_SERVER` names (so the cross-server runs of `./dev test`
//! really test Redis 8.2, Valkey 8.1 and Valkey 9.1), and a server too old
//! for latchkey (Redis 6.2: no `SET … NX … GET`) is refused at connect
//! with one line, before anything is written.

use latchkey::Error;
use latchkey_testkit::{servers_required, RedisServer, ServerProgram};

/// The fetched server `name`, or `None` with a note (a failure where
/// `./dev test` promised every server).
fn fetched(name: &str) -> Option<ServerProgram> {
    let found = ServerProgram::fetched(name);
    if found.is_none() {
        assert!(
            !servers_required(),
            "{name} is missing although LATCHKEY_REQUIRE_SERVERS=1: run ./dev servers"
        );
        eprintln!("note: {name} is not fetched (./dev servers): this test is skipped");
    }
    found
}

#[tokio::test]
async fn redis_6_2_is_refused_at_connect_naming_its_version() {
    let Some(old) = fetched("redis-6.2") else {
        return;
    };
    let redis = RedisServer::builder().program(old).start();
    let err = latchkey::Client::connect(&redis.url()).await.unwrap_err();
    assert!(
        matches!(&err, Error::UnsupportedServer { server: "Redis", version, .. } if version.starts_with("6.2.")),
        "{err:?}"
    );
    assert!(!err.is_transient(), "upgrading is the only fix");
    let line = err.to_string();
    assert!(!line.contains('\n'), "one line: {line:?}");
    assert!(
        line.starts_with("Redis 6.2.")
            && line.contains(&format!("127.0.0.1:{}", redis.port()))
            && line.ends_with(
                "is not supported: latchkey needs Redis 7.0 or later, or Valkey 7.2 or later"
            ),
        "{line}"
    );
    // Refused before anything was written (the INFO probe only).
    assert_eq!(redis.command(&["DBSIZE"]).unwrap(), "0");
    let calls = redis.command(&["INFO", "commandstats"]).unwrap();
    for written in ["cmdstat_set:", "cmdstat_evalsha:", "cmdstat_eval:"] {
        assert!(!calls.contains(written), "{written} sent: {calls}");
    }
}

#[tokio::test]
async fn the_server_under_test_is_the_one_named() {
    let named = ServerProgram::name_of_this_run();
    let redis = RedisServer::start();
    let info = redis.command(&["INFO", "server"]).unwrap();
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
            .map(str::to_owned)
    };
    let (product, version) = match named.split_once('-') {
        // The default is whatever `redis-server` is on PATH (7.0 on Debian 12).
        _ if named == "redis-7.0" => ("redis", "7"),
        Some((product @ ("redis" | "valkey"), version)) => (product, version),
        // A path: nothing promised but that it runs.
        _ => ("", ""),
    };
    let reported = match product {
        "valkey" => field("valkey_version"),
        "redis" => field("redis_version").filter(|_| field("valkey_version").is_none()),
        _ => field("redis_version"),
    };
    let reported = reported.unwrap_or_else(|| panic!("{named}: INFO server says {info}"));
    assert!(
        reported.starts_with(&format!("{version}.")) || version.is_empty(),
        "LATCHKEY_TEST_SERVER={named}, but the server reports {product} {reported}"
    );
    // And latchkey takes it: a lock round trip.
    let client = latchkey::Client::connect(&redis.url()).await.unwrap();
    let lock = client
        .lock("servers-probe", std::time::Duration::from_secs(5))
        .unwrap();
    let guard = lock.try_acquire().await.unwrap().expect("free");
    assert_eq!(guard.release().await.unwrap(), latchkey::Ownership::Owned);
}
