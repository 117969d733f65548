//! `latchkey-bench`: runs the benchmark scenarios on private redis-servers and
//! prints markdown tables with medians and same-run ratios.
//!
//! ```text
//! cargo run --release -p latchkey-bench -- [--quick] [--no-peers] [SCENARIO...]
//! ```
//!
//! A run of every scenario also writes `bench/RESULTS.md` and the handoff
//! plot `bench/handoff_p99.svg`; the `scale` scenario (not `--quick`)
//! writes `bench/SCALE.md` and `bench/scale.svg` whenever it runs, alone
//! too (`./dev bench -- scale`). `--no-peers` skips the Python and Node
//! peers (installed on first use by `bench/peers/install.sh`). The binary
//! re-executes itself as `latchkey-bench --worker LIB PORT` for the handoff
//! scenario's driver processes (see `worker.rs`), and, under callgrind, as
//! `latchkey-bench --instructions LIB PORT N` to count a client's
//! instructions per cycle (see `uncontended.rs`), and as
//! `latchkey-bench --elect PORT KEY` for the election scenario's candidates,
//! and as `latchkey-bench --cached-holder PORT` for the cached scenario's
//! holder (see `cached_holder.rs`).
//!
//! Each scenario lives in its own module and returns a [`Report`]. The process
//! exits non-zero when any scenario missed one of its targets.

use std::future::Future;
use std::pin::Pin;

mod cached;
mod cached_handoff;
mod cached_holder;
mod cluster;
mod doors;
mod driver;
mod election;
mod fair;
mod handoff;
mod many_keys;
mod multi;
mod native;
mod peers;
mod pin;
mod plot;
mod primitives;
mod profile;
mod redlock;
mod results;
mod scale;
mod signals;
mod stats;
mod told;
mod uncontended;
mod user_loop;
mod worker;

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

/// Runs `scenario` on a runtime worker, as an application's tasks run:
/// `block_on`'s thread is not a worker, so every reply would cross threads
/// to reach it (about a dozen extra context switches per cycle, for every
/// Rust library alike). A scenario that panics is reported under `title`;
/// `gated`: as a missed target, named so (a scenario with targets).
pub fn on_worker(
    title: &'static str,
    gated: Option<&'static str>,
    scenario: impl Future<Output = Report> + Send + 'static,
) -> Pin<Box<dyn Future<Output = Report>>> {
    Box::pin(async move {
        match tokio::spawn(scenario).await {
            Ok(report) => report,
            Err(e) => Report {
                title: title.into(),
                body: format!("The scenario failed: {e}\n"),
                missed: gated
                    .map(|name| format!("{name}: the scenario failed: {e}"))
                    .into_iter()
                    .collect(),
            },
        }
    })
}

/// Every scenario, in the order they run. Add new ones here.
const SCENARIOS: &[(&str, Scenario)] = &[
    ("uncontended", uncontended::run),
    ("handoff", handoff::run),
    ("fair", fair::run),
    ("many_keys", many_keys::run),
    ("signals", signals::run),
    ("redlock", redlock::run),
    ("cluster", cluster::run),
    ("primitives", primitives::run),
    ("election", election::run),
    ("multi", multi::run),
    ("cached", cached::run),
    ("told", told::run),
    ("native", native::run),
    ("scale", scale::run),
    ("user_loop", user_loop::run),
    ("doors", doors::run),
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--worker") {
        std::process::exit(worker::main(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("--instructions") {
        std::process::exit(uncontended::probe_main(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("--elect") {
        std::process::exit(election::candidate_main(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("--cached-holder") {
        std::process::exit(cached_holder::main(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("--profile") {
        std::process::exit(profile::main(&args[1..]));
    }
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
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("latchkey-bench: cannot start a tokio runtime: {e}");
            std::process::exit(1);
        }
    };
    let mut missed = Vec::new();
    let mut reports = Vec::new();
    for (name, scenario) in SCENARIOS {
        if !wanted.is_empty() && !wanted.contains(name) {
            continue;
        }
        let report = runtime.block_on(scenario(quick));
        println!("## {}\n\n{}", report.title, report.body);
        for m in &report.missed {
            println!("**target missed:** {m}\n");
        }
        missed.extend(report.missed.iter().cloned());
        reports.push(report);
    }
    if wanted.is_empty() {
        match results::write(&reports, quick) {
            Ok(path) => println!("Results written to {path}."),
            Err(e) => eprintln!("latchkey-bench: {e}"),
        }
    } else {
        println!("Only some scenarios ran: bench/RESULTS.md left as it was.");
    }
    if !missed.is_empty() {
        eprintln!("latchkey-bench: {} target(s) missed", missed.len());
        std::process::exit(1);
    }
}

/// The runtime every bench process uses: two workers, like the machine's
/// two cores, so the client's scheduling is the same in every scenario.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}
