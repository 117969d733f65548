//! `latchkey demo [--workers N] [--increments M]`: the problem and the fix,
//! in a few seconds.
//!
//! ```text
//! $ latchkey demo
//! latchkey demo: 8 workers × 25 increments of one counter in Redis
//! Redis: a private redis-server on 127.0.0.1:41234, started for this demo
//!
//! Without a lock: each worker loops GET counter, sleep 1ms, SET counter+1
//!   expected 200, got 27: 173 updates lost (86%)
//!
//! With latchkey: the same loop inside lock "demo-lock"
//!   expected 200, got 200: 0 updates lost
//! ...
//! With a fair latchkey lock (Lock::fair: waiters served in arrival order)
//!   expected 200, got 200: 0 updates lost
//! ...
//!   longest wait    412.0ms barging, 33.1ms fair
//! ```
//!
//! Every worker has its own connection (as separate machines would) and does
//! a read-modify-write on a counter: without a lock, workers overwrite each
//! other's increments; with latchkey none is lost, and the fencing tokens of
//! the critical sections come out strictly increasing. Without `--redis` (or
//! `LATCHKEY_REDIS_URL`) the demo starts a private `redis-server` on a free
//! loopback port and stops it at the end; with one, it uses two keys under
//! the prefix (`demo-counter`, `demo-lock`) and deletes them afterwards, also
//! when interrupted; the counter has a TTL, for a demo killed outright.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use latchkey::Connection;
use latchkey::Ownership;
use latchkey_testkit::RedisServer;

use crate::support::duration::human;
use crate::support::exit::{self, Failure, Outcome};
use crate::support::target::{redact, Target};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Concurrent workers, each with its own connection.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub workers: u32,
    /// Increments per worker.
    #[arg(long, value_name = "M", default_value_t = 25, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub increments: u32,
}

/// The "work" between reading and writing the counter: long enough that
/// workers without a lock interleave, short enough to keep the demo quick.
const WORK: Duration = Duration::from_millis(1);
const LOCK_NAME: &str = "demo-lock";
const COUNTER: &str = "demo-counter";
/// Generous: each hold is a few ms, but the demo must not hang forever.
const LOCK_TTL: Duration = Duration::from_secs(5);
const MAX_WAIT: Duration = Duration::from_secs(60);

/// What one critical section under the lock measured.
struct Section {
    waited: Duration,
    held: Duration,
    fencing_token: u64,
}

pub async fn demo(target: &Target, args: DemoArgs) -> Outcome {
    let (url, server) = if target.urls.is_empty() {
        let server = tokio::task::spawn_blocking(|| RedisServer::builder().try_start())
            .await
            .map_err(|e| Failure::new(exit::INTERNAL, format!("starting redis-server: {e}")))?
            .map_err(|e| {
                let why = e.to_string();
                let why = why.lines().next().unwrap_or("unknown error").to_owned();
                Failure::new(
                    exit::UNAVAILABLE,
                    format!("cannot start a private redis-server ({why}); install it (apt-get install redis-server) or pass --redis URL"),
                )
            })?;
        (server.url(), Some(server))
    } else {
        (target.single_url("the demo")?, None)
    };
    let (workers, increments) = (args.workers, args.increments);
    let expected = u64::from(workers) * u64::from(increments);

    println!("latchkey demo: {workers} workers × {increments} increments of one counter in Redis");
    match &server {
        Some(s) => println!(
            "Redis: a private redis-server on {}, started for this demo",
            s.addr()
        ),
        None => println!("Redis: {}", redact(&url)),
    }
    let mut clients = Vec::new();
    for _ in 0..workers {
        clients.push(target.new_client_for(&url).await?);
    }
    let counter_key = [clients[0].prefix(), COUNTER.as_bytes()].concat();
    let fence_key =
        latchkey::protocol::fence_key(&[clients[0].prefix(), LOCK_NAME.as_bytes()].concat());
    let mut admin = clients[0].connection();

    // Interrupted (Ctrl-C, SIGTERM, SIGHUP): the workers stop (their tasks
    // are aborted with the rounds) and the keys are deleted all the same;
    // a demo killed outright leaves only the counter, which expires.
    let mut signals = crate::support::signals::Signals::install()?;
    let ran = tokio::select! {
        ran = rounds(&clients, &counter_key, &mut admin, workers, increments) => ran,
        signo = signals.recv() => Err(Failure::new(
            128u8.saturating_add(signo as u8),
            format!("{} during the demo; removed its keys", crate::support::signals::signal_name(signo)),
        )),
    };

    // Leave nothing behind on someone else's server. The workers were
    // stopped, but a request one of them had queued may still be on its way:
    // a PING on each worker connection returns after everything sent before
    // it ran, so the DEL below is the last word.
    for client in &clients {
        let mut conn = client.connection();
        let _: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut conn).await;
    }
    let _: redis::RedisResult<i64> = redis::cmd("DEL")
        .arg(&counter_key)
        .arg(&fence_key)
        .query_async(&mut admin)
        .await;
    drop(clients);
    if let Some(mut server) = server {
        tokio::task::spawn_blocking(move || server.stop())
            .await
            .map_err(|e| Failure::new(exit::INTERNAL, format!("stopping redis-server: {e}")))?;
        println!("Stopped the private redis-server.");
    }
    let locked = ran?;
    if locked != expected {
        return Err(Failure::new(
            exit::INTERNAL,
            format!(
                "{} updates were lost under the lock: this is a bug",
                expected.saturating_sub(locked)
            ),
        ));
    }
    Ok(exit::OK)
}

/// The rounds, without a lock, with the lock, with a fair lock; returns
/// the counter after a locked round (the fair one's if it lost updates).
async fn rounds(
    clients: &[latchkey::Client],
    counter_key: &[u8],
    admin: &mut Connection,
    workers: u32,
    increments: u32,
) -> Result<u64, Failure> {
    let counter_key = counter_key.to_vec();
    let expected = u64::from(workers) * u64::from(increments);

    println!();
    println!(
        "Without a lock: each worker loops GET counter, sleep {}, SET counter+1",
        human(WORK)
    );
    let started = Instant::now();
    set(admin, &counter_key, 0).await?;
    let tasks: Vec<_> = clients
        .iter()
        .map(|client| {
            let (client, key) = (client.clone(), counter_key.clone());
            tokio::spawn(async move {
                let mut conn = client.connection();
                for _ in 0..increments {
                    increment(&mut conn, &key).await?;
                }
                Ok::<_, Failure>(())
            })
        })
        .collect();
    join(tasks).await?;
    let unlocked_took = started.elapsed();
    let unlocked = get(admin, &counter_key).await?;
    report(expected, unlocked);

    let titles = [
        format!("With latchkey: the same loop inside lock {LOCK_NAME:?}"),
        "With a fair latchkey lock (Lock::fair: waiters served in arrival order)".to_string(),
    ];
    // (the counter, the longest wait) of the barging round, then the fair one.
    let mut ends = [(0, Duration::ZERO); 2];
    for (fair, (title, end)) in titles.iter().zip(&mut ends).enumerate() {
        println!();
        println!("{title}");
        let (counter, sections, took) =
            locked_round(clients, &counter_key, admin, increments, fair == 1).await?;
        report(expected, counter);
        summary(&sections, workers, took, unlocked_took);
        *end = (
            counter,
            sections.iter().map(|s| s.waited).max().unwrap_or_default(),
        );
    }
    let [(locked, barging_max), (fair, fair_max)] = ends;
    println!();
    println!(
        "  longest wait    {} barging, {} fair",
        human(barging_max),
        human(fair_max)
    );
    if fair != expected {
        return Ok(fair);
    }
    Ok(locked)
}

/// The loop under the lock (`fair`: a fair lock); returns the counter, the
/// critical sections in the order they ran, and how long it took.
async fn locked_round(
    clients: &[latchkey::Client],
    counter_key: &[u8],
    admin: &mut Connection,
    increments: u32,
    fair: bool,
) -> Result<(u64, Vec<Section>, Duration), Failure> {
    let started = Instant::now();
    set(admin, counter_key, 0).await?;
    let expected = clients.len() * increments as usize;
    let sections = Arc::new(Mutex::new(Vec::with_capacity(expected)));
    let tasks: Vec<_> = clients
        .iter()
        .map(|client| {
            let (client, key, sections) = (client.clone(), counter_key.to_vec(), sections.clone());
            tokio::spawn(async move {
                let mut lock = client.lock(LOCK_NAME, LOCK_TTL)?;
                if fair {
                    lock = lock.fair()?;
                }
                let mut conn = client.connection();
                for _ in 0..increments {
                    let asked = Instant::now();
                    let guard = lock.acquire_until(MAX_WAIT).await?;
                    let got = Instant::now();
                    increment(&mut conn, &key).await?;
                    // Recorded inside the critical section: the list is in
                    // the order the sections ran.
                    let fencing_token = guard.fencing_token().await?;
                    lock_sections(&sections).push(Section {
                        waited: got - asked,
                        held: got.elapsed(),
                        fencing_token,
                    });
                    let released = guard.release().await?;
                    if released != Ownership::Owned {
                        // Only if a 1 ms hold outlived a 5 s TTL: worth saying.
                        return Err(Failure::new(
                            exit::INTERNAL,
                            format!("the demo lock expired while held ({released:?})"),
                        ));
                    }
                }
                Ok::<_, Failure>(())
            })
        })
        .collect();
    join(tasks).await?;
    let took = started.elapsed();
    let locked = get(admin, counter_key).await?;
    let sections = std::mem::take(&mut *lock_sections(&sections));
    Ok((locked, sections, took))
}

fn report(expected: u64, actual: u64) {
    let lost = expected.saturating_sub(actual);
    let share = if lost == 0 {
        String::new()
    } else {
        format!(" ({:.0}%)", lost as f64 * 100.0 / expected as f64)
    };
    println!("  expected {expected}, got {actual}: {lost} updates lost{share}");
}

fn summary(sections: &[Section], workers: u32, took: Duration, unlocked_took: Duration) {
    let n = sections.len().max(1) as u32;
    let total_wait: Duration = sections.iter().map(|s| s.waited).sum();
    let max_wait = sections.iter().map(|s| s.waited).max().unwrap_or_default();
    let total_hold: Duration = sections.iter().map(|s| s.held).sum();
    let tokens: Vec<u64> = sections.iter().map(|s| s.fencing_token).collect();
    let increasing = tokens.windows(2).all(|w| w[0] < w[1]);
    println!();
    println!(
        "  acquisitions    {} ({workers} workers, each with its own connection)",
        sections.len()
    );
    println!(
        "  waiting         total {}, avg {}, max {}",
        human(total_wait),
        human(total_wait / n),
        human(max_wait)
    );
    println!(
        "  holding         avg {} per critical section",
        human(total_hold / n)
    );
    if let (Some(first), Some(last)) = (tokens.first(), tokens.last()) {
        println!(
            "  fencing tokens  {first} … {last}, {}",
            if increasing {
                "strictly increasing"
            } else {
                "NOT increasing (bug!)"
            }
        );
    }
    println!(
        "  took            {} (without a lock: {})",
        human(took),
        human(unlocked_took)
    );
}

/// GET, a little "work", SET: the read-modify-write that loses updates
/// unless something serialises it.
async fn increment(conn: &mut Connection, key: &[u8]) -> Result<(), Failure> {
    let value = get(conn, key).await?;
    tokio::time::sleep(WORK).await;
    set(conn, key, value + 1).await
}

async fn get(conn: &mut Connection, key: &[u8]) -> Result<u64, Failure> {
    let value: Option<u64> = redis::cmd("GET")
        .arg(key)
        .query_async(conn)
        .await
        .map_err(redis_failure)?;
    Ok(value.unwrap_or(0))
}

/// How long the counter outlives a demo killed before it could delete it.
const COUNTER_TTL_MS: u64 = 60_000;

async fn set(conn: &mut Connection, key: &[u8], value: u64) -> Result<(), Failure> {
    redis::cmd("SET")
        .arg(key)
        .arg(value)
        .arg("PX")
        .arg(COUNTER_TTL_MS)
        .query_async::<()>(conn)
        .await
        .map_err(redis_failure)
}

fn redis_failure(e: redis::RedisError) -> Failure {
    Failure::new(exit::UNAVAILABLE, format!("Redis: {e}"))
}

async fn join(tasks: Vec<tokio::task::JoinHandle<Result<(), Failure>>>) -> Result<(), Failure> {
    // Dropped unfinished (the demo was interrupted): the workers stop too,
    // instead of writing the counter again after it was deleted.
    struct AbortOnDrop(Vec<tokio::task::JoinHandle<Result<(), Failure>>>);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            self.0.iter().for_each(|task| task.abort());
        }
    }
    let mut tasks = AbortOnDrop(tasks);
    for task in &mut tasks.0 {
        task.await
            .map_err(|e| Failure::new(exit::INTERNAL, format!("a demo worker failed: {e}")))??;
    }
    Ok(())
}

fn lock_sections(sections: &Mutex<Vec<Section>>) -> std::sync::MutexGuard<'_, Vec<Section>> {
    // A worker that panicked mid-push cannot leave the Vec half-updated.
    sections.lock().unwrap_or_else(|p| p.into_inner())
}
