//! `latchkey-bench --profile KIND PORTS N`: a warm-up, then N cycles of one
//! workload on the servers at PORTS (comma-separated), nothing printed: a
//! driver for callgrind (`dev/profile.sh` runs it twice, N and 3N cycles,
//! and takes the difference), for the workloads `--instructions` does not
//! cover:
//!
//! * `redlock5`: latchkey `Redlock` over 5 instances, `try_acquire` + `release`;
//! * `rslock5`: rslock over the same 5, `lock` + `unlock`;
//! * `mk-try`, `mk-acquire`: the `many_keys` scenario's shape, 64 tasks of
//!   one client on 1,000 locks, `try_acquire` (or `acquire`) + `release`;
//! * `mk-named`: as `mk-acquire`, but each cycle makes its `Lock` from the
//!   name (`Client::lock`), as the `scale` scenario's names in flight do;
//! * `mk-raw`: raw redis-rs sending the same two commands from 64 tasks over
//!   one multiplexed connection;
//! * `mk-raw-managed`: the same over redis-rs's `ConnectionManager`
//!   configured as latchkey's standalone connection is (it reconnects;
//!   each request bounded by the command timeout), which tells what that
//!   layer costs apart from latchkey's own work.

use std::sync::Arc;
use std::time::Duration;

use crate::many_keys::{raw_cycle, XorShift};

const TTL: Duration = Duration::from_secs(10);
const TASKS: u64 = 64;
const LOCKS: usize = 1000;
/// The release script as the library sends it.
fn release_lua() -> &'static str {
    latchkey::protocol::script_text("release.lua").expect("the release script")
}
const TOKEN: &str = "lk2:0123456789abcdef0123456789abcdef:1700000000000:12345:bench-host";

pub fn main(args: &[String]) -> i32 {
    let (Some(kind), Some(ports), Some(n)) = (
        args.first().cloned(),
        args.get(1).map(|p| {
            p.split(',')
                .filter_map(|p| p.parse::<u16>().ok())
                .collect::<Vec<_>>()
        }),
        args.get(2).and_then(|n| n.parse::<u64>().ok()),
    ) else {
        eprintln!("usage: latchkey-bench --profile KIND PORTS N");
        return 2;
    };
    let urls: Vec<String> = ports
        .iter()
        .map(|p| format!("redis://127.0.0.1:{p}/"))
        .collect();
    let result = crate::runtime().map_err(|e| e.to_string()).and_then(|rt| {
        // On a worker, as in the scenarios.
        rt.block_on(async { tokio::spawn(run(kind, urls, n)).await })
            .map_err(|e| e.to_string())?
    });
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("latchkey-bench --profile: {e}");
            1
        }
    }
}

async fn run(kind: String, urls: Vec<String>, n: u64) -> Result<(), String> {
    let refs: Vec<&str> = urls.iter().map(String::as_str).collect();
    match kind.as_str() {
        "redlock5" => {
            let r5 = latchkey::Redlock::connect(&refs)
                .await
                .map_err(|e| e.to_string())?;
            let lock = r5.lock("r5", TTL).map_err(|e| e.to_string())?;
            for count in [200, n] {
                for _ in 0..count {
                    let guard = lock.try_acquire().await.map_err(|e| e.to_string())?;
                    let guard = guard.ok_or("busy")?;
                    let _ = guard.release().await.map_err(|e| e.to_string())?;
                }
            }
        }
        "rslock5" => {
            let manager = rslock::LockManager::new(urls.clone());
            for count in [200, n] {
                for _ in 0..count {
                    let lock = manager
                        .lock(&b"bench:redlock:rslock"[..], TTL)
                        .await
                        .map_err(|e| format!("rslock: {e}"))?;
                    manager.unlock(&lock).await;
                }
            }
        }
        "mk-try" | "mk-acquire" => {
            let client = latchkey::Client::connect(refs[0])
                .await
                .map_err(|e| e.to_string())?;
            let locks: Arc<Vec<latchkey::Lock>> = Arc::new(
                (0..LOCKS)
                    .map(|i| client.lock(format!("mk:{i}"), TTL).expect("lock"))
                    .collect(),
            );
            let wait = kind == "mk-acquire";
            many(200, |t, per| mk_latchkey(locks.clone(), wait, t, per)).await;
            many(n, |t, per| mk_latchkey(locks.clone(), wait, t, per)).await;
        }
        "mk-named" => {
            let client = latchkey::Client::connect(refs[0])
                .await
                .map_err(|e| e.to_string())?;
            many(200, |t, per| mk_named(client.clone(), t, per)).await;
            many(n, |t, per| mk_named(client.clone(), t, per)).await;
        }
        "mk-raw" => {
            let conn = crate::handoff::connect(refs[0]).await;
            let keys = raw_keys();
            many(200, |t, per| mk_raw(conn.clone(), keys.clone(), t, per)).await;
            many(n, |t, per| mk_raw(conn.clone(), keys.clone(), t, per)).await;
        }
        "mk-raw-managed" => {
            let config = redis::aio::ConnectionManagerConfig::new()
                .set_connection_timeout(Some(latchkey::limits::DEFAULT_COMMAND_TIMEOUT))
                .set_response_timeout(Some(latchkey::limits::DEFAULT_COMMAND_TIMEOUT))
                .set_number_of_retries(1)
                .set_max_delay(Duration::from_millis(500));
            let client = redis::Client::open(refs[0]).map_err(|e| e.to_string())?;
            let conn = redis::aio::ConnectionManager::new_with_config(client, config)
                .await
                .map_err(|e| e.to_string())?;
            let keys = raw_keys();
            many(200, |t, per| mk_raw(conn.clone(), keys.clone(), t, per)).await;
            many(n, |t, per| mk_raw(conn.clone(), keys.clone(), t, per)).await;
        }
        other => return Err(format!("no workload {other:?}")),
    }
    Ok(())
}

/// `n` cycles over 64 tasks.
async fn many<F, Fut>(n: u64, task: F)
where
    F: Fn(u64, u64) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let joins: Vec<_> = (0..TASKS)
        .map(|t| tokio::spawn(task(t, n / TASKS)))
        .collect();
    for j in joins {
        let _ = j.await;
    }
}

async fn mk_latchkey(locks: Arc<Vec<latchkey::Lock>>, wait: bool, t: u64, per: u64) {
    let mut rng = XorShift::new(t);
    let mut done = 0;
    while done < per {
        let lock = &locks[rng.below(LOCKS)];
        let guard = if wait {
            match lock.acquire().await {
                Ok(guard) => guard,
                Err(_) => continue,
            }
        } else {
            match lock.try_acquire().await {
                Ok(Some(guard)) => guard,
                _ => continue,
            }
        };
        let _ = guard.release().await;
        done += 1;
    }
}

async fn mk_named(client: latchkey::Client, t: u64, per: u64) {
    let mut rng = XorShift::new(t);
    let mut done = 0;
    while done < per {
        let Ok(lock) = client.lock(format!("mk:{}", rng.below(LOCKS)), TTL) else {
            continue;
        };
        let Ok(guard) = lock.acquire().await else {
            continue;
        };
        let _ = guard.release().await;
        done += 1;
    }
}

/// The raw workloads' keys and release channels.
fn raw_keys() -> Arc<Vec<[String; 2]>> {
    Arc::new(
        (0..LOCKS)
            .map(|i| [format!("raw:mk:{i}"), format!("raw:mk:{i}:released")])
            .collect(),
    )
}

async fn mk_raw<C: redis::aio::ConnectionLike + Send>(
    mut conn: C,
    keys: Arc<Vec<[String; 2]>>,
    t: u64,
    per: u64,
) {
    let release = redis::Script::new(release_lua());
    let ttl = TTL.as_millis().to_string();
    let token = format!("{TOKEN}{t}");
    let mut rng = XorShift::new(t + 1000);
    let mut done = 0;
    while done < per {
        let [key, channel] = &keys[rng.below(LOCKS)];
        if raw_cycle(&mut conn, &release, key, channel, &token, &ttl).await {
            done += 1;
        }
    }
}
