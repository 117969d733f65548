//! `latchkey exporter`: Prometheus metrics of the locks in a Redis server.
//!
//! ```text
//! $ latchkey exporter --listen 127.0.0.1:9464 --long-held 5m 'billing:*' &
//! serving Prometheus metrics on http://127.0.0.1:9464/metrics
//! $ curl -s 127.0.0.1:9464/metrics | grep long_held
//! latchkey_locks_long_held{prefix="latchkey:"} 1
//! latchkey_lock_long_held_seconds{prefix="latchkey:",lock="billing:run",host="web-1",pid="4242"} 912.4
//! $ curl -s 127.0.0.1:9464/metrics | grep 'kind="semaphore"'
//! latchkey_primitives_active{prefix="latchkey:",kind="semaphore"} 1
//! latchkey_primitive_holders{prefix="latchkey:",kind="semaphore",name="billing:jobs"} 3
//! ```
//!
//! Every kind of primitive has series with a `kind` label
//! ([`Client::list_all`](latchkey::Client::list_all)); the `latchkey_lock*`
//! ones are the locks' (plain and fair) as before.
//!
//! Every `--scan-every` the exporter lists the locks matching PATTERN (the
//! library's [`Client::list_all`](latchkey::Client::list_all): `SCAN`, never
//! `KEYS`) and sets gauges from that snapshot; `metrics-exporter-prometheus`
//! serves them, with the process's own latchkey metrics, over its own HTTP
//! listener (any path; `/health` answers `OK`). The per-lock gauges carry the
//! lock name as a label: that is the operator's explicit choice here, unlike
//! in the library (see `docs/monitoring.md`).
//!
//! A gauge not set by a scan disappears from the output after two scan
//! intervals plus a second (the recorder's idle timeout): that is how a
//! released lock's series go away, and how every server-side gauge goes away
//! while Redis cannot be scanned (`latchkey_exporter_up` then says 0). The
//! exporter keeps running through Redis outages; it ends on SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use clap::Args;
use latchkey::inspect::{LockInfo, PrimitiveInfo};
use latchkey::Client;
use metrics::{counter, describe_counter, describe_gauge, gauge, Unit};
use metrics_exporter_prometheus::{ExporterFuture, Matcher, PrometheusBuilder, PrometheusRecorder};
use metrics_util::MetricKindMask;

use crate::support::duration;
use crate::support::exit::{self, Failure, Outcome};
use crate::support::stop::stop_signal;
use crate::support::target::Target;
use crate::support::text::escape;

mod kinds;

/// Gauge, label `prefix`: locks held now.
pub const LOCKS_HELD: &str = "latchkey_locks_held";
/// Gauge, label `prefix`: locks held longer than `--long-held`.
pub const LOCKS_LONG_HELD: &str = "latchkey_locks_long_held";
/// Gauge, labels `prefix`, `lock`: remaining TTL of each held lock; -1 for a
/// lock without a TTL (set by another client; it never expires by itself).
pub const LOCK_TTL: &str = "latchkey_lock_ttl_seconds";
/// Gauge, labels `prefix`, `lock`: how long each lock with a latchkey holder
/// has been held (by the holder's clock compared with the exporter's).
pub const LOCK_AGE: &str = "latchkey_lock_age_seconds";
/// Gauge, labels `prefix`, `lock`, `host`, `pid`: the age of each lock held
/// longer than `--long-held`: the list of suspects.
pub const LOCK_LONG_HELD: &str = "latchkey_lock_long_held_seconds";
/// Gauge: the `--long-held` threshold in force.
pub const LONG_HELD_THRESHOLD: &str = "latchkey_long_held_threshold_seconds";
/// Counter, label `outcome` = `ok` | `error`: scans of the server.
pub const SCANS: &str = "latchkey_exporter_scans_total";
/// Gauge: how long the last successful scan took.
pub const SCAN_DURATION: &str = "latchkey_exporter_scan_duration_seconds";
/// Gauge: 1 when the last scan succeeded, 0 when it failed.
pub const UP: &str = "latchkey_exporter_up";

#[derive(Args, Debug)]
pub struct ExporterArgs {
    /// Address of the HTTP listener serving Prometheus text.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9464")]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub scan: ScanArgs,
    /// Glob over lock names (Redis MATCH syntax: * ? [abc] \x).
    #[arg(default_value = "*")]
    pub pattern: String,
}

/// How the server's locks are scanned: the exporter's, and `latchkey
/// serve`'s for its `/metrics` (src/doors/http.rs).
#[derive(Args, Debug, Clone)]
pub struct ScanArgs {
    /// How often to scan the server's locks for the metrics.
    #[arg(long, value_name = "D", value_parser = duration::parse, default_value = "10s")]
    pub scan_every: Duration,
    /// Locks held longer than this are counted and listed as long-held.
    #[arg(long, value_name = "D", value_parser = duration::parse, default_value = "5m")]
    pub long_held: Duration,
}

impl ScanArgs {
    /// A usage error for a scan interval too short to be meant.
    pub fn check(&self) -> Result<(), Failure> {
        if self.scan_every < Duration::from_millis(10) {
            return Err(Failure::usage("--scan-every must be at least 10ms"));
        }
        Ok(())
    }

    /// The recorder's settings: a gauge no scan has set for two intervals
    /// (plus slack for a slow scan) belongs to a lock that is gone, or to a
    /// server we cannot scan, and disappears; seconds have the library's
    /// buckets.
    pub fn recorder(&self) -> Result<PrometheusBuilder, Failure> {
        let idle = self.scan_every * 2 + Duration::from_secs(1);
        PrometheusBuilder::new()
            .idle_timeout(MetricKindMask::GAUGE, Some(idle))
            .set_buckets_for_metric(
                Matcher::Suffix("_seconds".into()),
                latchkey::metrics::SECONDS_BUCKETS,
            )
            .map_err(|e| Failure::new(exit::INTERNAL, format!("metrics exporter: {e}")))
    }
}

/// Makes `recorder` the process's, with every metric described: the
/// library's (what this process's client does) and the scan's.
pub fn install(recorder: PrometheusRecorder) -> Result<(), Failure> {
    metrics::set_global_recorder(recorder)
        .map_err(|e| Failure::new(exit::INTERNAL, format!("metrics recorder: {e}")))?;
    latchkey::metrics::describe();
    describe();
    Ok(())
}

/// Scans one client's server: what sets the server-side gauges.
pub struct Scanner {
    client: Client,
    prefix: String,
    pattern: String,
    long_held: Duration,
    log: ScanLog,
}

impl Scanner {
    pub fn new(client: Client, pattern: String, scan: &ScanArgs) -> Scanner {
        let prefix = String::from_utf8_lossy(client.prefix()).into_owned();
        Scanner {
            client,
            prefix,
            pattern,
            long_held: scan.long_held,
            log: ScanLog::default(),
        }
    }

    /// One scan: lists every primitive and sets every server-side gauge
    /// from them (a failure: `latchkey_exporter_up` 0, one line on stderr).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: a scan dropped part-way leaves some gauges of this
    /// scan and some of the last, as a scan racing the locks would.
    pub async fn scan(&mut self) {
        scan(self).await;
    }
}

pub async fn exporter(target: &Target, args: ExporterArgs) -> Outcome {
    args.scan.check()?;
    let client = target.client("exporter").await?;
    let (listen, recorder, serve) = bind(args.listen, &args.scan)?;
    install(recorder)?;
    tokio::spawn(async move {
        if let Err(e) = serve.await {
            tracing::error!(error = ?e, "the metrics HTTP listener stopped");
        }
    });
    println!("serving Prometheus metrics on http://{listen}/metrics");

    let mut ticks = tokio::time::interval(args.scan.scan_every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let stop = stop_signal();
    tokio::pin!(stop);
    let mut scanner = Scanner::new(client, args.pattern, &args.scan);
    loop {
        tokio::select! {
            _ = &mut stop => return Ok(exit::OK),
            _ = ticks.tick() => scanner.scan().await,
        }
    }
}

/// The exporter's recorder and HTTP server, listening on `listen`; returns
/// the address it listens on. Port 0 means any free port: the Prometheus
/// crate binds inside `build` and does not tell which port it got, so a
/// free port is picked first (and picked again if another process takes it
/// in between).
fn bind(
    listen: SocketAddr,
    scan: &ScanArgs,
) -> Result<(SocketAddr, PrometheusRecorder, ExporterFuture), Failure> {
    let mut attempts = 0;
    loop {
        attempts += 1;
        let addr = if listen.port() == 0 {
            std::net::TcpListener::bind(listen)
                .and_then(|probe| probe.local_addr())
                .map_err(|e| Failure::usage(format!("cannot serve metrics on {listen}: {e}")))?
        } else {
            listen
        };
        let builder = scan.recorder()?.with_http_listener(addr);
        match builder.build() {
            Ok((recorder, serve)) => return Ok((addr, recorder, serve)),
            Err(_) if listen.port() == 0 && attempts < 5 => continue,
            Err(e) => {
                return Err(Failure::usage(format!(
                    "cannot serve metrics on {listen}: {e}"
                )))
            }
        }
    }
}

/// Scan failures, on stderr: the first of a run (and any that differs from
/// the last one printed), then one line when scans work again. Every scan
/// of a long outage would be noise; none would leave the operator blind
/// (tracing only shows with `-v`).
#[derive(Default)]
struct ScanLog {
    failing: Option<String>,
    /// Fencing counters already warned about: once each, not every scan.
    bad_counters: std::collections::HashSet<Vec<u8>>,
}

impl ScanLog {
    fn failed(&mut self, error: &latchkey::Error) {
        let message = error.to_string();
        if self.failing.as_ref() != Some(&message) {
            eprintln!("latchkey: warning: exporter scan failed: {message}");
        }
        tracing::warn!(error = %message, "scan failed");
        self.failing = Some(message);
    }

    fn succeeded(&mut self, prefix: &str, infos: &[&LockInfo]) {
        if self.failing.take().is_some() {
            eprintln!("latchkey: exporter scans work again");
        }
        for info in infos {
            if let Some(raw) = &info.bad_fencing_counter {
                if self.bad_counters.insert(info.name.clone()) {
                    let key = latchkey::protocol::fence_key(
                        &[prefix.as_bytes(), &info.name[..]].concat(),
                    );
                    eprintln!(
                        "latchkey: warning: fencing counter \"{}\" holds \"{}\", \
                         not a fencing token; the lock is exported without it",
                        escape(&key),
                        escape(raw)
                    );
                }
            }
        }
    }
}

/// One scan: lists every primitive and sets every server-side gauge from them.
async fn scan(scanner: &mut Scanner) {
    let Scanner {
        client,
        prefix,
        pattern,
        long_held: threshold,
        log,
    } = scanner;
    let (prefix, threshold) = (prefix.as_str(), *threshold);
    let started = Instant::now();
    let all = match client.list_all(pattern.as_str()).await {
        Ok(infos) => infos,
        Err(e) => {
            log.failed(&e);
            counter!(SCANS, "outcome" => "error").increment(1);
            gauge!(UP).set(0.0);
            return;
        }
    };
    let infos: Vec<&LockInfo> = all
        .iter()
        .filter_map(|info| match info {
            PrimitiveInfo::Lock(lock) => Some(lock),
            PrimitiveInfo::FairLock(fair) => Some(&fair.lock),
            _ => None,
        })
        .collect();
    log.succeeded(prefix, &infos);
    kinds::export(prefix, &all, threshold);
    let held: Vec<&LockInfo> = infos.into_iter().filter(|info| info.held).collect();
    let mut long_held = 0usize;
    for info in &held {
        let lock = String::from_utf8_lossy(&info.name).into_owned();
        let ttl = info.ttl.map_or(-1.0, |ttl| ttl.as_secs_f64());
        gauge!(LOCK_TTL, "prefix" => prefix.to_owned(), "lock" => lock.clone()).set(ttl);
        let (Some(age), Some(holder)) = (info.age, &info.holder) else {
            continue;
        };
        gauge!(LOCK_AGE, "prefix" => prefix.to_owned(), "lock" => lock.clone())
            .set(age.as_secs_f64());
        if age > threshold {
            long_held += 1;
            gauge!(
                LOCK_LONG_HELD,
                "prefix" => prefix.to_owned(),
                "lock" => lock,
                "host" => holder.host.clone(),
                "pid" => holder.pid.to_string()
            )
            .set(age.as_secs_f64());
        }
    }
    gauge!(LOCKS_HELD, "prefix" => prefix.to_owned()).set(held.len() as f64);
    gauge!(LOCKS_LONG_HELD, "prefix" => prefix.to_owned()).set(long_held as f64);
    gauge!(LONG_HELD_THRESHOLD).set(threshold.as_secs_f64());
    gauge!(SCAN_DURATION).set(started.elapsed().as_secs_f64());
    gauge!(UP).set(1.0);
    counter!(SCANS, "outcome" => "ok").increment(1);
}

fn describe() {
    describe_gauge!(LOCKS_HELD, "Locks held now (server-side scan).");
    describe_gauge!(LOCKS_LONG_HELD, "Locks held longer than --long-held.");
    describe_gauge!(
        LOCK_TTL,
        Unit::Seconds,
        "Remaining TTL of each held lock (-1: no TTL)."
    );
    describe_gauge!(LOCK_AGE, Unit::Seconds, "How long each lock has been held.");
    describe_gauge!(
        LOCK_LONG_HELD,
        Unit::Seconds,
        "Age of each lock held longer than --long-held, with its holder."
    );
    kinds::describe();
    describe_gauge!(
        LONG_HELD_THRESHOLD,
        Unit::Seconds,
        "The --long-held threshold."
    );
    describe_counter!(
        SCANS,
        "Scans of the server's locks, by outcome (ok, error)."
    );
    describe_gauge!(
        SCAN_DURATION,
        Unit::Seconds,
        "How long the last successful scan took."
    );
    describe_gauge!(UP, "1 when the last scan of the server succeeded, else 0.");
}

#[cfg(test)]
mod tests {
    use super::kinds::*;
    use super::*;
    use latchkey::metrics as lib;

    const EVERY_METRIC: [&str; 26] = [
        lib::ACQUISITIONS,
        lib::ACQUIRE_WAIT,
        lib::HOLD,
        lib::HANDOFF,
        lib::RENEWALS,
        lib::RENEWAL_ROUND_TRIPS,
        lib::LOCKS_LOST,
        lib::RELEASES,
        lib::COUNT_DOWNS,
        lib::SIGNALS_SENT,
        lib::SIGNALS_RECEIVED,
        lib::REDIS_ERRORS,
        LOCKS_HELD,
        LOCKS_LONG_HELD,
        LOCK_TTL,
        LOCK_AGE,
        LOCK_LONG_HELD,
        PRIMITIVES_ACTIVE,
        PRIMITIVE_HOLDERS,
        PRIMITIVE_WAITING,
        PRIMITIVE_AGE,
        PRIMITIVE_LONG_HELD,
        LONG_HELD_THRESHOLD,
        SCANS,
        SCAN_DURATION,
        UP,
    ];

    /// Every `latchkey_*` word in `text`.
    fn metric_names(text: &str) -> std::collections::BTreeSet<&str> {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|word| word.starts_with("latchkey_"))
            .collect()
    }

    #[test]
    fn the_docs_name_every_metric_and_the_dashboard_no_other() {
        let docs = include_str!("../../../../../docs/monitoring.md");
        for name in EVERY_METRIC {
            assert!(
                docs.contains(&format!("`{name}`")),
                "docs/monitoring.md lacks {name}"
            );
        }
        let dashboard = include_str!("../../../../../docs/grafana-latchkey.json");
        let json: serde_json::Value = serde_json::from_str(dashboard).expect("valid JSON");
        let panels = json["panels"].as_array().expect("panels");
        let mut used = 0;
        for panel in panels {
            for target in panel["targets"].as_array().into_iter().flatten() {
                let expr = target["expr"].as_str().expect("expr");
                for name in metric_names(expr) {
                    let base = name.strip_suffix("_bucket").unwrap_or(name);
                    assert!(
                        EVERY_METRIC.contains(&base),
                        "the dashboard uses unknown {name}"
                    );
                    used += 1;
                }
            }
        }
        assert!(used >= 10, "the dashboard queries only {used} metrics");
    }
}
