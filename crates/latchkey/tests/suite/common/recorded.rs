//! The recorder side of the metrics tests (`cross/metrics.rs`, the
//! watchdog's batches): what a test recorded, by series.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use latchkey::{Client, MetricsLabels};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

/// A metric with its labels, as `name{k=v,...}` (labels sorted).
type Series = String;

/// What a test recorded, summed over snapshots (a snapshot drains counters).
#[derive(Default, Debug)]
pub struct Recorded {
    pub counters: BTreeMap<Series, u64>,
    pub histograms: BTreeMap<Series, Vec<f64>>,
}

impl Recorded {
    pub fn add(&mut self, snapshotter: &Snapshotter) {
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            let key = key.key();
            let mut labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            let series = format!("{}{{{}}}", key.name(), labels.join(","));
            match value {
                DebugValue::Counter(n) => *self.counters.entry(series).or_default() += n,
                DebugValue::Histogram(values) => self
                    .histograms
                    .entry(series)
                    .or_default()
                    .extend(values.into_iter().map(|v| v.into_inner())),
                DebugValue::Gauge(_) => {}
            }
        }
    }

    pub fn counter(&self, series: &str) -> u64 {
        self.counters.get(series).copied().unwrap_or(0)
    }

    /// A counter by its series (`name{k=v,...}`), or a bare name's counters
    /// summed over every series.
    pub fn sum(&self, series_or_name: &str) -> u64 {
        match series_or_name.contains('{') {
            true => self.counter(series_or_name),
            false => self.counters_of(series_or_name).values().sum(),
        }
    }

    pub fn histogram(&self, series: &str) -> &[f64] {
        self.histograms.get(series).map_or(&[], Vec::as_slice)
    }

    /// The counters whose series start with `name{`, as `series n`.
    pub fn listed(&self, name: &str) -> Vec<String> {
        let counters = self.counters_of(name).into_iter();
        counters
            .map(|(series, n)| format!("{series} {n}"))
            .collect()
    }

    /// The counters whose series start with `name{`.
    pub fn counters_of(&self, name: &str) -> BTreeMap<&str, u64> {
        let prefix = format!("{name}{{");
        self.counters
            .iter()
            .filter(|(series, _)| series.starts_with(&prefix))
            .map(|(series, n)| (series.as_str(), *n))
            .collect()
    }
}

/// Runs `test` on a current-thread runtime with a fresh local recorder.
pub fn recorded<F: Future<Output = ()>>(test: impl FnOnce(Snapshotter) -> F) {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || runtime.block_on(test(snapshotter)));
}

pub async fn client_with(url: &str, labels: MetricsLabels) -> Client {
    Client::builder(url)
        .prefix("test:")
        .command_timeout(Duration::from_millis(500))
        .metrics_labels(labels)
        .connect()
        .await
        .unwrap()
}
