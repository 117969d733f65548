//! What the shared subscriber connects to: a fixed server, or the primary
//! the Sentinels name (it reconnects when they name another).

use redis::RedisResult;
use tokio::sync::watch;

use super::SentinelConnection;
use crate::tls_name::Target;

/// What a subscriber connects to: one server, or the primary the Sentinels
/// name (followed across failovers).
#[derive(Clone)]
pub(crate) enum Source {
    Fixed(Box<Target>),
    Sentinel(SentinelConnection),
}

impl Source {
    /// A fresh pub/sub connection to the server.
    pub(crate) async fn pubsub(&self) -> RedisResult<redis::aio::PubSub> {
        match self {
            Source::Fixed(target) => target.pubsub().await,
            Source::Sentinel(conn) => conn.primary_target().await?.pubsub().await,
        }
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
