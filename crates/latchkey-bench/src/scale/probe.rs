//! What the scale scenario reads off the server and this process: `INFO`
//! fields, the keyspace (keys, keys with and without a TTL, the longest TTL
//! left, by key shape), and this process's resident memory.
//!
//! ```text
//! let used = probe::info_u64(&server, "memory", "used_memory");
//! let survey = probe::survey(&url).await?;   // SCAN + PTTL of every key
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use latchkey_testkit::RedisServer;

use crate::stats::cpu_time;

/// One numeric field of `INFO section` (`used_memory`,
/// `total_commands_processed`); `None` when absent or unreadable.
pub fn info_u64(server: &RedisServer, section: &str, field: &str) -> Option<u64> {
    let info = server.command(&["INFO", section]).ok()?;
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

/// `used_memory` in bytes (0 when unreadable: the table then shows it).
pub fn used_memory(server: &RedisServer) -> u64 {
    info_u64(server, "memory", "used_memory").unwrap_or(0)
}

/// `DBSIZE`, and how many of those keys have a TTL (`INFO keyspace`'s
/// `expires`), exact.
pub fn keyspace(server: &RedisServer) -> (u64, u64) {
    let dbsize = server
        .command(&["DBSIZE"])
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let info = server.command(&["INFO", "keyspace"]).unwrap_or_default();
    let expires = info
        .lines()
        .find_map(|l| l.strip_prefix("db0:"))
        .and_then(|l| {
            l.split(',')
                .find_map(|kv| kv.strip_prefix("expires="))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0);
    (dbsize, expires)
}

/// `FLUSHALL SYNC`: every row starts from an empty server.
pub fn flush(server: &RedisServer) -> Result<(), String> {
    server
        .command(&["FLUSHALL", "SYNC"])
        .map(|_| ())
        .map_err(|e| format!("FLUSHALL: {e}"))
}

/// Server and client counters at one moment, for deltas.
#[derive(Clone)]
pub struct Snapshot {
    pub at: std::time::Instant,
    pub calls: std::collections::HashMap<String, u64>,
    pub redis_cpu: Duration,
    pub client_cpu: Duration,
}

impl Snapshot {
    pub fn take(server: &RedisServer) -> Snapshot {
        Snapshot::take_all(&[server])
    }

    /// The sum over `servers` (a cluster's nodes): their commands and
    /// their CPU added up, as one server's would be.
    pub fn take_all(servers: &[&RedisServer]) -> Snapshot {
        let mut calls = std::collections::HashMap::new();
        let mut redis_cpu = Duration::ZERO;
        for server in servers {
            for (name, n) in server.command_calls() {
                *calls.entry(name).or_insert(0) += n;
            }
            redis_cpu += server.pid().and_then(cpu_time).unwrap_or_default();
        }
        Snapshot {
            at: std::time::Instant::now(),
            calls,
            redis_cpu,
            client_cpu: cpu_time(std::process::id()).unwrap_or_default(),
        }
    }

    /// Every command the server ran since `earlier`, but the `INFO` the
    /// snapshots themselves send.
    pub fn commands_since(&self, earlier: &Snapshot) -> u64 {
        self.calls
            .iter()
            .filter(|(name, _)| name.as_str() != "info")
            .map(|(name, &n)| n.saturating_sub(earlier.calls.get(name).copied().unwrap_or(0)))
            .sum()
    }

    /// Calls of `name` (commandstats, lower case) since `earlier`.
    pub fn calls_since(&self, earlier: &Snapshot, name: &str) -> u64 {
        let get = |s: &Snapshot| s.calls.get(name).copied().unwrap_or(0);
        get(self).saturating_sub(get(earlier))
    }

    pub fn secs_since(&self, earlier: &Snapshot) -> f64 {
        (self.at - earlier.at).as_secs_f64().max(1e-9)
    }

    pub fn redis_cpu_since(&self, earlier: &Snapshot) -> Duration {
        self.redis_cpu.saturating_sub(earlier.redis_cpu)
    }

    pub fn client_cpu_since(&self, earlier: &Snapshot) -> Duration {
        self.client_cpu.saturating_sub(earlier.client_cpu)
    }
}

/// This process's resident set size in bytes (`/proc/self/statm`); 0 when
/// unreadable. RSS, not heap: freed memory the allocator keeps counts.
pub fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}

/// Every key's TTL, by key shape (digit runs written `#`, so
/// `scale:lock:17:fence` is `scale:lock:#:fence`).
#[derive(Default)]
pub struct Survey {
    /// Keys seen by the scan.
    pub scanned: u64,
    /// Keys with no TTL (`PTTL` -1): they stay for ever.
    pub forever: u64,
    /// Keys with a TTL, and the longest left among them (ms).
    pub expiring: u64,
    pub max_ttl_ms: i64,
    /// Shape → (no TTL, with a TTL).
    pub shapes: BTreeMap<String, (u64, u64)>,
}

impl Survey {
    /// "`shape` ×n (no TTL)" for the table, most numerous first, at most 3.
    pub fn shapes_line(&self) -> String {
        if self.shapes.is_empty() {
            return "–".into();
        }
        let mut shapes: Vec<_> = self.shapes.iter().collect();
        shapes.sort_by_key(|(_, (f, e))| std::cmp::Reverse(f + e));
        shapes
            .iter()
            .take(3)
            .map(|(shape, (forever, expiring))| match (forever, expiring) {
                (f, 0) => format!("`{shape}` {f} no TTL"),
                (0, e) => format!("`{shape}` {e} TTL"),
                (f, e) => format!("`{shape}` {f} no TTL, {e} TTL"),
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// `SCAN`s the whole keyspace and asks `PTTL` of every key (pipelined, a
/// thousand at a time).
pub async fn survey(url: &str) -> Result<Survey, String> {
    let mut conn = crate::handoff::connect(url).await;
    let mut out = Survey::default();
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
            .map_err(|e| format!("SCAN: {e}"))?;
        if !keys.is_empty() {
            let mut pipe = redis::pipe();
            for key in &keys {
                pipe.cmd("PTTL").arg(key);
            }
            let ttls: Vec<i64> = pipe
                .query_async(&mut conn)
                .await
                .map_err(|e| format!("PTTL: {e}"))?;
            for (key, ttl) in keys.iter().zip(ttls) {
                let entry = out.shapes.entry(shape(key)).or_default();
                out.scanned += 1;
                match ttl {
                    -1 => {
                        out.forever += 1;
                        entry.0 += 1;
                    }
                    t if t >= 0 => {
                        out.expiring += 1;
                        out.max_ttl_ms = out.max_ttl_ms.max(t);
                        entry.1 += 1;
                    }
                    _ => {} // gone since the SCAN
                }
            }
        }
        cursor = next;
        if cursor == 0 {
            return Ok(out);
        }
    }
}

/// A key with every run of digits written `#`.
fn shape(key: &[u8]) -> String {
    let text = String::from_utf8_lossy(key);
    let mut out = String::with_capacity(text.len());
    let mut in_digits = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// A TTL in ms as the tables show it: `–` for none, else seconds or hours.
pub fn ttl_text(ms: i64, any: bool) -> String {
    if !any {
        "–".into()
    } else if ms >= 3_600_000 {
        format!("{:.2} h", ms as f64 / 3_600_000.0)
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn shapes_hide_the_numbers() {
        assert_eq!(super::shape(b"scale:lock:17:fence"), "scale:lock:#:fence");
        assert_eq!(super::shape(b"{x}:12a3"), "{x}:#a#");
    }
}
