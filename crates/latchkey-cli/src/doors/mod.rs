//! Doors: latchkey's verbs for callers that do not run the CLI per step or
//! link the library. `mcp` serves them as Model Context Protocol tools over
//! stdio (for AI agents), `http` as HTTP/JSON (`latchkey serve`, with
//! `http_auth`'s bearer tokens); `verbs` is what both serve, once, so each
//! door is a skin over the same functions.
//!
//! Stateless by the owner token: a door keeps no locks, only a connection,
//! so any number of door processes may serve one deployment and a restart
//! loses nothing. A door never renews a lock on its own: a caller that stops
//! calling loses its lock at the TTL, as a dead process does.

pub(crate) mod http;
pub(crate) mod http_auth;
pub(crate) mod http_extract;
pub(crate) mod http_metrics;
pub(crate) mod http_openapi;
pub(crate) mod http_tls;
pub(crate) mod mcp;
pub(crate) mod mcp_holds;
pub(crate) mod verbs;

use latchkey::Client;

use crate::support::exit::Failure;
use crate::support::target::{redact, Target};
use verbs::VerbError;

/// The door's one connection: made on first use and kept; a failure to
/// connect is that call's error (the next call tries again), so a door
/// started while Redis is down serves as soon as it is back.
pub struct Redis {
    target: Target,
    url: String,
    client: tokio::sync::Mutex<Option<Client>>,
}

impl Redis {
    /// The door's server: one Redis URL (or Sentinel master). Several URLs
    /// (Redlock, cluster seeds) are refused: the doors do not serve them yet.
    pub fn new(target: &Target, door: &str) -> Result<Redis, Failure> {
        let url = target.single_url(door)?;
        Ok(Redis {
            target: target.clone(),
            url,
            client: tokio::sync::Mutex::new(None),
        })
    }

    /// The client, connected on first use.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropped while connecting, nothing is kept and the next
    /// call connects again.
    pub async fn client(&self) -> Result<Client, VerbError> {
        let mut slot = self.client.lock().await;
        if let Some(client) = &*slot {
            return Ok(client.clone());
        }
        let client = self
            .target
            .builder(&self.url)
            .connect()
            .await
            .map_err(|e| VerbError::from(e).about(&redact(&self.url)))?;
        *slot = Some(client.clone());
        Ok(client)
    }

    /// Waits, at most `within`, for the releases the client left running in
    /// the background (a wait dropped by its caller) before the door exits.
    ///
    /// # Cancel safety
    ///
    /// Not meant to be cancelled: what it has not flushed is forgotten
    /// (those locks free themselves at their TTL).
    pub async fn flush(&self, within: std::time::Duration) {
        let client = self.client.lock().await.clone();
        if let Some(client) = client {
            client.flush(within).await;
        }
    }
}
