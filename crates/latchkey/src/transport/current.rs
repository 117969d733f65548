//! The connection a reconnecting connection uses now (the TLS-pinned one,
//! the Sentinel one): made on demand, one attempt at a time, and counted by
//! epoch, so that a failure drops only the connection it met, never a newer
//! one made meanwhile.

use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisError, RedisResult};

/// See the module docs.
#[derive(Default)]
pub(crate) struct Current {
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

impl Current {
    /// The connection in use and its epoch, or a new one from `connect`.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped attempt leaves no connection in use, and the
    /// next caller makes one.
    pub(crate) async fn get<F, Fut>(&self, connect: F) -> RedisResult<(u64, MultiplexedConnection)>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = RedisResult<MultiplexedConnection>>,
    {
        if let Some(found) = self.cached() {
            return Ok(found);
        }
        let _one = self.connecting.lock().await;
        if let Some(found) = self.cached() {
            return Ok(found);
        }
        let conn = connect().await?;
        let mut state = self.state();
        state.epoch += 1;
        state.conn = Some(conn.clone());
        Ok((state.epoch, conn))
    }

    /// Drops the connection of `epoch` if it is still the one in use.
    pub(crate) fn drop_if(&self, epoch: u64) {
        let mut state = self.state();
        if state.epoch == epoch {
            state.conn = None;
        }
    }

    /// Drops the connection in use, whichever it is (the server behind it
    /// is no longer the one wanted).
    pub(crate) fn clear(&self) {
        self.state().conn = None;
    }

    fn cached(&self) -> Option<(u64, MultiplexedConnection)> {
        let state = self.state();
        state.conn.clone().map(|c| (state.epoch, c))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether `e` means the connection is no good: the next command connects
/// anew.
pub(crate) fn broken(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.is_unrecoverable_error()
}

/// A connection's settings: connecting and each command bounded by `timeout`.
pub(crate) fn config(timeout: Duration) -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
}
