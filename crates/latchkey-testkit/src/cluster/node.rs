//! One node of a [`RedisCluster`](crate::RedisCluster).

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use super::topology::View;
use crate::RedisServer;

/// Bound on one probe of a node's state; a paused or overloaded node then
/// reads as "not ready yet" instead of stalling a wait for 10 s.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Whether a cluster node serves slots or replicates a node that does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeRole {
    /// Serves hash slots (Redis calls it `master`).
    Primary,
    /// Replicates a primary and can take over from it (Redis: `slave`).
    Replica,
}

/// One `redis-server` of a [`RedisCluster`](crate::RedisCluster): a
/// [`RedisServer`] started with `cluster-enabled yes`, plus its cluster node
/// id.
///
/// Its role is not fixed: a [failover](crate::RedisCluster::failover) turns a
/// replica into a primary and the old primary into a replica, so
/// [`role`](Self::role) asks the node each time.
///
/// Killing or stopping a node is a real node failure: the other nodes notice
/// after the cluster's node timeout and, if it was a primary with a replica,
/// fail over to the replica. [`restart`](Self::restart) brings it back with
/// its node id (kept in `nodes.conf` in its data dir) but without its data.
#[derive(Debug)]
pub struct ClusterNode {
    pub(crate) server: RedisServer,
    pub(crate) id: String,
}

impl ClusterNode {
    /// The node id (40 hex digits), as `CLUSTER MYID` and `CLUSTER NODES`
    /// show it; stays the same across [`restart`](Self::restart).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The client port; the cluster bus listens on this port + 10000.
    pub fn port(&self) -> u16 {
        self.server.port()
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// `redis://127.0.0.1:PORT/`: any node's URL is enough for a cluster
    /// client to discover the rest.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The node's current role, asked of the node itself (`ROLE`); `None`
    /// if it does not answer within a second (killed, stopped, paused).
    pub fn role(&self) -> Option<NodeRole> {
        let reply = self.server.command_with_timeout(&["ROLE"], PROBE_TIMEOUT);
        match reply.ok()?.lines().next()? {
            "master" => Some(NodeRole::Primary),
            "slave" => Some(NodeRole::Replica),
            _ => None,
        }
    }

    /// Whether the process exists (a paused node counts as running).
    pub fn is_running(&self) -> bool {
        self.server.is_running()
    }

    /// Sends one command to this node only, like [`RedisServer::command`].
    /// A key served elsewhere gets a `MOVED <slot> <addr>` error, not a
    /// redirect: use a cluster client (or
    /// [`primary_for_key`](crate::RedisCluster::primary_for_key)) for keys.
    pub fn command(&self, args: &[&str]) -> io::Result<String> {
        self.server.command(args)
    }

    /// Crashes the node with SIGKILL (see [`RedisServer::kill`]).
    pub fn kill(&mut self) {
        self.server.kill();
    }

    /// Shuts the node down gracefully (see [`RedisServer::stop`]).
    pub fn stop(&mut self) {
        self.server.stop();
    }

    /// Starts the node again on the same ports with the same node id and
    /// waits until it answers PING; it rejoins the cluster by gossip, so call
    /// [`RedisCluster::wait_ok`](crate::RedisCluster::wait_ok) before relying
    /// on it. Its data is gone (no persistence): a primary that nobody failed
    /// over to comes back serving its slots, empty.
    pub fn restart(&mut self) {
        self.server.restart();
    }

    /// The underlying server, for everything else ([`RedisServer::pause`],
    /// [`RedisServer::dir`], [`RedisServer::command_calls`], ...).
    pub fn server(&self) -> &RedisServer {
        &self.server
    }

    /// The underlying server, mutably.
    pub fn server_mut(&mut self) -> &mut RedisServer {
        &mut self.server
    }

    /// A command bounded by [`PROBE_TIMEOUT`], its error naming the node.
    pub(crate) fn probe(&self, args: &[&str]) -> Result<String, String> {
        self.server
            .command_with_timeout(args, PROBE_TIMEOUT)
            .map_err(|e| format!("node {}: {}: {e}", self.port(), args.join(" ")))
    }

    /// This node's `CLUSTER NODES` table.
    pub(crate) fn view(&self) -> Result<View, String> {
        View::parse(&self.probe(&["CLUSTER", "NODES"])?)
            .map_err(|e| format!("node {}: {e}", self.port()))
    }

    /// An admin command that must succeed.
    pub(crate) fn must(&self, args: &[&str]) -> String {
        self.command(args).unwrap_or_else(|e| {
            panic!(
                "latchkey-testkit: node {}: {} failed: {e}",
                self.port(),
                args.join(" ")
            )
        })
    }
}
