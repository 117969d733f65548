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

use std::time::{Duration, Instant};

use crate::many_keys::{cycles_per_second, raw_cycle, XorShift, TOKEN};
use crate::stats::median;

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

pub(super) async fn run_latchkey(client: &latchkey::Client, names: usize, window: Duration) -> f64 {
    run_named(client, window, move |rng| {
        format!("nf:{}", rng.below(names))
    })
    .await
}

/// Cycles per second of 64 tasks of `client`, each cycle on the lock
/// `name` draws (the name set: uniform above, skewed in the cluster curve).
pub(super) async fn run_named<N>(client: &latchkey::Client, window: Duration, name: N) -> f64
where
    N: Fn(&mut XorShift) -> String + Clone + Send + 'static,
{
    cycles_per_second(window, |t, deadline| {
        let (client, name) = (client.clone(), name.clone());
        async move {
            let mut rng = XorShift::new(t as u64 + 7);
            let mut cycles = 0;
            while Instant::now() < deadline {
                let Ok(lock) = client.lock(name(&mut rng), crate::worker::TTL) else {
                    continue;
                };
                let Ok(guard) = lock.acquire().await else {
                    continue;
                };
                if guard.release().await.is_ok() {
                    cycles += 1;
                }
            }
            cycles
        }
    })
    .await
}

async fn run_raw(conn: &redis::aio::MultiplexedConnection, names: usize, window: Duration) -> f64 {
    let release = redis::Script::new(
        latchkey::protocol::script_text("release.lua").expect("the release script"),
    );
    let ttl = crate::worker::TTL.as_millis().to_string();
    cycles_per_second(window, |t, deadline| {
        let (mut conn, release, ttl) = (conn.clone(), release.clone(), ttl.clone());
        async move {
            let mut rng = XorShift::new(t as u64 + 1007);
            let token = format!("{TOKEN}{t}");
            let mut cycles = 0;
            while Instant::now() < deadline {
                let i = rng.below(names);
                let (key, channel) = (format!("raw:nf:{i}"), format!("raw:nf:{i}:released"));
                if raw_cycle(&mut conn, &release, &key, &channel, &token, &ttl).await {
                    cycles += 1;
                }
            }
            cycles
        }
    })
    .await
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
