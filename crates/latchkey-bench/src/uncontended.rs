//! Scenario `uncontended`: acquire + release with nobody else around, one
//! task, one cycle after the other: cycles per second.
//!
//! Compared in the same run, rounds interleaved (the order rotates every
//! round), on one server:
//!
//! * **latchkey**: `lock.try_acquire()` then `guard.release()` — two round
//!   trips: `SET key token NX PX ttl GET` and the release script (which
//!   also publishes the wake-up); no fencing token is asked for;
//! * **latchkey, `with_fencing`**: the same lock issuing a fencing token
//!   with every acquisition (the acquire script instead of the bare `SET`):
//!   what an eager token costs;
//! * **raw redis-rs, same commands**: a bare `MultiplexedConnection` sending
//!   the same two commands with the same keys and token shape — the
//!   client's limit, what latchkey costs over redis-rs itself;
//! * **raw redis-rs, SET NX PX + CAD**: the minimal lock, `SET key token NX
//!   PX ttl` and an `EVALSHA` compare-and-delete — what a lock without
//!   wake-ups costs;
//! * **rslock** (`LockManager::lock` + `unlock` on one instance);
//! * the Python and Node peers, in their driver processes.
//!
//! Measured in blocks — latchkey, X, latchkey, X, latchkey, a few hundred
//! cycles each, after a short warm-up of both — rounds rotating the order
//! of the X: each ratio compares an X chunk with the latchkey chunks right
//! around it, before the machine's load can change much, and inside a block
//! both connections idle equally long between their chunks (an idle
//! connection is slower for a while; see the round loop). Reported: median rates and the median of the ratios
//! latchkey ÷ X, plus the CPU each client process and redis-server used
//! per cycle. Targets: ≥ 0.95× the
//! raw client sending the same two commands, ≥ 1.0× rslock.

use std::time::{Duration, Instant};

use latchkey_testkit::RedisServer;

use crate::driver::Driver;
use crate::peers;
use crate::stats::{cpu_time, median, table};
use crate::worker::{COMPARE_AND_DELETE, TTL};
use crate::Report;

/// The release script as the library sends it.
fn release_lua() -> &'static str {
    latchkey::protocol::script_text("release.lua").expect("the release script")
}

pub fn run(quick: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Report>>> {
    crate::on_worker(
        "Uncontended acquire + release (one task)",
        Some("uncontended"),
        scenario(quick),
    )
}

/// One contender of this scenario.
enum Cycler {
    Latchkey(latchkey::Lock),
    RawSame(Raw),
    RawSetNx(Raw),
    Rslock(rslock::LockManager),
    /// A driver process and the key it uses.
    Peer(Driver, String),
}

struct Raw {
    conn: redis::aio::MultiplexedConnection,
    release: redis::Script,
    key: String,
    channel: String,
    host: String,
    counter: u128,
}

const KEY: &str = "uncontended";

/// One block of chunks: `true` for latchkey, `false` for the library
/// compared; every compared chunk sits between two of latchkey's.
const BLOCK: [bool; 5] = [true, false, true, false, true];

impl Cycler {
    /// Runs `n` cycles; returns their total time.
    async fn cycles(&mut self, n: u64) -> Result<Duration, String> {
        let started = Instant::now();
        match self {
            Cycler::Latchkey(lock) => {
                for _ in 0..n {
                    let guard = lock.try_acquire().await.map_err(|e| e.to_string())?;
                    let guard = guard.ok_or("latchkey: uncontended lock was busy")?;
                    let released = guard.release().await.map_err(|e| e.to_string())?;
                    if released != latchkey::Ownership::Owned {
                        return Err(format!("latchkey: release found {released:?}"));
                    }
                }
            }
            Cycler::RawSame(raw) => {
                let ttl = TTL.as_millis().to_string();
                for _ in 0..n {
                    let token = raw.token();
                    let holder: Option<Vec<u8>> = redis::cmd("SET")
                        .arg(&raw.key)
                        .arg(&token)
                        .arg("NX")
                        .arg("PX")
                        .arg(&ttl)
                        .arg("GET")
                        .query_async(&mut raw.conn)
                        .await
                        .map_err(|e| e.to_string())?;
                    if holder.is_some() {
                        return Err("raw: uncontended lock was busy".into());
                    }
                    let _: i64 = raw
                        .release
                        .key(&raw.key)
                        .arg(&token)
                        .arg(&raw.channel)
                        .arg("PUBLISH")
                        .invoke_async(&mut raw.conn)
                        .await
                        .map_err(|e| e.to_string())?;
                }
            }
            Cycler::RawSetNx(raw) => {
                let ttl = TTL.as_millis() as u64;
                for _ in 0..n {
                    let token = raw.token();
                    let ok: Option<String> = redis::cmd("SET")
                        .arg(&raw.key)
                        .arg(&token)
                        .arg("NX")
                        .arg("PX")
                        .arg(ttl)
                        .query_async(&mut raw.conn)
                        .await
                        .map_err(|e| e.to_string())?;
                    if ok.is_none() {
                        return Err("raw: uncontended lock was busy".into());
                    }
                    let _: i64 = raw
                        .release
                        .key(&raw.key)
                        .arg(&token)
                        .invoke_async(&mut raw.conn)
                        .await
                        .map_err(|e| e.to_string())?;
                }
            }
            Cycler::Rslock(manager) => {
                for _ in 0..n {
                    let lock = manager
                        .lock(&b"rslock:uncontended"[..], TTL)
                        .await
                        .map_err(|e| format!("rslock: {e}"))?;
                    manager.unlock(&lock).await;
                }
            }
            Cycler::Peer(driver, key) => {
                let (_, seconds) = driver.uncontended(key, n).await?;
                return Ok(Duration::from_secs_f64(seconds));
            }
        }
        Ok(started.elapsed())
    }
}

impl Raw {
    async fn new(url: &str, prefix: &str, release: &str) -> Raw {
        Raw {
            conn: crate::handoff::connect(url).await,
            release: redis::Script::new(release),
            key: format!("{prefix}{KEY}"),
            channel: format!("{prefix}{KEY}:released"),
            host: "bench-host".into(),
            counter: 0,
        }
    }

    /// A token of latchkey's shape and length (`lk2:<32 hex>:<ms>:<pid>:<host>`),
    /// so both send the same bytes; a counter stands in for the random part.
    fn token(&mut self) -> String {
        self.counter += 1;
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        format!(
            "lk2:{:032x}:{ms}:{}:{}",
            self.counter,
            std::process::id(),
            self.host
        )
    }
}

async fn scenario(quick: bool) -> Report {
    let server = RedisServer::start();
    let url = server.url();
    // Short rounds, many of them: the per-round ratio compares runs a
    // fraction of a second apart, before the machine's load can change much.
    let rounds = if quick { 6 } else { 20 };
    let per_round: u64 = if quick { 150 } else { 200 };

    let client = latchkey::Client::connect(&url)
        .await
        .expect("latchkey connect");
    // The first rows are the contenders whose instructions are counted, in
    // `PROBED`'s order (rows and counts share their index).
    let mut contenders: Vec<(String, Cycler)> = Vec::new();
    for (id, label) in PROBED {
        let cycler = Cycler::probed(id, &url, Some(&client))
            .await
            .expect("contender");
        contenders.push((label.into(), cycler));
    }
    contenders.push((
        "latchkey, with_fencing (a token every acquisition)".into(),
        Cycler::Latchkey(client.lock("eager", TTL).expect("lock").with_fencing()),
    ));
    let mut notes = Vec::new();
    // The row of each peer that started, by its id (for the Python package's target).
    let mut peer_rows: std::collections::HashMap<&str, usize> = Default::default();
    for lib in peers::FOREIGN {
        match peers::driver(lib, server.port()).await {
            Ok(d) => {
                peer_rows.insert(lib.id, contenders.len());
                let label = format!("{} {}", lib.label, d.version);
                contenders.push((label, Cycler::Peer(d, format!("{}:{KEY}", lib.id))));
            }
            Err(e) => notes.push(format!("- {}: {e}", lib.label)),
        }
    }
    // The raw client's token has latchkey's length: same host field.
    let probe = client
        .lock("probe", TTL)
        .expect("lock")
        .acquire()
        .await
        .expect("probe");
    let host = latchkey::inspect::Holder::from_token(probe.token().as_bytes())
        .map_or_else(|| "bench-host".into(), |h| h.host);
    let _ = probe.release().await;
    for (_, c) in contenders.iter_mut() {
        if let Cycler::RawSame(raw) | Cycler::RawSetNx(raw) = c {
            raw.host = host.clone();
        }
    }

    let peer_pids: Vec<u32> = contenders
        .iter()
        .filter_map(|(_, c)| match c {
            Cycler::Peer(d, _) => d.pid(),
            _ => None,
        })
        .collect();
    let pinned = crate::pin::Pinned::new(server.pid(), &peer_pids);
    // Warm-up: connections, script caches, JITs.
    let mut failed = vec![false; contenders.len()];
    for (i, (label, c)) in contenders.iter_mut().enumerate() {
        if let Err(e) = c.cycles(per_round / 4).await {
            notes.push(format!("- {label}: failed: {e}"));
            failed[i] = true;
        }
    }
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
    // CPU used per library: the client's process (this one, or the driver)
    // and redis-server's, over all its chunks — where the time of a cycle goes.
    let mut client_cpu = vec![Duration::ZERO; contenders.len()];
    let mut server_cpu = vec![Duration::ZERO; contenders.len()];
    let mut measured = vec![0u64; contenders.len()];
    let server_pid = server.pid().unwrap_or(0);
    for round in 0..rounds {
        // A block per library X (order rotating): both warmed, then latchkey
        // and X alternating, L X L X L; each ratio compares an X chunk with
        // the latchkey chunks right around it. Alternating inside a block
        // keeps both connections equally busy: a connection that sat idle
        // while other libraries ran is slower for a while, and the earlier
        // design (L X L, then the next X) let X's connection idle for whole
        // rounds while latchkey's never did, which favoured latchkey by
        // about 2 % (two identical raw clients read 1.7 % apart that way,
        // under 1 % apart in blocks).
        for k in 0..contenders.len() - 1 {
            let i = 1 + (k + round) % (contenders.len() - 1);
            if failed[0] || failed[i] {
                continue;
            }
            for who in [0, i] {
                if let Err(e) = contenders[who].1.cycles(per_round / 10).await {
                    notes.push(format!("- {}: failed: {e}", contenders[who].0));
                    failed[who] = true;
                }
            }
            let mut times = [Duration::ZERO; BLOCK.len()];
            for (step, who) in BLOCK
                .map(|ours| if ours { 0 } else { i })
                .into_iter()
                .enumerate()
            {
                if failed[0] || failed[i] {
                    break;
                }
                let (label, c) = &mut contenders[who];
                let client_pid = match c {
                    Cycler::Peer(d, _) => d.pid().unwrap_or(0),
                    _ => std::process::id(),
                };
                let (c0, s0) = (cpu_time(client_pid), cpu_time(server_pid));
                let result = c.cycles(per_round).await;
                if let (Some(c0), Some(c1), Some(s0), Some(s1)) =
                    (c0, cpu_time(client_pid), s0, cpu_time(server_pid))
                {
                    client_cpu[who] += c1.saturating_sub(c0);
                    server_cpu[who] += s1.saturating_sub(s0);
                    measured[who] += per_round;
                }
                match result {
                    Ok(t) => times[step] = t,
                    Err(e) => {
                        notes.push(format!("- {label}: failed: {e}"));
                        failed[who] = true;
                    }
                }
            }
            if failed[0] || failed[i] {
                continue;
            }
            let rate = |t: Duration| per_round as f64 / t.as_secs_f64();
            for step in (0..BLOCK.len()).step_by(2) {
                rates[0].push(rate(times[step]));
            }
            for step in (1..BLOCK.len()).step_by(2) {
                let ours =
                    2.0 * per_round as f64 / (times[step - 1] + times[step + 1]).as_secs_f64();
                let theirs = rate(times[step]);
                rates[i].push(theirs);
                ratios[i].push(ours / theirs);
            }
        }
    }

    let pinning = pinned.note.clone();
    // Every process may use every CPU again.
    drop(pinned);
    // Client instructions per cycle of the Rust contenders (callgrind), the
    // deterministic side of the comparison.
    let mut instructions: Vec<Option<f64>> = vec![None; contenders.len()];
    let have_valgrind = std::process::Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if have_valgrind {
        let n = if quick { 300 } else { 1000 };
        for (row, (lib, _)) in PROBED.iter().enumerate() {
            match instructions_per_cycle(lib, server.port(), n).await {
                Ok(count) => instructions[row] = Some(count),
                Err(e) => notes.push(format!("- instruction count of {lib}: {e}")),
            }
        }
    } else {
        notes.push("- client instructions per cycle: not counted (valgrind not installed)".into());
    }

    let mut missed = Vec::new();
    let mut rows = Vec::new();
    for (i, (label, _)) in contenders.iter().enumerate() {
        if rates[i].is_empty() {
            continue;
        }
        let rate = median(&mut rates[i]);
        let ratio = median(&mut ratios[i]);
        // `median` sorted them: the middle half of the ratios, to
        // show how far one run's median can be trusted.
        let spread = match ratios[i].len() {
            0 => String::new(),
            n => format!("{:.2}–{:.2}", ratios[i][n / 4], ratios[i][(3 * n) / 4]),
        };
        // The gate is the client's instructions per cycle, a count
        // the VM's noise does not move (the wall-clock ratio stays beside it
        // as information): at most 1.10× raw redis-rs sending the same
        // commands, and at most rslock's.
        let limit = match i {
            1 => Some(1.10),
            3 => Some(1.0),
            _ => None,
        };
        let verdict = match (limit, instructions[0], instructions[i]) {
            (Some(limit), Some(ours), Some(theirs)) => {
                let share = ours / theirs;
                if share <= limit {
                    format!("instructions ≤ {limit:.2}× ✓ ({share:.3}×)")
                } else {
                    missed.push(format!(
                        "uncontended: latchkey runs {share:.3}× the client instructions of {label} (target ≤ {limit:.2}×)"
                    ));
                    format!("instructions ≤ {limit:.2}× ✗ ({share:.3}×)")
                }
            }
            (Some(limit), _, _) => format!("instructions ≤ {limit:.2}×: not counted"),
            _ => String::new(),
        };
        rows.push(vec![
            label.clone(),
            format!("{rate:.0}"),
            format!("{:.1}", 1e6 / rate),
            if i == 0 {
                "1 (reference)".into()
            } else {
                format!("{ratio:.3}×")
            },
            spread,
            verdict,
            per_cycle(client_cpu[i], measured[i]),
            per_cycle(server_cpu[i], measured[i]),
            instructions[i].map_or_else(|| "–".into(), |n| format!("{n:.0}")),
        ]);
    }
    let python = python_target(&peer_rows, &ratios, &mut missed);
    let node = node_target(&peer_rows, &ratios, &client_cpu, &measured, &mut missed);
    let warm = per_round / 10;
    let probe_cycles = if quick { 300 } else { 1000 };
    let body = format!(
        "{}\n{rounds} rounds; in each, for every library X (order rotated), a block: both warmed ({warm} cycles), then \
         {per_round} cycles of latchkey, X, latchkey, X, latchkey. One task, TTL 10 s. Ratio = the two latchkey chunks \
         around an X chunk ÷ that chunk, then the median (> 1: latchkey faster), and beside it the 25th–75th \
         percentiles of those ratios; cycles/s = median over chunks. \
         CPU per cycle: total CPU time of the client's process (all threads) and of redis-server during that \
         library's rounds, divided by its cycles (from /proc/PID/task/*/schedstat). CPUs: {pinning} (see `pin.rs`: unpinned, \
         the scheduler's placement swung cycle times 3× and favoured whichever library ran right after a peer). \
         Client instructions per cycle: \
         counted by callgrind in a process of the contender's own ({probe_cycles} and three times as many cycles, the \
         difference), redis-rs and tokio included: unlike times, counts do not swing with the machine's load.\n{}{python}{node}",
        table(
            &[
                "library",
                "cycles/s",
                "µs/cycle",
                "latchkey ÷ library",
                "middle half of the ratios",
                "target",
                "client CPU µs/cycle",
                "redis CPU µs/cycle",
                "client instructions/cycle",
            ],
            &rows
        ),
        if notes.is_empty() {
            String::new()
        } else {
            format!("\nSkipped or incomplete:\n{}\n", notes.join("\n"))
        }
    );
    Report {
        title: "Uncontended acquire + release (one task)".into(),
        body,
        missed,
    }
}

/// The Python package runs at least 1.5× the cycles/s of
/// redis-py's `Lock`. Both were measured in blocks against the same latchkey
/// chunks around them, so the ratio of their "latchkey ÷ library" medians
/// compares them within the same run. A line for the body ("" when either
/// peer did not run).
fn python_target(
    rows: &std::collections::HashMap<&str, usize>,
    ratios: &[Vec<f64>],
    missed: &mut Vec<String>,
) -> String {
    let (Some(&py), Some(&redis_py)) = (
        rows.get(peers::LATCHKEY_PY.id),
        rows.get(peers::REDIS_PY.id),
    ) else {
        return String::new();
    };
    let mid = |v: &[f64]| -> Option<f64> {
        let mut v = v.to_vec();
        (!v.is_empty()).then(|| median(&mut v))
    };
    let (Some(py_ratio), Some(redis_ratio)) = (mid(&ratios[py]), mid(&ratios[redis_py])) else {
        return String::new();
    };
    let speedup = redis_ratio / py_ratio;
    let verdict = if speedup >= 1.5 { "✓" } else { "✗" };
    if speedup < 1.5 {
        missed.push(format!(
            "uncontended: latchkey-py runs {speedup:.2}× the cycles/s of redis-py's Lock (target ≥ 1.5×)"
        ));
    }
    format!(
        "\nlatchkey-py ÷ redis-py Lock (their latchkey ratios, same run): {speedup:.2}× (target ≥ 1.5×) {verdict}\n"
    )
}

/// The Node package: at least 1.1× the cycles/s of node-redlock (the ratio
/// of their latchkey ratios, as for the Python package), and at most 1.5×
/// the Rust library's client CPU per cycle (row 0, the same rounds). A line
/// for the body ("" when either peer did not run).
fn node_target(
    rows: &std::collections::HashMap<&str, usize>,
    ratios: &[Vec<f64>],
    client_cpu: &[Duration],
    measured: &[u64],
    missed: &mut Vec<String>,
) -> String {
    let (Some(&node), Some(&redlock)) = (
        rows.get(peers::LATCHKEY_NODE.id),
        rows.get(peers::NODE_REDLOCK.id),
    ) else {
        return String::new();
    };
    let mid = |v: &[f64]| -> Option<f64> {
        let mut v = v.to_vec();
        (!v.is_empty()).then(|| median(&mut v))
    };
    let (Some(node_ratio), Some(redlock_ratio)) = (mid(&ratios[node]), mid(&ratios[redlock]))
    else {
        return String::new();
    };
    let speedup = redlock_ratio / node_ratio;
    let fast = speedup >= 1.1;
    if !fast {
        missed.push(format!(
            "uncontended: latchkey-node runs {speedup:.2}× the cycles/s of node-redlock (target ≥ 1.1×)"
        ));
    }
    let mut line = format!(
        "\nlatchkey-node ÷ node-redlock (their latchkey ratios, same run): {speedup:.2}× (target ≥ 1.1×) {}",
        if fast { "✓" } else { "✗" }
    );
    if measured[node] > 0 && measured[0] > 0 {
        let per = |i: usize| client_cpu[i].as_secs_f64() / measured[i] as f64;
        let share = per(node) / per(0);
        let lean = share <= 1.5;
        if !lean {
            missed.push(format!(
                "uncontended: latchkey-node's client CPU per cycle is {share:.2}× the Rust library's (target ≤ 1.5×)"
            ));
        }
        line += &format!(
            "; its client CPU per cycle {share:.2}× the Rust library's (target ≤ 1.5×) {}",
            if lean { "✓" } else { "✗" }
        );
    }
    line + "\n"
}

fn per_cycle(cpu: Duration, cycles: u64) -> String {
    if cycles == 0 {
        return "–".into();
    }
    format!("{:.1}", cpu.as_secs_f64() * 1e6 / cycles as f64)
}

/// The Rust contenders, by id (for `--instructions`) and label: the first
/// rows of the table, and the ones a process of their own runs under
/// callgrind.
const PROBED: [(&str, &str); 4] = [
    ("latchkey", "latchkey"),
    ("raw-same", "raw redis-rs, same commands"),
    ("raw-setnx", "raw redis-rs, SET NX PX + CAD"),
    ("rslock", "rslock 0.10"),
];

impl Cycler {
    /// The contender `id` of [`PROBED`], on the server at `url`; latchkey's
    /// uses `client`.
    async fn probed(
        id: &str,
        url: &str,
        client: Option<&latchkey::Client>,
    ) -> Result<Cycler, String> {
        Ok(match (id, client) {
            ("latchkey", Some(client)) => {
                Cycler::Latchkey(client.lock(KEY, TTL).map_err(|e| e.to_string())?)
            }
            ("raw-same", _) => Cycler::RawSame(Raw::new(url, "raw:", release_lua()).await),
            ("raw-setnx", _) => {
                Cycler::RawSetNx(Raw::new(url, "rawset:", COMPARE_AND_DELETE).await)
            }
            ("rslock", _) => Cycler::Rslock(rslock::LockManager::new(vec![url.to_owned()])),
            (other, _) => return Err(format!("no contender {other:?} (latchkey needs a client)")),
        })
    }
}

/// `latchkey-bench --instructions LIB PORT N`: a warm-up, then N cycles of
/// one contender on the server at PORT, nothing printed: what callgrind
/// counts. Returns the exit code.
pub fn probe_main(args: &[String]) -> i32 {
    let (Some(lib), Some(port), Some(n)) = (
        args.first().cloned(),
        args.get(1).and_then(|p| p.parse::<u16>().ok()),
        args.get(2).and_then(|n| n.parse::<u64>().ok()),
    ) else {
        eprintln!("usage: latchkey-bench --instructions LIB PORT N");
        return 2;
    };
    let result = crate::runtime().map_err(|e| e.to_string()).and_then(|rt| {
        // On a worker, as in the scenario (see `run`).
        rt.block_on(async { tokio::spawn(probe(lib, port, n)).await })
            .map_err(|e| e.to_string())?
    });
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("latchkey-bench --instructions: {e}");
            1
        }
    }
}

async fn probe(lib: String, port: u16, n: u64) -> Result<(), String> {
    let url = format!("redis://127.0.0.1:{port}/");
    // Only latchkey's process connects a latchkey client: the others count
    // nothing of latchkey's.
    let client = match lib.as_str() {
        "latchkey" => Some(
            latchkey::Client::connect(&url)
                .await
                .map_err(|e| e.to_string())?,
        ),
        _ => None,
    };
    let mut cycler = Cycler::probed(&lib, &url, client.as_ref()).await?;
    cycler.cycles(200).await?;
    cycler.cycles(n).await?;
    Ok(())
}

/// Instructions the client executes per cycle, counted by callgrind: two
/// runs, of `n` and `3n` cycles, and the difference over `2n`, so start-up
/// and warm-up cancel out. Counts are the same run after run, whatever else
/// the machine does, where times on this VM swing by more than the few per
/// cent that separate the Rust clients; they include redis-rs and tokio.
async fn instructions_per_cycle(lib: &str, port: u16, n: u64) -> Result<f64, String> {
    counted_instructions(&["--instructions", lib, &port.to_string()], n).await
}

/// Instructions per cycle (see [`instructions_per_cycle`]) of this binary
/// run with `args` and a cycle count.
pub(crate) async fn counted_instructions(args: &[&str], n: u64) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find own binary: {e}"))?;
    let mut counts = Vec::new();
    for cycles in [n, 3 * n] {
        let out = tokio::process::Command::new("valgrind")
            .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
            .arg(&exe)
            .args(args)
            .arg(cycles.to_string())
            .output()
            .await
            .map_err(|e| format!("valgrind: {e}"))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            let last = stderr.lines().last().unwrap_or_default().to_owned();
            return Err(format!("valgrind failed: {last}"));
        }
        let collected = stderr
            .lines()
            .find_map(|line| line.split("Collected :").nth(1))
            .and_then(|count| count.trim().parse::<u64>().ok())
            .ok_or("no instruction count in valgrind's output")?;
        counts.push(collected);
    }
    Ok(counts[1].saturating_sub(counts[0]) as f64 / (2 * n) as f64)
}
