//! The Rust side of the driver protocol: `latchkey-bench --worker LIB PORT`
//! runs handoff rounds for latchkey, a plain polling lock or rslock in its own
//! process, exactly as the Python and Node drivers do for their libraries.
//!
//! ```text
//! $ latchkey-bench --worker latchkey 40123
//! {"ready":true,"lib":"latchkey","version":"0.1.0"}
//! handoff h 9 500 2 1000
//! {"armed":true}
//! go
//! {"acquisitions":1008,"acquired":[…],"released":[…]}
//! ```
//!
//! See [`crate::driver`] for the protocol.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

use crate::stats::mono_ns;

/// The TTL every library's lock gets in the benchmark.
pub const TTL: Duration = Duration::from_secs(10);

/// Runs the worker; returns the process exit code.
pub fn main(args: &[String]) -> i32 {
    let (Some(lib), Some(port)) = (
        args.first(),
        args.get(1).and_then(|p| p.parse::<u16>().ok()),
    ) else {
        eprintln!("usage: latchkey-bench --worker LIB PORT");
        return 2;
    };
    let runtime = match crate::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            emit(&serde_json::json!({ "error": format!("no tokio runtime: {e}") }));
            return 1;
        }
    };
    runtime.block_on(serve(lib, port))
}

pub(crate) fn emit(value: &serde_json::Value) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

async fn serve(lib: &str, port: u16) -> i32 {
    let url = format!("redis://127.0.0.1:{port}/");
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let version = match lib {
        "latchkey" | "latchkey-fair" | "polling" => "0.1.0",
        "rslock" => "0.10",
        other => {
            emit(&serde_json::json!({ "error": format!("unknown library {other:?}") }));
            return 1;
        }
    };
    emit(&serde_json::json!({ "ready": true, "lib": lib, "version": version }));
    while let Ok(Some(line)) = lines.next_line().await {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["handoff", key, tasks, hold_us, seconds, max] => {
                let parsed = (
                    tasks.parse(),
                    hold_us.parse(),
                    seconds.parse::<f64>(),
                    max.parse(),
                );
                let (Ok(tasks), Ok(hold_us), Ok(seconds), Ok(max)) = parsed else {
                    emit(&serde_json::json!({ "error": format!("bad handoff line {line:?}") }));
                    continue;
                };
                let round = Round {
                    tasks,
                    hold: Duration::from_micros(hold_us),
                    window: Duration::from_secs_f64(seconds),
                    max_handoffs: max,
                };
                match Contender::connect(lib, &url, key).await {
                    Ok(contender) => round.run(contender, &mut lines).await,
                    Err(e) => emit(&serde_json::json!({ "error": e })),
                }
            }
            ["quit"] => break,
            [] => {}
            _ => emit(&serde_json::json!({ "error": format!("unsupported command {line:?}") })),
        }
    }
    0
}

/// A lock library, connected and ready to contend for one key.
#[derive(Clone)]
enum Contender {
    Latchkey(latchkey::Lock),
    /// What most hand-written Redis locks do: `SET NX PX`, retry every
    /// 10 ms ± 50 % while busy, compare-and-delete release.
    Polling {
        conn: redis::aio::MultiplexedConnection,
        key: Arc<str>,
        release: redis::Script,
    },
    /// rslock with its defaults: 3 tries 0–200 ms apart per `lock`, and
    /// `acquire` calling `lock` until it succeeds.
    Rslock {
        manager: rslock::LockManager,
        key: Arc<[u8]>,
    },
}

enum Held {
    Latchkey(latchkey::LockGuard),
    Polling(String),
    Rslock(rslock::Lock),
}

/// The release script of the polling lock (and of most hand-written ones).
pub const COMPARE_AND_DELETE: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

impl Contender {
    async fn connect(lib: &str, url: &str, key: &str) -> Result<Contender, String> {
        let contender = match lib {
            "latchkey" => {
                let client = latchkey::Client::connect(url)
                    .await
                    .map_err(|e| e.to_string())?;
                Contender::Latchkey(client.lock(key, TTL).map_err(|e| e.to_string())?)
            }
            "latchkey-fair" => {
                let client = latchkey::Client::connect(url)
                    .await
                    .map_err(|e| e.to_string())?;
                let lock = client.lock(key, TTL).and_then(latchkey::Lock::fair);
                Contender::Latchkey(lock.map_err(|e| e.to_string())?)
            }
            "polling" => {
                let client = redis::Client::open(url).map_err(|e| e.to_string())?;
                let conn = client
                    .get_multiplexed_async_connection()
                    .await
                    .map_err(|e| e.to_string())?;
                Contender::Polling {
                    conn,
                    key: Arc::from(format!("poll:{key}")),
                    release: redis::Script::new(COMPARE_AND_DELETE),
                }
            }
            "rslock" => Contender::Rslock {
                manager: rslock::LockManager::new(vec![url.to_owned()]),
                key: Arc::from(format!("rslock:{key}").into_bytes()),
            },
            other => return Err(format!("unknown library {other:?}")),
        };
        // Warm up: connections, script cache, latchkey's subscriber.
        let held = contender.acquire(0).await?;
        contender.release(held).await;
        Ok(contender)
    }

    /// Waits until the lock is ours. `n` makes polling tokens unique.
    async fn acquire(&self, n: u64) -> Result<Held, String> {
        match self {
            Contender::Latchkey(lock) => lock
                .acquire()
                .await
                .map(Held::Latchkey)
                .map_err(|e| e.to_string()),
            Contender::Polling { conn, key, .. } => {
                let mut conn = conn.clone();
                let token = format!("poll-{}-{n}", std::process::id());
                let mut seed = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                loop {
                    let ok: Option<String> = redis::cmd("SET")
                        .arg(&**key)
                        .arg(&token)
                        .arg("NX")
                        .arg("PX")
                        .arg(TTL.as_millis() as u64)
                        .query_async(&mut conn)
                        .await
                        .map_err(|e| e.to_string())?;
                    if ok.is_some() {
                        return Ok(Held::Polling(token));
                    }
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let jitter_us = 5_000 + seed % 10_001; // 5..=15 ms
                    tokio::time::sleep(Duration::from_micros(jitter_us)).await;
                }
            }
            Contender::Rslock { manager, key } => manager
                .acquire_no_guard(&key[..], TTL)
                .await
                .map(Held::Rslock)
                .map_err(|e| e.to_string()),
        }
    }

    async fn release(&self, held: Held) {
        match (self, held) {
            (_, Held::Latchkey(guard)) => {
                let _ = guard.release().await;
            }
            (Contender::Polling { conn, key, release }, Held::Polling(token)) => {
                let mut conn = conn.clone();
                let _: Result<i64, _> =
                    release.key(&**key).arg(token).invoke_async(&mut conn).await;
            }
            (Contender::Rslock { manager, .. }, Held::Rslock(lock)) => manager.unlock(&lock).await,
            _ => {}
        }
    }
}

struct Round {
    tasks: usize,
    hold: Duration,
    window: Duration,
    max_handoffs: usize,
}

#[derive(Default)]
struct Record {
    acquisitions: u64,
    acquired: Vec<u64>,
    released: Vec<u64>,
}

impl Round {
    /// Arms the tasks, waits for `go`, runs until the window closes or
    /// `max_handoffs` were recorded, then reports the events.
    async fn run(
        self,
        contender: Contender,
        lines: &mut tokio::io::Lines<BufReader<tokio::io::Stdin>>,
    ) {
        let (start_tx, start) = tokio::sync::watch::channel(false);
        let done = CancellationToken::new();
        let record = Arc::new(Mutex::new(Record::default()));
        let deadline = Arc::new(Mutex::new(Instant::now()));
        // Acquisitions in this process so far: a task that released stands
        // aside until another task has acquired (see `crate::handoff`).
        let (count_tx, count) = tokio::sync::watch::channel(0u64);
        let count_tx = Arc::new(count_tx);
        let mut joins = Vec::new();
        for task in 0..self.tasks {
            let (contender, mut start, done, record, deadline) = (
                contender.clone(),
                start.clone(),
                done.clone(),
                record.clone(),
                deadline.clone(),
            );
            let (count_tx, mut count) = (count_tx.clone(), count.clone());
            let (hold, max) = (self.hold, self.max_handoffs);
            joins.push(tokio::spawn(async move {
                if start.wait_for(|go| *go).await.is_err() {
                    return;
                }
                let mut n = task as u64;
                loop {
                    n += 1 << 32;
                    let held = tokio::select! {
                        held = contender.acquire(n) => held,
                        _ = done.cancelled() => return,
                    };
                    let Ok(held) = held else { return };
                    let now = mono_ns();
                    let mut mine = 0;
                    count_tx.send_modify(|c| {
                        *c += 1;
                        mine = *c;
                    });
                    let more = {
                        let mut r = record.lock().unwrap_or_else(|p| p.into_inner());
                        r.acquisitions += 1;
                        let open =
                            Instant::now() < *deadline.lock().unwrap_or_else(|p| p.into_inner());
                        let more = open && r.acquired.len() < max && !done.is_cancelled();
                        if more {
                            r.acquired.push(now);
                        }
                        more
                    };
                    if more {
                        hold_for(hold).await;
                        let t = mono_ns();
                        record
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .released
                            .push(t);
                    } else {
                        done.cancel();
                    }
                    contender.release(held).await;
                    if !more {
                        return;
                    }
                    tokio::select! {
                        _ = count.wait_for(|c| *c > mine) => {}
                        _ = done.cancelled() => return,
                    }
                }
            }));
        }
        emit(&serde_json::json!({ "armed": true }));
        match lines.next_line().await {
            Ok(Some(line)) if line.trim() == "go" => {}
            _ => {
                done.cancel();
                return;
            }
        }
        *deadline.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now() + self.window;
        let _ = start_tx.send(true);
        let timer = {
            let done = done.clone();
            let window = self.window;
            tokio::spawn(async move {
                tokio::time::sleep(window).await;
                done.cancel();
            })
        };
        for j in joins {
            let _ = j.await;
        }
        timer.abort();
        let r = std::mem::take(&mut *record.lock().unwrap_or_else(|p| p.into_inner()));
        emit(&serde_json::json!({
            "acquisitions": r.acquisitions,
            "acquired": r.acquired,
            "released": r.released,
        }));
    }
}

/// Holds the lock for `hold`, precisely: tokio's timer has a 1 ms
/// resolution, so `tokio::time::sleep(500 µs)` would hold about twice as
/// long as the Python (`time.sleep`) and Node (`Atomics.wait`) drivers do.
/// A blocking-pool thread sleeps instead; the task waits for it.
async fn hold_for(hold: Duration) {
    if tokio::task::spawn_blocking(move || std::thread::sleep(hold))
        .await
        .is_err()
    {
        tokio::time::sleep(hold).await;
    }
}
