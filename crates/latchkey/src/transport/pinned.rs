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

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value};

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
    state: Mutex<State>,
    /// One connection attempt at a time: commands that find none wait for it.
    connecting: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    /// Counts connections made, so a failure only drops the one it met.
    epoch: u64,
    conn: Option<MultiplexedConnection>,
}

impl PinnedConnection {
    /// Connects to `target`, each attempt and each command bounded by
    /// `timeout`.
    pub(crate) async fn connect(target: Target, timeout: Duration) -> RedisResult<Self> {
        let conn = PinnedConnection {
            shared: Arc::new(Shared {
                target,
                timeout,
                state: Mutex::new(State::default()),
                connecting: tokio::sync::Mutex::new(()),
            }),
        };
        conn.current().await?;
        Ok(conn)
    }

    /// The connection in use, or a new one.
    async fn current(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        if let Some(found) = self.cached() {
            return Ok(found);
        }
        let _one = self.shared.connecting.lock().await;
        if let Some(found) = self.cached() {
            return Ok(found);
        }
        let timeout = Some(self.shared.timeout);
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(timeout)
            .set_response_timeout(timeout);
        let conn = self.shared.target.connect(config).await?;
        let mut state = lock(&self.shared.state);
        state.epoch += 1;
        state.conn = Some(conn.clone());
        Ok((state.epoch, conn))
    }

    fn cached(&self) -> Option<(u64, MultiplexedConnection)> {
        let state = lock(&self.shared.state);
        state.conn.clone().map(|c| (state.epoch, c))
    }

    /// Drops the connection of `epoch` if `result` says it is broken and it
    /// is still the one in use.
    fn check<T>(&self, epoch: u64, result: &RedisResult<T>) {
        if !result.as_ref().is_err_and(broken) {
            return;
        }
        let mut state = lock(&self.shared.state);
        if state.epoch == epoch {
            state.conn = None;
        }
    }
}

/// Whether `e` means the connection is no good.
fn broken(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.is_unrecoverable_error()
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
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
