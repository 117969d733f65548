//! The session: one connection to one Redis server, shared by every
//! primitive (layer 2, transport; the crate docs list the layers).
//!
//! Like etcd's `concurrency.Session`, a [`Session`] is what every lock,
//! guard, watchdog, waiter and listener is built from. It owns
//!
//! * one multiplexed command connection (redis-rs `ConnectionManager`, which
//!   reconnects by itself), with every command bounded by the command
//!   timeout and its errors classified (`query`, `eval`);
//! * one shared subscriber connection for wake-ups and signals, started on
//!   first use (see [`crate::transport::subscriber`]), and the replicas' subscribers;
//! * the background work of its primitives (releases finished after a
//!   cancellation or a failure), so that [`flush`] can wait for it;
//! * the options every primitive obeys: key prefix and command timeout.
//!
//! The public [`Client`](crate::Client) is a thin facade over it. Cloning a
//! `Session` is cheap and shares all of the above.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use redis::{FromRedisValue, Script};

use crate::transport::batch::{evalsha, RenewalBatcher};
use crate::transport::connection::{Connection, Kind};
use crate::transport::sentinel::Source;
use crate::transport::subscriber::Subscriber;
use crate::transport::tls::server_name::Target;
use crate::vocab::error::{Error, Result};
use crate::vocab::metrics::MetricsLabels;
use crate::vocab::token::Identity;

/// How long a single Redis command may take before it fails with
/// [`Error::Timeout`], unless [`ClientBuilder::command_timeout`](crate::ClientBuilder::command_timeout) says otherwise.
///
/// redis-rs would silently cut responses at 500 ms. We choose 2 s: long
/// enough that a busy server (a slow `SCAN`, a fork for persistence) is not
/// mistaken for a dead one, short enough that a waiter or watchdog notices a
/// dead link well within common lock TTLs (tens of seconds). The watchdog
/// additionally bounds each renewal by the lease's remaining validity.
///
/// The bound is per request: the reply must come within the timeout once
/// the request is sent, and a request made while the connection is being
/// re-established first waits for that, at most the timeout again (on a
/// standalone server the connection's own timers enforce both, which costs
/// less than a timer per command; on a cluster one timer bounds the whole
/// request, redirects and retries included). A script whose cached copy was
/// flushed (`NOSCRIPT`) is loaded and sent again, each within the bound.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// The key prefix used unless [`ClientBuilder::prefix`](crate::ClientBuilder::prefix) says otherwise.
///
/// An empty prefix makes the lock key equal to the lock name, which is what
/// other clients' single-key locks (redis-py `Lock`, node-redlock, redsync)
/// use: then a latchkey lock and theirs exclude each other on the same name.
pub const DEFAULT_PREFIX: &str = "latchkey:";

/// One Redis server's connections, options and shared state; see the module docs.
#[derive(Clone)]
pub(crate) struct Session {
    pub(crate) inner: Arc<SessionInner>,
}

pub(crate) struct SessionInner {
    /// The server of the URL (under a TLS server-name override, renamed;
    /// see `crate::transport::tls::server_name`).
    pub(crate) redis: Target,
    pub(crate) conn: Connection,
    pub(crate) prefix: Vec<u8>,
    pub(crate) command_timeout: Duration,
    pub(crate) pubsub_ping_every: Duration,
    pub(crate) identity: Identity,
    /// Started on first use: a client that never waits opens no second connection.
    pub(crate) subscriber: OnceLock<Subscriber>,
    /// Replicas of the server, given by [`ClientBuilder::replica`]: signal
    /// waiters also listen there (see `crate::primitives::signal`).
    pub(crate) replicas: Vec<Target>,
    /// One subscriber per replica, started on first use.
    pub(crate) replica_subscribers: OnceLock<Vec<Subscriber>>,
    /// A TLS cluster's certificates, for its subscriber's connections.
    pub(crate) cluster_certs: Option<redis::TlsCertificates>,
    /// The other seed nodes of a cluster ([`ClientBuilder::seed`](crate::ClientBuilder::seed)),
    /// for the subscriber's cluster client too.
    pub(crate) cluster_seeds: Vec<redis::ConnectionInfo>,
    pub(crate) local_queues: crate::transport::local_queues::LocalQueues,
    pub(crate) metrics_labels: MetricsLabels,
    /// Background releases (dropped guards, cancelled attempts and
    /// releases), so that [`Client::flush`] can wait for them.
    pub(crate) background: tokio_util::task::TaskTracker,
    /// Jobs to run later from one timer task: the extension after a fair
    /// hand-off (see `deferred.rs`).
    pub(crate) deferred: crate::transport::deferred::Deferred,
    /// Holds kept while idle (`Lock::with_caching`): `flush` gives them back.
    pub(crate) kept: crate::transport::kept::Kept,
    /// Every hold taken here and not yet ended: what `close` gives back.
    pub(crate) live: crate::transport::live::LiveHolds,
    /// A script has run here: Redis lets this user run the scripts that
    /// renew and release a hold (`EVALSHA`). Until then a lock's first try
    /// is its script, not a bare `SET`, so that a user without them is
    /// refused before it takes a key it could neither renew nor release.
    pub(crate) scripts_ran: std::sync::atomic::AtomicBool,
    /// The watchdogs' renewals, sent in batches (`batch.rs`); started on
    /// first use, never on a cluster.
    pub(crate) renewals: OnceLock<RenewalBatcher>,
    /// The queued waiters of fair locks, by lock: one task per lock renews
    /// their queue leases together (`waiter_groups.rs`).
    pub(crate) fair_waiters: crate::transport::waiter_groups::WaiterGroups,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.server())
            .field("prefix", &String::from_utf8_lossy(&self.inner.prefix))
            .field("command_timeout", &self.inner.command_timeout)
            .finish()
    }
}

impl Session {
    /// The key prefix in force.
    pub(crate) fn prefix(&self) -> &[u8] {
        &self.inner.prefix
    }

    /// The per-command timeout in force.
    pub(crate) fn command_timeout(&self) -> Duration {
        self.inner.command_timeout
    }

    /// The host and port of the server, for messages.
    pub(crate) fn server(&self) -> String {
        self.source().server()
    }

    /// What the shared subscriber connects to: the server, or the primary
    /// the Sentinels name.
    fn source(&self) -> Source {
        match &self.inner.conn.0 {
            crate::transport::connection::Kind::Sentinel(conn) => Source::Sentinel(conn.clone()),
            _ => Source::Fixed(Box::new(self.inner.redis.clone())),
        }
    }

    /// A handle to the client's shared command connection (it reconnects by
    /// itself), for commands latchkey has no method for: the CLI's `SCAN`,
    /// monitoring. Unlike latchkey's own calls, these are bounded only by
    /// the connection's response timeout (the command timeout).
    pub(crate) fn connection(&self) -> Connection {
        self.inner.conn.clone()
    }

    /// Whether the server is a Redis Cluster (commands are routed by slot).
    pub(crate) fn is_cluster(&self) -> bool {
        self.inner.conn.is_cluster()
    }

    /// The command that publishes wake-ups and signals: `SPUBLISH` on a
    /// cluster (sharded pub/sub: a message travels only within the shard
    /// that owns its channel's slot, where the waiters `SSUBSCRIBE`),
    /// `PUBLISH` elsewhere.
    pub(crate) fn publish_command(&self) -> &'static [u8] {
        if self.is_cluster() {
            b"SPUBLISH"
        } else {
            b"PUBLISH"
        }
    }

    /// Publishes `message` on `channel` with [`Session::publish_command`]:
    /// the connections that received it. One round trip.
    pub(crate) async fn publish(&self, channel: &[u8], message: &[u8]) -> Result<u64> {
        let mut publish = redis::Cmd::new();
        publish
            .arg(self.publish_command())
            .arg(channel)
            .arg(message);
        let count: i64 = self.query("PUBLISH", publish, channel).await?;
        u64::try_from(count).map_err(|_| Error::Protocol(format!("PUBLISH returned {count}")))
    }

    /// Waits, at most `within`, for the work this client does in the
    /// background to finish: releases of guards dropped without
    /// [`release`](crate::LockGuard::release), of releases and acquisitions
    /// that were cancelled or failed after their request was sent. Returns
    /// whether all of it finished. Call it before the process exits (a
    /// runtime that shuts down cancels such a release, and the lock then
    /// stays held until its TTL); the client stays usable.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future stops the waiting, not the work.
    pub(crate) async fn flush(&self, within: Duration) -> bool {
        self.inner.kept.give_back_all(&self.inner.background);
        flush(&self.inner.background, within).await
    }

    /// Closes: refuses every new hold, gives back every live one and the
    /// ones kept while idle, and waits at most `within` for all of it.
    /// Whether all of it finished in time.
    ///
    /// # Cancel safety
    /// Cancel safe: the client stays closed; releases sent finish in the
    /// background.
    pub(crate) async fn close(&self, within: Duration) -> bool {
        self.inner.identity.close();
        crate::transport::live::close_within(&self.inner.live, within, |left| self.flush(left))
            .await
    }

    /// Runs one command on the shared connection, bounded by the command
    /// timeout. `key` is only used to name the key in a WRONGTYPE error.
    pub(crate) async fn query<T: FromRedisValue>(
        &self,
        op: &'static str,
        cmd: redis::Cmd,
        key: &[u8],
    ) -> Result<T> {
        let mut conn = self.inner.conn.clone();
        // Awaited here, not through `bounded`: every attempt and release
        // carries this future in its own, and a wrapper holding the command's
        // future twice made them larger than what the client touches per
        // command elsewhere (see `bounded`).
        let outcome = match &self.inner.conn.0 {
            Kind::Standalone(_) => Ok(cmd.query_async::<T>(&mut conn).await),
            _ => Box::pin(self.timed(cmd.query_async::<T>(&mut conn))).await,
        };
        self.outcome(op, &[key], outcome)
    }

    /// Runs a script (EVALSHA, re-sent with its body after a `NOSCRIPT`, so a
    /// `SCRIPT FLUSH` on the server is invisible) bounded by the command
    /// timeout.
    pub(crate) async fn eval<T: FromRedisValue>(
        &self,
        op: &'static str,
        script: &Script,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Result<T> {
        let mut conn = self.inner.conn.clone();
        // As in `query`.
        let outcome = match &self.inner.conn.0 {
            Kind::Standalone(_) => Ok(evalsha(script, keys, args, &mut conn).await),
            _ => Box::pin(self.timed(evalsha(script, keys, args, &mut conn))).await,
        };
        if matches!(outcome, Ok(Ok(_))) {
            self.inner
                .scripts_ran
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        self.outcome(op, keys, outcome)
    }

    /// [`Session::eval`] of a watchdog's renewal: `batch_by` (`Some`) lets
    /// it wait in the session's renewal batch until then, to share one
    /// round trip with the other holds' renewals (`batch.rs`; a cluster's
    /// go on their own); `None`, the program's own renewal, is sent now.
    ///
    /// # Cancel safety
    /// Cancel safe: a renewal dropped while it waits in the batch is left
    /// out of it; one already sent runs, and its owner check makes it
    /// harmless after a release (`batch.rs`, "Cancel safety").
    pub(crate) async fn eval_renewal<T: FromRedisValue>(
        &self,
        op: &'static str,
        script: &'static Script,
        keys: &[&[u8]],
        args: &[&[u8]],
        batch_by: Option<std::time::Instant>,
    ) -> Result<T> {
        let Some(by) = batch_by else {
            return self.eval(op, script, keys, args).await;
        };
        if self.is_cluster() {
            crate::vocab::metrics::renewal_round_trip();
            return self.eval(op, script, keys, args).await;
        }
        let (conn, timeout) = (&self.inner.conn, self.inner.command_timeout);
        let batcher =
            (self.inner.renewals).get_or_init(|| RenewalBatcher::new(conn.clone(), timeout));
        let outcome = batcher.send(script, keys, args, by).await;
        if outcome.is_ok() {
            self.inner
                .scripts_ran
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        self.outcome(op, keys, Ok(outcome))
    }

    /// Whether a script ran on this session (see `SessionInner::scripts_ran`).
    pub(crate) fn scripts_ran(&self) -> bool {
        self.inner
            .scripts_ran
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `fut` bounded by the command timeout, as every request to a Redis
    /// Cluster or through Sentinel is (see `bounded`).
    async fn timed<T>(
        &self,
        fut: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> std::result::Result<redis::RedisResult<T>, tokio::time::error::Elapsed> {
        tokio::time::timeout(self.inner.command_timeout, fut).await
    }

    /// Runs `fut`, a request on this session's connection, bounded by the
    /// command timeout where the connection does not bound it itself.
    pub(crate) async fn bounded<T>(
        &self,
        op: &'static str,
        keys: &[&[u8]],
        fut: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T> {
        // A standalone connection bounds each request itself (its response
        // timeout is the command timeout, and so is its connection timeout
        // when it reconnects): a timer of our own per command would cost
        // more than the rest of the client's work on it. The cluster
        // client retries and follows redirects within one request: bounded
        // here as a whole.
        let outcome = match &self.inner.conn.0 {
            Kind::Standalone(_) => Ok(fut.await),
            // Boxed: every command's future would carry the timer.
            _ => Box::pin(self.timed(fut)).await,
        };
        self.outcome(op, keys, outcome)
    }

    /// A request's outcome as latchkey's result; a failure is counted.
    fn outcome<T>(
        &self,
        op: &'static str,
        keys: &[&[u8]],
        outcome: std::result::Result<redis::RedisResult<T>, tokio::time::error::Elapsed>,
    ) -> Result<T> {
        let after = self.inner.command_timeout;
        let error = match outcome {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(e)) => match Error::from_redis(e, keys, after) {
                Error::Timeout { .. } => Error::Timeout { op, after },
                other => other,
            },
            Err(_) => Error::Timeout { op, after },
        };
        crate::vocab::metrics::redis_error(&error);
        Err(error)
    }

    /// The shared subscriber, started on first use.
    pub(crate) fn subscriber(&self) -> &Subscriber {
        self.inner.subscriber.get_or_init(|| {
            if self.is_cluster() {
                let seed = self.inner.redis.client.get_connection_info().clone();
                let seeds = std::iter::once(seed).chain(self.inner.cluster_seeds.iter().cloned());
                let mut builder = redis::cluster::ClusterClientBuilder::new(seeds);
                if let Some(certs) = &self.inner.cluster_certs {
                    builder = builder.certs(certs.clone());
                }
                return Subscriber::start_cluster(
                    builder,
                    self.inner.command_timeout,
                    self.inner.pubsub_ping_every,
                );
            }
            Subscriber::start(
                self.source(),
                self.inner.command_timeout,
                self.inner.pubsub_ping_every,
            )
        })
    }

    /// The replicas' subscribers (empty without replicas), started on first use.
    pub(crate) fn replica_subscribers(&self) -> &[Subscriber] {
        self.inner.replica_subscribers.get_or_init(|| {
            self.inner
                .replicas
                .iter()
                .map(|replica| {
                    Subscriber::start(
                        Source::Fixed(Box::new(replica.clone())),
                        self.inner.command_timeout,
                        self.inner.pubsub_ping_every,
                    )
                })
                .collect()
        })
    }

    /// The subscriber if it was started, without starting a connection
    /// nobody listens on.
    pub(crate) fn subscriber_if_started(&self) -> Option<&Subscriber> {
        self.inner.subscriber.get()
    }
}

/// Waits, at most `within`, until `tracker` has no task left.
pub(crate) async fn flush(tracker: &tokio_util::task::TaskTracker, within: Duration) -> bool {
    // `wait` completes only on a closed tracker; reopening lets later
    // background work be tracked (and flushed) again.
    tracker.close();
    let done = tokio::time::timeout(within, tracker.wait()).await.is_ok();
    tracker.reopen();
    done
}

/// Declares a view of a session as one kind of server (`Single`, a lock's;
/// `Inspector`, inspection's; `Signals`, signals'): the higher layers' own
/// methods over a session, so that `Session` knows nothing of them. The
/// view derefs to the session.
macro_rules! session_view {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub(crate) struct $name<'a>(pub(crate) &'a $crate::transport::session::Session);

        impl std::ops::Deref for $name<'_> {
            type Target = $crate::transport::session::Session;
            fn deref(&self) -> &Self::Target {
                self.0
            }
        }
    };
}
pub(crate) use session_view;
