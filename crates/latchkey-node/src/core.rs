//! One client's connection (a Redis, a cluster, a Sentinel-watched primary,
//! or a Redlock over N servers). The holds taken through it are the
//! library's client's to keep (`latchkey::Client::keep`, hold.rs): a hold
//! ends when the program releases or forgets it, when it is lost, at
//! `close()`, or when its thread's environment ends (envs.rs), never
//! because JavaScript collected its guard.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use napi_derive::napi;
use tokio_util::sync::CancellationToken;

use crate::args::opt_ms;
use crate::errors::{closed, invalid};

/// What `Client.connect` takes (the facade checks and documents it).
#[napi(object)]
pub struct ConnectOptions {
    /// One URL, or the seed nodes of one Redis Cluster, or (with
    /// `redlock`) the N independent servers.
    pub urls: Vec<String>,
    pub prefix: Option<String>,
    pub command_timeout_ms: Option<f64>,
    /// `host:port` of each Sentinel; `urls[0]` is then the template of
    /// the primary's URL (password, database, TLS).
    pub sentinels: Option<Vec<String>>,
    pub master: Option<String>,
    pub tls_ca: Option<String>,
    pub tls_cert: Option<String>,
    pub tls_key: Option<String>,
    pub tls_server_name: Option<String>,
    pub redlock: Option<bool>,
    pub instance_timeout_ms: Option<f64>,
}

/// A connection, and what its close ends.
pub(crate) struct Core {
    /// Of one Redis (standalone, cluster, Sentinel), or a Redlock's, which
    /// makes locks only (the library refuses the rest).
    pub(crate) client: latchkey::Client,
    closed: AtomicBool,
    /// Cancelled by close(): every wait of the client selects on it.
    closing: CancellationToken,
}

fn configure(
    mut builder: latchkey::ClientBuilder,
    o: &ConnectOptions,
) -> latchkey::Result<latchkey::ClientBuilder> {
    if let Some(sentinels) = &o.sentinels {
        let Some(master) = &o.master else {
            return Err(invalid("sentinels need the master's name (master)"));
        };
        builder = builder.sentinel(sentinels, master);
    }
    if let Some(prefix) = &o.prefix {
        builder = builder.prefix(prefix);
    }
    if let Some(timeout) = opt_ms("commandTimeout", o.command_timeout_ms)? {
        builder = builder.command_timeout(timeout);
    }
    if let Some(ca) = &o.tls_ca {
        builder = builder.tls_ca_file(ca);
    }
    match (&o.tls_cert, &o.tls_key) {
        (Some(cert), Some(key)) => builder = builder.tls_client_cert_files(cert, key),
        (None, None) => {}
        _ => return Err(invalid("tlsCert and tlsKey go together")),
    }
    if let Some(name) = &o.tls_server_name {
        builder = builder.tls_server_name(name);
    }
    Ok(builder)
}

impl Core {
    pub(crate) async fn connect(o: ConnectOptions) -> latchkey::Result<Arc<Core>> {
        let at = o
            .urls
            .iter()
            .map(|u| latchkey::redact_url(u))
            .collect::<Vec<_>>();
        Core::connect_to(o).await.map_err(|e| match e {
            latchkey::Error::Unreachable(cause) => {
                latchkey::Error::Unreachable(redis::RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    format!("{}: {cause}", at.join(", ")),
                )))
            }
            other => other,
        })
    }

    async fn connect_to(o: ConnectOptions) -> latchkey::Result<Arc<Core>> {
        let Some(first) = o.urls.first() else {
            return Err(invalid("a client needs at least one URL"));
        };
        let client = if o.redlock == Some(true) {
            // The options are checked once here: the closure below makes
            // each instance's builder with the same (then infallible) calls.
            configure(latchkey::Client::builder(first), &o)?;
            let urls: Vec<&str> = o.urls.iter().map(String::as_str).collect();
            let connecting = latchkey::Redlock::connect_with(&urls, |b| {
                configure(b, &o).unwrap_or_else(|_| latchkey::Client::builder(first))
            });
            let mut redlock = connecting.await?;
            if let Some(timeout) = opt_ms("instanceTimeout", o.instance_timeout_ms)? {
                redlock = redlock.with_instance_timeout(timeout)?;
            }
            latchkey::Client::from(redlock)
        } else {
            let mut builder = latchkey::Client::builder(first);
            for seed in &o.urls[1..] {
                builder = builder.seed(seed);
            }
            configure(builder, &o)?.connect().await?
        };
        Ok(Arc::new(Core {
            client,
            closed: AtomicBool::new(false),
            closing: CancellationToken::new(),
        }))
    }

    /// The client, while this core is open.
    pub(crate) fn client(&self) -> latchkey::Result<&latchkey::Client> {
        self.check_open()?;
        Ok(&self.client)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub(crate) fn check_open(&self) -> latchkey::Result<()> {
        match self.closed.load(Ordering::Acquire) {
            true => Err(closed()),
            false => Ok(()),
        }
    }

    /// Fires when the client is closed.
    pub(crate) fn closing(&self) -> CancellationToken {
        self.closing.clone()
    }

    pub(crate) fn prefix(&self) -> Vec<u8> {
        self.client.prefix().to_vec()
    }

    /// Ends the pending waits, then the library's close: every hold of the
    /// client is given back (and told: CLOSED), and the holds cached locks
    /// keep; waits at most `within` for the releases, and refuses new
    /// calls. Whether all finished in time.
    pub(crate) async fn close(&self, within: Duration) -> bool {
        self.closed.store(true, Ordering::Release);
        self.closing.cancel();
        self.client.close(within).await
    }

    /// Waits at most `within` for background releases (and gives back the
    /// holds cached locks keep idle).
    pub(crate) async fn flush(&self, within: Duration) -> bool {
        self.client.flush(within).await
    }
}
