//! Curve 1, distinct names over time: what N holds of N distinct names
//! leave in Redis right after they ended.
//!
//! For each primitive (a lock, a lock `with_fencing`, a semaphore of one
//! permit, an election, a latch of count 1) and each N: one hold of another
//! name (which loads the scripts and opens the connections), `FLUSHALL`,
//! read `used_memory`, then 64 tasks of one client take and end one hold per name
//! (acquire + release; campaign + resign; create + count down), each name
//! used once. Then `used_memory` again (bytes per name = the growth / N),
//! `DBSIZE`, and a `SCAN` + `PTTL` of every key: how many have no TTL (they
//! stay for ever), how many expire later and the longest TTL left, by key
//! shape. Every hold has a TTL of 1 h, so that what a row leaves is still
//! there when it is counted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use latchkey_testkit::RedisServer;

use super::probe::{self, Survey};

/// Concurrent tasks taking the holds.
const TASKS: u64 = 64;
/// Every hold's TTL (and the latch's): long enough that nothing a row
/// leaves behind expires before it is counted.
pub const TTL: Duration = Duration::from_secs(3600);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Lock,
    Fenced,
    Semaphore,
    Election,
    Latch,
}

pub const KINDS: [Kind; 5] = [
    Kind::Lock,
    Kind::Fenced,
    Kind::Semaphore,
    Kind::Election,
    Kind::Latch,
];

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::Fenced => "lock with_fencing",
            Kind::Semaphore => "semaphore (1 permit)",
            Kind::Election => "election",
            Kind::Latch => "latch (count 1)",
        }
    }

    fn id(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::Fenced => "fenced",
            Kind::Semaphore => "sem",
            Kind::Election => "elect",
            Kind::Latch => "latch",
        }
    }
}

pub struct Row {
    pub kind: Kind,
    pub n: u64,
    pub holds_per_sec: f64,
    pub bytes_per_name: f64,
    pub keys: u64,
    pub survey: Survey,
    pub failed: u64,
    pub first_error: Option<String>,
}

/// N holds of `kind` on N distinct names, and what they left.
pub async fn row(server: &RedisServer, kind: Kind, n: u64) -> Result<Row, String> {
    probe::flush(server)?;
    let url = server.url();
    let client = latchkey::Client::connect(&url)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    // One hold first: the scripts are loaded and every connection is open
    // before the baseline is read, so the growth is the names' alone.
    hold(&client, kind, u64::MAX).await?;
    client.flush(Duration::from_secs(5)).await;
    probe::flush(server)?;
    let before = probe::used_memory(server);
    let failed = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(Mutex::new(None::<String>));
    let started = Instant::now();
    let joins: Vec<_> = (0..TASKS)
        .map(|t| {
            let (client, failed, first_error) =
                (client.clone(), failed.clone(), first_error.clone());
            tokio::spawn(async move {
                let mut i = t;
                while i < n {
                    if let Err(e) = hold(&client, kind, i).await {
                        failed.fetch_add(1, Ordering::Relaxed);
                        let mut first = first_error.lock().unwrap_or_else(|p| p.into_inner());
                        first.get_or_insert(e);
                    }
                    i += TASKS;
                }
            })
        })
        .collect();
    for j in joins {
        j.await.map_err(|e| format!("a task failed: {e}"))?;
    }
    let took = started.elapsed().as_secs_f64();
    // Background releases (there should be none) land before we look.
    client.flush(Duration::from_secs(5)).await;
    let after = probe::used_memory(server);
    let (keys, _) = probe::keyspace(server);
    let survey = probe::survey(&url).await?;
    let first_error = first_error.lock().unwrap_or_else(|p| p.into_inner()).take();
    Ok(Row {
        kind,
        n,
        holds_per_sec: n as f64 / took,
        bytes_per_name: (after as f64 - before as f64) / n as f64,
        keys,
        survey,
        failed: failed.load(Ordering::Relaxed),
        first_error,
    })
}

/// One hold of name `i`, begun and ended.
async fn hold(client: &latchkey::Client, kind: Kind, i: u64) -> Result<(), String> {
    let name = format!("scale:{}:{i}", kind.id());
    let e = |e: latchkey::Error| e.to_string();
    match kind {
        Kind::Lock | Kind::Fenced => {
            let mut lock = client.lock(&name, TTL).map_err(e)?;
            if kind == Kind::Fenced {
                lock = lock.with_fencing();
            }
            let guard = lock.try_acquire().await.map_err(e)?.ok_or("busy")?;
            owned(guard.release().await.map_err(e)?)?;
        }
        Kind::Semaphore => {
            let sem = client.semaphore(&name, 1, TTL).map_err(e)?;
            let permit = sem.try_acquire().await.map_err(e)?.ok_or("no permit")?;
            owned(permit.release().await.map_err(e)?)?;
        }
        Kind::Election => {
            let election = client.election(&name, TTL).map_err(e)?;
            let leading = election
                .try_campaign(b"v")
                .await
                .map_err(e)?
                .ok_or("someone leads")?;
            owned(leading.resign().await.map_err(e)?)?;
        }
        Kind::Latch => {
            let latch = client.latch(&name, TTL).map_err(e)?;
            latch.create(1).await.map_err(e)?;
            latch.count_down().await.map_err(e)?;
        }
    }
    Ok(())
}

/// A hold that ended on a hold found not ours is a failed hold.
fn owned(found: latchkey::Ownership) -> Result<(), String> {
    match found {
        latchkey::Ownership::Owned => Ok(()),
        other => Err(format!("ended on {other:?}")),
    }
}

/// The table of every row.
pub fn table(rows: &[Row]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let s = &r.survey;
            vec![
                r.kind.label().to_owned(),
                r.n.to_string(),
                format!("{:.0}", r.holds_per_sec),
                format!("{:.1}", r.bytes_per_name),
                r.keys.to_string(),
                s.forever.to_string(),
                s.expiring.to_string(),
                probe::ttl_text(s.max_ttl_ms, s.expiring > 0),
                s.shapes_line(),
                match &r.first_error {
                    Some(e) => format!("{} ({e})", r.failed),
                    None => r.failed.to_string(),
                },
            ]
        })
        .collect();
    crate::stats::table(
        &[
            "primitive",
            "names (holds)",
            "holds/s",
            "used_memory bytes/name after",
            "keys after",
            "keys with no TTL (for ever)",
            "keys with a TTL",
            "max TTL left",
            "what is left, by key shape",
            "failed holds",
        ],
        &cells,
    )
}
