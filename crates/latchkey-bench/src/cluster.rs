//! Scenario `cluster`: latchkey on a 3-primary Redis Cluster beside a single
//! primary, in the same run. Information, no targets: on this
//! bench machine the cluster's three servers share the client's cores, so
//! the figure says what the cluster path costs here, not what a cluster of
//! machines gains.
//!
//! * **Many keys**: 64 tasks of one client, `try_acquire` + `release` over
//!   1,000 locks (as in `many_keys`), cycles per second on each deployment;
//!   rounds interleave the two (A B, B A, …), medians of rounds and the
//!   median of the same-round ratios.
//! * **Wake-up**: a waiter on another client is woken by a release; the gap
//!   from the release's reply to the waiter's acquisition, p50/p99 over
//!   many hand-offs: plain pub/sub (`PUBLISH`/`SUBSCRIBE`, single primary)
//!   beside sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`, cluster), interleaved
//!   in blocks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use latchkey::{Client, Lock};
use latchkey_testkit::{RedisCluster, RedisServer};

use crate::stats::{median, quantile, table, us};
use crate::Report;

const TASKS: usize = 64;
const LOCKS: usize = 1000;

pub fn run(quick: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Report>>> {
    Box::pin(scenario(quick))
}

async fn scenario(quick: bool) -> Report {
    let (server, cluster) = tokio::task::spawn_blocking(|| {
        let cluster = RedisCluster::builder()
            .primaries(3)
            .replicas_per_primary(0)
            .start();
        (RedisServer::start(), cluster)
    })
    .await
    .expect("start the servers");
    let urls = [server.url(), cluster.seed_url()];
    let names = ["single primary", "3-primary cluster"];
    let rounds = if quick { 2 } else { 6 };
    let window = if quick {
        Duration::from_millis(600)
    } else {
        Duration::from_secs(2)
    };
    let handoffs = if quick { 60 } else { 300 };

    let mut clients = Vec::new();
    for url in &urls {
        clients.push(connect(url).await);
    }
    let locks: Vec<Arc<Vec<Lock>>> = clients
        .iter()
        .map(|c| {
            Arc::new(
                (0..LOCKS)
                    .map(|i| {
                        c.lock(format!("ck:{i}"), Duration::from_secs(10))
                            .expect("lock")
                    })
                    .collect(),
            )
        })
        .collect();

    let mut rates: [Vec<f64>; 2] = Default::default();
    let mut ratios = Vec::new();
    let mut gaps: [Vec<Duration>; 2] = Default::default();
    for (i, l) in locks.iter().enumerate() {
        let _ = many_keys(l, window / 4).await; // warm-up
        let _ = wakeups(&clients[i], &connect(&urls[i]).await, 5).await;
    }
    let mut waiters = Vec::new();
    for url in &urls {
        waiters.push(connect(url).await);
    }
    for round in 0..rounds {
        let mut this = [0.0; 2];
        for k in 0..2 {
            let i = (k + round) % 2;
            this[i] = many_keys(&locks[i], window).await;
            rates[i].push(this[i]);
            gaps[i].extend(wakeups(&clients[i], &waiters[i], handoffs / rounds).await);
        }
        ratios.push(this[1] / this[0]);
    }

    let mut rows = Vec::new();
    for i in 0..2 {
        let (p50, p99) = (quantile(&mut gaps[i], 0.5), quantile(&mut gaps[i], 0.99));
        rows.push(vec![
            names[i].to_owned(),
            format!("{:.0}", median(&mut rates[i])),
            if i == 1 {
                format!("{:.3}×", median(&mut ratios))
            } else {
                "1×".to_owned()
            },
            if i == 1 {
                "sharded (SPUBLISH)"
            } else {
                "plain (PUBLISH)"
            }
            .to_owned(),
            us(p50),
            us(p99),
            gaps[i].len().to_string(),
        ]);
    }
    let body = table(
        &[
            "deployment",
            "many keys: cycles/s (64 tasks, 1,000 locks, try_acquire + release)",
            "vs single (same rounds)",
            "wake-ups",
            "wake-up gap p50 (µs)",
            "p99 (µs)",
            "hand-offs",
        ],
        &rows,
    ) + "\nThe three cluster nodes, the single server and the client share this machine's cores: \
         a cluster of separate machines would scale where this one cannot. Wake-up gap: from the \
         release's reply to the woken waiter's acquisition (another client in this process).\n";
    Report {
        title: "Redis Cluster beside a single primary (information, no targets)".into(),
        body,
        missed: Vec::new(),
    }
}

async fn connect(url: &str) -> Client {
    Client::builder(url)
        .prefix("bench:")
        .connect()
        .await
        .expect("latchkey connect")
}

/// Cycles per second of `TASKS` tasks over `locks` for `window`.
async fn many_keys(locks: &Arc<Vec<Lock>>, window: Duration) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + window;
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let (locks, done) = (locks.clone(), done.clone());
            tokio::spawn(async move {
                let mut x = (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                while Instant::now() < deadline {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let lock = &locks[(x % LOCKS as u64) as usize];
                    if let Ok(Some(guard)) = lock.try_acquire().await {
                        if guard.release().await.is_ok() {
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

/// `n` hand-offs from a holder on `holder` to a waiter on `waiter`: the gap
/// between the release's reply and the waiter's acquisition, each.
async fn wakeups(holder: &Client, waiter: &Client, n: usize) -> Vec<Duration> {
    let mut gaps = Vec::with_capacity(n);
    for i in 0..n {
        let name = format!("wake:{}", i % 16);
        let Ok(Some(guard)) = holder
            .lock(&name, Duration::from_secs(30))
            .expect("lock")
            .try_acquire()
            .await
        else {
            continue;
        };
        let lock = waiter.lock(&name, Duration::from_secs(30)).expect("lock");
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let waiting = tokio::spawn(async move {
            // The first attempt finds the lock held and marks it: from then
            // on only the release's message wakes the waiter.
            let _ = ready_tx.send(());
            let got = lock.acquire_until(Duration::from_secs(20)).await;
            (Instant::now(), got)
        });
        let _ = ready_rx.await;
        // Release only once the waiter marked the holder's token (it is
        // subscribed by then): the release then publishes, and the gap is
        // the message's.
        let key = format!("bench:{name}");
        let mut conn = holder.connection();
        let marked = async {
            loop {
                let value: Option<String> = redis::cmd("GET")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .ok()
                    .flatten();
                if value.is_some_and(|v| v.ends_with("+w")) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(5), marked)
            .await
            .is_err()
        {
            continue;
        }
        let released = Instant::now();
        if guard.release().await.is_err() {
            continue;
        }
        if let Ok((acquired, Ok(got))) = waiting.await {
            gaps.push(acquired.saturating_duration_since(released));
            let _ = got.release().await;
        }
    }
    gaps
}
