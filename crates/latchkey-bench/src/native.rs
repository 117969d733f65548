//! Scenario `native`: would a release or an extension through Valkey 9's
//! own compare-and-set commands (`DELIFEQ key token`, `SET key token IFEQ
//! token PX ttl`) beat latchkey's scripts (`release.lua`, `extend.lua`
//! through `EVALSHA`)? Measured on Valkey 9.1, with the scripts on this
//! run's server (Redis 7.0 by default) beside it.
//!
//! One connection per server, one request in flight, so a figure is one
//! round trip: the client's median latency per operation, and the server's
//! own cost per call (`INFO commandstats` `usec_per_call`, after `CONFIG
//! RESETSTAT`). Each round runs every variant once, in an order rotated
//! per round; the ratios (native / script, on Valkey 9.1) are per round,
//! and the table shows their medians.
//!
//! The native commands do less than the scripts: `DELIFEQ` compares one
//! exact value (the script also accepts the token with a waiter's `+w`
//! mark, then publishes the wake-up, and tells "expired" from "someone
//! else's"), and `SET … IFEQ` rewrites the value (a marked token must be
//! compared and written marked). So what is measured is their best case,
//! an unmarked lock: if that does not pay, nothing does. No target: this
//! is a measurement for a decision (bench/RESULTS.md, "Native
//! compare-and-set").

use std::time::{Duration, Instant};

use latchkey_testkit::{RedisServer, ServerProgram};
use redis::aio::MultiplexedConnection;

use crate::stats::{median, quantile, table};
use crate::Report;

/// The release script as the library sends it.
fn release_lua() -> &'static str {
    latchkey::protocol::script_text("release.lua").expect("the release script")
}
/// The extend script as the library sends it.
fn extend_lua() -> &'static str {
    latchkey::protocol::script_text("extend.lua").expect("the extend script")
}
/// The shape and length of a latchkey token.
const TOKEN: &str = "lk2:0123456789abcdef0123456789abcdef:1700000000000:12345:bench-host";
const KEY: &str = "latchkey:native-bench";
const CHANNEL: &str = "{latchkey:native-bench}:released";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Variant {
    /// `EVALSHA release.lua` on Valkey 9.1.
    ReleaseScript,
    /// `DELIFEQ` on Valkey 9.1.
    ReleaseNative,
    /// `EVALSHA release.lua` on this run's server.
    ReleaseScriptOther,
    /// `EVALSHA extend.lua` on Valkey 9.1.
    ExtendScript,
    /// `SET … IFEQ … PX` on Valkey 9.1.
    ExtendNative,
    /// `EVALSHA extend.lua` on this run's server.
    ExtendScriptOther,
}

const VARIANTS: [Variant; 6] = [
    Variant::ReleaseScript,
    Variant::ReleaseNative,
    Variant::ReleaseScriptOther,
    Variant::ExtendScript,
    Variant::ExtendNative,
    Variant::ExtendScriptOther,
];

impl Variant {
    /// The command whose `usec_per_call` is the server's cost.
    fn stat(self) -> &'static str {
        match self {
            Variant::ReleaseNative => "cmdstat_delifeq",
            Variant::ExtendNative => "cmdstat_set",
            _ => "cmdstat_evalsha",
        }
    }

    fn on_valkey(self) -> bool {
        !matches!(
            self,
            Variant::ReleaseScriptOther | Variant::ExtendScriptOther
        )
    }
}

/// One round's figures of a variant: client median, server µs per call.
#[derive(Clone, Copy, Default)]
struct Figure {
    client: Duration,
    server_us: f64,
}

pub fn run(quick: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Report>>> {
    Box::pin(scenario(quick))
}

async fn scenario(quick: bool) -> Report {
    let title =
        "Native compare-and-set (Valkey 9.1 DELIFEQ / SET IFEQ) against the scripts".to_owned();
    let Some(valkey) = ServerProgram::fetched("valkey-9.1") else {
        return Report {
            title,
            body: "Skipped: Valkey 9.1 is not fetched (`./dev servers`).\n".to_owned(),
            missed: Vec::new(),
        };
    };
    let other_name = ServerProgram::name_of_this_run();
    let v9 = RedisServer::builder().program(valkey).start();
    let other = RedisServer::start();
    let mut v9c = connect(&v9).await;
    let mut otherc = connect(&other).await;
    let release = redis::Script::new(release_lua());
    let extend = redis::Script::new(extend_lua());
    let (rounds, n) = if quick { (3, 1_000) } else { (9, 5_000) };
    let mut figures: Vec<[Figure; 6]> = Vec::new();
    for round in 0..rounds {
        let mut row = [Figure::default(); 6];
        for i in 0..VARIANTS.len() {
            let at = (i + round) % VARIANTS.len();
            let variant = VARIANTS[at];
            let conn = if variant.on_valkey() {
                &mut v9c
            } else {
                &mut otherc
            };
            row[at] = measure(conn, variant, n, &release, &extend).await;
        }
        figures.push(row);
    }
    let med = |at: usize, f: fn(&Figure) -> f64| {
        let mut values: Vec<f64> = figures.iter().map(|row| f(&row[at])).collect();
        median(&mut values)
    };
    let client_us = |fig: &Figure| fig.client.as_secs_f64() * 1e6;
    let server_us = |fig: &Figure| fig.server_us;
    let ratio = |native: usize, script: usize, f: fn(&Figure) -> f64| {
        let mut values: Vec<f64> = figures
            .iter()
            .map(|row| f(&row[native]) / f(&row[script]))
            .collect();
        median(&mut values)
    };
    let rows = vec![
        vec![
            "release".to_owned(),
            format!("{:.1}", med(0, client_us)),
            format!("{:.1}", med(1, client_us)),
            format!("{:.2}x", ratio(1, 0, client_us)),
            format!("{:.2}", med(0, server_us)),
            format!("{:.2}", med(1, server_us)),
            format!("{:.2}x", ratio(1, 0, server_us)),
            format!("{:.1} / {:.2}", med(2, client_us), med(2, server_us)),
        ],
        vec![
            "extend".to_owned(),
            format!("{:.1}", med(3, client_us)),
            format!("{:.1}", med(4, client_us)),
            format!("{:.2}x", ratio(4, 3, client_us)),
            format!("{:.2}", med(3, server_us)),
            format!("{:.2}", med(4, server_us)),
            format!("{:.2}x", ratio(4, 3, server_us)),
            format!("{:.1} / {:.2}", med(5, client_us), med(5, server_us)),
        ],
    ];
    let other_header = format!("script on {other_name}: client µs / server µs");
    let header = [
        "operation",
        "Valkey 9.1 script: client µs",
        "native: client µs",
        "native / script (client)",
        "script: server µs/call",
        "native: server µs/call",
        "native / script (server)",
        other_header.as_str(),
    ];
    let body = format!(
        "{}\nOne connection, one request in flight; {n} operations per variant per round, \
         {rounds} rounds, variants interleaved (order rotated per round); medians of per-round \
         medians, ratios per round. Client µs: the round trip's median. Server µs/call: `INFO \
         commandstats` after `CONFIG RESETSTAT`. The native commands' best case (an unmarked \
         lock): `DELIFEQ` neither accepts the waiter's `+w` mark nor publishes the wake-up, \
         and `SET … IFEQ` rewrites the value.\n",
        table(&header, &rows)
    );
    Report {
        title,
        body,
        missed: Vec::new(),
    }
}

async fn connect(server: &RedisServer) -> MultiplexedConnection {
    redis::Client::open(server.url())
        .expect("a test kit URL")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to a private server")
}

/// `n` operations of `variant`, each checked (an operation that did not do
/// what it should fails the bench rather than timing a no-op).
async fn measure(
    conn: &mut MultiplexedConnection,
    variant: Variant,
    n: usize,
    release: &redis::Script,
    extend: &redis::Script,
) -> Figure {
    let releasing = matches!(
        variant,
        Variant::ReleaseScript | Variant::ReleaseNative | Variant::ReleaseScriptOther
    );
    if !releasing {
        // Before the reset: `SET … IFEQ` is counted as `set` too.
        take(conn).await;
    }
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(conn)
        .await
        .expect("CONFIG RESETSTAT");
    let mut samples = Vec::with_capacity(n);
    // The script is loaded before timing (redis-rs sends EVALSHA, then
    // loads it on NOSCRIPT once).
    for _ in 0..n {
        if releasing {
            take(conn).await;
        }
        let sent = Instant::now();
        let done: i64 = match variant {
            Variant::ReleaseScript | Variant::ReleaseScriptOther => release
                .key(KEY)
                .arg(TOKEN)
                .arg(CHANNEL)
                .arg("PUBLISH")
                .invoke_async(conn)
                .await
                .expect("release script"),
            Variant::ReleaseNative => redis::cmd("DELIFEQ")
                .arg(KEY)
                .arg(TOKEN)
                .query_async(conn)
                .await
                .expect("DELIFEQ"),
            Variant::ExtendScript | Variant::ExtendScriptOther => extend
                .key(KEY)
                .arg(TOKEN)
                .arg(30_000)
                .invoke_async(conn)
                .await
                .expect("extend script"),
            Variant::ExtendNative => {
                let reply: Option<String> = redis::cmd("SET")
                    .arg(KEY)
                    .arg(TOKEN)
                    .arg("IFEQ")
                    .arg(TOKEN)
                    .arg("PX")
                    .arg(30_000)
                    .query_async(conn)
                    .await
                    .expect("SET IFEQ");
                i64::from(reply.as_deref() == Some("OK"))
            }
        };
        samples.push(sent.elapsed());
        assert_eq!(done, 1, "{variant:?} did not release or extend");
    }
    if !releasing {
        let _: i64 = redis::cmd("DEL")
            .arg(KEY)
            .query_async(conn)
            .await
            .expect("DEL");
    }
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO commandstats");
    let server_us = stats
        .lines()
        .find_map(|line| line.strip_prefix(variant.stat())?.strip_prefix(':'))
        .and_then(|fields| {
            fields
                .split(',')
                .find_map(|f| f.strip_prefix("usec_per_call="))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN);
    Figure {
        client: quantile(&mut samples, 0.5),
        server_us,
    }
}

/// Takes the bench lock (plain `SET NX PX`, as an acquisition), untimed.
async fn take(conn: &mut MultiplexedConnection) {
    let taken: Option<String> = redis::cmd("SET")
        .arg(KEY)
        .arg(TOKEN)
        .arg("NX")
        .arg("PX")
        .arg(30_000)
        .query_async(conn)
        .await
        .expect("SET NX PX");
    assert_eq!(taken.as_deref(), Some("OK"), "the bench lock was free");
}
