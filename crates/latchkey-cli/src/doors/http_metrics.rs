//! `GET /metrics` on `latchkey serve`: the Prometheus text `latchkey
//! exporter` serves (the same recorder settings, the same scan of the
//! server's locks: `commands/exporter`), on the door's listener and behind
//! its bearer tokens and TLS, plus the library's metrics of what this
//! process's own client did (acquisitions, releases, Redis errors).
//!
//! The scan runs every `--scan-every` whether or not anyone scrapes, as the
//! exporter's does: a gauge no scan set for two intervals disappears, which
//! is how a released lock's series go away, so scanning at scrape time
//! would leave them up to two scrapes late.

use std::sync::Arc;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use metrics::{counter, gauge};
use metrics_exporter_prometheus::PrometheusHandle;

use super::Redis;
use crate::commands::exporter::{self, ScanArgs, Scanner, SCANS, UP};
use crate::support::exit::Failure;

/// Prometheus's text exposition format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Installs the exporter's recorder as the process's and starts scanning
/// `redis`'s locks every `scan.scan_every`; the handle renders the text.
pub fn start(redis: Arc<Redis>, scan: ScanArgs) -> Result<PrometheusHandle, Failure> {
    scan.check()?;
    let recorder = scan.recorder()?.build_recorder();
    let handle = recorder.handle();
    exporter::install(recorder)?;
    tokio::spawn(scanning(redis, scan, handle.clone()));
    Ok(handle)
}

/// Every `--scan-every`: the recorder's upkeep (histograms) and a scan, once
/// the door's client connects (until then, each tick is a failed scan).
async fn scanning(redis: Arc<Redis>, scan: ScanArgs, handle: PrometheusHandle) {
    let mut ticks = tokio::time::interval(scan.scan_every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut scanner: Option<Scanner> = None;
    loop {
        ticks.tick().await;
        handle.run_upkeep();
        let scanner = match &mut scanner {
            Some(scanner) => scanner,
            None => match redis.client().await {
                Ok(client) => scanner.insert(Scanner::new(client, "*".into(), &scan)),
                Err(e) => {
                    tracing::warn!(error = %e.message, "serve: metrics scan cannot connect");
                    counter!(SCANS, "outcome" => "error").increment(1);
                    gauge!(UP).set(0.0);
                    continue;
                }
            },
        };
        scanner.scan().await;
    }
}

/// The `/metrics` reply.
pub fn render(handle: &PrometheusHandle) -> Response {
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], handle.render()).into_response()
}
