//! A private Redis Cluster on loopback: real `redis-server` nodes started
//! with `cluster-enabled yes` and joined with `redis-cli --cluster create`.
//!
//! Each node is a [`RedisServer`](crate::RedisServer) (its own port and
//! data dir, killed on drop, killed with the test process), on a port whose
//! *cluster bus* port (port + 10000) is free too; see
//! [`free_cluster_port`](crate::free_cluster_port). [`RedisCluster::start`]
//! returns only once every node reports `cluster_state:ok`, all 16384 slots
//! are served, every node has the same table of nodes, slots and replicas,
//! and every replica is in sync. See [`RedisCluster`] for an example.
//!
//! Files: `builder.rs` starts a cluster, `change.rs` fails over and
//! reshards, `node.rs` is one node, `topology.rs` reads `CLUSTER NODES` and
//! computes hash slots.

mod builder;
mod change;
mod node;
mod topology;

use std::thread;
use std::time::{Duration, Instant};

pub use builder::ClusterBuilder;
pub use node::{ClusterNode, NodeRole};
pub use topology::{key_slot, SLOTS};

/// How long forming the cluster, a failover or a slot migration may take.
/// Seconds normally; generous because test hosts are shared and slow.
const CLUSTER_PATIENCE: Duration = Duration::from_secs(30);
/// Pause between polls of the nodes' state.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// A private Redis Cluster: primaries that share the 16384 hash slots, each
/// with its replicas, all on loopback; stopped (every process, every data
/// dir) on drop.
///
/// Each node is a [`RedisServer`](crate::RedisServer) started with
/// `cluster-enabled yes` on a port whose cluster bus port (port + 10000) is
/// free too ([`free_cluster_port`](crate::free_cluster_port)); the nodes are
/// joined with `redis-cli --cluster create`, and [`start`](Self::start)
/// returns once the cluster is healthy ([`wait_ok`](Self::wait_ok)).
///
/// # Example
///
/// ```no_run
/// use latchkey_testkit::{key_slot, RedisCluster};
///
/// // Three primaries and no replicas start fastest: about 2 s, most of it
/// // Redis's own delay before a fresh primary serves its slots.
/// let cluster = RedisCluster::builder().replicas_per_primary(0).start();
/// // A cluster client needs just one node's URL to find the others.
/// assert!(cluster.seed_url().starts_with("redis://127.0.0.1:"));
///
/// // A key lives on the primary that serves its hash slot...
/// let owner = cluster.primary_for_key(b"{job}.lock");
/// owner.command(&["SET", "{job}.lock", "me"]).unwrap();
///
/// // ...until the slot is resharded, key included.
/// let slot = key_slot(b"{job}.lock");
/// let other = cluster.primaries().into_iter().find(|p| p.id() != owner.id()).unwrap();
/// cluster.migrate_slot(slot, other);
/// assert_eq!(cluster.primary_for_slot(slot).id(), other.id());
/// assert_eq!(other.command(&["GET", "{job}.lock"]).unwrap(), "me");
/// // The old owner now redirects clients.
/// assert!(owner.command(&["GET", "{job}.lock"]).is_err()); // MOVED
/// ```
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<ClusterNode>,
}

impl RedisCluster {
    /// Starts 3 primaries with one replica each; see [`ClusterBuilder::start`].
    pub fn start() -> RedisCluster {
        Self::builder().start()
    }

    /// Returns a builder for another shape (e.g. no replicas) or config.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// Every node, primaries and replicas, in start order (roles change on
    /// failover; ask [`ClusterNode::role`]).
    pub fn nodes(&self) -> &[ClusterNode] {
        &self.nodes
    }

    /// Every node, to [`kill`](ClusterNode::kill) or
    /// [`restart`](ClusterNode::restart) one.
    pub fn nodes_mut(&mut self) -> &mut [ClusterNode] {
        &mut self.nodes
    }

    /// The nodes that say they are primaries now.
    pub fn primaries(&self) -> Vec<&ClusterNode> {
        self.with_role(NodeRole::Primary)
    }

    /// The nodes that say they are replicas now.
    pub fn replicas(&self) -> Vec<&ClusterNode> {
        self.with_role(NodeRole::Replica)
    }

    /// The replicas of `primary`, as `primary` sees them.
    ///
    /// # Panics
    ///
    /// If `primary` does not answer.
    pub fn replicas_of(&self, primary: &ClusterNode) -> Vec<&ClusterNode> {
        let view = primary
            .view()
            .unwrap_or_else(|e| panic!("latchkey-testkit: {e}"));
        view.0
            .iter()
            .filter(|e| e.primary.as_deref() == Some(primary.id()))
            .filter_map(|e| self.node_by_id(&e.id))
            .collect()
    }

    /// Every node's URL.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(ClusterNode::url).collect()
    }

    /// The URL of a running primary: what a cluster client is given.
    ///
    /// # Panics
    ///
    /// If no primary answers.
    pub fn seed_url(&self) -> String {
        self.primaries()
            .first()
            .map(|node| node.url())
            .expect("latchkey-testkit: no primary of the cluster answers")
    }

    /// The primary that serves `slot` (0..16384), according to the first
    /// running node that answers (after [`wait_ok`](Self::wait_ok) they all
    /// agree).
    ///
    /// # Panics
    ///
    /// If `slot` is out of range, no node answers or none serves the slot.
    pub fn primary_for_slot(&self, slot: u16) -> &ClusterNode {
        assert!(
            slot < SLOTS,
            "latchkey-testkit: slot {slot} is not below {SLOTS}"
        );
        let view = self
            .running()
            .find_map(|node| node.view().ok())
            .expect("latchkey-testkit: no node of the cluster answers CLUSTER NODES");
        let owner = view
            .owner(slot)
            .unwrap_or_else(|| panic!("latchkey-testkit: no node serves slot {slot}"));
        self.node_by_id(&owner.id).unwrap_or_else(|| {
            panic!("latchkey-testkit: slot {slot} is served by a stranger, {owner:?}")
        })
    }

    /// The primary that serves `key`'s slot ([`key_slot`]).
    pub fn primary_for_key(&self, key: impl AsRef<[u8]>) -> &ClusterNode {
        self.primary_for_slot(key_slot(key.as_ref()))
    }

    /// Waits until the cluster is healthy: every running node reports
    /// `cluster_state:ok` with all 16384 slots served, knows every node,
    /// agrees with the others on who serves which slots and who replicates
    /// whom, has no slot half-migrated, and every replica of a running
    /// primary is in sync with it. Polled, bounded by 30 s.
    ///
    /// A paused node does not answer, so the cluster is not healthy while one
    /// is. A killed or stopped node is skipped once no slot is served by it
    /// any more: after a primary dies, this waits until its replica has taken
    /// over (the cluster's node timeout, plus an election); a dead primary
    /// without a replica leaves the cluster unhealthy, and this panics.
    ///
    /// # Panics
    ///
    /// If that takes longer than 30 s, saying what is still wrong.
    pub fn wait_ok(&self) {
        poll("the cluster is healthy", || self.check_ok());
    }

    fn running(&self) -> impl Iterator<Item = &ClusterNode> {
        self.nodes.iter().filter(|node| node.is_running())
    }

    fn with_role(&self, role: NodeRole) -> Vec<&ClusterNode> {
        self.nodes
            .iter()
            .filter(|node| node.role() == Some(role))
            .collect()
    }

    fn node_by_id(&self, id: &str) -> Option<&ClusterNode> {
        self.nodes.iter().find(|node| node.id() == id)
    }

    /// One look at whether the cluster is healthy; `Err` says what is not.
    fn check_ok(&self) -> Result<(), String> {
        let mut first: Option<(u16, topology::View)> = None;
        for node in self.running() {
            let info = node.probe(&["CLUSTER", "INFO"])?;
            let all = SLOTS.to_string();
            for (field, want) in [
                ("cluster_state", "ok"),
                ("cluster_slots_assigned", all.as_str()),
                ("cluster_slots_ok", all.as_str()),
            ] {
                let got = info_field(&info, field);
                if got != Some(want) {
                    return Err(format!("node {} has {field}:{got:?}", node.port()));
                }
            }
            let view = node.view()?;
            if view.0.len() != self.nodes.len() {
                let known = view.0.len();
                let all = self.nodes.len();
                return Err(format!(
                    "node {} knows {known} nodes, not {all}",
                    node.port()
                ));
            }
            if let Some(e) = view
                .0
                .iter()
                .find(|e| e.joining || self.node_by_id(&e.id).is_none())
            {
                return Err(format!(
                    "node {} lists an unexpected node {e:?}",
                    node.port()
                ));
            }
            if let Some(e) = view.0.iter().find(|e| !e.open_slots.is_empty()) {
                return Err(format!("node {} has open slots {:?}", e.port, e.open_slots));
            }
            match &first {
                None => first = Some((node.port(), view)),
                Some((port, seen)) if !seen.agrees_with(&view) => {
                    return Err(format!(
                        "nodes {port} and {} disagree: {seen:?} vs {view:?}",
                        node.port()
                    ));
                }
                Some(_) => {}
            }
        }
        let (_, view) = first.ok_or("no node is running")?;
        // Right after a kill the others still count the dead node in; its
        // slots are only served again once its replica has taken over.
        for entry in &view.0 {
            let down = !self
                .node_by_id(&entry.id)
                .is_some_and(ClusterNode::is_running);
            if down && !entry.slots.is_empty() {
                let port = entry.port;
                return Err(format!(
                    "node {port} is down but still serves {:?}",
                    entry.slots
                ));
            }
        }
        for node in self.running() {
            let Some(primary) = view.get(node.id()).and_then(|e| e.primary.as_deref()) else {
                continue;
            };
            if let Some(primary) = self
                .node_by_id(primary)
                .filter(|p| ClusterNode::is_running(p))
            {
                let info = node.probe(&["INFO", "replication"])?;
                if info_field(&info, "master_link_status") != Some("up") {
                    return Err(format!("replica {} is not in sync yet", node.port()));
                }
                // And the primary counts it: a `WAIT` right after start-up
                // must find the replica online there, not still syncing.
                let theirs = primary.probe(&["INFO", "replication"])?;
                let port = format!("port={},", node.port());
                let online = theirs.lines().any(|l| {
                    l.starts_with("slave") && l.contains(&port) && l.contains("state=online")
                });
                if !online {
                    return Err(format!(
                        "primary {} does not list replica {} online yet",
                        primary.port(),
                        node.port()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Polls `check` until it is `Ok`, for at most [`CLUSTER_PATIENCE`]; then panics with
/// `what` and the last reason.
fn poll<T>(what: &str, mut check: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + CLUSTER_PATIENCE;
    loop {
        match check() {
            Ok(value) => return value,
            Err(why) if Instant::now() >= deadline => {
                panic!("latchkey-testkit: timed out after {CLUSTER_PATIENCE:?} waiting until {what}: {why}")
            }
            Err(_) => thread::sleep(POLL_INTERVAL),
        }
    }
}

/// The value of `field` in an `INFO`-style `field:value` reply.
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| line.trim().strip_prefix(field)?.strip_prefix(':'))
}
