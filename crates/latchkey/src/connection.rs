//! The command connection (layer 2): to a standalone server, or to a Redis
//! Cluster through redis-rs's cluster client, chosen by asking the server
//! (`INFO cluster`). Everything above sends commands through it and does
//! not care which: on a cluster each command goes to the node that serves
//! its first key's slot, and layout 3 keeps every key of one lock in one
//! slot (`docs/protocol.md`).

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// A handle to a client's command connection (cheap to clone; it reconnects
/// by itself), for commands latchkey has no method for: use it with
/// redis-rs's `query_async` as any async connection. Made by
/// [`Client::connection`](crate::Client::connection).
#[derive(Clone)]
pub struct Connection(pub(crate) Kind);

#[derive(Clone)]
pub(crate) enum Kind {
    Standalone(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Connection {
    /// Whether this is a connection to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.0, Kind::Cluster(_))
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.is_cluster() {
            "cluster"
        } else {
            "standalone"
        };
        f.debug_tuple("Connection").field(&kind).finish()
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.0 {
            Kind::Standalone(conn) => conn.req_packed_command(cmd),
            Kind::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.0 {
            Kind::Standalone(conn) => conn.req_packed_commands(pipeline, offset, count),
            Kind::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.0 {
            Kind::Standalone(conn) => conn.get_db(),
            Kind::Cluster(conn) => conn.get_db(),
        }
    }
}
