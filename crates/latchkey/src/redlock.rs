//! [`Redlock`]: one lock over N independent Redis instances, held while a
//! majority of them agree.
//!
//! ```no_run
//! # async fn demo() -> latchkey::Result<()> {
//! use std::time::Duration;
//! let redlock = latchkey::Redlock::connect(&[
//!     "redis://127.0.0.1:7001/",
//!     "redis://127.0.0.1:7002/",
//!     "redis://127.0.0.1:7003/",
//! ])
//! .await?;
//! // The same `Lock`, guard, watchdog, lost() and fencing as `Client::lock`:
//! let lock = redlock.lock("invoices", Duration::from_secs(10))?.with_watchdog();
//! let guard = lock.acquire_timeout(Duration::from_secs(5)).await?;
//! tokio::select! {
//!     _ = guard.lost() => eprintln!("lost the lock: stop touching the invoices"),
//!     _ = async { /* write, passing guard.fencing_token().await? */ } => {}
//! }
//! let outcome = guard.release().await?; // Owned: a majority confirmed
//! # Ok(()) }
//! ```
//!
//! The algorithm is the one on redis.io ("Distributed Locks with Redis") and
//! in antirez's reference code; `docs/redlock.md` describes it as
//! implemented here, with the timeouts chosen, the fencing guarantee, the
//! persistence and clock assumptions, and when not to use it.

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use crate::backend::Backend;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::lock::Lock;
use crate::queue::LocalQueues;
use crate::session::{ClientBuilder, Session};
use crate::token::Identity;

mod gather;
mod rounds;
mod tally;

/// The per-instance timeout used when none is set and no TTL is at hand
/// (release, subscribing), and the cap of the TTL-derived one: see
/// [`Redlock::instance_timeout`].
pub const MAX_INSTANCE_TIMEOUT: Duration = Duration::from_millis(250);

/// The floor of the TTL-derived per-instance timeout.
pub const MIN_INSTANCE_TIMEOUT: Duration = Duration::from_millis(5);

/// How a [`Redlock`] turns the per-instance fencing tokens of a hold (issued
/// by the acquisition of a lock made [`with_fencing`](Lock::with_fencing),
/// else by the guard's first [`fencing_token`](crate::LockGuard::fencing_token)
/// call) into the one token of its guard. Both take the maximum over the
/// issuing majority; they differ in what makes the next token greater. See
/// `docs/redlock.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Fencing {
    /// After a majority issued tokens, raise the fencing counters of the
    /// instances to the token before handing it out (one more concurrent
    /// round trip). Any later majority then contains an instance whose
    /// counter is at least this token, so later tokens are strictly
    /// greater, whatever the clocks say, as long as a majority keeps its
    /// counters (persistence, or at most a minority restarted between two
    /// tokens).
    #[default]
    Strict,
    /// No extra round trip: the token is the maximum over the majority, and
    /// only the per-instance time floor (server time in µs) makes later
    /// tokens greater. Monotonic only as far as the servers' clocks agree.
    TimeFloor,
}

/// A lock service over N independent Redis instances (Redlock). Cheap to
/// clone; clones share connections, the local wait queues and the
/// reconnection of instances that were down at connect time.
///
/// Make locks with [`Redlock::lock`]: they are the same [`Lock`] as
/// [`Client::lock`] makes, so code written against `Lock` and
/// [`LockGuard`](crate::LockGuard) switches with one constructor.
#[derive(Clone)]
pub struct Redlock {
    pub(crate) inner: Arc<Inner>,
    options: Options,
}

#[derive(Debug, Clone, Copy)]
struct Options {
    /// `None`: derived from the TTL, see [`Redlock::instance_timeout`].
    instance_timeout: Option<Duration>,
    fencing: Fencing,
}

pub(crate) struct Inner {
    instances: Vec<Instance>,
    quorum: usize,
    prefix: Vec<u8>,
    identity: Identity,
    local_queues: LocalQueues,
    /// Background releases, so that [`Redlock::flush`] can wait for them.
    pub(crate) background: tokio_util::task::TaskTracker,
}

struct Instance {
    /// For messages: the server's address, or the URL while not connected.
    label: String,
    /// Set at construction, or later by the reconnect task for an instance
    /// that was down when [`Redlock::connect`] ran. Until then every
    /// operation counts it as unreachable, at once.
    client: OnceLock<Session>,
}

impl std::fmt::Debug for Redlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let labels: Vec<&str> = self
            .inner
            .instances
            .iter()
            .map(|i| i.label.as_str())
            .collect();
        f.debug_struct("Redlock")
            .field("instances", &labels)
            .field("connected", &self.connected())
            .field("quorum", &self.inner.quorum)
            .field("prefix", &String::from_utf8_lossy(&self.inner.prefix))
            .field("instance_timeout", &self.options.instance_timeout)
            .field("fencing", &self.options.fencing)
            .finish()
    }
}

impl Redlock {
    /// A Redlock over these connected clients, one per independent Redis
    /// instance (not replicas of each other: a replica can lose the lock in
    /// a failover).
    ///
    /// Fails with [`Error::InvalidInput`] for no clients, for two clients of
    /// the same server, and for clients with different key prefixes (the
    /// instances must agree on the key). Warns (a log line) for fewer than
    /// three or an even number of instances: an even N tolerates no more
    /// failures than N − 1.
    pub fn new(clients: Vec<Client>) -> Result<Redlock> {
        let labels: Vec<String> = clients.iter().map(Client::server).collect();
        check_distinct(&labels)?;
        let Some(first) = clients.first() else {
            return Err(no_instances());
        };
        let prefix = first.prefix().to_vec();
        if let Some(odd) = clients.iter().find(|c| c.prefix() != prefix.as_slice()) {
            return Err(Error::InvalidInput(format!(
                "all Redlock instances need the same key prefix; {} has {:?}, {} has {:?}",
                first.server(),
                String::from_utf8_lossy(&prefix),
                odd.server(),
                String::from_utf8_lossy(odd.prefix())
            )));
        }
        let instances = clients
            .into_iter()
            .zip(labels)
            .map(|(client, label)| Instance {
                label,
                client: OnceLock::from(client.session),
            })
            .collect();
        Ok(Redlock::from_instances(instances, prefix))
    }

    /// Connects to every URL concurrently with default client options. See
    /// [`Redlock::connect_with`].
    pub async fn connect(urls: &[&str]) -> Result<Redlock> {
        Self::connect_with(urls, |builder| builder).await
    }

    /// Connects to every URL concurrently, each client made by
    /// `configure(Client::builder(url))` (all must end up with the same key
    /// prefix).
    ///
    /// Starts with a majority: when at least `N/2 + 1` instances connect,
    /// the Redlock is returned and each instance that could not be reached
    /// is reconnected in the background (jittered backoff from 100 ms to
    /// 5 s) and joins in when it answers; meanwhile it counts as
    /// unreachable, without waiting for it. The quorum is always a majority
    /// of *all* N. With fewer than a majority reachable, fails with
    /// [`Error::NoQuorum`]; with a bad URL or option, with the error of that
    /// instance. Needs a tokio runtime.
    pub async fn connect_with(
        urls: &[&str],
        configure: impl Fn(ClientBuilder) -> ClientBuilder,
    ) -> Result<Redlock> {
        let labels: Vec<String> = urls.iter().map(|u| label_of(u)).collect::<Result<_>>()?;
        check_distinct(&labels)?;
        if urls.is_empty() {
            return Err(no_instances());
        }
        let builders: Vec<ClientBuilder> = urls
            .iter()
            .map(|u| configure(ClientBuilder::new(u)))
            .collect();
        let attempts = builders.iter().map(|b| b.clone().open());
        let results = futures_util::future::join_all(attempts).await;

        let mut instances = Vec::with_capacity(urls.len());
        let mut down = Vec::new();
        let mut prefix: Option<Vec<u8>> = None;
        for (i, result) in results.into_iter().enumerate() {
            let instance = match result {
                Ok(client) => {
                    let p = prefix.get_or_insert_with(|| client.prefix().to_vec());
                    if client.prefix() != p.as_slice() {
                        return Err(Error::InvalidInput(
                            "all Redlock instances need the same key prefix".into(),
                        ));
                    }
                    Instance {
                        label: client.server(),
                        client: OnceLock::from(client),
                    }
                }
                // A mistake in the input is not an outage: report it.
                Err(e) if !e.is_transient() => return Err(e),
                Err(e) => {
                    tracing::warn!(instance = %labels[i], error = %e, "Redlock instance unreachable at connect; reconnecting in the background");
                    down.push(i);
                    Instance {
                        label: labels[i].clone(),
                        client: OnceLock::new(),
                    }
                }
            };
            instances.push(instance);
        }
        let n = instances.len();
        let needed = tally::quorum(n);
        let Some(prefix) = prefix.filter(|_| n - down.len() >= needed) else {
            return Err(Error::NoQuorum {
                op: "connect",
                answered: n - down.len(),
                needed,
                instances: n,
            });
        };
        let redlock = Redlock::from_instances(instances, prefix);
        for i in down {
            spawn_reconnect(Arc::downgrade(&redlock.inner), i, builders[i].clone());
        }
        Ok(redlock)
    }

    fn from_instances(instances: Vec<Instance>, prefix: Vec<u8>) -> Redlock {
        let n = instances.len();
        if n < 3 || n % 2 == 0 {
            tracing::warn!(
                instances = n,
                "a Redlock should have an odd number of at least 3 instances: {n} tolerate{} {} failure(s)",
                if n == 1 { "s" } else { "" },
                n - tally::quorum(n)
            );
        }
        Redlock {
            inner: Arc::new(Inner {
                instances,
                quorum: tally::quorum(n),
                prefix,
                identity: Identity::of_this_process(),
                local_queues: LocalQueues::default(),
                background: tokio_util::task::TaskTracker::new(),
            }),
            options: Options {
                instance_timeout: None,
                fencing: Fencing::default(),
            },
        }
    }

    /// A lock called `name`, held while a majority of the instances hold it,
    /// for at most `ttl` unless extended. The same checks and the same
    /// [`Lock`] as [`Client::lock`].
    pub fn lock(&self, name: impl AsRef<[u8]>, ttl: Duration) -> Result<Lock> {
        Lock::new(Backend::Redlock(self.clone()), name.as_ref(), ttl)
    }

    /// Sets how long each instance may take to answer one command of an
    /// acquire, extend or release round (all instances are asked at once,
    /// so this bounds the round).
    ///
    /// By default it is `ttl / 10`, at least [`MIN_INSTANCE_TIMEOUT`] and
    /// at most [`MAX_INSTANCE_TIMEOUT`], and never more than the client's
    /// command timeout: far below the TTL, as the algorithm asks, so a slow
    /// or silent instance costs a round at most a tenth of the lease
    /// instead of all of it, yet far above a LAN round trip. Release (which
    /// has no TTL at hand) uses [`MAX_INSTANCE_TIMEOUT`]. Set it when your
    /// instances are farther apart than a LAN. Fails with
    /// [`Error::InvalidInput`] for zero.
    pub fn instance_timeout(mut self, timeout: Duration) -> Result<Self> {
        if timeout.is_zero() {
            return Err(Error::InvalidInput(
                "the per-instance timeout must be positive".into(),
            ));
        }
        self.options.instance_timeout = Some(timeout);
        Ok(self)
    }

    /// Chooses how fencing tokens are made (default [`Fencing::Strict`]).
    pub fn fencing(mut self, fencing: Fencing) -> Self {
        self.options.fencing = fencing;
        self
    }

    /// The number of instances, N.
    pub fn instances(&self) -> usize {
        self.inner.instances.len()
    }

    /// How many instances must agree: `N/2 + 1`.
    pub fn quorum(&self) -> usize {
        self.inner.quorum
    }

    /// How many instances have a connection (those down at connect time
    /// count once they came back). Says nothing about whether they answer now.
    pub fn connected(&self) -> usize {
        self.inner
            .instances
            .iter()
            .filter(|i| i.client.get().is_some())
            .count()
    }

    /// The key prefix shared by all instances.
    pub fn prefix(&self) -> &[u8] {
        &self.inner.prefix
    }

    /// Waits, at most `within`, for the releases this Redlock finishes in
    /// the background (dropped guards, cancelled or unanswered releases) to
    /// end; see [`Client::flush`]. Returns whether all of them did.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future stops the waiting, not the work.
    pub async fn flush(&self, within: Duration) -> bool {
        crate::session::flush(&self.inner.background, within).await
    }

    pub(crate) fn background(&self) -> &tokio_util::task::TaskTracker {
        &self.inner.background
    }

    pub(crate) fn local_queues(&self) -> &LocalQueues {
        &self.inner.local_queues
    }

    pub(crate) fn new_token(&self) -> Result<String> {
        self.inner.identity.new_token()
    }

    /// The metrics label policy of the first connected instance's client
    /// (all are made alike by [`Redlock::connect_with`]).
    pub(crate) fn metrics_labels(&self) -> &crate::metrics::MetricsLabels {
        static NONE: crate::metrics::MetricsLabels = crate::metrics::MetricsLabels::None;
        self.inner
            .instances
            .iter()
            .find_map(|i| i.client.get())
            .map_or(&NONE, |c| &c.inner.metrics_labels)
    }

    /// The per-instance timeout for a round on a lock with this TTL.
    fn timeout_for(&self, ttl: Duration) -> Duration {
        self.options
            .instance_timeout
            .unwrap_or_else(|| (ttl / 10).clamp(MIN_INSTANCE_TIMEOUT, MAX_INSTANCE_TIMEOUT))
    }

    /// The per-instance timeout where no TTL is known.
    fn timeout_without_ttl(&self) -> Duration {
        self.options
            .instance_timeout
            .unwrap_or(MAX_INSTANCE_TIMEOUT)
    }
}

fn no_instances() -> Error {
    Error::InvalidInput("a Redlock needs at least one Redis instance".into())
}

/// The host and port of a URL, so that no password reaches a log line, and
/// two spellings of one server compare equal.
fn label_of(url: &str) -> Result<String> {
    redis::Client::open(url)
        .map(|client| client.get_connection_info().addr().to_string())
        .map_err(|e| Error::InvalidInput(format!("bad Redis URL {url:?}: {e}")))
}

fn check_distinct(labels: &[String]) -> Result<()> {
    for (i, label) in labels.iter().enumerate() {
        if labels[..i].contains(label) {
            return Err(Error::InvalidInput(format!(
                "Redis instance {label} is given twice; Redlock needs independent instances"
            )));
        }
    }
    Ok(())
}

/// Connects instance `index` in the background until it answers or the
/// Redlock is gone.
fn spawn_reconnect(inner: Weak<Inner>, index: usize, builder: ClientBuilder) {
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        loop {
            tokio::time::sleep(crate::subscriber::jitter(backoff)).await;
            if inner.strong_count() == 0 {
                return;
            }
            match builder.clone().open().await {
                Ok(client) => {
                    let Some(inner) = inner.upgrade() else { return };
                    let instance = &inner.instances[index];
                    if client.prefix() != inner.prefix.as_slice() {
                        tracing::error!(instance = %instance.label, "Redlock instance has a different key prefix; not using it");
                        return;
                    }
                    tracing::info!(instance = %instance.label, "Redlock instance connected");
                    let _ = instance.client.set(client);
                    return;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "Redlock instance still unreachable");
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    });
}
