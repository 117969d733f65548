//! Replicated acquisition (layer 3): `WAIT` for a lock's replicas on the
//! server that holds its key. See [`Lock::with_replicas`](crate::Lock::with_replicas)
//! and `docs/reliability.md`, "Replicated acquisition".

use std::time::Duration;

use super::Backend;
use crate::connection::Kind;
use crate::error::{Error, Result};
use crate::names::LockKeys;
use crate::session::Session;

/// How long an acquisition of a lock made
/// [`with_replicas`](crate::Lock::with_replicas) waits for the replicas'
/// acknowledgements unless [`with_replicas_within`](crate::Lock::with_replicas_within)
/// says otherwise: 500 ms. A replica on the same network acknowledges in
/// about a round trip; one that takes longer is lagging, and a lock it has
/// not acknowledged is as good as unreplicated. It must stay below the
/// command timeout (default 2 s), which bounds the `WAIT` command too.
pub const DEFAULT_REPLICA_TIMEOUT: Duration = Duration::from_millis(500);

/// Whether locks on `backend` may wait `timeout` for replicas.
pub(crate) fn check(backend: &Backend, timeout: Duration) -> Result<()> {
    let Backend::Single(session) = backend else {
        return Err(Error::InvalidInput(
            "replicated acquisition is for a single Redis (or a cluster or Sentinel set), not a Redlock".into(),
        ));
    };
    if timeout.is_zero() || timeout >= session.command_timeout() {
        return Err(Error::InvalidInput(format!(
            "replica timeout {timeout:?}: it must be positive and shorter than the command timeout ({:?})",
            session.command_timeout()
        )));
    }
    Ok(())
}

impl Session {
    /// `WAIT n timeout` on the connection that took the lock, routed on a
    /// cluster to the primary of the key's slot (the connection to that
    /// node carried the write). Returns how many replicas acknowledged.
    pub(crate) async fn wait_replicas(
        &self,
        keys: &LockKeys,
        n: usize,
        timeout: Duration,
    ) -> Result<usize> {
        let millis = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut wait = redis::cmd("WAIT");
        wait.arg(n).arg(millis);
        let mut conn = self.connection();
        let fut = async move {
            match &mut conn.0 {
                Kind::Cluster(cluster) => {
                    use redis::cluster_routing::{
                        Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
                    };
                    let route = Route::with_key(&keys.key, SlotAddr::Master);
                    let routing =
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
                    let value = cluster.route_command(wait, routing).await?;
                    redis::from_redis_value::<usize>(value).map_err(redis::RedisError::from)
                }
                _ => wait.query_async::<usize>(&mut conn).await,
            }
        };
        self.bounded("WAIT", &[&keys.key], fut).await
    }
}
