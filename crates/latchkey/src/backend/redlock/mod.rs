//! The Redlock backend (layer 3): one lock over N independent Redis
//! instances, held while a majority of them agree. [`Group`] is the set of
//! instances and the options; the rounds (acquire, owner-only, fencing,
//! wake-ups) are in `rounds/`, the fan-out in `gather.rs`, and every quorum
//! rule in `tally.rs`. The public face is [`Redlock`](crate::Redlock).

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use crate::transport::builder::ClientBuilder;
use crate::transport::local_queues::LocalQueues;
use crate::transport::session::Session;
use crate::vocab::error::{Error, Result};
use crate::vocab::token::Identity;

mod gather;
mod late;
mod rounds;
mod tally;

/// The per-instance timeout used when none is set and no TTL is at hand
/// (release, subscribing), and the cap of the TTL-derived one: see
/// [`Redlock::with_instance_timeout`](crate::Redlock::with_instance_timeout).
pub const MAX_INSTANCE_TIMEOUT: Duration = Duration::from_millis(250);

/// The floor of the TTL-derived per-instance timeout.
pub const MIN_INSTANCE_TIMEOUT: Duration = Duration::from_millis(5);

/// How a [`Redlock`](crate::Redlock) turns the per-instance fencing tokens of a hold (issued
/// by the acquisition of a lock made [`with_fencing`](crate::Lock::with_fencing),
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

/// N independent Redis instances and the options of the rounds run on them.
/// Cheap to clone; clones share connections, the local wait queues and the
/// reconnection of instances that were down at connect time.
#[derive(Clone)]
pub(crate) struct Group {
    pub(crate) inner: Arc<Inner>,
    options: Options,
}

#[derive(Debug, Clone, Copy)]
struct Options {
    /// `None`: derived from the TTL, see [`Redlock::with_instance_timeout`](crate::Redlock::with_instance_timeout).
    instance_timeout: Option<Duration>,
    fencing: Fencing,
}

pub(crate) struct Inner {
    instances: Vec<Instance>,
    quorum: usize,
    prefix: Vec<u8>,
    identity: Identity,
    local_queues: LocalQueues,
    /// The first instance connected when the group was made (there is
    /// always one: a group starts with a majority): what a `Client` made
    /// from a Redlock answers `connection()` and `command_timeout()` with.
    first: Session,
    /// Background releases, so that [`Redlock::flush`](crate::Redlock::flush) can wait for them.
    pub(crate) background: tokio_util::task::TaskTracker,
    /// Every hold taken and not yet ended: what `close` gives back.
    pub(crate) live: crate::transport::live::LiveHolds,
    /// The acquires a won round left running: a release waits for them.
    late: late::LateAcquires,
}

struct Instance {
    /// For messages: the server's address, or the URL while not connected.
    label: String,
    /// Set at construction, or later by the reconnect task for an instance
    /// that was down when [`Redlock::connect`](crate::Redlock::connect) ran. Until then every
    /// operation counts it as unreachable, at once.
    client: OnceLock<Session>,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redlock")
            .field("instances", &self.labels())
            .field("connected", &self.connected())
            .field("quorum", &self.inner.quorum)
            .field("prefix", &String::from_utf8_lossy(&self.inner.prefix))
            .field("instance_timeout", &self.options.instance_timeout)
            .field("fencing", &self.options.fencing)
            .finish()
    }
}

/// A [`Group`] that does not keep its instances alive (what
/// [`WeakClient`](crate::WeakClient) keeps of a Redlock's client).
#[derive(Clone)]
pub(crate) struct WeakGroup {
    inner: Weak<Inner>,
    options: Options,
}

impl WeakGroup {
    pub(crate) fn upgrade(&self) -> Option<Group> {
        Some(Group {
            inner: self.inner.upgrade()?,
            options: self.options,
        })
    }
}

impl Group {
    pub(crate) fn downgrade(&self) -> WeakGroup {
        WeakGroup {
            inner: Arc::downgrade(&self.inner),
            options: self.options,
        }
    }
}

impl Group {
    /// A Redlock over these connected clients, one per independent Redis
    /// instance (not replicas of each other: a replica can lose the lock in
    /// a failover).
    ///
    /// Fails with [`Error::InvalidInput`] for no clients, for two clients of
    /// the same server, and for clients with different key prefixes (the
    /// instances must agree on the key). Warns (a log line) for fewer than
    /// three or an even number of instances: an even N tolerates no more
    /// failures than N − 1.
    pub(crate) fn new(clients: Vec<Session>) -> Result<Group> {
        let labels: Vec<String> = clients.iter().map(Session::server).collect();
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
        let first = first.clone();
        let instances = clients
            .into_iter()
            .zip(labels)
            .map(|(client, label)| Instance {
                label,
                client: OnceLock::from(client),
            })
            .collect();
        Ok(Group::from_instances(instances, prefix, first))
    }

    /// Connects the instances: see [`Redlock::connect_with`](crate::Redlock::connect_with).
    pub(crate) async fn connect_with(
        urls: &[&str],
        configure: impl Fn(ClientBuilder) -> ClientBuilder,
    ) -> Result<Group> {
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
        let mut first: Option<Session> = None;
        for (i, result) in results.into_iter().enumerate() {
            let instance = match result {
                Ok(client) => {
                    // Redlock's safety rests on independent servers; the
                    // nodes of a cluster are one store (and a cluster
                    // node's keys are not all on it): refused, with the fix.
                    if client.is_cluster() {
                        return Err(Error::InvalidInput(format!(
                            "Redlock needs independent Redis servers, and {} is a Redis Cluster \
                             node; for a cluster give its nodes as seeds of one client \
                             (ClientBuilder::seed; the CLI does that when every --redis URL \
                             is a node of one cluster)",
                            client.server()
                        )));
                    }
                    let p = prefix.get_or_insert_with(|| client.prefix().to_vec());
                    first.get_or_insert_with(|| client.clone());
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
        let connected = prefix.zip(first).filter(|_| n - down.len() >= needed);
        let Some((prefix, first)) = connected else {
            return Err(Error::NoQuorum {
                op: "connect",
                answered: n - down.len(),
                needed,
                instances: n,
            });
        };
        let redlock = Group::from_instances(instances, prefix, first);
        for i in down {
            spawn_reconnect(Arc::downgrade(&redlock.inner), i, builders[i].clone());
        }
        Ok(redlock)
    }

    fn from_instances(instances: Vec<Instance>, prefix: Vec<u8>, first: Session) -> Group {
        let n = instances.len();
        if n < 3 || n.is_multiple_of(2) {
            tracing::warn!(
                instances = n,
                "a Redlock should have an odd number of at least 3 instances: {n} tolerate{} {} failure(s)",
                if n == 1 { "s" } else { "" },
                n - tally::quorum(n)
            );
        }
        Group {
            inner: Arc::new(Inner {
                instances,
                quorum: tally::quorum(n),
                prefix,
                identity: Identity::of_this_process(),
                local_queues: LocalQueues::default(),
                first,
                background: tokio_util::task::TaskTracker::new(),
                live: crate::transport::live::LiveHolds::default(),
                late: late::LateAcquires::default(),
            }),
            options: Options {
                instance_timeout: None,
                fencing: Fencing::default(),
            },
        }
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
    pub(crate) fn with_instance_timeout(mut self, timeout: Duration) -> Result<Self> {
        if timeout.is_zero() {
            return Err(Error::InvalidInput(
                "the per-instance timeout must be positive".into(),
            ));
        }
        self.options.instance_timeout = Some(timeout);
        Ok(self)
    }

    /// Chooses how fencing tokens are made (default [`Fencing::Strict`]).
    pub(crate) fn with_fencing_mode(mut self, fencing: Fencing) -> Self {
        self.options.fencing = fencing;
        self
    }

    /// The number of instances, N.
    pub(crate) fn instances(&self) -> usize {
        self.inner.instances.len()
    }

    /// How many instances must agree: `N/2 + 1`.
    pub(crate) fn quorum(&self) -> usize {
        self.inner.quorum
    }

    /// How many instances have a connection (those down at connect time
    /// count once they came back). Says nothing about whether they answer now.
    pub(crate) fn connected(&self) -> usize {
        self.inner
            .instances
            .iter()
            .filter(|i| i.client.get().is_some())
            .count()
    }

    /// The key prefix shared by all instances.
    pub(crate) fn prefix(&self) -> &[u8] {
        &self.inner.prefix
    }

    /// The first instance connected when the group was made.
    pub(crate) fn first(&self) -> &Session {
        &self.inner.first
    }

    /// Every instance's address (its URL while not connected), for messages.
    pub(crate) fn servers(&self) -> String {
        self.labels().join(", ")
    }

    fn labels(&self) -> Vec<&str> {
        self.inner
            .instances
            .iter()
            .map(|i| i.label.as_str())
            .collect()
    }

    /// Waits, at most `within`, for the releases this Redlock finishes in
    /// the background (dropped guards, cancelled or unanswered releases) to
    /// end; see [`Client::flush`]. Returns whether all of them did.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future stops the waiting, not the work.
    pub(crate) async fn flush(&self, within: Duration) -> bool {
        crate::transport::session::flush(&self.inner.background, within).await
    }

    /// Closes, as [`Session::close`] does, over every instance.
    pub(crate) async fn close(&self, within: Duration) -> bool {
        self.inner.identity.close();
        crate::transport::live::close_within(&self.inner.live, within, |left| self.flush(left))
            .await
    }

    pub(crate) fn live(&self) -> &crate::transport::live::LiveHolds {
        &self.inner.live
    }

    /// Whether any instance is a Redis Cluster.
    pub(crate) fn has_cluster(&self) -> bool {
        self.inner
            .instances
            .iter()
            .any(|i| i.client.get().is_some_and(Session::is_cluster))
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
    /// (all are made alike by [`Redlock::connect_with`](crate::Redlock::connect_with)).
    pub(crate) fn metrics_labels(&self) -> &crate::vocab::metrics::MetricsLabels {
        static NONE: crate::vocab::metrics::MetricsLabels =
            crate::vocab::metrics::MetricsLabels::None;
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
        .map_err(|e| Error::bad_url(url, &e))
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
            tokio::time::sleep(crate::transport::subscriber::jitter(backoff)).await;
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
