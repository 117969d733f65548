//! Inspecting primitives from the outside: who holds one, for how much
//! longer, and the last fencing token issued — for operators and `latchkey
//! status`. [`Client::describe`](crate::Client::describe) reads every kind
//! under one name with one script (`any.rs`, `inspect_any.lua`),
//! [`Client::list_all`](crate::Client::list_all) every name matching a glob
//! (`scan.rs`), and [`Client::inspect`](crate::Client::inspect) is
//! `describe`'s lock view (the types in `kinds.rs`).
//!
//! ```no_run
//! # async fn demo() -> latchkey::Result<()> {
//! let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
//!
//! let info = client.inspect("nightly-report").await?;
//! match (&info.holder, info.ttl) {
//!     (Some(h), Some(ttl)) => println!("held by {} pid {}, {ttl:?} left", h.host, h.pid),
//!     _ if info.held => println!("held by another client"),
//!     _ => println!("free"),
//! }
//!
//! for found in client.list_all("nightly-*").await? {
//!     println!("{} is a {}", String::from_utf8_lossy(found.name()), found.kind().as_str());
//! }
//! # Ok(()) }
//! ```
//!
//! An inspection is a snapshot: by the time it is printed the lock may have
//! changed hands. Never decide ownership from it; that is what the owner
//! token is for.

use std::time::{Duration, SystemTime};

use crate::vocab::error::Result;
use crate::vocab::names::LockKeys;
use crate::vocab::token::Holder;

mod any;
mod kinds;
mod scan;

pub use kinds::{
    BarrierInfo, ElectionInfo, FairLockInfo, Holding, Kind, LatchInfo, LockInfo, PrimitiveInfo,
    RwLockInfo, SemaphoreInfo,
};

/// Names described at once by [`Client::list_all`]: the connection is
/// multiplexed, so these are pipelined rather than run one after the other.
pub(super) const INSPECT_IN_FLIGHT: usize = 64;

/// Keys asked for per `SCAN` call: large enough that a big keyspace takes few
/// round trips, small enough that each call stays short on the server.
const SCAN_COUNT: usize = 1000;

crate::transport::session::session_view! {
    /// A session as the reader of every primitive's keys: what inspection
    /// asks of a server.
    Inspector
}

impl Inspector<'_> {
    /// See [`Client::inspect`](crate::Client::inspect): the lock's part of
    /// [`describe`](Inspector::describe) (a fair lock's lock too), or a
    /// free lock's when the name holds no lock.
    pub(crate) async fn inspect(&self, name: &[u8]) -> Result<LockInfo> {
        let found = self.describe(name).await?;
        Ok(lock_view(self.prefix(), name, found))
    }

    /// See [`Client::lock_waiters`](crate::Client::lock_waiters).
    pub(crate) async fn lock_waiters(&self, names: &[&[u8]]) -> Result<Vec<u64>> {
        let channels: Vec<Vec<u8>> = names
            .iter()
            .map(|name| crate::vocab::protocol::release_channel(&[self.prefix(), name].concat()))
            .collect();
        let mut totals = vec![0; channels.len()];
        if channels.is_empty() {
            return Ok(totals);
        }
        let mut conn = self.connection();
        // Waiters subscribe with SSUBSCRIBE on a cluster, at the node of
        // the channel's slot: ask every primary (the others count 0).
        let (command, nodes) = if conn.is_cluster() {
            let nodes = self.bounded("CLUSTER NODES", &[], conn.primaries()).await?;
            ("SHARDNUMSUB", nodes)
        } else {
            ("NUMSUB", vec![None])
        };
        for node in &nodes {
            let mut cmd = redis::cmd("PUBSUB");
            cmd.arg(command).arg(&channels);
            let counts: std::collections::HashMap<Vec<u8>, u64> = self
                .bounded("PUBSUB NUMSUB", &[], conn.query_on(cmd, node))
                .await?;
            for (total, channel) in totals.iter_mut().zip(&channels) {
                *total += counts.get(channel).copied().unwrap_or(0);
            }
        }
        Ok(totals)
    }

    /// Every key matching `glob` (of `type_filter` only, when given), on
    /// every primary.
    pub(super) async fn scan_keys(
        &self,
        glob: &[u8],
        type_filter: Option<&str>,
    ) -> Result<Vec<Vec<u8>>> {
        let mut keys = Vec::new();
        let mut conn = self.connection();
        let nodes = self.bounded("CLUSTER NODES", &[], conn.primaries()).await?;
        for node in &nodes {
            let mut cursor: u64 = 0;
            loop {
                let mut cmd = redis::cmd("SCAN");
                cmd.arg(cursor)
                    .arg("MATCH")
                    .arg(glob)
                    .arg("COUNT")
                    .arg(SCAN_COUNT);
                if let Some(kind) = type_filter {
                    cmd.arg("TYPE").arg(kind);
                }
                let (next, batch): (u64, Vec<Vec<u8>>) =
                    self.bounded("SCAN", &[], conn.query_on(cmd, node)).await?;
                keys.extend(batch);
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        Ok(keys)
    }
}

/// The lock's view of what [`describe`](Inspector::describe) found under
/// `name`: its lock, or its fair lock's; a free lock when neither is there
/// (nothing stored under the lock key or the fencing counter).
fn lock_view(prefix: &[u8], name: &[u8], found: Vec<PrimitiveInfo>) -> LockInfo {
    found
        .into_iter()
        .find_map(|info| match info {
            PrimitiveInfo::Lock(lock) => Some(lock),
            PrimitiveInfo::FairLock(fair) => Some(fair.lock),
            _ => None,
        })
        .unwrap_or_else(|| {
            // An absent key's PTTL is -2: no TTL.
            lock_info(name, &LockKeys::new(prefix, name), None, -2, None, None)
        })
}

/// A [`LockInfo`] from what `inspect_any.lua` read of the lock;
/// `held`: ms since the hold began, when the acquired record tells (a
/// waiter that was queued: its token tells when it queued).
pub(crate) fn lock_info(
    name: &[u8],
    keys: &LockKeys,
    value: Option<Vec<u8>>,
    pttl: i64,
    fence: Option<Vec<u8>>,
    held: Option<u64>,
) -> LockInfo {
    let parsed = fence.as_ref().map(|raw| {
        std::str::from_utf8(raw)
            .ok()
            .and_then(|text| text.parse::<u64>().ok())
    });
    let fencing_token = parsed.flatten();
    let bad_fencing_counter = match parsed {
        Some(None) => {
            tracing::warn!(
                key = %String::from_utf8_lossy(&keys.fence_key),
                value = %String::from_utf8_lossy(fence.as_deref().unwrap_or_default()),
                "a fencing counter holds something other than a fencing token; delete it to reset it"
            );
            fence
        }
        _ => None,
    };
    let holder = value
        .as_deref()
        .and_then(Holder::from_token)
        .map(|h| any::held_for(h, held));
    let age = holder.as_ref().map(|h| {
        SystemTime::now()
            .duration_since(h.acquired_at)
            .unwrap_or(Duration::ZERO)
    });
    LockInfo {
        name: name.to_vec(),
        held: value.is_some(),
        ttl: u64::try_from(pttl).ok().map(Duration::from_millis),
        value,
        holder,
        age,
        fencing_token,
        bad_fencing_counter,
    }
}

/// Whether an inspected key is one of ours to list (see [`Client::list_all`]).
pub(super) fn is_lock(info: &LockInfo) -> bool {
    let our_token = info
        .value
        .as_deref()
        .is_some_and(crate::vocab::token::is_token);
    our_token || info.fencing_token.is_some() || info.bad_fencing_counter.is_some()
}

/// Escapes the glob metacharacters of a literal (the key prefix) for `MATCH`.
pub(super) fn escape_glob(literal: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(literal.len());
    for &b in literal {
        if matches!(b, b'*' | b'?' | b'[' | b']' | b'\\') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_globs_are_escaped() {
        assert_eq!(escape_glob(b"app:"), b"app:");
        assert_eq!(escape_glob(b"a*b?[c]\\"), b"a\\*b\\?\\[c\\]\\\\");
    }
}
