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
//!   first use (see [`crate::subscriber`]), and the replicas' subscribers;
//! * the background work of its primitives (releases finished after a
//!   cancellation or a failure), so that [`flush`] can wait for it;
//! * the options every primitive obeys: key prefix and command timeout.
//!
//! The public [`Client`](crate::Client) is a thin facade over it. Cloning a
//! `Session` is cheap and shares all of the above.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{FromRedisValue, Script};

use crate::connection::{Connection, Kind};
use crate::error::{Error, Result};
use crate::metrics::MetricsLabels;
use crate::sentinel::{SentinelSpec, Source};
use crate::subscriber::Subscriber;
use crate::token::Identity;

mod sentinel;

/// How long a single Redis command may take before it fails with
/// [`Error::Timeout`], unless [`ClientBuilder::command_timeout`] says otherwise.
///
/// redis-rs would silently cut responses at 500 ms. We choose 2 s: long
/// enough that a busy server (a slow `SCAN`, a fork for persistence) is not
/// mistaken for a dead one, short enough that a waiter or watchdog notices a
/// dead link well within common lock TTLs (tens of seconds). The watchdog
/// additionally bounds each renewal by the lease's remaining validity.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// The key prefix used unless [`ClientBuilder::prefix`] says otherwise.
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
    pub(crate) redis: redis::Client,
    pub(crate) conn: Connection,
    pub(crate) prefix: Vec<u8>,
    pub(crate) command_timeout: Duration,
    pub(crate) pubsub_ping_every: Duration,
    pub(crate) identity: Identity,
    /// Started on first use: a client that never waits opens no second connection.
    pub(crate) subscriber: OnceLock<Subscriber>,
    /// Replicas of the server, given by [`ClientBuilder::replica`]: signal
    /// waiters also listen there (see `crate::signal`).
    pub(crate) replicas: Vec<redis::Client>,
    /// One subscriber per replica, started on first use.
    pub(crate) replica_subscribers: OnceLock<Vec<Subscriber>>,
    pub(crate) local_queues: crate::queue::LocalQueues,
    pub(crate) metrics_labels: MetricsLabels,
    /// Background releases (dropped guards, cancelled attempts and
    /// releases), so that [`Client::flush`] can wait for them.
    pub(crate) background: tokio_util::task::TaskTracker,
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

/// Options for a [`Client`](crate::Client); made by
/// [`Client::builder`](crate::Client::builder), connected by
/// [`ClientBuilder::connect`].
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    url: String,
    prefix: Vec<u8>,
    command_timeout: Duration,
    pubsub_ping_every: Duration,
    replicas: Vec<String>,
    metrics_labels: MetricsLabels,
    /// Set: the URL gives the primary's settings, the Sentinels its address.
    sentinel: Option<SentinelSpec>,
}

impl ClientBuilder {
    /// Prefix prepended to every key and channel latchkey uses (default
    /// [`DEFAULT_PREFIX`]). May be empty.
    pub fn prefix(mut self, prefix: impl AsRef<[u8]>) -> Self {
        self.prefix = prefix.as_ref().to_vec();
        self
    }

    /// Per-command timeout (default [`DEFAULT_COMMAND_TIMEOUT`]). Also bounds
    /// connecting.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// How often the shared subscriber connection is PINGed to detect a dead
    /// link that never closes (default 1 s). A failed ping reconnects and
    /// resubscribes, and every waiter re-checks its lock.
    pub fn pubsub_ping_every(mut self, every: Duration) -> Self {
        self.pubsub_ping_every = every;
        self
    }

    /// Adds a replica of the server (repeatable). Signal waiters subscribe on
    /// the server and on every replica, so they still hear signals while
    /// their connection to the server is down (see [`Listener`](crate::Listener)).
    /// Replicas are connected on first use; one that is down is not an error.
    pub fn replica(mut self, url: &str) -> Self {
        self.replicas.push(url.to_owned());
        self
    }

    /// Which `lock` label this client's lock metrics carry (default
    /// [`MetricsLabels::None`]); see [`crate::metrics`].
    pub fn metrics_labels(mut self, labels: MetricsLabels) -> Self {
        self.metrics_labels = labels;
        self
    }

    /// Connects the session behind a [`Client`](crate::Client) (or a
    /// Redlock instance); see [`ClientBuilder::connect`].
    pub(crate) async fn open(self) -> Result<Session> {
        if self.command_timeout.is_zero() {
            return Err(Error::InvalidInput(
                "command timeout must be positive".into(),
            ));
        }
        if self.pubsub_ping_every.is_zero() {
            return Err(Error::InvalidInput(
                "pubsub ping interval must be positive".into(),
            ));
        }
        let mut this = self;
        if let Some(parsed) = crate::sentinel::parse_url(&this.url) {
            let (spec, template) = parsed.map_err(|e| {
                Error::InvalidInput(format!("bad Sentinel URL {:?}: {e}", this.url))
            })?;
            this.sentinel = Some(spec);
            this.url = template;
        }
        let redis = redis::Client::open(this.url.as_str())
            .map_err(|e| Error::InvalidInput(format!("bad Redis URL {:?}: {e}", this.url)))?;
        let replicas = this.replica_clients()?;
        match this.sentinel.take() {
            Some(spec) => this.open_sentinel(spec, redis, replicas).await,
            None => this.open_standalone(redis, replicas).await,
        }
    }

    fn replica_clients(&self) -> Result<Vec<redis::Client>> {
        self.replicas
            .iter()
            .map(|url| {
                redis::Client::open(url.as_str())
                    .map_err(|e| Error::InvalidInput(format!("bad replica URL {url:?}: {e}")))
            })
            .collect()
    }

    async fn open_standalone(
        self,
        redis: redis::Client,
        replicas: Vec<redis::Client>,
    ) -> Result<Session> {
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.command_timeout))
            .set_response_timeout(Some(self.command_timeout))
            // Fail fast when the server is down: callers (and our own waiters
            // and watchdogs) decide when to retry, with their own deadlines.
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let connecting = redis::aio::ConnectionManager::new_with_config(redis.clone(), config);
        let standalone = match tokio::time::timeout(self.command_timeout, connecting).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return Err(Error::from_redis(e, &[], self.command_timeout)),
            Err(_) => {
                return Err(Error::Timeout {
                    op: "connect",
                    after: self.command_timeout,
                })
            }
        };
        let (conn, answered) = self.cluster_or(standalone).await?;
        self.session(redis, replicas, conn, answered).await
    }

    /// The session over `conn`; checks it may be used unless `answered`.
    pub(super) async fn session(
        self,
        redis: redis::Client,
        replicas: Vec<redis::Client>,
        conn: Connection,
        answered: bool,
    ) -> Result<Session> {
        let client = Session {
            inner: Arc::new(SessionInner {
                redis,
                conn,
                prefix: self.prefix,
                command_timeout: self.command_timeout,
                pubsub_ping_every: self.pubsub_ping_every,
                identity: Identity::of_this_process(),
                subscriber: OnceLock::new(),
                replicas,
                replica_subscribers: OnceLock::new(),
                local_queues: Default::default(),
                metrics_labels: self.metrics_labels,
                background: tokio_util::task::TaskTracker::new(),
            }),
        };
        // A connection is only useful if we may use it: surface auth and ACL
        // problems now, with a clear error, instead of at the first lock. A
        // server that answered `INFO` took us already: no second round trip.
        if !answered {
            let _: String = client.query("PING", redis::cmd("PING"), b"").await?;
        }
        Ok(client)
    }
}

impl ClientBuilder {
    /// A connection to the cluster when the server at the URL is a cluster
    /// node (`cluster_enabled:1`), else `standalone`. A server that does not
    /// answer `INFO cluster` (an ACL without `INFO`, a wrong password) is
    /// taken as standalone, and the caller's `PING` says what is wrong;
    /// `true` with the connection when the server answered.
    async fn cluster_or(&self, mut standalone: ConnectionManager) -> Result<(Connection, bool)> {
        let info = tokio::time::timeout(
            self.command_timeout,
            redis::cmd("INFO")
                .arg("cluster")
                .query_async::<String>(&mut standalone),
        )
        .await;
        let answered = matches!(&info, Ok(Ok(_)));
        let cluster =
            matches!(&info, Ok(Ok(text)) if text.lines().any(|l| l.trim() == "cluster_enabled:1"));
        if !cluster {
            return Ok((Connection(Kind::Standalone(standalone)), answered));
        }
        let client = redis::cluster::ClusterClient::builder(vec![self.url.as_str()])
            .connection_timeout(self.command_timeout)
            .response_timeout(self.command_timeout)
            .retries(2)
            .build()
            .map_err(|e| Error::InvalidInput(format!("bad Redis URL {:?}: {e}", self.url)))?;
        match tokio::time::timeout(self.command_timeout, client.get_async_connection()).await {
            Ok(Ok(conn)) => Ok((Connection(Kind::Cluster(conn)), true)),
            Ok(Err(e)) => Err(Error::from_redis(e, &[], self.command_timeout)),
            Err(_) => Err(Error::Timeout {
                op: "connect",
                after: self.command_timeout,
            }),
        }
    }

    /// The options for `url`, all at their defaults.
    pub(crate) fn new(url: &str) -> ClientBuilder {
        ClientBuilder {
            url: url.to_owned(),
            prefix: DEFAULT_PREFIX.as_bytes().to_vec(),
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            pubsub_ping_every: Duration::from_secs(1),
            replicas: Vec::new(),
            metrics_labels: MetricsLabels::None,
            sentinel: None,
        }
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
            Kind::Sentinel(conn) => Source::Sentinel(conn.clone()),
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
        flush(&self.inner.background, within).await
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
        let fut = cmd.query_async::<T>(&mut conn);
        self.bounded(op, &[key], fut).await
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
        let fut = evalsha(script, keys, args, &mut conn);
        self.bounded(op, keys, fut).await
    }

    pub(crate) async fn bounded<T>(
        &self,
        op: &'static str,
        keys: &[&[u8]],
        fut: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T> {
        let after = self.inner.command_timeout;
        let error = match tokio::time::timeout(after, fut).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(e)) => match Error::from_redis(e, keys, after) {
                Error::Timeout { .. } => Error::Timeout { op, after },
                other => other,
            },
            Err(_) => Error::Timeout { op, after },
        };
        crate::metrics::redis_error(&error);
        Err(error)
    }

    /// The shared subscriber, started on first use.
    pub(crate) fn subscriber(&self) -> &Subscriber {
        self.inner.subscriber.get_or_init(|| {
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

    /// The subscriber if it was started: used to wake local waiters at once
    /// on a local release, without starting a connection nobody listens on.
    pub(crate) fn subscriber_if_started(&self) -> Option<&Subscriber> {
        self.inner.subscriber.get()
    }
}

/// What `ScriptInvocation::invoke_async` does (`EVALSHA`; on `NOSCRIPT`,
/// `SCRIPT LOAD` and the same `EVALSHA` again), with the command built in
/// one buffer sized up front: the invocation copies every key and argument
/// into a `Vec` of its own and then again into the command, which cost more
/// than the rest of a release's client-side work.
async fn evalsha<T: FromRedisValue>(
    script: &Script,
    keys: &[&[u8]],
    args: &[&[u8]],
    conn: &mut Connection,
) -> redis::RedisResult<T> {
    let hash = script.get_hash();
    let data =
        keys.iter().chain(args).map(|a| a.len()).sum::<usize>() + "EVALSHA".len() + hash.len() + 2;
    let mut cmd = redis::Cmd::with_capacity(3 + keys.len() + args.len(), data);
    cmd.arg("EVALSHA").arg(hash).arg(keys.len());
    for arg in keys.iter().chain(args) {
        cmd.arg(*arg);
    }
    match cmd.query_async(conn).await {
        Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
            script.load_async(conn).await?;
            cmd.query_async(conn).await
        }
        result => result,
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
