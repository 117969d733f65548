//! Writes `bench/RESULTS.md`: every scenario's table and notes, the missed
//! targets, and what machine and Redis produced them.
//!
//! ```text
//! results::write(&reports, quick)?;   // -> bench/RESULTS.md
//! ```
//!
//! Only a run of every scenario writes the file, so a partial run never
//! replaces a complete report with a fragment.

use std::fmt::Write as _;

use crate::Report;

/// Where the results go, relative to the repository root.
pub const PATH: &str = "bench/RESULTS.md";

pub fn write(reports: &[Report], quick: bool) -> Result<&'static str, String> {
    let mut out = String::new();
    let _ = writeln!(out, "# latchkey benchmark results\n");
    let _ = writeln!(
        out,
        "Written by `cargo run --release -p latchkey-bench{}` ({} run). Absolute numbers \
         depend on the machine and swing between runs on a shared VM; the ratios are measured \
         in the same run, rounds interleaved, and are what to compare.\n",
        if quick { " -- --quick" } else { "" },
        if quick { "quick" } else { "full" },
    );
    let _ = writeln!(out, "- machine: {}", machine());
    let _ = writeln!(out, "- redis-server: {}", redis_version());
    let _ = writeln!(out, "- written: {}\n", unix_time());
    let missed: Vec<&String> = reports.iter().flat_map(|r| &r.missed).collect();
    if missed.is_empty() {
        let _ = writeln!(out, "All targets met.\n");
    } else {
        let _ = writeln!(out, "**Targets missed:**\n");
        for m in missed {
            let _ = writeln!(out, "- {m}");
        }
        out.push('\n');
    }
    for r in reports {
        let _ = writeln!(out, "## {}\n\n{}", r.title, r.body);
    }
    let path = crate::peers::repo_root().join(PATH);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(&path, out).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(PATH)
}

pub(crate) fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cpus} CPUs, {model}, {}", std::env::consts::OS)
}

pub(crate) fn redis_version() -> String {
    std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".into())
}

pub(crate) fn unix_time() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm), UTC.
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60
    )
}
