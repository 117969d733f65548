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
