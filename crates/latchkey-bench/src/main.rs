//! `latchkey-bench`: runs the benchmark scenarios on private redis-servers and
//! prints markdown tables with medians and same-run ratios.
//!
//! ```text
//! cargo run --release -p latchkey-bench -- [--quick] [SCENARIO...]
//! ```
//!
//! Each scenario lives in its own module and returns a [`Report`]. The process
//! exits non-zero when any scenario missed one of its targets.

use std::future::Future;
use std::pin::Pin;

mod stats;

/// What a scenario found.
pub struct Report {
    /// A heading for the table.
    pub title: String,
    /// A markdown table (see [`stats::table`]) plus any notes.
    pub body: String,
    /// One line per target that was missed; empty when all were met.
    pub missed: Vec<String>,
}

type Scenario = fn(bool) -> Pin<Box<dyn Future<Output = Report>>>;

/// Every scenario, in the order they run. Add new ones here.
const SCENARIOS: &[(&str, Scenario)] = &[];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let wanted: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .map(String::as_str)
        .collect();
    for name in &wanted {
        if !SCENARIOS.iter().any(|(n, _)| n == name) {
            let names: Vec<&str> = SCENARIOS.iter().map(|(n, _)| *n).collect();
            eprintln!("latchkey-bench: unknown scenario {name:?}; known: {names:?}");
            std::process::exit(2);
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("latchkey-bench: cannot start a tokio runtime: {e}");
            std::process::exit(1);
        }
    };
    let mut missed = Vec::new();
    for (name, scenario) in SCENARIOS {
        if !wanted.is_empty() && !wanted.contains(name) {
            continue;
        }
        let report = runtime.block_on(scenario(quick));
        println!("## {}\n\n{}", report.title, report.body);
        for m in &report.missed {
            println!("**target missed:** {m}\n");
        }
        missed.extend(report.missed);
    }
    if !missed.is_empty() {
        eprintln!("latchkey-bench: {} target(s) missed", missed.len());
        std::process::exit(1);
    }
}
