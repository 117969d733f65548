//! The library's metrics (the `metrics` facade: docs/monitoring.md),
//! recorded in this process for Python to read: counters and fixed-bucket
//! histograms. A recorder of its own rather than metrics-util's registry:
//! that one keeps every histogram sample until someone drains it, which a
//! process nobody scrapes would pile up forever; fixed buckets
//! (`latchkey::metrics::SECONDS_BUCKETS`, the library's own advice) cost a
//! few words a series, whatever the traffic.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// One histogram: a count per bucket (the last one above every bound),
/// their sum and count.
struct Buckets {
    counts: Vec<AtomicU64>,
    /// The sum of the values, as f64 bits (updated by compare-and-swap).
    sum: AtomicU64,
}

impl Buckets {
    fn new() -> Buckets {
        Buckets {
            counts: (0..=latchkey::metrics::SECONDS_BUCKETS.len())
                .map(|_| AtomicU64::new(0))
                .collect(),
            sum: AtomicU64::new(0f64.to_bits()),
        }
    }
}

impl HistogramFn for Buckets {
    fn record(&self, value: f64) {
        let bounds = latchkey::metrics::SECONDS_BUCKETS;
        let at = bounds.partition_point(|&le| le < value);
        self.counts[at].fetch_add(1, Ordering::Relaxed);
        let _ = self
            .sum
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + value).to_bits())
            });
    }
}

#[derive(Default)]
struct Series {
    counters: HashMap<Key, Arc<AtomicU64>>,
    histograms: HashMap<Key, Arc<Buckets>>,
    help: HashMap<String, String>,
}

/// This process's recorder (the facade's global one, from the import on).
struct Registry(LazyLock<Mutex<Series>>);

static REGISTRY: Registry = Registry(LazyLock::new(Mutex::default));

impl Registry {
    fn series(&self) -> std::sync::MutexGuard<'_, Series> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn describe(&self, key: KeyName, description: SharedString) {
        self.series()
            .help
            .insert(key.as_str().to_owned(), description.into_owned());
    }
}

impl Recorder for Registry {
    fn describe_counter(&self, key: KeyName, _: Option<Unit>, description: SharedString) {
        self.describe(key, description);
    }

    fn describe_gauge(&self, key: KeyName, _: Option<Unit>, description: SharedString) {
        self.describe(key, description);
    }

    fn describe_histogram(&self, key: KeyName, _: Option<Unit>, description: SharedString) {
        self.describe(key, description);
    }

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut series = self.series();
        let counter = series.counters.entry(key.clone()).or_default().clone();
        Counter::from_arc(counter)
    }

    /// The library records no gauge (the server-side view has them:
    /// `latchkey exporter`).
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut series = self.series();
        let buckets = series
            .histograms
            .entry(key.clone())
            .or_insert_with(|| Arc::new(Buckets::new()));
        Histogram::from_arc(buckets.clone())
    }
}

thread_local! {
    /// The registry's lock, held by the forking thread across a fork.
    static FORKING: std::cell::RefCell<Option<std::sync::MutexGuard<'static, Series>>> =
        const { std::cell::RefCell::new(None) };
}

/// Takes the registry's lock just before a fork (see mod.rs).
pub(super) fn hold_for_fork() {
    FORKING.with(|held| *held.borrow_mut() = Some(REGISTRY.series()));
}

/// Gives it back just after, in the parent and in the child.
pub(super) fn release_after_fork() {
    FORKING.with(|held| drop(held.borrow_mut().take()));
}

/// Makes this process's recorder the facade's (once; a recorder someone
/// else installed first is left in place) and describes the metrics.
pub(super) fn install() {
    if metrics::set_global_recorder(&REGISTRY).is_ok() {
        latchkey::metrics::describe();
    }
}

fn labels<'py>(py: Python<'py>, key: &Key) -> PyResult<Bound<'py, PyDict>> {
    let labels = PyDict::new(py);
    for label in key.labels() {
        labels.set_item(label.key(), label.value())?;
    }
    Ok(labels)
}

/// Every series recorded so far: `(name, type, help, labels, value)`,
/// where a counter's value is its count and a histogram's is
/// `(count, sum, [(upper bound, cumulative count), ...])` (the last bound
/// is infinity). python/latchkey/_metrics.py shapes it.
#[pyfunction]
pub(crate) fn _metrics_snapshot(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    type Counted = (Key, u64);
    type Bucketed = (Key, Vec<u64>, f64);
    let (counters, histograms, help): (Vec<Counted>, Vec<Bucketed>, HashMap<String, String>) = {
        let series = REGISTRY.series();
        (
            series
                .counters
                .iter()
                .map(|(k, v)| (k.clone(), v.load(Ordering::Relaxed)))
                .collect(),
            series
                .histograms
                .iter()
                .map(|(k, b)| {
                    let counts = b.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
                    (
                        k.clone(),
                        counts,
                        f64::from_bits(b.sum.load(Ordering::Relaxed)),
                    )
                })
                .collect(),
            series.help.clone(),
        )
    };
    let out = PyList::empty(py);
    let row = |key: &Key, kind: &str, value: Bound<'_, PyAny>| -> PyResult<()> {
        let help = help.get(key.name()).cloned().unwrap_or_default();
        out.append((key.name(), kind, help, labels(py, key)?, value))
    };
    for (key, count) in counters {
        row(&key, "counter", count.into_pyobject(py)?.into_any())?;
    }
    let bounds = latchkey::metrics::SECONDS_BUCKETS
        .iter()
        .copied()
        .chain([f64::INFINITY]);
    for (key, counts, sum) in histograms {
        let mut cumulative = 0;
        let buckets: Vec<(f64, u64)> = bounds
            .clone()
            .zip(counts)
            .map(|(le, n)| {
                cumulative += n;
                (le, cumulative)
            })
            .collect();
        let value = (cumulative, sum, buckets).into_pyobject(py)?.into_any();
        row(&key, "histogram", value)?;
    }
    Ok(out)
}
