//! What the shared subscriber connects to: a fixed server, or the primary
//! the Sentinels name (it reconnects when they name another).

use redis::RedisResult;
use tokio::sync::watch;

use super::SentinelConnection;
use crate::transport::tls::server_name::Target;

/// What a subscriber connects to: one server, or the primary the Sentinels
/// name (followed across failovers).
#[derive(Clone)]
pub(crate) enum Source {
    Fixed(Box<Target>),
    Sentinel(SentinelConnection),
}

impl Source {
    /// A fresh RESP3 connection to the server for subscribing: messages
    /// arrive as pushes, at `config`'s push sender.
    pub(crate) async fn push_connection(
        &self,
        config: redis::AsyncConnectionConfig,
    ) -> RedisResult<redis::aio::MultiplexedConnection> {
        let target = match self {
            Source::Fixed(target) => (**target).clone(),
            Source::Sentinel(conn) => conn.primary_target().await?,
        };
        resp3(&target.client)?
            .get_multiplexed_async_connection_with_config(&target.config(config))
            .await
    }

    /// Told when the server to use changes (never for a fixed one).
    pub(crate) fn moved(&self) -> Option<watch::Receiver<Option<(String, u16)>>> {
        match self {
            Source::Fixed(_) => None,
            Source::Sentinel(conn) => Some(conn.primary()),
        }
    }

    /// The server, for messages.
    pub(crate) fn server(&self) -> String {
        match self {
            Source::Fixed(target) => target.server(),
            Source::Sentinel(conn) => conn.server(),
        }
    }
}

/// `client` speaking RESP3 (its address, TLS settings and user kept).
fn resp3(client: &redis::Client) -> RedisResult<redis::Client> {
    let info = client.get_connection_info().clone();
    let settings = info
        .redis_settings()
        .clone()
        .set_protocol(redis::ProtocolVersion::RESP3);
    redis::Client::open(info.set_redis_settings(settings))
}
