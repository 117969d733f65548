//! The command connection to one server under a TLS server-name override
//! (layer 2, transport): redis-rs's `ConnectionManager` takes no DNS
//! resolver, so this is a small reconnecting connection over multiplexed
//! ones, which do (see `crate::transport::tls::server_name`).
//!
//! The first command connects; a command that fails for the connection's
//! sake (reset, refused, timed out) drops it and goes back to the caller, so
//! the next command connects anew, as the `ConnectionManager` of a client
//! without the override does (latchkey asks it for one retry at most:
//! callers retry with their own deadlines).

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

use crate::transport::current::{broken, config, Current};

use crate::transport::tls::server_name::Target;

/// A reconnecting connection to one server (cheap to clone); see the
/// module docs.
#[derive(Clone)]
pub(crate) struct PinnedConnection {
    shared: Arc<Shared>,
}

struct Shared {
    target: Target,
    timeout: Duration,
    current: Current,
}

impl PinnedConnection {
    /// Connects to `target`, each attempt and each command bounded by
    /// `timeout`.
    pub(crate) async fn connect(target: Target, timeout: Duration) -> RedisResult<Self> {
        let conn = PinnedConnection {
            shared: Arc::new(Shared {
                target,
                timeout,
                current: Current::default(),
            }),
        };
        conn.current().await?;
        Ok(conn)
    }

    /// The connection in use, or a new one.
    async fn current(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        let shared = &self.shared;
        let connect = || shared.target.connect(config(shared.timeout));
        shared.current.get(connect).await
    }

    /// Drops the connection of `epoch` if `result` says it is broken and it
    /// is still the one in use.
    fn check<T>(&self, epoch: u64, result: &RedisResult<T>) {
        if result.as_ref().is_err_and(broken) {
            self.shared.current.drop_if(epoch);
        }
    }
}

impl ConnectionLike for PinnedConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (epoch, mut conn) = self.current().await?;
            let result = conn.req_packed_command(cmd).await;
            self.check(epoch, &result);
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (epoch, mut conn) = self.current().await?;
            let result = conn.req_packed_commands(pipeline, offset, count).await;
            self.check(epoch, &result);
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.shared
            .target
            .client
            .get_connection_info()
            .redis_settings()
            .db()
    }
}
