//! Scenario `told`: how soon a holder learns that its hold ended, for every
//! kind of hold, when an operator revokes it and when Redis restarts
//! without its data; and, for `latchkey run`, how soon CMD gets SIGTERM
//! after a revocation.
//!
//! Library holds (lock, fair lock, permit, writer, reader, two locks at
//! once, leadership) have a watchdog and a 30 s TTL: renewals come every
//! 10 s, so anything well under that was heard, not found by a renewal.
//! Revoked: from the `revoke` call to `lost()` (the holder waits until its
//! watch listens first: PUBSUB NUMSUB). Restarted: every kind held at once,
//! the server restarted without persistence, from the restart's return to
//! each `lost()`. `run`: from `latchkey revoke` to CMD's SIGTERM trap
//! (noted by CMD in a file), with the release CLI binary
//! (`target/release/latchkey`; built by `./dev bench`). No targets: the
//! figures are for `docs/reliability.md`.

use std::time::{Duration, Instant};

use latchkey::Client;
use latchkey_testkit::RedisServer;

use crate::stats::{quantile, table};
use crate::Report;

const TTL: Duration = Duration::from_secs(30);

pub fn run(quick: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Report>>> {
    Box::pin(run_async(quick))
}

async fn run_async(quick: bool) -> Report {
    let rounds = if quick { 5 } else { 30 };
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    match library(rounds).await {
        Ok(mut found) => rows.append(&mut found),
        Err(e) => notes.push(format!("library holds not measured: {e}")),
    }
    match cli(if quick { 3 } else { 15 }).await {
        Ok(mut found) => rows.append(&mut found),
        Err(e) => notes.push(format!("`latchkey run` not measured: {e}")),
    }
    let mut body = table(
        &["hold", "event", "to", "samples", "p50", "p99", "max"],
        &rows,
    );
    for note in notes {
        body.push_str(&format!("\n{note}\n"));
    }
    Report {
        title: "Holders told at once: revocation and restart to `lost`".into(),
        body,
        missed: Vec::new(),
    }
}

fn row(hold: &str, event: &str, to: &str, mut samples: Vec<Duration>) -> Vec<String> {
    let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1000.0);
    vec![
        hold.into(),
        event.into(),
        to.into(),
        samples.len().to_string(),
        ms(quantile(&mut samples, 0.5)),
        ms(quantile(&mut samples, 0.99)),
        ms(quantile(&mut samples, 1.0)),
    ]
}

const KINDS: [&str; 7] = [
    "lock",
    "fair lock",
    "permit",
    "writer",
    "reader",
    "two locks",
    "leadership",
];

/// A hold of kind `k` on `name`, with its watchdog, and the channel its
/// watch listens on.
async fn hold(
    client: &Client,
    k: usize,
    name: &str,
) -> latchkey::Result<(Box<dyn latchkey::Guard>, String)> {
    let channel = |suffix: &str| format!("{{bench:{name}}}:{suffix}");
    Ok(match k {
        0 => (
            Box::new(
                client
                    .lock(name, TTL)?
                    .with_watchdog()
                    .try_acquire()
                    .await?
                    .ok_or_else(busy)?,
            ),
            channel("released"),
        ),
        1 => (
            Box::new(
                client
                    .lock(name, TTL)?
                    .fair()?
                    .with_watchdog()
                    .try_acquire()
                    .await?
                    .ok_or_else(busy)?,
            ),
            channel("released"),
        ),
        2 => (
            Box::new(
                client
                    .semaphore(name, 2, TTL)?
                    .with_watchdog()
                    .try_acquire()
                    .await?
                    .ok_or_else(busy)?,
            ),
            channel("permits:released"),
        ),
        3 => (
            Box::new(
                client
                    .rwlock(name, TTL)?
                    .with_watchdog()
                    .try_write()
                    .await?
                    .ok_or_else(busy)?,
            ),
            channel("rw:released"),
        ),
        4 => (
            Box::new(
                client
                    .rwlock(name, TTL)?
                    .with_watchdog()
                    .try_read()
                    .await?
                    .ok_or_else(busy)?,
            ),
            channel("rw:released"),
        ),
        5 => {
            let other = format!("{name}-b");
            let locks = client
                .lock_all(&[name, other.as_str()], TTL)?
                .with_watchdog();
            (
                Box::new(locks.try_acquire().await?.ok_or_else(busy)?),
                channel("released"),
            )
        }
        _ => (
            Box::new(
                client
                    .election(name, TTL)?
                    .try_campaign("bench")
                    .await?
                    .ok_or_else(busy)?,
            ),
            channel("election:changes"),
        ),
    })
}

fn busy() -> latchkey::Error {
    latchkey::Error::Internal("a fresh name was busy".into())
}

async fn until_subscribed(server: &RedisServer, channel: &str) -> Result<(), String> {
    let until = Instant::now() + Duration::from_secs(10);
    while server.subscribers(channel) < 1 {
        if Instant::now() > until {
            return Err(format!("nobody listened on {channel}"));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
}

async fn library(rounds: usize) -> Result<Vec<Vec<String>>, String> {
    let mut server = RedisServer::builder()
        .try_start()
        .map_err(|e| e.to_string())?;
    let connect = |url: String| async move {
        Client::builder(&url)
            .prefix("bench:")
            .pubsub_ping_every(Duration::from_millis(200))
            .connect()
            .await
            .map_err(|e| e.to_string())
    };
    let holder = connect(server.url()).await?;
    let operator = connect(server.url()).await?;
    let mut revoked = vec![Vec::new(); KINDS.len()];
    for round in 0..rounds {
        for (k, times) in revoked.iter_mut().enumerate() {
            let name = format!("told-{k}-{round}");
            let (guard, channel) = hold(&holder, k, &name).await.map_err(|e| e.to_string())?;
            until_subscribed(&server, &channel).await?;
            let at = Instant::now();
            operator.revoke(&name).await.map_err(|e| e.to_string())?;
            tokio::time::timeout(TTL / 3, guard.lost())
                .await
                .map_err(|_| format!("{}: not told within a renewal", KINDS[k]))?;
            times.push(at.elapsed());
        }
    }
    let mut restarted = vec![Vec::new(); KINDS.len()];
    for round in 0..rounds.min(10) {
        let mut held = Vec::new();
        for k in 0..KINDS.len() {
            let name = format!("restart-{k}-{round}");
            let (guard, channel) = hold(&holder, k, &name).await.map_err(|e| e.to_string())?;
            until_subscribed(&server, &channel).await?;
            held.push(guard);
        }
        server.restart();
        let at = Instant::now();
        let waits: Vec<_> = held
            .into_iter()
            .map(|g| {
                tokio::spawn(async move {
                    let lost = tokio::time::timeout(TTL / 3, g.lost()).await;
                    lost.ok().map(|()| at.elapsed())
                })
            })
            .collect();
        for (k, wait) in waits.into_iter().enumerate() {
            let took = wait.await.ok().flatten();
            let took = took.ok_or_else(|| format!("{}: not told after a restart", KINDS[k]))?;
            restarted[k].push(took);
        }
    }
    let mut rows = Vec::new();
    for (k, times) in revoked.into_iter().enumerate() {
        rows.push(row(KINDS[k], "revoke", "`lost()`", times));
    }
    for (k, times) in restarted.into_iter().enumerate() {
        rows.push(row(KINDS[k], "restart, data lost", "`lost()`", times));
    }
    Ok(rows)
}

/// `latchkey run` of each kind, revoked: to CMD's SIGTERM.
async fn cli(rounds: usize) -> Result<Vec<Vec<String>>, String> {
    let exe = crate::peers::repo_root().join("target/release/latchkey");
    if !exe.exists() {
        return Err(format!(
            "{} not built (cargo build --release -p latchkey-cli)",
            exe.display()
        ));
    }
    let server = RedisServer::builder()
        .try_start()
        .map_err(|e| e.to_string())?;
    let dir = std::env::temp_dir().join(format!("latchkey-bench-told-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let modes: [(&str, &[&str], &str); 6] = [
        ("run", &[], "released"),
        ("run --fair", &["--fair"], "released"),
        ("run --permits 2", &["--permits", "2"], "permits:released"),
        ("run --write", &["--write"], "rw:released"),
        ("run --read", &["--read"], "rw:released"),
        ("run --and", &["--and", "other"], "released"),
    ];
    let mut rows = Vec::new();
    for (label, flags, suffix) in modes {
        let mut times = Vec::new();
        for round in 0..rounds {
            let name = format!("cli-{}-{round}", label.replace(' ', "-"));
            let marks = dir.join(&name);
            let script = format!(
                "trap 'echo TERM >> {m}; exit 0' TERM; echo started >> {m}; while :; do sleep 0.01; done",
                m = marks.display()
            );
            let mut flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
            if let Some(at) = flags.iter().position(|f| f == "other") {
                flags[at] = format!("{name}-b");
            }
            let mut child = tokio::process::Command::new(&exe)
                .args(["--redis", &server.url(), "--prefix", "bench:", "run"])
                .args(&flags)
                .args([name.as_str(), "--", "sh", "-c", &script])
                .stderr(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| e.to_string())?;
            wait_for(&marks, "started").await?;
            until_subscribed(&server, &format!("{{bench:{name}}}:{suffix}")).await?;
            let at = Instant::now();
            let out = tokio::process::Command::new(&exe)
                .args([
                    "--redis",
                    &server.url(),
                    "--prefix",
                    "bench:",
                    "revoke",
                    &name,
                    "--yes",
                ])
                .output()
                .await
                .map_err(|e| e.to_string())?;
            if !out.status.success() {
                return Err(format!(
                    "revoke {name}: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            wait_for(&marks, "TERM").await?;
            times.push(at.elapsed());
            let _ = child.wait().await;
        }
        rows.push(row(label, "`latchkey revoke`", "CMD's SIGTERM", times));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(rows)
}

async fn wait_for(path: &std::path::Path, needle: &str) -> Result<(), String> {
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        if std::fs::read_to_string(path)
            .unwrap_or_default()
            .contains(needle)
        {
            return Ok(());
        }
        if Instant::now() > until {
            return Err(format!("{} never got {needle:?}", path.display()));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}
