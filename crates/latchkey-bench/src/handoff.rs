//! Scenario `handoff`: how fast a released lock reaches the next waiter.
//!
//! W+1 tasks contend for one lock; each holds it 0.5 ms and releases it. The
//! *gap* is the time from the start of a release to the moment the next
//! holder has the lock. Shapes: 1, 8 and 64 waiters in one process, and 8
//! waiters in 4 processes (9 tasks split 3+2+2+2). Every library runs in
//! driver processes of its own (see [`crate::driver`]) — latchkey, a plain
//! polling lock (`SET NX PX`, retry every 10 ms ± 50 %, compare-and-delete
//! release: what most hand-written Redis locks do), rslock, and the Python
//! and Node peers with their default settings — on the same server, rounds
//! interleaved (the library order rotates every round).
//!
//! A task that released **stands aside until another task of its process
//! has acquired**, then contends again. Without that, a releasing task that
//! loops straight back into `acquire` barges past the waiters of a polling
//! lock (they are asleep), and the "gap" would measure a task re-taking its
//! own lock, not a handoff. So every measured gap ends in a waiter's
//! acquisition, and W waiters wait at every release (in the 4-process shape,
//! between 5 and 8: a task stands aside until a sibling in its own process
//! acquires).
//!
//! Events carry `CLOCK_MONOTONIC` timestamps, so gaps across processes are
//! measured on one clock. Commands per handoff are the commands the
//! library's clients sent (`INFO commandstats` deltas of the names in
//! [`crate::peers::Lib::commands`]; commands a script runs inside the server
//! are not counted), over every acquisition of the round.
//!
//! Targets, for latchkey in one process: p99 gap ≤ 5× the median
//! PING round trip measured in the same run, and ≤ 4 Redis commands per
//! handoff at every waiter count. The 4-process shape is reported, not
//! gated: there each process's head waiter contends remotely by design.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use latchkey_testkit::RedisServer;

use crate::driver::{Driver, Events};
use crate::peers::{self, Lib};
use crate::stats::{gaps, median, quantile, table, us};
use crate::Report;

const HOLD: Duration = Duration::from_micros(500);

pub fn run(quick: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Report>>> {
    Box::pin(scenario(quick))
}

/// How many waiters, in how many processes.
#[derive(Clone, Copy)]
pub(crate) struct Shape {
    pub(crate) waiters: usize,
    pub(crate) processes: usize,
}

impl Shape {
    pub(crate) fn label(&self) -> String {
        match self.processes {
            1 => self.waiters.to_string(),
            p => format!("{} in {p} procs", self.waiters),
        }
    }

    /// Tasks per process: W+1 split as evenly as possible.
    fn tasks(&self) -> Vec<usize> {
        let total = self.waiters + 1;
        (0..self.processes)
            .map(|i| total / self.processes + usize::from(i < total % self.processes))
            .collect()
    }
}

const SHAPES: [Shape; 4] = [
    Shape {
        waiters: 1,
        processes: 1,
    },
    Shape {
        waiters: 8,
        processes: 1,
    },
    Shape {
        waiters: 64,
        processes: 1,
    },
    Shape {
        waiters: 8,
        processes: 4,
    },
];

async fn scenario(quick: bool) -> Report {
    let server = RedisServer::start();
    let rounds = if quick { 3 } else { 5 };
    let max_handoffs = if quick { 200 } else { 1000 };
    let window = if quick {
        Duration::from_millis(600)
    } else {
        Duration::from_millis(1500)
    };

    let mut pool = DriverPool::default();
    let mut pings = Vec::new();
    let mut samples: HashMap<(usize, &str), Sample> = HashMap::new();
    for (s, shape) in SHAPES.iter().enumerate() {
        for round in 0..rounds {
            pings.extend(ping_samples(&server.url(), 300).await);
            for i in 0..peers::HANDOFF.len() {
                let lib = peers::HANDOFF[(i + round + s) % peers::HANDOFF.len()];
                let Some(drivers) = pool.get(lib, shape.processes, server.port()).await else {
                    continue;
                };
                let key = format!("handoff-{s}-{round}-{}", lib.id);
                // Several processes cannot share a count; they share the window.
                let max = if shape.processes == 1 {
                    max_handoffs
                } else {
                    usize::MAX >> 1
                };
                match run_round(&server, lib, drivers, &key, *shape, window, max).await {
                    Ok(r) => samples.entry((s, lib.id)).or_default().add(r),
                    Err(e) => pool.fail(lib, format!("failed: {e}")),
                }
            }
        }
    }
    let ping = quantile(&mut pings, 0.5);
    let ping_p99 = quantile(&mut pings, 0.99);

    let mut rows = Vec::new();
    let mut missed = Vec::new();
    let mut plot_series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for (s, shape) in SHAPES.iter().enumerate() {
        let reference = samples
            .get_mut(&(s, peers::LATCHKEY.id))
            .map(|x| x.summary());
        for lib in peers::HANDOFF {
            let Some(sample) = samples.get_mut(&(s, lib.id)) else {
                continue;
            };
            let sum = sample.summary();
            let vs = reference
                .as_ref()
                .filter(|r| !r.p99.is_zero())
                .map(|r| format!("{:.1}×", sum.p99.as_secs_f64() / r.p99.as_secs_f64()))
                .unwrap_or_else(|| "–".into());
            rows.push(vec![
                shape.label(),
                format!("{} {}", lib.label, pool.version(lib)),
                us(sum.p50),
                us(sum.p99),
                format!("{}–{}", us(sum.p99_min), us(sum.p99_max)),
                format!("{:.1}×", sum.p99.as_secs_f64() / ping.as_secs_f64()),
                format!("{:.1}×", sum.p99.as_secs_f64() / ping_p99.as_secs_f64()),
                vs,
                format!("{:.2}", sum.commands),
                format!("{:.0}", sum.rate),
                sum.n.to_string(),
            ]);
            if shape.processes == 1 {
                let series = match plot_series.iter_mut().find(|(l, _)| l == lib.label) {
                    Some(s) => s,
                    None => {
                        plot_series.push((lib.label.to_owned(), Vec::new()));
                        plot_series.last_mut().expect("just pushed")
                    }
                };
                series
                    .1
                    .push((shape.waiters as f64, sum.p99.as_secs_f64() * 1e6));
            }
            if lib.id == peers::LATCHKEY.id && shape.processes == 1 {
                if sum.p99 > ping * 5 {
                    missed.push(format!(
                        "handoff p99 gap with {} waiters is {} µs > 5× PING ({} µs)",
                        shape.waiters,
                        us(sum.p99),
                        us(ping)
                    ));
                }
                if sum.commands > 4.0 {
                    missed.push(format!(
                        "{:.3} Redis commands per handoff with {} waiters (> 4)",
                        sum.commands, shape.waiters
                    ));
                }
            }
        }
    }
    let mut python = Vec::new();
    for (s, shape) in SHAPES.iter().enumerate() {
        let mut p99 = |id: &'static str| samples.get_mut(&(s, id)).map(|x| x.summary().p99);
        let (rust, py, redis_py) = (
            p99(peers::LATCHKEY.id),
            p99(peers::LATCHKEY_PY.id),
            p99(peers::REDIS_PY.id),
        );
        if let Some(line) = binding_targets(
            ("latchkey-py", "redis-py"),
            rust,
            py,
            redis_py,
            &mut missed,
            shape,
        ) {
            python.push(line);
        }
    }
    let mut node = Vec::new();
    for (s, shape) in SHAPES.iter().enumerate() {
        let mut p99 = |id: &'static str| samples.get_mut(&(s, id)).map(|x| x.summary().p99);
        let (rust, ours, redlock) = (
            p99(peers::LATCHKEY.id),
            p99(peers::LATCHKEY_NODE.id),
            p99(peers::NODE_REDLOCK.id),
        );
        let names = ("latchkey-node", "node-redlock");
        if let Some(line) = binding_targets(names, rust, ours, redlock, &mut missed, shape) {
            node.push(line);
        }
    }
    for lib in peers::HANDOFF {
        if !samples.keys().any(|(_, id)| *id == lib.id) && !pool.notes.contains_key(lib.id) {
            pool.fail(lib, "no round completed".into());
        }
    }
    let plot_note = match crate::plot::handoff_p99(&plot_series, ping) {
        Ok(path) => format!("Plot: [{}]({}).", path, path.trim_start_matches("bench/")),
        Err(e) => format!("Plot not written: {e}."),
    };
    let mut notes: Vec<String> = pool
        .notes
        .iter()
        .map(|(id, why)| format!("- {id}: {why}"))
        .collect();
    notes.sort();
    let body = format!(
        "{}\nPING round trip ({} pings interleaved with the rounds): median {} µs, p99 {} µs \
         (\"p99 / PING\": the gap's p99 over the PINGs' median; \"/ PING p99\": over their p99, \
         both tails of one machine). \
         Gap = release start → next holder has the lock; p50 and p99 per round, then the median over {rounds} \
         interleaved rounds (the range of the rounds' p99 beside it) \
         (one process: up to {max_handoffs} handoffs or {:.1} s per round; 4 processes: {:.1} s). \
         \"vs latchkey\" = p99 / latchkey's p99 in the same shape. \
         Commands = what the clients sent per handoff (a script call counts once), median of rounds; \
         handoffs/s likewise; gaps = handoffs measured in all rounds. Hold 0.5 ms (a precise sleep in every driver: tokio and Node timers cannot wait under 1 ms). \
         TTL 10 s for every library, all other settings their defaults. {plot_note}\n{}",
        table(
            &[
                "waiters",
                "library",
                "gap p50 µs",
                "gap p99 µs",
                "p99 of rounds µs",
                "p99 / PING",
                "p99 / PING p99",
                "p99 vs latchkey",
                "cmds/handoff",
                "handoffs/s",
                "gaps",
            ],
            &rows
        ),
        pings.len(),
        us(ping),
        us(ping_p99),
        window.as_secs_f64(),
        window.as_secs_f64(),
        if notes.is_empty() {
            String::new()
        } else {
            format!("\nSkipped or incomplete:\n{}\n", notes.join("\n"))
        }
    );
    let body = match python.is_empty() {
        true => body,
        false => format!(
            "{body}\nlatchkey-py (targets, gated in one process: p99 ≤ 3× the Rust library's, and redis-py's p99 ≥ 50× latchkey-py's; same run):\n{}\n",
            python.join("\n")
        ),
    };
    let body = match node.is_empty() {
        true => body,
        false => format!(
            "{body}\nlatchkey-node (targets, gated in one process: p99 ≤ 3× the Rust library's, and node-redlock's p99 ≥ 50× latchkey-node's; same run):\n{}\n",
            node.join("\n")
        ),
    };
    Report {
        title: "Handoff: release → next holder".into(),
        body,
        missed,
    }
}

/// A binding's hand-off targets for one shape (`names`: the binding's and
/// its language's usual peer's): the binding's p99 at most 3× the Rust
/// library's, the peer's at least 50× the binding's. A line for the body,
/// `None` when the binding did not run.
fn binding_targets(
    (ours, theirs): (&str, &str),
    rust: Option<Duration>,
    binding: Option<Duration>,
    peer: Option<Duration>,
    missed: &mut Vec<String>,
    shape: &Shape,
) -> Option<String> {
    let binding = binding.filter(|p| !p.is_zero())?;
    let mut line = format!("- {} waiters: p99 {} µs", shape.label(), us(binding));
    let gate = shape.processes == 1;
    if let Some(rust) = rust.filter(|r| !r.is_zero()) {
        let x = binding.as_secs_f64() / rust.as_secs_f64();
        let ok = x <= 3.0;
        line += &format!(
            "; {x:.2}× the Rust library's {}",
            if ok { "✓" } else { "✗" }
        );
        if gate && !ok {
            missed.push(format!(
                "handoff: {ours} p99 with {} waiters is {x:.2}× the Rust library's (target ≤ 3×)",
                shape.label()
            ));
        }
    }
    if let Some(peer) = peer {
        let x = peer.as_secs_f64() / binding.as_secs_f64();
        let ok = x >= 50.0;
        line += &format!("; {theirs}'s is {x:.0}× {}", if ok { "✓" } else { "✗" });
        if gate && !ok {
            missed.push(format!(
                "handoff: {theirs}'s p99 with {} waiters is only {x:.0}× {ours}'s (target ≥ 50×)",
                shape.label()
            ));
        }
    }
    Some(line)
}

/// Driver processes per library, started on first use and reused across
/// rounds; a library whose driver fails is not tried again.
#[derive(Default)]
pub(crate) struct DriverPool {
    drivers: HashMap<&'static str, Vec<Driver>>,
    pub(crate) notes: HashMap<&'static str, String>,
}

impl DriverPool {
    pub(crate) async fn get(
        &mut self,
        lib: &'static Lib,
        n: usize,
        port: u16,
    ) -> Option<&mut [Driver]> {
        if self.notes.contains_key(lib.id) {
            return None;
        }
        let have = self.drivers.get(lib.id).map_or(0, Vec::len);
        for _ in have..n {
            match peers::driver(lib, port).await {
                Ok(d) => self.drivers.entry(lib.id).or_default().push(d),
                Err(e) => {
                    self.fail(lib, e);
                    return None;
                }
            }
        }
        self.drivers.get_mut(lib.id).map(|d| &mut d[..n])
    }

    pub(crate) fn fail(&mut self, lib: &'static Lib, why: String) {
        self.drivers.remove(lib.id);
        self.notes.entry(lib.id).or_insert(why);
    }

    pub(crate) fn version(&self, lib: &Lib) -> String {
        self.drivers
            .get(lib.id)
            .and_then(|d| d.first())
            .map(|d| d.version.clone())
            .unwrap_or_default()
    }
}

pub(crate) struct RoundResult {
    gaps: Vec<Duration>,
    commands_per_handoff: f64,
    handoffs_per_sec: f64,
}

pub(crate) async fn run_round(
    server: &RedisServer,
    lib: &Lib,
    drivers: &mut [Driver],
    key: &str,
    shape: Shape,
    window: Duration,
    max_handoffs: usize,
) -> Result<RoundResult, String> {
    for (driver, tasks) in drivers.iter_mut().zip(shape.tasks()) {
        driver
            .arm_handoff(key, tasks, HOLD, window, max_handoffs)
            .await?;
    }
    let before = server.command_calls();
    for driver in drivers.iter_mut() {
        driver.go().await?;
    }
    let mut all = Events::default();
    for driver in drivers.iter_mut() {
        let e = driver.handoff_result().await?;
        all.acquisitions += e.acquisitions;
        all.acquired.extend(e.acquired);
        all.released.extend(e.released);
    }
    let sent = lib.sent(&before, &server.command_calls(), all.acquisitions);
    let gaps = gaps(&all.acquired, &all.released);
    if gaps.is_empty() {
        return Err("no handoff happened in the window".into());
    }
    let first = all.acquired.iter().min().copied().unwrap_or(0);
    let last = all.released.iter().max().copied().unwrap_or(first);
    let span = Duration::from_nanos(last.saturating_sub(first).max(1));
    Ok(RoundResult {
        commands_per_handoff: sent as f64 / all.acquisitions.saturating_sub(1).max(1) as f64,
        handoffs_per_sec: gaps.len() as f64 / span.as_secs_f64(),
        gaps,
    })
}

/// Per-round statistics of one library in one shape. Quantiles are taken
/// per round and summarised by their median over rounds: a burst of load
/// from elsewhere on a shared machine spoils one round's tail, not the
/// result (the range of the rounds' p99 is shown next to it).
#[derive(Default)]
pub(crate) struct Sample {
    p50s: Vec<f64>,
    p99s: Vec<f64>,
    commands: Vec<f64>,
    rates: Vec<f64>,
    n: usize,
}

pub(crate) struct Summary {
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    pub(crate) p99_min: Duration,
    pub(crate) p99_max: Duration,
    pub(crate) commands: f64,
    pub(crate) rate: f64,
    pub(crate) n: usize,
}

impl Sample {
    pub(crate) fn add(&mut self, mut r: RoundResult) {
        self.p50s.push(quantile(&mut r.gaps, 0.5).as_secs_f64());
        self.p99s.push(quantile(&mut r.gaps, 0.99).as_secs_f64());
        self.n += r.gaps.len();
        self.commands.push(r.commands_per_handoff);
        self.rates.push(r.handoffs_per_sec);
    }

    pub(crate) fn summary(&mut self) -> Summary {
        let secs = Duration::from_secs_f64;
        let p99 = median(&mut self.p99s);
        Summary {
            p50: secs(median(&mut self.p50s)),
            p99: secs(p99),
            p99_min: secs(self.p99s.first().copied().unwrap_or(p99)),
            p99_max: secs(self.p99s.last().copied().unwrap_or(p99)),
            commands: median(&mut self.commands),
            rate: median(&mut self.rates),
            n: self.n,
        }
    }
}

/// Round trips of `n` PINGs on a fresh connection.
pub async fn ping_samples(url: &str, n: usize) -> Vec<Duration> {
    let mut conn = connect(url).await;
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .expect("PING");
        samples.push(t.elapsed());
    }
    samples
}

pub async fn connect(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}
