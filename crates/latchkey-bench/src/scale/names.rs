//! Curve 4, names in flight: 64 tasks of one client cycle (acquire,
//! release) over N distinct lock names, each cycle on a random one, against
//! raw redis-rs sending the same two commands (`SET NX PX GET`, the
//! compare-and-delete release script) over one multiplexed connection, as
//! in the `many_keys` scenario ([`crate::many_keys::raw_cycle`]; a busy key
//! is skipped there, `acquire` waits for it here).
//!
//! With many names a program does not keep a `Lock` per name: each cycle
//! makes its `Lock` from the name (`Client::lock`), and the raw client
//! formats its key and channel, so both pay for a name per cycle. Rounds
//! alternate the two (order rotating); the ratio is taken in each round,
//! then the median. Target at the biggest N: ≥ 0.90× raw.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::many_keys::{raw_cycle, XorShift};
use crate::stats::median;

const TASKS: usize = 64;

pub struct Row {
    pub names: usize,
    pub latchkey: f64,
    pub raw: f64,
    pub ratio: f64,
    pub rounds: usize,
}

pub async fn row(url: &str, names: usize, rounds: usize, window: Duration) -> Result<Row, String> {
    let client = latchkey::Client::connect(url)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let conn = crate::handoff::connect(url).await;
    let (mut ours, mut raws, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let _ = run_latchkey(&client, names, window / 4).await; // warm-up
    for round in 0..rounds {
        let (l, r) = if round % 2 == 0 {
            let l = run_latchkey(&client, names, window).await;
            (l, run_raw(&conn, names, window).await)
        } else {
            let r = run_raw(&conn, names, window).await;
            (run_latchkey(&client, names, window).await, r)
        };
        ours.push(l);
        raws.push(r);
        if r > 0.0 {
            ratios.push(l / r);
        }
    }
    if ratios.is_empty() {
        return Err("raw redis-rs completed no cycle".into());
    }
    Ok(Row {
        names,
        latchkey: median(&mut ours),
        raw: median(&mut raws),
        ratio: median(&mut ratios),
        rounds,
    })
}

async fn run_latchkey(client: &latchkey::Client, names: usize, window: Duration) -> f64 {
    let count = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + window;
    let started = Instant::now();
    let joins: Vec<_> = (0..TASKS)
        .map(|t| {
            let (client, count) = (client.clone(), count.clone());
            tokio::spawn(async move {
                let mut rng = XorShift::new(t as u64 + 7);
                while Instant::now() < deadline {
                    let Ok(lock) =
                        client.lock(format!("nf:{}", rng.below(names)), crate::worker::TTL)
                    else {
                        continue;
                    };
                    let Ok(guard) = lock.acquire().await else {
                        continue;
                    };
                    if guard.release().await.is_ok() {
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for j in joins {
        let _ = j.await;
    }
    count.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

async fn run_raw(conn: &redis::aio::MultiplexedConnection, names: usize, window: Duration) -> f64 {
    let release = redis::Script::new(
        latchkey::protocol::script_text("release.lua").expect("the release script"),
    );
    let ttl = crate::worker::TTL.as_millis().to_string();
    let count = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + window;
    let started = Instant::now();
    let joins: Vec<_> = (0..TASKS)
        .map(|t| {
            let (mut conn, count, release, ttl) =
                (conn.clone(), count.clone(), release.clone(), ttl.clone());
            tokio::spawn(async move {
                let mut rng = XorShift::new(t as u64 + 1007);
                let token = format!(
                    "lk2:0123456789abcdef0123456789abcdef:1700000000000:12345:bench-host{t}"
                );
                while Instant::now() < deadline {
                    let i = rng.below(names);
                    let (key, channel) = (format!("raw:nf:{i}"), format!("raw:nf:{i}:released"));
                    if raw_cycle(&mut conn, &release, &key, &channel, &token, &ttl).await {
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for j in joins {
        let _ = j.await;
    }
    count.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

pub fn table(rows: &[Row]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.names.to_string(),
                format!("{:.0}", r.latchkey),
                format!("{:.0}", r.raw),
                format!("{:.3}×", r.ratio),
                r.rounds.to_string(),
            ]
        })
        .collect();
    crate::stats::table(
        &[
            "distinct names",
            "latchkey cycles/s",
            "raw redis-rs cycles/s",
            "latchkey ÷ raw (median of rounds)",
            "rounds",
        ],
        &cells,
    )
}
