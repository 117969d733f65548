//! The report: the figures of every scenario as one aligned table.
//!
//! ```text
//! scenario       faults holds  writes overlap lost-upd stale-acc stale-rej tokens recovery max/bound  lost() on time  slow wake-ups  verdict
//! pause               9   212     203       0        0         0         9 ok          1.13s/2.75s       3/9             0  PASS
//! control (unfenced)  9   208     201       7        7         7         0 ok          1.09s/2.75s       0/9             0  VIOLATIONS SHOWN (expected)
//! ```

use std::fmt::Write as _;
use std::time::Duration;

use crate::checker::{Figures, Limits, Verdict};

/// One row of the report: a scenario that ran, or one that was skipped.
#[derive(Debug, Clone)]
pub struct Row {
    pub scenario: String,
    pub outcome: Result<(Figures, Verdict), String>,
}

const HEADER: [&str; 13] = [
    "scenario",
    "faults",
    "holds",
    "writes",
    "overlaps",
    "lost upd",
    "stale acc",
    "stale rej",
    "tokens",
    "recovery max/bound",
    "lost() on time",
    "slow wake-ups",
    "verdict",
];

/// The table, aligned, one row per scenario.
pub fn table(rows: &[Row], limits: &Limits) -> String {
    let mut cells: Vec<Vec<String>> = vec![HEADER.iter().map(|h| h.to_string()).collect()];
    for row in rows {
        let mut line = vec![row.scenario.clone()];
        match &row.outcome {
            Ok((f, verdict)) => {
                let recovery = match f.recoveries.iter().max() {
                    Some(worst) => format!("{}/{}", secs(*worst), secs(limits.recovery)),
                    None => "-".into(),
                };
                let lost = if f.lost_fired == 0 {
                    "-".into()
                } else {
                    format!("{}/{}", f.lost_on_time, f.lost_fired)
                };
                line.extend([
                    f.faults.to_string(),
                    f.holds.to_string(),
                    f.writes_accepted.to_string(),
                    f.overlaps.to_string(),
                    f.lost_updates.to_string(),
                    f.stale_accepted.to_string(),
                    f.stale_rejected.to_string(),
                    if f.token_violations == 0 {
                        "ok".into()
                    } else {
                        format!("{} bad", f.token_violations)
                    },
                    recovery,
                    lost,
                    format!("{}/{}", f.slow_handoffs, f.handoffs.len()),
                    verdict.label(),
                ]);
            }
            Err(reason) => {
                line.extend(std::iter::repeat_n("-".to_owned(), HEADER.len() - 2));
                line.push(format!("skipped: {reason}"));
            }
        }
        cells.push(line);
    }
    let widths: Vec<usize> = (0..HEADER.len())
        .map(|c| {
            cells
                .iter()
                .map(|row| row[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in &cells {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            if c == 0 || c == HEADER.len() - 1 {
                let _ = write!(line, "{cell}{}", " ".repeat(pad));
            } else {
                let _ = write!(line, "{}{cell}", " ".repeat(pad));
            }
            line.push_str("  ");
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `1.13s`, `850ms`.
pub fn secs(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.2}s", d.as_secs_f64())
    }
}

/// The p-th percentile (0..=100) of some durations.
pub fn percentile(values: &[Duration], p: usize) -> Option<Duration> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let last = sorted.len().checked_sub(1)?;
    sorted.get((last * p.min(100)).div_ceil(100)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            ttl: Duration::from_millis(1000),
            recovery: Duration::from_millis(2750),
            lost_tolerance: Duration::from_millis(50),
            slow_handoff: Duration::from_millis(200),
        }
    }

    #[test]
    fn the_table_lines_up() {
        let l = limits();
        let rows = [
            Row {
                scenario: "none".into(),
                outcome: Ok((Figures::default(), Verdict::Pass)),
            },
            Row {
                scenario: "clock".into(),
                outcome: Err("libfaketime is not installed".into()),
            },
        ];
        let text = table(&rows, &l);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("scenario"));
        assert!(lines[2].contains("skipped: libfaketime"));
        assert_eq!(
            percentile(&[Duration::from_millis(1), Duration::from_millis(3)], 50),
            Some(Duration::from_millis(3))
        );
        assert_eq!(percentile(&[], 99), None);
    }
}
