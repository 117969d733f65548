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
    /// The name the servers' TLS certificates are checked against, when
    /// it is not the URL's host (an IP address, a tunnel).
    pub(crate) tls_server_name: Option<String>,
    /// `Some` for a Redlock: `url` and `seeds` are then its N independent
    /// instances, and this its per-instance timeout, if one was set.
    pub(crate) redlock: Option<Option<Duration>>,
    /// Whether the construction connects (a blocking client's default;
    /// `connect=False` leaves it, and the runtime's threads, to the first
    /// use, as an asyncio client does).
    pub(crate) connect_now: bool,
}

impl Options {
    /// The URL for `repr()`, by the library's one redaction rule.
    pub(crate) fn shown_url(&self) -> String {
        latchkey::redact_url(&self.url)
    }
}

/// The connection of one Python client (shared by its clones and the locks
/// made from it). The holds taken through it are kept by the library's
/// client (`latchkey::Client::keep`).
pub(crate) struct Core {
    pub(crate) options: Options,
    /// What is connected (a client of one Redis, a cluster, a
    /// Sentinel-watched primary, or a Redlock's, which makes locks only)
    /// and the process that connected it.
    connected: Mutex<Option<(u32, latchkey::Client)>>,
    /// Set by `close()`: every later call is refused, and the waits in
    /// flight end.
    closing: tokio::sync::watch::Sender<bool>,
}

/// Every core alive (weakly), for the interpreter's exit: each core's
/// client is closed then, which gives back every hold it keeps.
static LIVE: Mutex<Vec<std::sync::Weak<Core>>> = Mutex::new(Vec::new());

/// The last flushes of the cores Python let go of (`Core::drop`): a
/// client made in `main()` is gone before the interpreter exits, and its
/// background releases with it unless the exit waits for these.
static RETIRING: Mutex<Vec<tokio::task::JoinHandle<()>>> = Mutex::new(Vec::new());

/// The clients of the cores Python let go of, weakly: one whose holds are
/// still kept (a guard in a module global outlives the client object that
/// took it, or both were collected) is alive, and closed at exit, which
/// gives those holds back.
static ORPHANS: Mutex<Vec<latchkey::WeakClient>> = Mutex::new(Vec::new());

/// How long a dropped client's last flush waits for its background work.
const RETIRE_WITHIN: Duration = Duration::from_secs(10);

impl Core {
    pub(crate) fn new(options: Options) -> Arc<Core> {
        let core = Arc::new(Core {
            options,
            connected: Mutex::new(None),
            closing: tokio::sync::watch::Sender::new(false),
        });
        let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
        if live.len() >= 64 && live.len().is_power_of_two() {
            live.retain(|c| c.strong_count() > 0);
        }
        live.push(Arc::downgrade(&core));
        drop(live);
        core
    }

    /// What this process connected, if it did.
    pub(crate) fn connected(&self) -> Option<latchkey::Client> {
        let connected = self.connected.lock().unwrap_or_else(|p| p.into_inner());
        match &*connected {
            Some((owner, made)) if *owner == pid() => Some(made.clone()),
            _ => None,
        }
    }

    /// The client options every connection of this core is made with.
    fn configure(&self, mut builder: latchkey::ClientBuilder) -> latchkey::ClientBuilder {
        let options = &self.options;
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
        if let Some(name) = &options.tls_server_name {
            builder = builder.tls_server_name(name);
        }
        builder
    }

    /// Keeps what this process connected, unless another thread connected
    /// first (then that is kept, and returned).
    fn keep(&self, made: latchkey::Client) -> latchkey::Client {
        let mut connected = self.connected.lock().unwrap_or_else(|p| p.into_inner());
        match connected.take() {
            Some((owner, first)) if owner == pid() => {
                *connected = Some((owner, first.clone()));
                return first;
            }
            Some((_, inherited)) => std::mem::forget(inherited),
            None => {}
        }
        *connected = Some((pid(), made.clone()));
        made
    }

    /// `ClientClosed` once `close()` was called.
    pub(crate) fn check_open(&self) -> latchkey::Result<()> {
        match *self.closing.borrow() {
            true => Err(latchkey::Error::ClientClosed),
            false => Ok(()),
        }
    }

    /// `wait`, ended by `close()` (dropped, which the library makes safe:
    /// whatever it took is given back), with `ClientClosed`.
    pub(crate) async fn unless_closed<T>(
        &self,
        wait: impl std::future::Future<Output = latchkey::Result<T>>,
    ) -> latchkey::Result<T> {
        let mut closing = self.closing.subscribe();
        tokio::select! {
            biased;
            done = wait => done,
            _ = closing.wait_for(|closed| *closed) => Err(latchkey::Error::ClientClosed),
        }
    }

    /// Gives back every hold and the holds cached locks keep, waits at most
    /// `within` for the background releases, and refuses every later call.
    /// Whether all finished in time.
    pub(crate) async fn close(self: Arc<Self>, within: Duration) -> latchkey::Result<bool> {
        self.closing.send_replace(true);
        Ok(match self.connected() {
            Some(connected) => connected.close(within).await,
            None => true,
        })
    }

    /// What this process connected, connecting first when needed (the
    /// first call, and the first in a forked child).
    pub(crate) async fn connect(self: Arc<Self>) -> latchkey::Result<latchkey::Client> {
        self.check_open()?;
        if let Some(connected) = self.connected() {
            return Ok(connected);
        }
        let made = match self.options.redlock {
            None => {
                let mut builder = latchkey::Client::builder(&self.options.url);
                for seed in &self.options.seeds {
                    builder = builder.seed(seed);
                }
                let client = self.configure(builder).connect().await;
                client.map_err(|e| self.connect_failed(e))?
            }
            Some(instance_timeout) => {
                let urls: Vec<&str> = std::iter::once(self.options.url.as_str())
                    .chain(self.options.seeds.iter().map(String::as_str))
                    .collect();
                let connecting =
                    latchkey::Redlock::connect_with(&urls, |builder| self.configure(builder));
                let mut redlock = connecting.await.map_err(|e| self.connect_failed(e))?;
                if let Some(timeout) = instance_timeout {
                    redlock = redlock.with_instance_timeout(timeout)?;
                }
                latchkey::Client::from(redlock)
            }
        };
        Ok(self.keep(made))
    }

    /// Waits, at most `within`, for the client's background releases,
    /// those of calls cancelled from Python included.
    pub(crate) async fn flush(self: Arc<Self>, within: Duration) -> latchkey::Result<bool> {
        let deadline = std::time::Instant::now() + within;
        let dropped = crate::runtime::cancelled_dropped(deadline).await;
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match self.connected() {
            Some(connected) => Ok(connected.flush(left).await && dropped),
            None => Ok(dropped),
        }
    }

    /// The key prefix in force.
    pub(crate) fn prefix(&self) -> Vec<u8> {
        match (self.connected(), &self.options.prefix) {
            (Some(client), _) => client.prefix().to_vec(),
            (None, Some(prefix)) => prefix.clone(),
            (None, None) => latchkey::limits::DEFAULT_PREFIX.as_bytes().to_vec(),
        }
    }
}

/// At the interpreter's exit: closes the client of every core still
/// alive and of those dropped with holds kept (which gives back every
/// hold and waits for the background releases), and waits for the last
/// flushes of the cores dropped, all within `within`; whether all finished.
pub(crate) async fn close_all(within: Duration) -> bool {
    let deadline = std::time::Instant::now() + within;
    let live = std::mem::take(&mut *LIVE.lock().unwrap_or_else(|p| p.into_inner()));
    let mut clients: Vec<latchkey::Client> = live
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .filter_map(|core| core.connected())
        .collect();
    let orphans = std::mem::take(&mut *ORPHANS.lock().unwrap_or_else(|p| p.into_inner()));
    clients.extend(orphans.iter().filter_map(latchkey::WeakClient::upgrade));
    let retiring = std::mem::take(&mut *RETIRING.lock().unwrap_or_else(|p| p.into_inner()));
    let closes: Vec<_> = clients
        .into_iter()
        .map(|client| {
            tokio::spawn(async move {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                client.close(left).await
            })
        })
        .collect();
    let mut all = true;
    for close in closes {
        all &= close.await.unwrap_or(false);
    }
    for last in retiring {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        all &= tokio::time::timeout(left, last).await.is_ok();
    }
    all
}

impl Drop for Core {
    fn drop(&mut self) {
        let Some((owner, made)) = self.connected.get_mut().ok().and_then(|c| c.take()) else {
            return;
        };
        // The parent's client in a forked child is forgotten.
        if owner != pid() {
            std::mem::forget(made);
            return;
        }
        // Holds still kept (their Python objects outlive this one, or were
        // collected) keep the client alive: reachable for the close at exit.
        let mut orphans = ORPHANS.lock().unwrap_or_else(|p| p.into_inner());
        if orphans.len() >= 64 && orphans.len().is_power_of_two() {
            orphans.retain(|c| c.upgrade().is_some());
        }
        orphans.push(made.downgrade());
        drop(orphans);
        // Nothing of Python's holds this client any more (every lock keeps
        // its core): what their drops left in the background is on its
        // tracker now. Its last flush waits for that, and for the holds its
        // cached locks kept, before the connection goes.
        let Ok(handle) = crate::runtime::handle() else {
            return drop(made); // the interpreter is exiting
        };
        let last = handle.spawn(async move {
            made.flush(RETIRE_WITHIN).await;
            drop(made);
        });
        let mut retiring = RETIRING.lock().unwrap_or_else(|p| p.into_inner());
        retiring.retain(|r| !r.is_finished());
        retiring.push(last);
    }
}
