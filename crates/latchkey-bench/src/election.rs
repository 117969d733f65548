//! Scenario `election`: how long an election is without a leader when the
//! leader resigns, and when its process is killed (`kill -9`), latchkey
//! beside npm `redis-leader` (0.1.0, its defaults: TTL 10 s, a try every
//! 1 s) in the same run.
//!
//! Each sample starts two candidate processes on a fresh election key: the
//! first is elected; the second campaigns (for latchkey: until it is
//! subscribed to the change channel; for redis-leader: once it made its
//! first try), and a random 0–1 s more, so the fault lands at a random
//! phase of the renewals and of redis-leader's tries. Then the leader is
//! told to resign (a line on its stdin) or is sent SIGKILL, and the time
//! runs until the standby prints `elected`.
//! Both libraries pay the same pipe latencies. latchkey's lease is 10 s
//! too (the candidate of this binary: `latchkey-bench --elect PORT KEY`).
//!
//! Expected: latchkey's standby is woken by the resign's message (a few
//! round trips) and by the lease's end after a kill (≤ TTL + a round trip);
//! redis-leader's polls every second: up to 1 s after a resign, up to
//! TTL + 1 s after a kill. No targets: the figures are for
//! `docs/reliability.md`.

use std::process::Stdio;
use std::time::{Duration, Instant};

use latchkey_testkit::RedisServer;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

use crate::peers::repo_root;
use crate::stats::{quantile, table};
use crate::Report;

const TTL: Duration = Duration::from_secs(10);

pub fn run(quick: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Report>>> {
    Box::pin(run_async(quick))
}

#[derive(Clone, Copy, PartialEq)]
enum Lib {
    Latchkey,
    RedisLeader,
}

struct Candidate {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Candidate {
    async fn start(lib: Lib, port: u16, key: &str) -> Result<Candidate, String> {
        let mut cmd = match lib {
            Lib::Latchkey => {
                let exe = std::env::current_exe().map_err(|e| e.to_string())?;
                let mut c = Command::new(exe);
                c.arg("--elect");
                c
            }
            Lib::RedisLeader => {
                let root = repo_root();
                let mut c = Command::new("node");
                c.env("NODE_PATH", root.join("bench/peers/node/node_modules"));
                c.arg(root.join("crates/latchkey-bench/peers/node/elect.cjs"));
                c
            }
        };
        cmd.arg(port.to_string())
            .arg(key)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| format!("cannot start: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        Ok(Candidate {
            child,
            lines: BufReader::new(stdout).lines(),
        })
    }

    /// Reads lines until `want`; an `error …` line or a timeout fails.
    async fn expect(&mut self, want: &str, within: Duration) -> Result<Instant, String> {
        let deadline = Instant::now() + within;
        loop {
            let line = tokio::time::timeout_at(deadline.into(), self.lines.next_line())
                .await
                .map_err(|_| format!("no {want:?} within {within:?}"))?
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("exited before {want:?}"))?;
            if line == want {
                return Ok(Instant::now());
            }
            if line.starts_with("error") {
                return Err(line);
            }
        }
    }

    async fn resign(&mut self) -> Result<(), String> {
        let stdin = self.child.stdin.as_mut().ok_or("no stdin")?;
        stdin
            .write_all(b"resign\n")
            .await
            .map_err(|e| e.to_string())?;
        stdin.flush().await.map_err(|e| e.to_string())
    }
}

/// One failover: `kill` or resign. Returns the time without a leader.
async fn sample(lib: Lib, server: &RedisServer, key: &str, kill: bool) -> Result<Duration, String> {
    let port = server.port();
    let mut leader = Candidate::start(lib, port, key).await?;
    leader.expect("elected", Duration::from_secs(30)).await?;
    let mut standby = Candidate::start(lib, port, key).await?;
    standby.expect("ready", Duration::from_secs(30)).await?;
    if lib == Lib::Latchkey {
        let channel = format!("{{latchkey:{key}}}:election:changes");
        let until = Instant::now() + Duration::from_secs(10);
        while server.subscribers(&channel) < 1 {
            if Instant::now() > until {
                return Err("the standby never subscribed".into());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    } else {
        // redis-leader has no hook for "tried once": its first try is
        // sent right after `ready`; one round trip is plenty.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // At a random phase of the leader's renewals and of redis-leader's
    // tries: 0–1 s more (its try interval).
    let phase = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() % 1_000_000_000);
    tokio::time::sleep(Duration::from_nanos(u64::from(phase))).await;
    let start = Instant::now();
    if kill {
        leader.child.start_kill().map_err(|e| e.to_string())?;
    } else {
        leader.resign().await?;
    }
    let elected = standby.expect("elected", TTL * 3).await?;
    let _ = leader.child.kill().await;
    let _ = standby.child.kill().await;
    Ok(elected - start)
}

async fn run_async(quick: bool) -> Report {
    let server = RedisServer::start();
    let (resigns, kills) = if quick { (3, 1) } else { (10, 2) };
    let peer_ok = ensure_redis_leader();
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for (lib, name) in [
        (Lib::Latchkey, "latchkey (TTL 10 s)"),
        (
            Lib::RedisLeader,
            "npm redis-leader 0.1.0 (defaults: TTL 10 s, try every 1 s)",
        ),
    ] {
        if lib == Lib::RedisLeader {
            if let Err(why) = &peer_ok {
                notes.push(format!("redis-leader: {why}"));
                continue;
            }
        }
        let mut figures = Vec::new();
        for (kill, n) in [(false, resigns), (true, kills)] {
            let mut samples = Vec::new();
            for i in 0..n {
                let key = format!("bench-elect-{}-{i}", if kill { "kill" } else { "resign" });
                let key = if lib == Lib::RedisLeader {
                    format!("{key}-node")
                } else {
                    key
                };
                match sample(lib, &server, &key, kill).await {
                    Ok(d) => samples.push(d),
                    Err(e) => notes.push(format!("{name}: a sample failed: {e}")),
                }
            }
            figures.push(describe(&mut samples, kill));
        }
        rows.push(vec![
            name.to_owned(),
            figures[0].clone(),
            figures[1].clone(),
        ]);
    }
    let mut body = table(
        &[
            "library",
            &format!("after resign: p50 / max ({resigns} samples)"),
            &format!("after kill -9: each of {kills} samples"),
        ],
        &rows,
    );
    for note in notes {
        body.push_str(&format!("\n{note}\n"));
    }
    Report {
        title: "election: time without a leader after a resign and after a kill".into(),
        body,
        missed: vec![],
    }
}

/// p50 / max; every sample for the few kill samples.
fn describe(samples: &mut [Duration], each: bool) -> String {
    if samples.is_empty() {
        return "-".into();
    }
    if each {
        let all: Vec<String> = samples.iter().map(|d| ms(*d)).collect();
        return all.join(", ");
    }
    let p50 = quantile(samples, 0.5);
    let max = quantile(samples, 1.0);
    format!("{} / {}", ms(p50), ms(max))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// redis-leader and ioredis under `bench/peers/node`, installing them
/// (`bench/peers/install.sh`) if they are missing.
fn ensure_redis_leader() -> Result<(), String> {
    if std::env::args().any(|a| a == "--no-peers") {
        return Err("skipped (--no-peers)".into());
    }
    let peers = repo_root().join("bench/peers");
    let installed = || peers.join("node/node_modules/redis-leader").exists();
    if !installed() {
        let _ = std::process::Command::new("bash")
            .arg(peers.join("install.sh"))
            .stdout(Stdio::null())
            .status();
    }
    match installed() {
        true => Ok(()),
        false => Err("not installed (bench/peers/install.sh could not install it)".into()),
    }
}

/// `latchkey-bench --elect PORT KEY`: a latchkey candidate (see the module
/// docs for its lines).
pub fn candidate_main(args: &[String]) -> i32 {
    let [port, key] = args else {
        eprintln!("usage: latchkey-bench --elect PORT KEY");
        return 2;
    };
    let Ok(runtime) = crate::runtime() else {
        return 1;
    };
    runtime.block_on(async {
        let url = format!("redis://127.0.0.1:{port}/");
        let election = match latchkey::Client::connect(&url)
            .await
            .and_then(|c| c.election(key, TTL))
        {
            Ok(e) => e,
            Err(e) => {
                println!("error {e}");
                return 1;
            }
        };
        let mut stdin = BufReader::new(tokio::io::stdin()).lines();
        let leadership = match election.try_campaign("bench").await {
            Ok(Some(l)) => l,
            Ok(None) => {
                println!("ready");
                match election.campaign("bench").await {
                    Ok(l) => l,
                    Err(e) => {
                        println!("error {e}");
                        return 1;
                    }
                }
            }
            Err(e) => {
                println!("error {e}");
                return 1;
            }
        };
        println!("elected");
        while let Ok(Some(line)) = stdin.next_line().await {
            if line.trim() == "resign" {
                let _ = leadership.resign().await;
                break;
            }
        }
        std::future::pending::<i32>().await
    })
}
