//! One client's connection (a Redis, a cluster, a Sentinel-watched primary,
//! or a Redlock over N servers) and the holds taken through it, kept
//! strongly: a hold ends when the program releases or forgets it, when it
//! is lost (then the registry lets go of it once it cannot be ours any
//! more), at `close()`, or when its thread's environment ends (envs.rs),
//! never because JavaScript collected its guard.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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

/// A live hold, as the core sees it: something to give back at close()
/// (hold.rs implements it; the core knows no more of holds).
pub(crate) trait Releasable: Send + Sync {
    fn give_back(self: Arc<Self>) -> latchkey::BoxFuture<'static, ()>;
    /// Lost beyond any renewal (a TTL past its deadline): nothing left to
    /// give back, so the registry may let go of it.
    fn is_gone(&self) -> bool;
}

/// The live holds, and the count at the last sweep of the gone ones.
#[derive(Default)]
struct Holds {
    live: HashMap<u64, Arc<dyn Releasable>>,
    swept_at: usize,
}

/// A connection and its live holds.
pub(crate) struct Core {
    /// Of one Redis (standalone, cluster, Sentinel), or a Redlock's, which
    /// makes locks only (the library refuses the rest).
    pub(crate) client: latchkey::Client,
    holds: Mutex<Holds>,
    next_hold: AtomicU64,
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
            holds: Mutex::new(Holds::default()),
            next_hold: AtomicU64::new(0),
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

    fn holds(&self) -> std::sync::MutexGuard<'_, Holds> {
        self.holds.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps a live hold until it is released, forgotten, gone or given
    /// back at close: its id for `forget`. CLIENT_CLOSED once closed (the
    /// caller then lets the hold go).
    pub(crate) fn track(&self, hold: Arc<dyn Releasable>) -> latchkey::Result<u64> {
        let id = self.next_hold.fetch_add(1, Ordering::Relaxed);
        let gone = {
            let mut holds = self.holds();
            // Under the mutex that close() drains: no hold slips in after.
            if self.closed.load(Ordering::Acquire) {
                return Err(closed());
            }
            holds.live.insert(id, hold);
            // Holds lost and never released would pile up in a program
            // that leaks guards: swept each time the count doubles.
            let mut gone = Vec::new();
            if holds.live.len() >= (holds.swept_at * 2).max(64) {
                holds.live.retain(|_, h| match h.is_gone() {
                    true => {
                        gone.push(h.clone());
                        false
                    }
                    false => true,
                });
                holds.swept_at = holds.live.len();
            }
            gone
        };
        // Dropped outside the mutex: a hold's drop may release in the background.
        drop(gone);
        Ok(id)
    }

    pub(crate) fn forget(&self, id: u64) {
        let removed = self.holds().live.remove(&id);
        drop(removed);
    }

    pub(crate) fn prefix(&self) -> Vec<u8> {
        self.client.prefix().to_vec()
    }

    /// Gives back every live hold and the holds cached locks keep, and
    /// waits at most `within` for the background releases; then refuses
    /// new calls. Whether all finished in time.
    pub(crate) async fn close(&self, within: Duration) -> bool {
        let live: Vec<Arc<dyn Releasable>> = {
            let mut holds = self.holds();
            self.closed.store(true, Ordering::Release);
            holds.live.drain().map(|(_, h)| h).collect()
        };
        self.closing.cancel();
        let deadline = tokio::time::Instant::now() + within;
        let releases = live.into_iter().map(|hold| tokio::spawn(hold.give_back()));
        let releases: Vec<_> = releases.collect();
        let mut all = true;
        for release in releases {
            all &= tokio::time::timeout_at(deadline, release).await.is_ok();
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        // The library's close: whatever is still out is given back, and
        // nothing is taken after it.
        all & self.client.close(left).await
    }

    /// Waits at most `within` for background releases (and gives back the
    /// holds cached locks keep idle).
    pub(crate) async fn flush(&self, within: Duration) -> bool {
        self.client.flush(within).await
    }
}
