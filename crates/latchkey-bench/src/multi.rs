//! Scenario `multi`: several locks at once (`Client::lock_all`,
//! `run --and`), uncontended, one task: `lock_all` of 2 and of 8 names
//! (`acquire` + `release`) beside the same names taken by 2 and 8
//! sequential `Lock::acquire`s and released one by one, in the same run.
//!
//! * **One server**: `lock_all` is one script to take all and one to
//!   release all (two round trips whatever N); the sequential locks are
//!   N + N round trips.
//! * **A Redis Cluster (3 primaries), names in different slots**: no script
//!   can touch them all, so `lock_all` takes them one after the other in
//!   key order (N round trips, each the acquire script) and releases them
//!   all at once (N requests in flight together); the sequential locks are
//!   N bare `SET NX`s and N releases.
//!
//! Rounds interleave the four variants of a place (rotating which goes
//! first); cycles/s is the median of the rounds, and the ratio
//! `lock_all ÷ sequential` is taken per round, then its median. No
//! targets: the figures are for the table.

use std::time::{Duration, Instant};

use latchkey::{Client, Lock, MultiLock};
use latchkey_testkit::{RedisCluster, RedisServer};

use crate::stats::{median, table};
use crate::Report;

const TTL: Duration = Duration::from_secs(10);
const SIZES: [usize; 2] = [2, 8];

pub fn run(quick: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Report>>> {
    Box::pin(scenario(quick))
}

async fn scenario(quick: bool) -> Report {
    let (rounds, cycles) = if quick { (3, 100) } else { (9, 400) };
    let mut body = String::new();
    let server = RedisServer::start();
    match connect(&server.url()).await {
        Ok(client) => body.push_str(&place("One server", &client, rounds, cycles).await),
        Err(e) => body.push_str(&format!("One server: could not connect: {e}\n\n")),
    }
    let cluster = tokio::task::spawn_blocking(|| {
        RedisCluster::builder()
            .primaries(3)
            .replicas_per_primary(0)
            .start()
    })
    .await
    .expect("start the cluster");
    match connect(&cluster.seed_url()).await {
        Ok(client) => {
            let title = "A Redis Cluster of 3 primaries, names in different slots";
            body.push_str(&place(title, &client, rounds, cycles).await);
        }
        Err(e) => body.push_str(&format!("Cluster: could not connect: {e}\n\n")),
    }
    body.push_str(&format!(
        "One task, uncontended, TTL 10 s; {rounds} rounds of {cycles} cycles per variant, interleaved; cycles/s: median of the rounds; ratio: median of the rounds' `lock_all ÷ sequential` for the same names. A cycle takes every lock and releases every lock: `lock_all(names).acquire()` + `release()`, or `acquire()` of each lock in turn, then `release()` of each.\n"
    ));
    Report {
        title: "Several locks at once: lock_all beside sequential acquires".into(),
        body,
        missed: vec![],
    }
}

async fn connect(url: &str) -> latchkey::Result<Client> {
    Client::builder(url).prefix("bench:").connect().await
}

/// What one cycle takes.
enum Variant {
    All(MultiLock),
    Sequential(Vec<Lock>),
}

impl Variant {
    /// One cycle: every lock taken, then every lock released.
    async fn cycle(&self) {
        match self {
            Variant::All(locks) => {
                if let Ok(guard) = locks.acquire().await {
                    let _ = guard.release().await;
                }
            }
            Variant::Sequential(locks) => {
                let mut guards = Vec::with_capacity(locks.len());
                for lock in locks {
                    if let Ok(guard) = lock.acquire().await {
                        guards.push(guard);
                    }
                }
                for guard in guards {
                    let _ = guard.release().await;
                }
            }
        }
    }
}

/// The table of one place (a server or a cluster).
async fn place(title: &str, client: &Client, rounds: usize, cycles: usize) -> String {
    // Per size: lock_all, then sequential; each of its own names, so that
    // neither finds the other's locks.
    let mut variants = Vec::new();
    for n in SIZES {
        let names = |kind: &str| {
            (0..n)
                .map(|i| format!("multi:{kind}{n}:{i}"))
                .collect::<Vec<_>>()
        };
        let all = client.lock_all(&names("all"), TTL).expect("valid names");
        let one_script = all.one_round_trip();
        let sequential = names("seq")
            .iter()
            .map(|name| client.lock(name, TTL).expect("valid name"))
            .collect();
        variants.push((n, one_script, Variant::All(all)));
        variants.push((n, one_script, Variant::Sequential(sequential)));
    }
    for (_, _, variant) in &variants {
        for _ in 0..20 {
            variant.cycle().await; // warm-up: scripts loaded, connections made
        }
    }
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); SIZES.len()];
    for round in 0..rounds {
        let mut this_round = vec![0.0; variants.len()];
        for k in 0..variants.len() {
            let i = (k + round) % variants.len();
            let started = Instant::now();
            for _ in 0..cycles {
                variants[i].2.cycle().await;
            }
            this_round[i] = cycles as f64 / started.elapsed().as_secs_f64();
        }
        for (i, rate) in this_round.iter().enumerate() {
            rates[i].push(*rate);
        }
        for s in 0..SIZES.len() {
            ratios[s].push(this_round[2 * s] / this_round[2 * s + 1]);
        }
    }
    let mut rows = Vec::new();
    for (i, (n, one_script, variant)) in variants.iter().enumerate() {
        let rate = median(&mut rates[i]);
        let (what, ratio) = match variant {
            Variant::All(_) => {
                let how = if *one_script {
                    "one script each way"
                } else {
                    "one lock after the other"
                };
                let ratio = format!("{:.2}×", median(&mut ratios[i / 2]));
                (format!("`lock_all` of {n} ({how})"), ratio)
            }
            Variant::Sequential(_) => (format!("{n} sequential `acquire`s"), "1×".into()),
        };
        rows.push(vec![
            what,
            format!("{rate:.0}"),
            format!("{:.1}", 1e6 / rate),
            ratio,
        ]);
    }
    let mut out = format!("**{title}**\n\n");
    out.push_str(&table(
        &["variant", "cycles/s", "µs/cycle", "lock_all ÷ sequential"],
        &rows,
    ));
    out.push('\n');
    out
}
