//! Small statistics and table helpers shared by the scenarios.
//!
//! Loopback round trips on a small shared VM swing 2–5x between runs, so the
//! scenarios interleave what they compare (A B A B …), repeat, and report
//! medians and ratios measured in the same run; absolute numbers are printed
//! for context only.

use std::time::Duration;

/// The `q`-quantile (0.0..=1.0) of `samples` (sorted in place). Zero when empty.
pub fn quantile(samples: &mut [Duration], q: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort_unstable();
    let i = ((samples.len() - 1) as f64 * q).round() as usize;
    samples[i]
}

/// Median of plain numbers (sorted in place). Zero when empty.
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

/// Microseconds with one decimal, for tables.
pub fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

/// A markdown table: a header row and rows of cells.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!("| {} |\n", header.join(" | "));
    out.push_str(&format!("|{}\n", "---|".repeat(header.len())));
    for row in rows {
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

/// Nanoseconds on `CLOCK_MONOTONIC`, the clock every driver process (Rust,
/// Python's `time.monotonic_ns`, Node's `process.hrtime`) reads on Linux, so
/// events recorded in different processes can be merged into one timeline.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// Handoff gaps from the events of one or more processes sharing a lock:
/// `acquired` (a holder has the lock) and `released` (a holder starts to
/// release) timestamps in [`mono_ns`] nanoseconds. Mutual exclusion makes
/// the merged timeline alternate acquired, released, acquired, …; a gap is
/// a release followed by the next acquisition.
pub fn gaps(acquired: &[u64], released: &[u64]) -> Vec<Duration> {
    let mut events: Vec<(u64, bool)> = acquired
        .iter()
        .map(|&t| (t, true))
        .chain(released.iter().map(|&t| (t, false)))
        .collect();
    events.sort_unstable();
    events
        .windows(2)
        .filter_map(|w| match (w[0], w[1]) {
            ((r, false), (a, true)) => Some(Duration::from_nanos(a - r)),
            _ => None,
        })
        .collect()
}

/// CPU time a process has used so far, all threads (`/proc/PID/task/*/schedstat`,
/// nanosecond resolution). `None` where that is not available.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = 0u64;
    for task in tasks.flatten() {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        total += stat
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(Duration::from_nanos(total))
}
