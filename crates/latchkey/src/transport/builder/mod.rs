//! The options of a [`Client`](crate::Client) and how it connects (layer 2,
//! transport): [`ClientBuilder`] checks the options, opens the command
//! connection, finds out whether the server is a Redis Cluster node (and
//! then connects to the cluster), and hands the [`Session`] everything it
//! owns from then on.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::transport::connection::{Connection, Kind};
use crate::transport::pinned::PinnedConnection;
use crate::transport::sentinel::SentinelSpec;
use crate::transport::server_version;
use crate::transport::session::{Session, SessionInner, DEFAULT_COMMAND_TIMEOUT, DEFAULT_PREFIX};
use crate::transport::tls::server_name::Target;
use crate::transport::tls::{Pem, TlsOptions};
use crate::vocab::error::{Error, Result};
use crate::vocab::metrics::MetricsLabels;
use crate::vocab::token::Identity;

mod sentinel;

/// Options for a [`Client`](crate::Client); made by
/// [`Client::builder`](crate::Client::builder), connected by
/// [`ClientBuilder::connect`].
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::builder("rediss://locker:secret@redis.internal:6380/")
///     .prefix("billing:")
///     .command_timeout(Duration::from_millis(500))
///     .tls_ca_file("/etc/ssl/private-ca.pem")
///     .tls_client_cert_files("/etc/ssl/me.pem", "/etc/ssl/me.key")
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
///
/// # What it promises
/// Setting an option does no I/O and cannot fail; [`connect`](ClientBuilder::connect)
/// checks the options (a bad URL, certificate file or Sentinel address is
/// an error that names it, such as [`Error::InvalidInput`](crate::Error::InvalidInput)
/// or [`Error::Tls`](crate::Error::Tls)), connects, and finds out by asking
/// the server whether it is a Redis Cluster node. A
/// builder is cheap to clone, so one set of options can connect several
/// clients.
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    url: String,
    prefix: Vec<u8>,
    command_timeout: Duration,
    pubsub_ping_every: Duration,
    replicas: Vec<String>,
    metrics_labels: MetricsLabels,
    tls: TlsOptions,
    /// Set: the URL gives the primary's settings, the Sentinels its address.
    sentinel: Option<SentinelSpec>,
    /// More nodes of the same Redis Cluster, tried in turn when the URL's
    /// node cannot be reached, and given to the cluster client.
    seeds: Vec<String>,
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

    /// Adds another node of the same Redis Cluster as a seed (repeatable),
    /// as `redis-cli -c` and redis-rs's cluster client take several: when
    /// the URL's node cannot be reached (it died, and the cluster failed
    /// over), the seeds are tried in turn, and the cluster client may learn
    /// the slots from any of them later. Each seed takes the URL's TLS
    /// options; a seed's own password and database are its own. The node
    /// that answers must be a cluster node: seeds beside a standalone
    /// server are [`Error::NotACluster`] (independent servers are
    /// [`Redlock`](crate::Redlock)'s business), and so are seeds with
    /// [`sentinel`](Self::sentinel).
    pub fn seed(mut self, url: &str) -> Self {
        self.seeds.push(url.to_owned());
        self
    }

    /// Which `lock` label this client's primitive metrics carry (default
    /// [`MetricsLabels::None`]); see [`crate::vocab::metrics`].
    pub fn metrics_labels(mut self, labels: MetricsLabels) -> Self {
        self.metrics_labels = labels;
        self
    }

    /// Trusts the CA certificate(s) in the PEM file at `path` for a
    /// `rediss://` server, instead of the system's CAs, on every connection
    /// of the client. Read when it connects: a missing file is
    /// [`Error::InvalidInput`], one without a certificate [`Error::Tls`].
    /// See `docs/security.md`.
    pub fn tls_ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.tls.ca = Some(Pem::File(path.into()));
        self
    }

    /// [`tls_ca_file`](Self::tls_ca_file) with the PEM text itself.
    pub fn tls_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.ca = Some(Pem::Bytes(pem.into()));
        self
    }

    /// Presents the client certificate (chain) in the PEM file `cert`, with
    /// its private key in the PEM file `key` (mutual TLS). Read and checked
    /// when the client connects, as [`tls_ca_file`](Self::tls_ca_file); a
    /// key that is not the certificate's is [`Error::Tls`].
    pub fn tls_client_cert_files(
        mut self,
        cert: impl Into<std::path::PathBuf>,
        key: impl Into<std::path::PathBuf>,
    ) -> Self {
        self.tls.client = Some((Pem::File(cert.into()), Pem::File(key.into())));
        self
    }

    /// [`tls_client_cert_files`](Self::tls_client_cert_files) with the PEM
    /// texts themselves (say, from a secret store).
    pub fn tls_client_cert_pem(
        mut self,
        cert: impl Into<Vec<u8>>,
        key: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.client = Some((Pem::Bytes(cert.into()), Pem::Bytes(key.into())));
        self
    }

    /// Checks the server's certificate against `name`, and sends `name` as
    /// the TLS server name (SNI), instead of the URL's host, while still
    /// connecting to the URL's address: for a server reached by an address
    /// (or a name) its certificate does not carry. Applies to every
    /// `rediss://` connection of the client: the command and pub/sub
    /// connections, [`replica`](Self::replica)s, and the primary that
    /// [`sentinel`](Self::sentinel)s name (not the Sentinels themselves).
    /// Checked when the client connects: an empty name, an IP address, a
    /// name that is not a valid DNS name, and a `redis://` URL are
    /// [`Error::InvalidInput`]; a Redis Cluster is refused with
    /// [`Error::InvalidInput`] (its nodes are reached by the addresses they
    /// announce; see `docs/security.md`). A certificate without the name is
    /// [`Error::Tls`].
    pub fn tls_server_name(mut self, name: impl Into<String>) -> Self {
        self.tls.server_name = Some(name.into());
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
        if let Some(parsed) = crate::transport::sentinel::parse_url(&this.url) {
            let (spec, template) = parsed.map_err(|e| {
                Error::InvalidInput(format!("bad Sentinel URL {:?}: {e}", this.url))
            })?;
            this.sentinel = Some(spec);
            this.url = template;
        }
        let over = this.tls.server_override()?;
        let redis = crate::transport::tls::redis_client(&this.url, &this.tls, over.as_ref())?;
        let replicas =
            crate::transport::tls::replica_clients(&this.replicas, &this.tls, over.as_ref())?;
        if let Some(spec) = this.sentinel.take() {
            if !this.seeds.is_empty() {
                return Err(Error::InvalidInput(
                    "cluster seeds cannot be used with Sentinels".into(),
                ));
            }
            return this.open_sentinel(spec, redis, replicas, over).await;
        }
        if this.seeds.is_empty() {
            return this.open_standalone(redis, replicas).await;
        }
        // The URL's node, then each seed, until one answers.
        let nodes: Vec<String> = std::iter::once(this.url.clone())
            .chain(this.seeds.iter().cloned())
            .collect();
        let mut last = None;
        for (i, node) in nodes.iter().enumerate() {
            let mut attempt = this.clone();
            attempt.url = node.clone();
            // The cluster client knows every node, the one that answered first.
            attempt.seeds = nodes.iter().filter(|n| *n != node).cloned().collect();
            let redis = if i == 0 {
                redis.clone()
            } else {
                crate::transport::tls::redis_client(node, &this.tls, over.as_ref())?
            };
            match attempt.open_standalone(redis, replicas.clone()).await {
                Ok(session) if !session.is_cluster() => {
                    return Err(Error::NotACluster {
                        server: session.server(),
                    })
                }
                Err(e) if e.is_transient() => {
                    tracing::warn!(seed = %node_label(node), error = %e, "cluster seed unreachable; trying the next");
                    last = Some(e);
                }
                other => return other,
            }
        }
        Err(last.unwrap_or_else(|| Error::Internal("no seed was tried".into())))
    }

    async fn open_standalone(self, redis: Target, replicas: Vec<Target>) -> Result<Session> {
        let timed_out = Error::Timeout {
            op: "connect",
            after: self.command_timeout,
        };
        if redis.is_redirected() {
            // Under a server-name override: see `crate::transport::pinned`.
            let connecting = PinnedConnection::connect(redis.clone(), self.command_timeout);
            let pinned = match tokio::time::timeout(self.command_timeout, connecting).await {
                Ok(Ok(conn)) => conn,
                Ok(Err(e)) => return Err(Error::from_redis(e, &[], self.command_timeout)),
                Err(_) => return Err(timed_out),
            };
            let (conn, probe) = self.cluster_or(Connection(Kind::Pinned(pinned))).await?;
            return self.session(redis, replicas, conn, probe).await;
        }
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.command_timeout))
            .set_response_timeout(Some(self.command_timeout))
            // Fail fast when the server is down: callers (and our own waiters
            // and watchdogs) decide when to retry, with their own deadlines.
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let connecting =
            redis::aio::ConnectionManager::new_with_config(redis.client.clone(), config);
        let standalone = match tokio::time::timeout(self.command_timeout, connecting).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return Err(Error::from_redis(e, &[], self.command_timeout)),
            Err(_) => return Err(timed_out),
        };
        let (conn, probe) = self
            .cluster_or(Connection(Kind::Standalone(standalone)))
            .await?;
        self.session(redis, replicas, conn, probe).await
    }

    /// The session over `conn`; checks it may be used unless `answered`.
    pub(super) async fn session(
        self,
        redis: Target,
        replicas: Vec<Target>,
        conn: Connection,
        probe: Probe,
    ) -> Result<Session> {
        // The cluster subscriber (started on first use) connects with the
        // same certificates as the command connection.
        let cluster_certs = if conn.is_cluster() {
            crate::transport::tls::cluster_certificates(&self.tls)?
        } else {
            None
        };
        let server_label = match &self.sentinel {
            Some(spec) => format!("the primary of Sentinel master {:?}", spec.master),
            None => node_label(&self.url),
        };
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
                cluster_certs,
                cluster_seeds: self
                    .seeds
                    .iter()
                    .filter_map(|url| {
                        redis::IntoConnectionInfo::into_connection_info(url.as_str()).ok()
                    })
                    .collect(),
                local_queues: Default::default(),
                metrics_labels: self.metrics_labels,
                background: tokio_util::task::TaskTracker::new(),
                scripts_ran: std::sync::atomic::AtomicBool::new(false),
                renewals: std::sync::OnceLock::new(),
                fair_waiters: Default::default(),
                deferred: crate::transport::deferred::Deferred::default(),
                kept: crate::transport::kept::Kept::default(),
                live: crate::transport::live::LiveHolds::default(),
            }),
        };
        // A connection is only useful if we may use it: surface auth and ACL
        // problems now, with a clear error, instead of at the first lock,
        // and a server too old for latchkey (`server_version.rs`). A server
        // that answered `INFO` took us already: no second round trip.
        let info = match probe {
            Probe::Answered(info) => Some(info),
            Probe::NotAsked => {
                let mut info = redis::cmd("INFO");
                info.arg("server");
                let asked: Result<String> = client.query("INFO", info, b"").await;
                match asked {
                    Ok(info) => Some(info),
                    // Not allowed INFO (or a proxy without it): `PING` says
                    // whether we may connect at all, and the version is
                    // not checked.
                    Err(Error::NoPermission(_) | Error::Redis(_)) => None,
                    Err(e) => return Err(e),
                }
            }
            Probe::Refused => None,
        };
        match info {
            Some(info) => server_version::check(&info, &server_label)?,
            None => {
                let _: String = client.query("PING", redis::cmd("PING"), b"").await?;
            }
        }
        Ok(client)
    }
}

impl ClientBuilder {
    /// A connection to the cluster when the server at the URL is a cluster
    /// node (`cluster_enabled:1`), else `standalone`, with what the server
    /// said of itself (`INFO server` and `INFO cluster`, one pipelined round
    /// trip: Redis before 7.0 takes one section per `INFO`). A server that
    /// does not answer them (an ACL without `INFO`, a wrong password) is
    /// taken as standalone, and the caller's `PING` says what is wrong. A
    /// cluster is refused under a TLS server-name override (see
    /// `docs/security.md`).
    async fn cluster_or(&self, mut standalone: Connection) -> Result<(Connection, Probe)> {
        let info = tokio::time::timeout(
            self.command_timeout,
            redis::pipe()
                .cmd("INFO")
                .arg("server")
                .cmd("INFO")
                .arg("cluster")
                .query_async::<(String, String)>(&mut standalone),
        )
        .await;
        let (probe, cluster) = match info {
            Ok(Ok((server, cluster))) => {
                let enabled = cluster.lines().any(|l| l.trim() == "cluster_enabled:1");
                (Probe::Answered(server), enabled)
            }
            _ => (Probe::Refused, false),
        };
        if !cluster {
            return Ok((standalone, probe));
        }
        if let Some(name) = &self.tls.server_name {
            return Err(Error::InvalidInput(format!(
                "the TLS server name {name:?} cannot be used with a Redis Cluster: \
                 its nodes are reached by the addresses they announce, each checked \
                 against its own certificate; have the nodes announce DNS names their \
                 certificates carry (cluster-announce-hostname, \
                 cluster-preferred-endpoint-type hostname) and connect without it"
            )));
        }
        let nodes = std::iter::once(self.url.as_str()).chain(self.seeds.iter().map(String::as_str));
        let mut builder = redis::cluster::ClusterClient::builder(nodes)
            .connection_timeout(self.command_timeout)
            .response_timeout(self.command_timeout)
            .retries(2);
        if let Some(certs) = crate::transport::tls::cluster_certificates(&self.tls)? {
            builder = builder.certs(certs);
        }
        let client = builder.build().map_err(|e| Error::bad_url(&self.url, &e))?;
        match tokio::time::timeout(self.command_timeout, client.get_async_connection()).await {
            Ok(Ok(conn)) => Ok((Connection(Kind::Cluster(conn)), probe)),
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
            tls: TlsOptions::default(),
            sentinel: None,
            seeds: Vec::new(),
        }
    }
}

/// What the server said of itself before the session was made.
pub(super) enum Probe {
    /// Its `INFO server` reply.
    Answered(String),
    /// It did not answer `INFO` (refused, or an error).
    Refused,
    /// Nobody asked yet (a Sentinel's primary): the session asks.
    NotAsked,
}

/// The host and port of a node's URL, for a log line (no password).
fn node_label(url: &str) -> String {
    redis::Client::open(url).map_or_else(
        |_| "a seed".to_owned(),
        |client| client.get_connection_info().addr().to_string(),
    )
}
