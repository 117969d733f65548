//! Scenario `doors`: what an acquire + release costs through the CLI's two
//! doors, `latchkey mcp` (one MCP session: JSON-RPC lines over its stdin
//! and stdout) and `latchkey serve` (one keep-alive HTTP/1.1 connection),
//! beside the Rust library in this process, on one private redis-server.
//!
//! The library runs plain and fenced: a door's locks are fenced (every
//! holder gets a fencing token, as the CLI's), so the fenced row is the
//! door's own Redis work without the door. Each round runs a chunk of
//! cycles of every row, in an order that rotates round to round; each
//! cycle is timed alone. Reported: the median and p99 cycle, the median of
//! the per-round ratios of the medians to the fenced library's (rounds a
//! fraction of a second apart: the machine's load changes less within one),
//! and the Redis commands a cycle sends (`INFO commandstats` deltas counted
//! as in the handoff scenario, by [`peers::Lib::sent`]: a script's inner
//! commands are not round trips).
//!
//! The doors run the release CLI, `target/release/latchkey` (`cargo build
//! --release -p latchkey-cli`; `LATCHKEY_BIN` names another). No targets:
//! the figures are for docs/http.md and docs/agents.md ("Cost"); the CLI as
//! two processes a cycle and the memory per long-polling waiter stay in
//! `bench/doors.py`.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use latchkey_testkit::RedisServer;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::peers;
use crate::stats::{median, quantile, table, us};
use crate::Report;

const TTL: Duration = Duration::from_secs(10);

pub fn run(quick: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Report>>> {
    crate::on_worker(TITLE, None, scenario(quick))
}

const TITLE: &str = "Doors: acquire + release through `latchkey mcp` and `latchkey serve`";

/// One row: how it takes and gives back a lock.
enum Door {
    Library(latchkey::Lock),
    Mcp(Mcp),
    Serve(Http),
}

impl Door {
    async fn cycle(&mut self) -> Result<(), String> {
        match self {
            Door::Library(lock) => {
                let guard = lock.try_acquire().await.map_err(|e| e.to_string())?;
                let guard = guard.ok_or("library: the lock was busy")?;
                let released = guard.release().await.map_err(|e| e.to_string())?;
                if released != latchkey::Ownership::Owned {
                    return Err(format!("library: release found {released:?}"));
                }
            }
            Door::Mcp(mcp) => {
                let held = mcp
                    .tool("acquire", json!({"name": "mcp", "ttl": "10s"}))
                    .await?;
                let token = held["token"].as_str().ok_or("mcp: no token")?.to_owned();
                let released = mcp
                    .tool("release", json!({"name": "mcp", "token": token}))
                    .await?;
                if released["released"] != true {
                    return Err(format!("mcp: release replied {released}"));
                }
            }
            Door::Serve(http) => {
                let held = http
                    .post("/v1/locks/http/acquire", &json!({"ttl": "10s"}))
                    .await?;
                let token = held["token"].as_str().ok_or("serve: no token")?.to_owned();
                let released = http
                    .post("/v1/locks/http/release", &json!({"token": token}))
                    .await?;
                if released["released"] != true {
                    return Err(format!("serve: release replied {released}"));
                }
            }
        }
        Ok(())
    }
}

/// `latchkey mcp`, initialized: one session.
struct Mcp {
    _child: Child,
    input: ChildStdin,
    output: Lines<BufReader<ChildStdout>>,
    next_id: u64,
}

impl Mcp {
    async fn start(exe: &PathBuf, url: &str) -> Result<Mcp, String> {
        let mut child = Command::new(exe)
            .args(["--redis", url, "--prefix", "bench:", "mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("{}: {e}", exe.display()))?;
        let input = child.stdin.take().ok_or("mcp: no stdin")?;
        let output = BufReader::new(child.stdout.take().ok_or("mcp: no stdout")?).lines();
        let mut mcp = Mcp {
            _child: child,
            input,
            output,
            next_id: 0,
        };
        mcp.call(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "latchkey-bench", "version": "1"}}),
        )
        .await?;
        mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(mcp)
    }

    async fn send(&mut self, message: &Value) -> Result<(), String> {
        let line = format!("{message}\n");
        self.input
            .write_all(line.as_bytes())
            .await
            .map_err(|e| format!("mcp: {e}"))
    }

    /// A request and its reply's `result`.
    async fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        loop {
            let line = self
                .output
                .next_line()
                .await
                .map_err(|e| format!("mcp: {e}"))?
                .ok_or("mcp: the session ended")?;
            let mut reply: Value =
                serde_json::from_str(&line).map_err(|e| format!("mcp: {e}: {line}"))?;
            if reply["id"] == id {
                return match reply.get_mut("result") {
                    Some(result) => Ok(result.take()),
                    None => Err(format!("mcp: {line}")),
                };
            }
        }
    }

    /// A tool's structured reply; a tool error is an `Err`.
    async fn tool(&mut self, name: &str, arguments: Value) -> Result<Value, String> {
        let mut result = self
            .call("tools/call", json!({"name": name, "arguments": arguments}))
            .await?;
        if result["isError"] == true {
            return Err(format!("mcp {name}: {result}"));
        }
        Ok(result["structuredContent"].take())
    }
}

/// `latchkey serve` on a free loopback port, and one keep-alive connection
/// to it.
struct Http {
    _child: Child,
    stream: BufReader<TcpStream>,
}

impl Http {
    async fn start(exe: &PathBuf, url: &str) -> Result<Http, String> {
        let mut child = Command::new(exe)
            .args(["--redis", url, "--prefix", "bench:", "serve"])
            .args(["--listen", "127.0.0.1:0"])
            .env_remove("LATCHKEY_SERVE_TOKENS")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("{}: {e}", exe.display()))?;
        let stdout = child.stdout.take().ok_or("serve: no stdout")?;
        // Its one line says where it listens: it listens then.
        let line = BufReader::new(stdout)
            .lines()
            .next_line()
            .await
            .map_err(|e| format!("serve: {e}"))?
            .ok_or("serve: exited before listening")?;
        let addr = line
            .strip_prefix("listening on http://")
            .ok_or_else(|| format!("serve said {line:?}"))?;
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("serve: {e}"))?;
        tcp.set_nodelay(true).map_err(|e| format!("serve: {e}"))?;
        Ok(Http {
            _child: child,
            stream: BufReader::new(tcp),
        })
    }

    /// A POST on the kept connection: the JSON reply of a 200.
    async fn post(&mut self, path: &str, body: &Value) -> Result<Value, String> {
        let body = body.to_string();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let io = |e: std::io::Error| format!("serve: {e}");
        self.stream
            .get_mut()
            .write_all(request.as_bytes())
            .await
            .map_err(io)?;
        let mut status = String::new();
        self.stream.read_line(&mut status).await.map_err(io)?;
        let mut length = None;
        loop {
            let mut header = String::new();
            self.stream.read_line(&mut header).await.map_err(io)?;
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse::<usize>().ok();
                }
            }
        }
        let mut reply = vec![0; length.ok_or("serve: a reply without Content-Length")?];
        self.stream.read_exact(&mut reply).await.map_err(io)?;
        if !status.starts_with("HTTP/1.1 200") {
            return Err(format!(
                "serve: {} {}",
                status.trim_end(),
                String::from_utf8_lossy(&reply)
            ));
        }
        serde_json::from_slice(&reply).map_err(|e| format!("serve: {e}"))
    }
}

/// The release CLI the doors run.
fn cli() -> Result<PathBuf, String> {
    let exe = std::env::var_os("LATCHKEY_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| peers::repo_root().join("target/release/latchkey"));
    if exe.exists() {
        Ok(exe)
    } else {
        Err(format!(
            "{} not built (cargo build --release -p latchkey-cli)",
            exe.display()
        ))
    }
}

async fn scenario(quick: bool) -> Report {
    match measure(quick).await {
        Ok(body) => Report {
            title: TITLE.into(),
            body,
            missed: Vec::new(),
        },
        Err(e) => Report {
            title: TITLE.into(),
            body: format!("Not measured: {e}\n"),
            missed: Vec::new(),
        },
    }
}

/// Per row: every cycle's time, each round's median, the commands sent.
#[derive(Default)]
struct Tally {
    cycles: Vec<Duration>,
    round_medians: Vec<Duration>,
    commands: u64,
}

async fn measure(quick: bool) -> Result<String, String> {
    let exe = cli()?;
    let server = RedisServer::builder()
        .try_start()
        .map_err(|e| e.to_string())?;
    let url = server.url();
    let (rounds, per_round) = if quick { (4, 50) } else { (20, 100) };
    let client = latchkey::Client::connect(&url)
        .await
        .map_err(|e| e.to_string())?;
    let lock = |name: &str| client.lock(name, TTL).map_err(|e| e.to_string());
    // How each row's commands are counted: a plain lock's first try is a
    // bare `SET` sent by the client; a fenced acquire is a script every
    // time, as a fair one's (the counter's `SET` runs inside it, checked
    // with MONITOR), so `LATCHKEY_FAIR`'s accounting is the fenced rows'.
    let fenced_count = &peers::LATCHKEY_FAIR;
    let mut rows: Vec<(&str, &peers::Lib, Door)> = vec![
        (
            "Rust library, this process",
            &peers::LATCHKEY,
            Door::Library(lock("lib")?),
        ),
        (
            "Rust library, fenced (as the doors' locks)",
            fenced_count,
            Door::Library(lock("fenced")?.with_fencing()),
        ),
        (
            "`latchkey mcp`, one session",
            fenced_count,
            Door::Mcp(Mcp::start(&exe, &url).await?),
        ),
        (
            "`latchkey serve`, one keep-alive connection",
            fenced_count,
            Door::Serve(Http::start(&exe, &url).await?),
        ),
    ];
    // Warm every row: connections made, scripts loaded, pages touched.
    for (_, _, door) in rows.iter_mut() {
        for _ in 0..20 {
            door.cycle().await?;
        }
    }
    let mut tallies: Vec<Tally> = rows.iter().map(|_| Tally::default()).collect();
    for round in 0..rounds {
        for k in 0..rows.len() {
            let at = (round + k) % rows.len();
            let (_, counted, door) = &mut rows[at];
            let before = server.command_calls();
            let mut times = Vec::with_capacity(per_round);
            for _ in 0..per_round {
                let started = Instant::now();
                door.cycle().await?;
                times.push(started.elapsed());
            }
            let after = server.command_calls();
            let tally = &mut tallies[at];
            tally.commands += counted.sent(&before, &after, per_round as u64);
            tally.round_medians.push(quantile(&mut times, 0.5));
            tally.cycles.extend(times);
        }
    }
    let fenced = 1;
    let mut out = Vec::new();
    for (at, (label, _, _)) in rows.iter().enumerate() {
        let mut ratios: Vec<f64> = tallies[at]
            .round_medians
            .iter()
            .zip(&tallies[fenced].round_medians)
            .map(|(door, lib)| door.as_secs_f64() / lib.as_secs_f64().max(1e-9))
            .collect();
        let tally = &mut tallies[at];
        let n = tally.cycles.len();
        out.push(vec![
            (*label).to_owned(),
            n.to_string(),
            us(quantile(&mut tally.cycles, 0.5)),
            us(quantile(&mut tally.cycles, 0.99)),
            format!("{:.2}x", median(&mut ratios)),
            format!("{:.2}", tally.commands as f64 / n as f64),
        ]);
    }
    let mut body = table(
        &[
            "through",
            "cycles",
            "median µs",
            "p99 µs",
            "median vs fenced library",
            "Redis commands per cycle",
        ],
        &out,
    );
    body.push_str(&format!(
        "\n{rounds} rounds of {per_round} cycles per row, rows interleaved (the order \
         rotates each round); one cycle = acquire + release of an uncontended lock. The \
         doors run {} on the same redis-server; their time includes the JSON and the pipe \
         or socket to them.\n",
        exe.display()
    ));
    Ok(body)
}
