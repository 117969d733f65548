//! Replicated acquisition (layer 3): `WAIT` for a lock's replicas on the
//! server that holds its key. See [`Lock::with_replicas`](crate::Lock::with_replicas)
//! and `docs/reliability.md`, "Replicated acquisition".

use std::time::Duration;

use super::Backend;
use crate::backend::single::Single;
use crate::transport::connection::Kind;
use crate::vocab::error::{Error, Result};
use crate::vocab::names::{ttl_ms, LockKeys};
use crate::vocab::outcome::Ownership;
use crate::vocab::protocol::scripts;

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

impl Single<'_> {
    /// Confirms the hold of `token` with `n` replicas: one pipeline on one
    /// connection (on a cluster, to the primary of the key's slot) of the
    /// extend script (a write of ours: the lock's expiry set to `keep` from
    /// now, when it still holds `token`) and `WAIT n timeout`. Returns what
    /// the extend found and how many replicas acknowledged.
    ///
    /// Why the write: `WAIT` counts the replicas that acknowledged *its own
    /// connection's* writes. A bare `WAIT` after the acquisition would, on a
    /// connection replaced in between (a reconnect, a Sentinel failover),
    /// find no write to wait for and count every connected replica at once,
    /// and on a promoted replica that never saw the lock it would confirm a
    /// lock that is not there. The extend, sent with it, is a write on the
    /// same connection, after the acquisition on the same server (replication
    /// is one ordered stream), or, on a server without our key, the answer
    /// that the lock is not ours. Sent whole (`EVAL`): a `NOSCRIPT` in a
    /// pipeline would cost a second one.
    pub(crate) async fn confirm_replicas(
        self,
        keys: &LockKeys,
        token: &str,
        keep: Duration,
        n: usize,
        timeout: Duration,
    ) -> Result<(Ownership, usize)> {
        let millis = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut pipe = redis::pipe();
        // Each reply as it came: a refusal (NOPERM for `WAIT`, WRONGTYPE)
        // keeps its own kind and text (see `replies`).
        pipe.ignore_errors()
            .cmd("EVAL")
            .arg(scripts::EXTEND_BODY)
            .arg(1)
            .arg(&keys.key)
            .arg(token)
            .arg(ttl_ms(keep).max(1))
            .cmd("WAIT")
            .arg(n)
            .arg(millis);
        let mut conn = self.connection();
        let fut = async move {
            match &mut conn.0 {
                Kind::Cluster(cluster) => {
                    use redis::cluster_routing::{Route, SingleNodeRoutingInfo, SlotAddr};
                    let route = Route::with_key(&keys.key, SlotAddr::Master);
                    let replies = cluster
                        .route_pipeline(pipe, 0, 2, SingleNodeRoutingInfo::SpecificNode(route))
                        .await?;
                    replies_of(replies)
                }
                _ => replies_of(pipe.query_async::<Vec<redis::Value>>(&mut conn).await?),
            }
        };
        let (extended, acked) = self.bounded("WAIT", &[&keys.key], fut).await?;
        Ok((super::single::ownership("extend", extended)?, acked))
    }
}

/// The extend script's and `WAIT`'s replies; the first refusal among them
/// as the error it is.
fn replies_of(replies: Vec<redis::Value>) -> redis::RedisResult<(i64, usize)> {
    if let Some(refusal) = replies.iter().find_map(|reply| match reply {
        redis::Value::ServerError(e) => Some(e.clone()),
        _ => None,
    }) {
        return Err(refusal.into());
    }
    Ok(redis::from_redis_value(redis::Value::Array(replies))?)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use latchkey_testkit::{eventually, RedisServer};

    use crate::primitives::lock::spec::Replicated;
    use crate::{Client, Lock, LockGuard};

    /// A client of `primary`, its lock `name` made to wait for 1 replica
    /// (300 ms), and a hold of it once the replica has linked.
    async fn replicated_hold(primary: &RedisServer, name: &str) -> (Client, Lock, LockGuard) {
        let client = Client::builder(&primary.url())
            .prefix("test:")
            .connect()
            .await
            .unwrap();
        let lock = client
            .lock(name, Duration::from_secs(30))
            .unwrap()
            .with_replicas_within(1, Duration::from_millis(300))
            .unwrap();
        // Refused (too few replicas) until the replica has linked.
        let guard = eventually("the replica is linked", || async {
            lock.try_acquire().await.ok().flatten()
        })
        .await;
        (client, lock, guard)
    }

    /// What the server says of `guard`'s hold and its replicas now.
    async fn confirm(lock: &Lock, guard: &LockGuard) -> Replicated {
        let confirming = lock.inner.confirm_replicas(guard.token(), guard.deadline());
        confirming.await.unwrap()
    }

    /// The hole a bare `WAIT` after the acquisition had: on a connection
    /// replaced in between, `WAIT` has no write of its own to wait for and
    /// counts a replica that never acknowledged anything. The confirming
    /// write closes it.
    #[tokio::test]
    async fn a_replaced_connection_does_not_confirm_with_a_stopped_replica() {
        let primary = RedisServer::start();
        let replica = RedisServer::builder().replica_of(primary.port()).start();
        let (client, lock, guard) = replicated_hold(&primary, "hole").await;

        // The replica has acknowledged everything (so no `REPLCONF GETACK`
        // of the primary's is still on its way to be charged to a later
        // command), then stops answering.
        eventually("the replica caught up", || async { in_sync(&primary) }).await;
        replica.pause();
        // The server drops the client's connection; the next command fails
        // and reconnects, the one after runs on the new connection.
        primary
            .command(&["CLIENT", "KILL", "TYPE", "normal"])
            .unwrap();
        let mut conn = client.connection();
        let _ = redis::cmd("PING").query_async::<String>(&mut conn).await;
        // What a bare WAIT says on it: the stopped replica counted.
        let bare: usize = redis::cmd("WAIT")
            .arg(1)
            .arg(300)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(bare, 1, "the hole this test is about is not there");

        let confirmed = confirm(&lock, &guard).await;
        assert!(
            matches!(confirmed, Replicated::TooFew(0)),
            "a stopped replica confirmed the hold: {confirmed:?}"
        );
        replica.resume();
    }

    /// A server without the hold (a failover to a replica that never saw
    /// it, here a deleted key) does not confirm it, whatever its replicas
    /// say; nor does one where another client holds the lock.
    #[tokio::test]
    async fn a_hold_the_server_does_not_have_is_not_confirmed() {
        let primary = RedisServer::start();
        let _replica = RedisServer::builder().replica_of(primary.port()).start();
        let (_client, lock, guard) = replicated_hold(&primary, "gone").await;

        primary.command(&["DEL", "test:gone"]).unwrap();
        let confirmed = confirm(&lock, &guard).await;
        assert!(
            matches!(confirmed, Replicated::Gone(crate::Ownership::Expired)),
            "{confirmed:?}"
        );
        assert_eq!(confirmed.shortfall(), Some(0));

        primary
            .command(&["SET", "test:gone", "someone-else"])
            .unwrap();
        let confirmed = confirm(&lock, &guard).await;
        assert!(
            matches!(confirmed, Replicated::Gone(crate::Ownership::HeldByOther)),
            "{confirmed:?}"
        );
        assert_eq!(
            primary.command(&["GET", "test:gone"]).unwrap(),
            "someone-else",
            "the other holder's lock is untouched"
        );
    }

    /// Whether the primary's one replica acknowledged its whole stream.
    fn in_sync(primary: &RedisServer) -> bool {
        let info = primary.command(&["INFO", "replication"]).unwrap();
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_owned())
        };
        let master = field("master_repl_offset:");
        let acked = field("slave0:").and_then(|s| {
            s.split(',')
                .find_map(|kv| kv.strip_prefix("offset=").map(str::to_owned))
        });
        master.is_some() && master == acked
    }
}
