//! The holder process of the `cached` scenario: `latchkey-bench
//! --cached-holder PORT` holds latchkey locks on command, plainly or kept
//! while idle, so that the bench process can wait for them from another
//! process.
//!
//! ```text
//! $ latchkey-bench --cached-holder 40123
//! {"ready":true,"lib":"latchkey","version":"0.1.0"}
//! hold barging
//! {"held":true}
//! release
//! {"released":123456789,"owned":true}
//! keep idle
//! {"kept":true,"from_redis":true}
//! ```
//!
//! | bench sends | holder answers |
//! |---|---|
//! | (start) | `{"ready":true,..}`, as every driver (see [`crate::driver`]) |
//! | `hold NAME` | acquires the plain lock NAME: `{"held":true}` |
//! | `release` | stamps [`mono_ns`], releases the lock held: `{"released":NS,"owned":B}` |
//! | `keep NAME` | acquires and releases the cached lock NAME, which keeps its hold: `{"kept":B,"from_redis":B}` |
//! | `quit` (or EOF) | exits |
//!
//! Every lock has the bench's TTL and the watchdog on (a cached lock needs
//! it; the plain one gets it too, so the two differ only in caching). The
//! `released` stamp is taken right before the release starts, where
//! [`crate::worker`] stamps its handoff rounds' releases.

use std::collections::HashMap;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::driver::Driver;
use crate::stats::mono_ns;
use crate::worker::{emit, TTL};

/// The longest any one wait of the scenario may take before it fails.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// An error of the scenario, as the line the report shows.
pub(crate) fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// How long a cached lock keeps its hold unused: far longer than the
/// scenario's pauses between samples, so only being wanted gives it back.
pub const IDLE: Duration = Duration::from_secs(60);

/// Starts a holder process on the server at `port`.
pub async fn spawn(port: u16) -> Result<Driver, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find own binary: {e}"))?;
    let mut command = Command::new(exe);
    command.arg("--cached-holder").arg(port.to_string());
    Driver::spawn(command).await
}

/// Runs the holder; returns the process exit code.
pub fn main(args: &[String]) -> i32 {
    let Some(port) = args.first().and_then(|p| p.parse::<u16>().ok()) else {
        eprintln!("usage: latchkey-bench --cached-holder PORT");
        return 2;
    };
    let runtime = match crate::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            emit(&serde_json::json!({ "error": format!("no tokio runtime: {e}") }));
            return 1;
        }
    };
    // On a runtime worker, as application tasks run (see `uncontended::run`).
    match runtime.block_on(async { tokio::spawn(serve(port)).await }) {
        Ok(code) => code,
        Err(e) => {
            emit(&serde_json::json!({ "error": format!("the holder failed: {e}") }));
            1
        }
    }
}

async fn serve(port: u16) -> i32 {
    let url = format!("redis://127.0.0.1:{port}/");
    let client = match latchkey::Client::connect(&url).await {
        Ok(c) => c,
        Err(e) => {
            emit(&serde_json::json!({ "error": format!("cannot connect: {e}") }));
            return 1;
        }
    };
    emit(&serde_json::json!({ "ready": true, "lib": "latchkey", "version": "0.1.0" }));
    let mut holder = Holder {
        client,
        plain: HashMap::new(),
        cached: HashMap::new(),
        held: None,
    };
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let words: Vec<&str> = line.split_whitespace().collect();
        let reply = match words.as_slice() {
            ["hold", name] => holder.hold(name).await,
            ["release"] => holder.release().await,
            ["keep", name] => holder.keep(name).await,
            ["quit"] => break,
            [] => continue,
            _ => Err(format!("unsupported command {line:?}")),
        };
        emit(&reply.unwrap_or_else(|e| serde_json::json!({ "error": e })));
    }
    // Gives kept holds back before the process ends.
    holder.client.flush(Duration::from_secs(2)).await;
    0
}

struct Holder {
    client: latchkey::Client,
    plain: HashMap<String, latchkey::Lock>,
    cached: HashMap<String, latchkey::CachedLock>,
    held: Option<latchkey::LockGuard>,
}

impl Holder {
    fn plain(&mut self, name: &str) -> Result<latchkey::Lock, String> {
        if let Some(lock) = self.plain.get(name) {
            return Ok(lock.clone());
        }
        let lock = self
            .client
            .lock(name, TTL)
            .map_err(|e| e.to_string())?
            .with_watchdog();
        self.plain.insert(name.to_owned(), lock.clone());
        Ok(lock)
    }

    fn cached(&mut self, name: &str) -> Result<latchkey::CachedLock, String> {
        if let Some(lock) = self.cached.get(name) {
            return Ok(lock.clone());
        }
        let lock = self
            .client
            .lock(name, TTL)
            .map_err(|e| e.to_string())?
            .with_watchdog()
            .with_caching(IDLE)
            .map_err(|e| e.to_string())?;
        self.cached.insert(name.to_owned(), lock.clone());
        Ok(lock)
    }

    async fn hold(&mut self, name: &str) -> Result<serde_json::Value, String> {
        if self.held.is_some() {
            return Err("already holding a lock".into());
        }
        let lock = self.plain(name)?;
        let guard = lock.acquire_until(TTL).await.map_err(|e| e.to_string())?;
        self.held = Some(guard);
        Ok(serde_json::json!({ "held": true }))
    }

    async fn release(&mut self) -> Result<serde_json::Value, String> {
        let guard = self.held.take().ok_or("nothing held")?;
        let t = mono_ns();
        let owned = guard.release().await.map_err(|e| e.to_string())?;
        Ok(serde_json::json!({
            "released": t,
            "owned": owned == latchkey::Ownership::Owned,
        }))
    }

    async fn keep(&mut self, name: &str) -> Result<serde_json::Value, String> {
        let lock = self.cached(name)?;
        let guard = lock.acquire_until(TTL).await.map_err(|e| e.to_string())?;
        let from_redis = guard.took_from_redis();
        let owned = guard.release().await.map_err(|e| e.to_string())?;
        Ok(serde_json::json!({
            "kept": owned == latchkey::Ownership::Owned && lock.is_kept(),
            "from_redis": from_redis,
        }))
    }
}
