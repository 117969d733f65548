//! The recording resource: the counter the workers increment under the
//! lock, and the log from which the checker rebuilds what happened.
//!
//! ```text
//! let resource = Resource::connect(url, &keys, Fencing::On, timeout).await?;
//! if let Access::Accepted(n) = resource.read(fence, worker).await? {
//!     // ... sleep ...
//!     resource.write(fence, worker, n + 1).await?;
//! }
//! let log = fetch_log(url, &keys, timeout).await?; // every access, in server order
//! ```
//!
//! It lives in `resource.lua` (header: KEYS, ARGV, replies, log format): one
//! script call per access, so the log order is the order in which the server
//! applied the accesses, and each entry carries the server's time. It lives
//! on a server of its own (or, against a user's Redis, under keys of its
//! own, on a connection that bypasses the fault proxies): faults hit the
//! lock, never the record.

use std::sync::LazyLock;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::Script;

static RESOURCE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("resource.lua")));

/// Where one scenario's resource lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    /// Hash: `value`, `fence`.
    pub state: String,
    /// List: the access log.
    pub log: String,
}

impl Keys {
    /// The keys of scenario `scenario` of run `run`, under `prefix`.
    pub fn new(prefix: &str, run: &str, scenario: &str) -> Keys {
        Keys {
            state: format!("{prefix}torture:{run}:{scenario}:resource"),
            log: format!("{prefix}torture:{run}:{scenario}:log"),
        }
    }

    /// The resource of the `i`-th other lock of a multi workload (from 1).
    pub fn other(&self, i: usize) -> Keys {
        Keys {
            state: format!("{}:{i}", self.state),
            log: format!("{}:{i}", self.log),
        }
    }
}

/// What an access found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Done; the counter is now this.
    Accepted(u64),
    /// Refused: a higher fencing token touched the resource first.
    Refused,
}

/// A worker's handle on the resource.
#[derive(Clone)]
pub struct Resource {
    conn: ConnectionManager,
    keys: Keys,
    fenced: bool,
    timeout: Duration,
}

impl Resource {
    pub async fn connect(
        url: &str,
        keys: &Keys,
        fenced: bool,
        timeout: Duration,
    ) -> Result<Resource, String> {
        Ok(Resource {
            conn: connect(url, timeout).await?,
            keys: keys.clone(),
            fenced,
            timeout,
        })
    }

    /// Reads the counter (and, fenced, records our token: see resource.lua).
    pub async fn read(&self, fence: u64, worker: u32) -> Result<Access, String> {
        self.access("read", fence, worker, 0).await
    }

    /// Overwrites the counter with `value`.
    pub async fn write(&self, fence: u64, worker: u32, value: u64) -> Result<Access, String> {
        self.access("write", fence, worker, value).await
    }

    async fn access(
        &self,
        op: &str,
        fence: u64,
        worker: u32,
        value: u64,
    ) -> Result<Access, String> {
        let mut invocation = RESOURCE.prepare_invoke();
        invocation
            .key(&self.keys.state)
            .key(&self.keys.log)
            .arg(op)
            .arg(fence.to_string())
            .arg(worker.to_string())
            .arg(value.to_string())
            .arg(if self.fenced { "fenced" } else { "plain" });
        let mut conn = self.conn.clone();
        let reply: (i64, String) =
            tokio::time::timeout(self.timeout, invocation.invoke_async(&mut conn))
                .await
                .map_err(|_| format!("resource {op} timed out after {:?}", self.timeout))?
                .map_err(|e| format!("resource {op}: {e}"))?;
        match reply {
            (1, value) => value
                .parse()
                .map(Access::Accepted)
                .map_err(|_| format!("resource holds a bad value {value:?}")),
            (0, _) => Ok(Access::Refused),
            (other, _) => Err(format!("resource script returned {other}")),
        }
    }
}

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Read,
    Write,
}

/// One entry of the access log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub kind: OpKind,
    pub fence: u64,
    pub worker: u32,
    /// Read: the value returned; write: the value written.
    pub value: u64,
    pub accepted: bool,
    /// A higher token had touched the resource before this access.
    pub stale: bool,
    /// The resource server's clock, µs since the epoch.
    pub time_us: u64,
}

impl Op {
    /// Parses one log entry (format in resource.lua).
    pub fn parse(entry: &str) -> Option<Op> {
        let words: Vec<&str> = entry.split(' ').collect();
        let [op, fence, worker, value, accepted, stale, time_us] = words[..] else {
            return None;
        };
        Some(Op {
            kind: match op {
                "read" => OpKind::Read,
                "write" => OpKind::Write,
                _ => return None,
            },
            fence: fence.parse().ok()?,
            worker: worker.parse().ok()?,
            value: value.parse().ok()?,
            accepted: accepted == "1",
            stale: stale == "1",
            time_us: time_us.parse().ok()?,
        })
    }
}

/// The whole access log, oldest first.
pub async fn fetch_log(url: &str, keys: &Keys, timeout: Duration) -> Result<Vec<Op>, String> {
    let mut conn = connect(url, timeout).await?;
    let entries: Vec<String> = tokio::time::timeout(
        timeout,
        redis::cmd("LRANGE")
            .arg(&keys.log)
            .arg(0)
            .arg(-1)
            .query_async(&mut conn),
    )
    .await
    .map_err(|_| "reading the resource log timed out".to_owned())?
    .map_err(|e| format!("reading the resource log: {e}"))?;
    entries
        .iter()
        .map(|entry| Op::parse(entry).ok_or_else(|| format!("bad resource log entry {entry:?}")))
        .collect()
}

/// Deletes the resource's keys (runs against a user's server clean up after themselves).
pub async fn delete(url: &str, keys: &Keys, timeout: Duration) -> Result<(), String> {
    let mut conn = connect(url, timeout).await?;
    let _: i64 = tokio::time::timeout(
        timeout,
        redis::cmd("DEL")
            .arg(&keys.state)
            .arg(&keys.log)
            .query_async(&mut conn),
    )
    .await
    .map_err(|_| "deleting the resource timed out".to_owned())?
    .map_err(|e| format!("deleting the resource: {e}"))?;
    Ok(())
}

async fn connect(url: &str, timeout: Duration) -> Result<ConnectionManager, String> {
    let client = redis::Client::open(url).map_err(|e| format!("bad resource URL: {e}"))?;
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout));
    tokio::time::timeout(timeout, ConnectionManager::new_with_config(client, config))
        .await
        .map_err(|_| format!("connecting to the resource server timed out after {timeout:?}"))?
        .map_err(|e| format!("connecting to the resource server: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_entries_parse() {
        let op = Op::parse("write 17 3 42 1 0 1732900000123456").unwrap();
        assert_eq!(op.kind, OpKind::Write);
        assert_eq!(
            (op.fence, op.worker, op.value, op.accepted, op.stale),
            (17, 3, 42, true, false)
        );
        assert_eq!(Op::parse("write 17 3 42 1 0"), None);
        assert_eq!(Op::parse("poke 17 3 42 1 0 1"), None);
    }
}
