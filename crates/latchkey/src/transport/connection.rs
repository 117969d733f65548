//! The command connection (layer 2): to a standalone server, or to a Redis
//! Cluster through redis-rs's cluster client, chosen by asking the server
//! (`INFO cluster`), or to the primary that Redis Sentinels name
//! (`crate::transport::sentinel`). Everything above sends commands through it and does
//! not care which: on a cluster each command goes to the node that serves
//! its first key's slot, and layout 3 keeps every key of one lock in one
//! slot (`docs/protocol.md`).

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use crate::transport::pinned::PinnedConnection;
use crate::transport::sentinel::SentinelConnection;

/// A handle to a client's command connection (cheap to clone; it reconnects
/// by itself), for commands latchkey has no method for: use it with
/// redis-rs's `query_async` as any async connection. Made by
/// [`Client::connection`](crate::Client::connection).
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let mut conn = client.connection();
/// let pong: String = redis::cmd("PING")
///     .query_async(&mut conn)
///     .await
///     .map_err(latchkey::Error::Redis)?;
/// println!("{pong}");
/// # Ok(()) }
/// ```
///
/// It shares the client's command connection (multiplexed), options and
/// reconnection; on a Redis Cluster each command goes to the node that serves
/// its first key's slot.
#[derive(Clone)]
pub struct Connection(pub(crate) Kind);

#[derive(Clone)]
pub(crate) enum Kind {
    Standalone(ConnectionManager),
    /// A standalone server under a TLS server-name override.
    Pinned(PinnedConnection),
    Cluster(ClusterConnection),
    Sentinel(SentinelConnection),
}

impl Connection {
    /// Whether this is a connection to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.0, Kind::Cluster(_))
    }

    /// The nodes a whole-keyspace walk must visit: the one server, or every
    /// cluster primary that is not marked failed (`None`: the one server).
    pub(crate) async fn primaries(&mut self) -> redis::RedisResult<Vec<Option<(String, u16)>>> {
        let Kind::Cluster(conn) = &mut self.0 else {
            return Ok(vec![None]);
        };
        let nodes: String = redis::cmd("CLUSTER").arg("NODES").query_async(conn).await?;
        Ok(nodes
            .lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let (addr, flags) = (fields.get(1)?, fields.get(2)?);
                let primary = flags.split(',').any(|f| f == "master")
                    && !flags.split(',').any(|f| f == "fail" || f == "noaddr");
                if !primary {
                    return None;
                }
                // `ip:port@cport[,hostname]`
                let (host, port) = addr.split('@').next()?.rsplit_once(':')?;
                Some((host.to_owned(), port.parse().ok()?))
            })
            .map(Some)
            .collect())
    }

    /// Runs `cmd` on the node at `node` (`None`: wherever this connection
    /// sends it, the one server).
    pub(crate) async fn query_on<T: redis::FromRedisValue>(
        &mut self,
        cmd: Cmd,
        node: &Option<(String, u16)>,
    ) -> redis::RedisResult<T> {
        match (&mut self.0, node) {
            (Kind::Cluster(conn), Some((host, port))) => {
                use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                });
                // A refusal (NOPERM, …) comes back as a value: made an
                // error first, so it is not reported as a reply of the
                // wrong type.
                let value = conn.route_command(cmd, routing).await?.extract_error()?;
                Ok(redis::from_redis_value(value)?)
            }
            _ => cmd.query_async(self).await,
        }
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.0 {
            Kind::Standalone(_) | Kind::Pinned(_) => "standalone",
            Kind::Cluster(_) => "cluster",
            Kind::Sentinel(_) => "sentinel",
        };
        f.debug_tuple("Connection").field(&kind).finish()
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.0 {
            Kind::Standalone(conn) => conn.req_packed_command(cmd),
            Kind::Pinned(conn) => conn.req_packed_command(cmd),
            Kind::Cluster(conn) => conn.req_packed_command(cmd),
            Kind::Sentinel(conn) => conn.req_packed_command(cmd),
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
            Kind::Pinned(conn) => conn.req_packed_commands(pipeline, offset, count),
            Kind::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
            Kind::Sentinel(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.0 {
            Kind::Standalone(conn) => conn.get_db(),
            Kind::Pinned(conn) => conn.get_db(),
            Kind::Cluster(conn) => conn.get_db(),
            Kind::Sentinel(conn) => conn.get_db(),
        }
    }
}
