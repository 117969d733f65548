//! Scenario `user_loop`: what a user's plain `acquire` + `release` loop
//! sees, quiet and with the machine's CPUs busy.
//!
//! `uncontended` pins the server and the clients to CPUs of their own (see
//! `pin.rs`) to compare libraries with little noise; a user's process is
//! not pinned, and shares the machine with other work. Here nothing is
//! pinned, and every library runs the loop
//!
//! ```text
//! loop { let guard = lock.acquire().await?; guard.release().await?; }
//! ```
//!
//! one cycle after the other, one task, TTL 10 s, in its own driver
//! process (see `driver.rs`): latchkey-node, the `@sesamecare-oss/redlock`
//! fork, `redlock` 5.0.0-beta.2 (what `npm install redlock` gives),
//! latchkey-py, redis-py's `Lock`, and the Rust library in this process (a
//! `Lock` of a `latchkey::Client`, on a runtime worker) as a reference.
//!
//! Two conditions: **quiet**, and **CPU contention**: one busy-looping
//! child process (`sh -c 'while :; do :; done'`) per CPU, started just
//! before the chunk and killed right after it (a [`Spinners`] guard, so
//! also on an error or a panic). Rounds are interleaved: in each round,
//! each condition in turn (which goes first alternates), and within it
//! each library's chunk in turn, the order rotating every round. A chunk
//! is as many cycles as the library ran in about [`CHUNK`] of its warm-up,
//! quiet. Reported per library and condition: the median cycles/s over
//! rounds, the median over rounds of latchkey ÷ library (the same
//! language's latchkey package, same round, same condition: > 1 means
//! latchkey faster), and the client process's CPU per cycle (all threads,
//! `/proc/PID/task/*/schedstat`). Information only: no targets.

use std::time::{Duration, Instant};

use latchkey_testkit::RedisServer;

use crate::driver::Driver;
use crate::peers::{self, Lib};
use crate::stats::{cpu_time, median, table};
use crate::worker::TTL;
use crate::Report;

const TITLE: &str = "A user's loop: acquire + release, unpinned, quiet and under CPU contention";

/// The driver-process libraries, in table order: Node's, then Python's.
const LIBS: [&Lib; 5] = [
    &peers::LATCHKEY_NODE,
    &peers::NODE_REDLOCK,
    &peers::NODE_REDLOCK5,
    &peers::LATCHKEY_PY,
    &peers::REDIS_PY,
];

const CONDITIONS: [&str; 2] = ["quiet", "CPU contention"];

/// About how long a chunk runs, quiet.
const CHUNK: Duration = Duration::from_millis(400);

pub fn run(quick: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Report>>> {
    crate::on_worker(TITLE, None, scenario(quick))
}

/// One busy-looping process per CPU, killed (and reaped) when dropped.
struct Spinners(Vec<std::process::Child>);

impl Spinners {
    fn start(n: usize) -> Result<Spinners, String> {
        use std::os::unix::process::CommandExt;
        let mut spinners = Spinners(Vec::with_capacity(n));
        for _ in 0..n {
            let mut command = std::process::Command::new("sh");
            command
                .args(["-c", "while :; do :; done"])
                .stdin(std::process::Stdio::null());
            // SAFETY: prctl is async-signal-safe; it only asks the kernel to
            // kill the child should this process die without dropping us.
            unsafe {
                command.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
            // On an error, the ones already started are killed by the drop.
            let child = command
                .spawn()
                .map_err(|e| format!("cannot start a busy loop: {e}"))?;
            spinners.0.push(child);
        }
        Ok(spinners)
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One library's loop.
enum Looper {
    /// The Rust library, in this process.
    Rust(latchkey::Lock),
    /// A driver process and the key it uses.
    Peer(Box<Driver>, String),
}

impl Looper {
    /// Runs `n` cycles; returns their time.
    async fn cycles(&mut self, n: u64) -> Result<Duration, String> {
        match self {
            Looper::Rust(lock) => {
                let started = Instant::now();
                for _ in 0..n {
                    let guard = lock.acquire().await.map_err(|e| e.to_string())?;
                    let released = guard.release().await.map_err(|e| e.to_string())?;
                    if released != latchkey::Ownership::Owned {
                        return Err(format!("latchkey: release found {released:?}"));
                    }
                }
                Ok(started.elapsed())
            }
            Looper::Peer(driver, key) => {
                let (_, seconds) = driver.uncontended(key, n).await?;
                Ok(Duration::from_secs_f64(seconds))
            }
        }
    }

    /// The process whose CPU time a cycle costs.
    fn pid(&self) -> u32 {
        match self {
            Looper::Rust(_) => std::process::id(),
            Looper::Peer(d, _) => d.pid().unwrap_or(0),
        }
    }
}

struct Contender {
    /// The library id (`"latchkey"` for the Rust row).
    id: &'static str,
    label: String,
    /// The id of the same language's latchkey, for the ratio (None: Rust).
    reference: Option<&'static str>,
    looper: Looper,
    /// Cycles per chunk.
    chunk: u64,
    failed: bool,
    /// Per condition: cycles/s per round, the round's latchkey ÷ this, client CPU, cycles.
    rates: [Vec<f64>; 2],
    ratios: [Vec<f64>; 2],
    cpu: [Duration; 2],
    cycles: [u64; 2],
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

async fn scenario(quick: bool) -> Report {
    let load_before = loadavg();
    let server = RedisServer::start();
    let rounds = if quick { 3 } else { 15 };
    let chunk_time = if quick { CHUNK / 3 } else { CHUNK };
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut notes = Vec::new();

    let client = latchkey::Client::connect(&server.url())
        .await
        .expect("latchkey connect");
    let mut contenders = vec![Contender::new(
        "latchkey",
        "latchkey (Rust, in-process)".into(),
        None,
        Looper::Rust(client.lock("user-loop", TTL).expect("lock")),
    )];
    for lib in LIBS {
        match peers::driver(lib, server.port()).await {
            Ok(d) => {
                let reference = match lib.runtime {
                    peers::Runtime::Node => peers::LATCHKEY_NODE.id,
                    _ => peers::LATCHKEY_PY.id,
                };
                let label = format!("{} {}", lib.label, d.version);
                let key = format!("{}:user-loop", lib.id);
                contenders.push(Contender::new(
                    lib.id,
                    label,
                    Some(reference),
                    Looper::Peer(Box::new(d), key),
                ));
            }
            Err(e) => notes.push(format!("- {}: {e}", lib.label)),
        }
    }

    // Warm-up (connections, script caches, JITs), then the chunk size from
    // a quiet timed run.
    let warm = if quick { 100 } else { 300 };
    for c in contenders.iter_mut() {
        let timed = match c.looper.cycles(warm).await {
            Ok(_) => c.looper.cycles(warm).await,
            Err(e) => Err(e),
        };
        match timed {
            Ok(t) => {
                let rate = warm as f64 / t.as_secs_f64().max(1e-6);
                c.chunk = ((rate * chunk_time.as_secs_f64()) as u64).clamp(50, 20_000);
            }
            Err(e) => c.fail(&mut notes, e),
        }
    }

    for round in 0..rounds {
        for k in 0..CONDITIONS.len() {
            let cond = (k + round) % CONDITIONS.len();
            let mut round_rates: Vec<Option<f64>> = vec![None; contenders.len()];
            for j in 0..contenders.len() {
                let i = (j + round) % contenders.len();
                let c = &mut contenders[i];
                if c.failed {
                    continue;
                }
                let spinners = if cond == 1 {
                    match Spinners::start(cpus) {
                        Ok(s) => Some(s),
                        Err(e) => {
                            notes.push(format!("- CPU contention: {e}"));
                            break;
                        }
                    }
                } else {
                    None
                };
                if spinners.is_some() {
                    // Let the busy loops get going.
                    tokio::time::sleep(Duration::from_millis(30)).await;
                }
                let pid = c.looper.pid();
                let before = cpu_time(pid);
                let result = c.looper.cycles(c.chunk).await;
                let after = cpu_time(pid);
                drop(spinners);
                match result {
                    Ok(t) => {
                        let rate = c.chunk as f64 / t.as_secs_f64().max(1e-9);
                        c.rates[cond].push(rate);
                        round_rates[i] = Some(rate);
                        if let (Some(b), Some(a)) = (before, after) {
                            c.cpu[cond] += a.saturating_sub(b);
                            c.cycles[cond] += c.chunk;
                        }
                    }
                    Err(e) => c.fail(&mut notes, e),
                }
            }
            // Same round, same condition: latchkey ÷ library.
            for i in 0..contenders.len() {
                let Some(reference) = contenders[i].reference else {
                    continue;
                };
                let ours = contenders
                    .iter()
                    .position(|c| c.id == reference)
                    .and_then(|r| round_rates[r]);
                if let (Some(ours), Some(theirs)) = (ours, round_rates[i]) {
                    contenders[i].ratios[cond].push(ours / theirs);
                }
            }
        }
    }
    let load_after = loadavg();

    let mut rows = Vec::new();
    for (cond, condition) in CONDITIONS.iter().enumerate() {
        for c in contenders.iter_mut() {
            if c.rates[cond].is_empty() {
                continue;
            }
            let ratio = if c.reference == Some(c.id) {
                "1 (reference)".into()
            } else if c.reference.is_none() || c.ratios[cond].is_empty() {
                "–".into()
            } else {
                let n = c.ratios[cond].len();
                let m = median(&mut c.ratios[cond]);
                format!(
                    "{m:.2}× ({:.2}–{:.2})",
                    c.ratios[cond][n / 4],
                    c.ratios[cond][(3 * n) / 4]
                )
            };
            let cpu = if c.cycles[cond] == 0 {
                "–".into()
            } else {
                format!(
                    "{:.1}",
                    c.cpu[cond].as_secs_f64() * 1e6 / c.cycles[cond] as f64
                )
            };
            rows.push(vec![
                c.label.clone(),
                (*condition).into(),
                format!("{:.0}", median(&mut c.rates[cond])),
                ratio,
                cpu,
            ]);
        }
    }

    let mut gap = |lib: &str, name: &str| -> String {
        let Some(c) = contenders.iter_mut().find(|c| c.id == lib) else {
            return format!("{name}: not measured");
        };
        let [quiet, busy] = &mut c.ratios;
        if quiet.is_empty() || busy.is_empty() {
            return format!("{name}: not measured");
        }
        format!(
            "{name} **{:.2}×** under CPU contention (quiet: {:.2}×)",
            median(busy),
            median(quiet)
        )
    };
    let gaps = format!(
        "**The gap** (latchkey ÷ library, cycles/s, median of same-round ratios): {}; {}.\n",
        gap(peers::NODE_REDLOCK5.id, "latchkey-node ÷ redlock 5"),
        gap(peers::REDIS_PY.id, "latchkey-py ÷ redis-py Lock"),
    );
    let body = format!(
        "{}\n{gaps}\n{rounds} rounds; in each, both conditions in turn (alternating which first), and in each \
         condition one chunk per library (order rotating), each library in its own process except the Rust \
         library (in the bench process), nothing pinned to CPUs. A chunk is as many cycles as the library ran in \
         about {} ms quiet during its warm-up. CPU contention: {cpus} busy-looping processes (one per CPU) from \
         just before a chunk until just after it. latchkey ÷ library: the same language's latchkey package in \
         the same round and condition ÷ the library (> 1: latchkey faster), median over rounds, and in brackets \
         the 25th–75th percentiles. Client CPU: the client process's CPU time (all threads) over its chunks, per \
         cycle. Load average (1, 5, 15 min) before: {load_before}; after: {load_after}.\n{}",
        table(
            &[
                "library",
                "condition",
                "cycles/s (median)",
                "latchkey ÷ library",
                "client CPU µs/cycle",
            ],
            &rows
        ),
        chunk_time.as_millis(),
        if notes.is_empty() {
            String::new()
        } else {
            format!("\nSkipped or incomplete:\n{}\n", notes.join("\n"))
        }
    );
    Report {
        title: TITLE.into(),
        body,
        missed: Vec::new(),
    }
}

impl Contender {
    fn new(
        id: &'static str,
        label: String,
        reference: Option<&'static str>,
        looper: Looper,
    ) -> Contender {
        Contender {
            id,
            label,
            reference,
            looper,
            chunk: 0,
            failed: false,
            rates: Default::default(),
            ratios: Default::default(),
            cpu: [Duration::ZERO; 2],
            cycles: [0; 2],
        }
    }

    fn fail(&mut self, notes: &mut Vec<String>, e: String) {
        notes.push(format!("- {}: failed: {e}", self.label));
        self.failed = true;
    }
}
