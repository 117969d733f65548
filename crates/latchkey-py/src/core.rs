//! One client's connection, per process: made on first use, and made again
//! in a child after `os.fork()` (the parent's sockets and runtime are not
//! the child's to use; they are forgotten there, never closed or written).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::runtime::pid;

/// What a client connects with.
pub(crate) struct Options {
    pub(crate) url: String,
    /// More nodes of the same Redis Cluster (a list of URLs was given).
    pub(crate) seeds: Vec<String>,
    /// Sentinels (`host:port`) and the master they watch: `url` is then
    /// the template of the primary's URL (password, database, TLS).
    pub(crate) sentinel: Option<(Vec<String>, String)>,
    pub(crate) prefix: Option<Vec<u8>>,
    pub(crate) command_timeout: Option<Duration>,
    pub(crate) tls_ca: Option<PathBuf>,
    pub(crate) tls_client: Option<(PathBuf, PathBuf)>,
}

/// The connection of one Python client (shared by its clones and the locks
/// made from it).
pub(crate) struct Core {
    pub(crate) options: Options,
    /// The connected client and the process that connected it.
    connected: Mutex<Option<(u32, latchkey::Client)>>,
}

impl Core {
    pub(crate) fn new(options: Options) -> Arc<Core> {
        Arc::new(Core {
            options,
            connected: Mutex::new(None),
        })
    }

    /// The client connected by this process, if it is.
    pub(crate) fn current(&self) -> Option<latchkey::Client> {
        let connected = self.connected.lock().unwrap_or_else(|p| p.into_inner());
        match &*connected {
            Some((owner, client)) if *owner == pid() => Some(client.clone()),
            _ => None,
        }
    }

    /// The client of this process, connecting it first when needed (the
    /// first call, and the first in a forked child).
    pub(crate) async fn client(self: Arc<Self>) -> latchkey::Result<latchkey::Client> {
        if let Some(client) = self.current() {
            return Ok(client);
        }
        let options = &self.options;
        let mut builder = latchkey::Client::builder(&options.url);
        for seed in &options.seeds {
            builder = builder.seed(seed);
        }
        if let Some((sentinels, master)) = &options.sentinel {
            builder = builder.sentinel(sentinels, master);
        }
        if let Some(prefix) = &options.prefix {
            builder = builder.prefix(prefix);
        }
        if let Some(timeout) = options.command_timeout {
            builder = builder.command_timeout(timeout);
        }
        if let Some(ca) = &options.tls_ca {
            builder = builder.tls_ca_file(ca);
        }
        if let Some((cert, key)) = &options.tls_client {
            builder = builder.tls_client_cert_files(cert, key);
        }
        let client = builder.connect().await?;
        let mut connected = self.connected.lock().unwrap_or_else(|p| p.into_inner());
        match connected.take() {
            // Two threads connected at once: keep the first.
            Some((owner, first)) if owner == pid() => {
                *connected = Some((owner, first.clone()));
                return Ok(first);
            }
            Some((_, inherited)) => std::mem::forget(inherited),
            None => {}
        }
        *connected = Some((pid(), client.clone()));
        Ok(client)
    }

    /// Waits, at most `within`, for the client's background releases,
    /// those of calls cancelled from Python included.
    pub(crate) async fn flush(self: Arc<Self>, within: Duration) -> latchkey::Result<bool> {
        let deadline = std::time::Instant::now() + within;
        let dropped = crate::runtime::cancelled_dropped(deadline).await;
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match self.current() {
            Some(client) => Ok(client.flush(left).await && dropped),
            None => Ok(dropped),
        }
    }

    /// The key prefix in force.
    pub(crate) fn prefix(&self) -> Vec<u8> {
        match (self.current(), &self.options.prefix) {
            (Some(client), _) => client.prefix().to_vec(),
            (None, Some(prefix)) => prefix.clone(),
            (None, None) => latchkey::DEFAULT_PREFIX.as_bytes().to_vec(),
        }
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        // The parent's client in a forked child is forgotten.
        if let Some((owner, client)) = self.connected.get_mut().ok().and_then(|c| c.take()) {
            crate::runtime::drop_in_runtime(client, owner);
        }
    }
}
