//! Changing a running [`RedisCluster`]: failover and resharding.

use std::time::Duration;

use super::{poll, ClusterNode, NodeRole, RedisCluster};
use crate::resp::{self, Reply};

/// Keys moved per `MIGRATE` while migrating a slot.
const MIGRATE_BATCH: usize = 100;
/// Bound on one `MIGRATE` of a batch.
const MIGRATE_TIMEOUT: Duration = Duration::from_secs(10);

impl RedisCluster {
    /// Waits until every running replica of `primary` has every write the
    /// primary had when this was called: its replication offset reached the
    /// primary's. What to wait for before killing a primary whose writes
    /// must survive. (`WAIT` cannot say it from a connection of its own: it
    /// counts the acknowledgements of *that connection's* writes, so a
    /// fresh connection's `WAIT` returns at once.)
    ///
    /// # Panics
    ///
    /// If `primary` does not answer, or a replica is not caught up within 30 s.
    pub fn wait_replicas_synced(&self, primary: &ClusterNode) {
        let info = primary.must(&["INFO", "replication"]);
        let offset: u64 = super::info_field(&info, "master_repl_offset")
            .and_then(|o| o.parse().ok())
            .unwrap_or_else(|| {
                panic!(
                    "latchkey-testkit: node {} has no replication offset",
                    primary.port()
                )
            });
        let replicas: Vec<&ClusterNode> = self
            .replicas_of(primary)
            .into_iter()
            .filter(|r| r.is_running())
            .collect();
        assert!(
            !replicas.is_empty(),
            "latchkey-testkit: node {} has no running replica",
            primary.port()
        );
        for replica in replicas {
            poll("a replica caught up with its primary", || {
                let info = replica.probe(&["INFO", "replication"])?;
                let theirs: u64 = super::info_field(&info, "slave_repl_offset")
                    .and_then(|o| o.parse().ok())
                    .unwrap_or(0);
                if super::info_field(&info, "master_link_status") == Some("up") && theirs >= offset
                {
                    Ok(())
                } else {
                    Err(format!(
                        "replica {} at offset {theirs}, its primary {} at {offset}",
                        replica.port(),
                        primary.port()
                    ))
                }
            });
        }
    }

    /// Manual failover: `CLUSTER FAILOVER` on `replica` (with `FORCE` if its
    /// primary is not running), then waits until `replica` reports itself a
    /// primary and the cluster is healthy again, its old primary (if running)
    /// now a replica of it. Acknowledged writes are not lost: a manual
    /// failover waits for the replica to catch up.
    ///
    /// # Panics
    ///
    /// If `replica` is not a replica, refuses, or the failover does not
    /// complete within 30 s.
    pub fn failover(&self, replica: &ClusterNode) {
        let view = replica
            .view()
            .unwrap_or_else(|e| panic!("latchkey-testkit: {e}"));
        let primary = view
            .get(replica.id())
            .and_then(|me| me.primary.as_deref())
            .unwrap_or_else(|| panic!("latchkey-testkit: node {} is no replica", replica.port()));
        let primary_up = self
            .node_by_id(primary)
            .is_some_and(ClusterNode::is_running);
        if primary_up {
            replica.must(&["CLUSTER", "FAILOVER"]);
        } else {
            replica.must(&["CLUSTER", "FAILOVER", "FORCE"]);
        }
        let what = format!(
            "node {} is a primary after CLUSTER FAILOVER",
            replica.port()
        );
        poll(&what, || match replica.role() {
            Some(NodeRole::Primary) => Ok(()),
            role => Err(format!("its role is {role:?}")),
        });
        self.wait_ok();
    }

    /// Reshards `slot` to the primary `to`, keys included, as `redis-cli
    /// --cluster reshard` does: `CLUSTER SETSLOT IMPORTING` on `to`,
    /// `MIGRATING` on the owner, `MIGRATE` of the slot's keys in batches,
    /// then `CLUSTER SETSLOT NODE` on `to`, the old owner and every other
    /// primary; waits until every node agrees on the new owner and the
    /// cluster is healthy. Does nothing if `to` serves the slot already.
    ///
    /// While the keys move, a client that asks the old owner for a moved key
    /// gets `ASK` and one that asks `to` without `ASKING` gets `MOVED`; a
    /// cluster client follows both.
    ///
    /// # Panics
    ///
    /// If `to` is not a primary, a step fails (quoting the error), or the
    /// nodes do not agree within 30 s.
    pub fn migrate_slot(&self, slot: u16, to: &ClusterNode) {
        let from = self.primary_for_slot(slot);
        if from.id() == to.id() {
            return;
        }
        assert_eq!(
            to.role(),
            Some(NodeRole::Primary),
            "latchkey-testkit: migrate_slot to node {}, which is no primary",
            to.port()
        );
        let s = slot.to_string();
        to.must(&["CLUSTER", "SETSLOT", &s, "IMPORTING", from.id()]);
        from.must(&["CLUSTER", "SETSLOT", &s, "MIGRATING", to.id()]);
        while move_keys(from, to, slot) > 0 {}

        // The new owner first, so that it serves the slot before the old one
        // starts redirecting there; then everyone else, so they need not
        // wait for gossip.
        let mut primaries = vec![to, from];
        primaries.extend(
            self.primaries()
                .into_iter()
                .filter(|p| p.id() != to.id() && p.id() != from.id()),
        );
        for node in primaries {
            node.must(&["CLUSTER", "SETSLOT", &s, "NODE", to.id()]);
        }
        let what = format!("every node says node {} serves slot {slot}", to.port());
        poll(&what, || {
            for node in self.running() {
                let owner = node.view()?.owner(slot).map(|e| e.id.clone());
                if owner.as_deref() != Some(to.id()) {
                    return Err(format!("node {} says {owner:?}", node.port()));
                }
            }
            Ok(())
        });
        self.wait_ok();
    }
}

/// Moves up to one batch of `slot`'s keys from `from` to `to` with
/// `MIGRATE` (binary-safe), returning how many it moved.
fn move_keys(from: &ClusterNode, to: &ClusterNode, slot: u16) -> usize {
    let fail = |what: &str, detail: String| -> ! {
        panic!(
            "latchkey-testkit: migrating slot {slot} from node {} to {}: {what}: {detail}",
            from.port(),
            to.port()
        )
    };
    let slot = slot.to_string();
    let batch = MIGRATE_BATCH.to_string();
    let args: [&[u8]; 4] = [
        b"CLUSTER",
        b"GETKEYSINSLOT",
        slot.as_bytes(),
        batch.as_bytes(),
    ];
    let keys: Vec<Vec<u8>> = match resp::command_raw(from.addr(), None, &args, MIGRATE_TIMEOUT) {
        Ok(Reply::Array(Some(items))) => items
            .into_iter()
            .map(|item| match item {
                Reply::Bulk(Some(key)) => key,
                other => fail("GETKEYSINSLOT", format!("{other:?}")),
            })
            .collect(),
        other => fail("GETKEYSINSLOT", format!("{other:?}")),
    };
    if keys.is_empty() {
        return 0;
    }
    let port = to.port().to_string();
    let timeout_ms = MIGRATE_TIMEOUT.as_millis().to_string();
    let mut args: Vec<&[u8]> = vec![b"MIGRATE", b"127.0.0.1", port.as_bytes(), b"", b"0"];
    args.extend([timeout_ms.as_bytes(), b"KEYS"]);
    args.extend(keys.iter().map(Vec::as_slice));
    match resp::command_raw(from.addr(), None, &args, MIGRATE_TIMEOUT * 2) {
        Ok(Reply::Simple(_)) => keys.len(),
        other => fail("MIGRATE", format!("{other:?}")),
    }
}
