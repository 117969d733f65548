//! A private Sentinel set on loopback: a primary, its replicas and the
//! Sentinels (`redis-server CONF --sentinel`) that watch it and fail it over.
//!
//! Every process is a [`RedisServer`] (its own port and data dir, killed on
//! drop and with the test process). [`SentinelSet::start`] returns only once
//! every replica is in sync and every Sentinel knows every replica and every
//! other Sentinel (they find each other through hello messages on the
//! primary, every 2 s), so that a failover can be agreed at once.
//!
//! Sentinel's timers are set low for tests: a primary that does not answer
//! for [`SentinelBuilder::down_after`] (default 1 s) is down, and a failover
//! that stalls is retried after twice [`SentinelBuilder::failover_timeout`].
//!
//! [`SentinelBuilder::tls`] (feature `tls`) makes the data nodes serve TLS
//! only ([`ServerBuilder::tls`](crate::ServerBuilder::tls), `rediss://`
//! URLs) and replicate over TLS (`tls-replication yes`). The Sentinels keep
//! their plain TCP port for clients ([`SentinelSet::sentinel_addrs`]) and
//! reach the data nodes over TLS with the server certificate (which carries
//! ClientAuth too). With `tls-replication yes` a Sentinel also reaches the
//! *other Sentinels* over TLS, at the port their hello messages announce:
//! their `tls-port` when they have one. So each Sentinel has a second,
//! TLS-only port, for its peers; clients never need it. Everything else
//! (readiness, [`SentinelSet::failover`], [`SentinelSet::kill_primary`],
//! [`SentinelSet::wait_replicas_synced`]) works alike: the kit's own
//! commands to a TLS data node speak TLS.

use std::io;
use std::thread;
use std::time::{Duration, Instant};

use crate::{RedisServer, ServerBuilder};

/// How long forming the set, or a failover, may take before the test fails.
/// Seconds normally (a `kill -9` failover: down-after plus an election);
/// generous because test hosts are shared and slow.
const SENTINEL_PATIENCE: Duration = Duration::from_secs(30);
/// Pause between polls of the Sentinels' state.
const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// Bound on one admin command to a Sentinel or server.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// A primary, its replicas and the Sentinels that watch it, all private
/// `redis-server` processes on loopback; stopped (every process, every data
/// dir) on drop.
///
/// ```no_run
/// use latchkey_testkit::SentinelSet;
///
/// let mut set = SentinelSet::start(); // a primary, a replica, 3 Sentinels
/// let old = set.primary_port();
/// set.server(old).command(&["SET", "k", "v"]).unwrap();
/// set.wait_replicas_synced();
/// let new = set.kill_primary(); // kill -9, then wait for the announcement
/// assert_ne!(new, old);
/// assert_eq!(set.server(new).command(&["GET", "k"]).unwrap(), "v");
/// ```
#[derive(Debug)]
pub struct SentinelSet {
    master: String,
    /// The primary first, as started; roles change with failovers.
    servers: Vec<RedisServer>,
    sentinels: Vec<RedisServer>,
}

/// Configures a [`SentinelSet`]; see [`SentinelSet::builder`].
#[derive(Clone, Debug)]
#[must_use]
pub struct SentinelBuilder {
    master: String,
    replicas: usize,
    sentinels: usize,
    down_after: Duration,
    failover_timeout: Duration,
    /// TLS data nodes (see the module docs).
    tls: Option<crate::tls::SetTls>,
}

impl Default for SentinelBuilder {
    fn default() -> Self {
        SentinelBuilder {
            master: "latchkey".to_owned(),
            replicas: 1,
            sentinels: 3,
            down_after: Duration::from_secs(1),
            failover_timeout: Duration::from_secs(3),
            tls: None,
        }
    }
}

impl SentinelBuilder {
    /// The master name the Sentinels know the primary by (default `latchkey`).
    pub fn master_name(mut self, name: &str) -> Self {
        self.master = name.to_owned();
        self
    }

    /// Replicas of the primary (default 1; at least 1, or nothing can be promoted).
    pub fn replicas(mut self, n: usize) -> Self {
        self.replicas = n.max(1);
        self
    }

    /// Sentinels (default 3; the quorum is a majority of them).
    pub fn sentinels(mut self, n: usize) -> Self {
        self.sentinels = n.max(1);
        self
    }

    /// `down-after-milliseconds`: how long the primary may not answer before
    /// a Sentinel deems it down (default 1 s).
    pub fn down_after(mut self, after: Duration) -> Self {
        self.down_after = after;
        self
    }

    /// `failover-timeout` (default 3 s).
    pub fn failover_timeout(mut self, timeout: Duration) -> Self {
        self.failover_timeout = timeout;
        self
    }

    /// The TLS settings (`tls.rs`, [`SentinelBuilder::tls`]).
    #[cfg(feature = "tls")]
    pub(crate) fn with_tls(mut self, tls: crate::tls::SetTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// A data node's builder: TLS only and replicating over TLS if the set is.
    fn data_node(&self) -> ServerBuilder {
        match &self.tls {
            Some(tls) => tls.data_node(),
            None => RedisServer::builder(),
        }
    }

    /// A Sentinel whose config starts as `conf` (a TLS set's adds its own).
    fn start_sentinel(&self, conf: &str) -> RedisServer {
        match &self.tls {
            Some(tls) => tls.start_sentinel(conf),
            None => RedisServer::builder().sentinel(conf.to_owned()).start(),
        }
    }

    /// Starts the servers, then the Sentinels, and waits until the set is
    /// ready: every replica in sync, and every Sentinel knowing every
    /// replica and every other Sentinel, so that a failover can be agreed
    /// at once.
    ///
    /// # Panics
    /// When a process does not start, or the set is not ready within 30 s.
    pub fn start(self) -> SentinelSet {
        let primary = self.data_node().start();
        let mut servers = vec![primary];
        for _ in 0..self.replicas {
            let port = servers[0].port();
            servers.push(self.data_node().replica_of(port).start());
        }
        let port = servers[0].port();
        let quorum = self.sentinels / 2 + 1;
        let name = &self.master;
        let conf = format!(
            "sentinel monitor {name} 127.0.0.1 {port} {quorum}\n\
             sentinel down-after-milliseconds {name} {}\n\
             sentinel failover-timeout {name} {}\n\
             sentinel parallel-syncs {name} 1\n",
            self.down_after.as_millis().max(1),
            self.failover_timeout.as_millis().max(1),
        );
        let sentinels = (0..self.sentinels)
            .map(|_| self.start_sentinel(&conf))
            .collect();
        let set = SentinelSet {
            master: self.master,
            servers,
            sentinels,
        };
        set.wait_replicas_synced();
        let (replicas, others) = (self.replicas, self.sentinels - 1);
        poll("every Sentinel knows every replica and Sentinel", || {
            for sentinel in &set.sentinels {
                let fields = master_fields(sentinel, &set.master)?;
                let count = |f: &str| fields.get(f).and_then(|v| v.parse::<usize>().ok());
                if count("num-slaves") != Some(replicas)
                    || count("num-other-sentinels") != Some(others)
                {
                    return Err(format!("port {}: {fields:?}", sentinel.port()));
                }
            }
            Ok(())
        });
        set
    }
}

impl SentinelSet {
    /// Starts a primary, one replica and 3 Sentinels; see [`SentinelBuilder::start`].
    pub fn start() -> SentinelSet {
        Self::builder().start()
    }

    /// Returns a builder for another shape or other timers.
    pub fn builder() -> SentinelBuilder {
        SentinelBuilder::default()
    }

    /// The master name the Sentinels know the primary by.
    pub fn master_name(&self) -> &str {
        &self.master
    }

    /// The Sentinels' addresses, `127.0.0.1:PORT` each.
    pub fn sentinel_addrs(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port()))
            .collect()
    }

    /// The Sentinel processes.
    pub fn sentinels(&self) -> &[RedisServer] {
        &self.sentinels
    }

    /// Every data server (primary and replicas, whichever is which now),
    /// running or not.
    pub fn servers(&self) -> &[RedisServer] {
        &self.servers
    }

    /// The data server on `port`.
    ///
    /// # Panics
    /// When no server of the set has that port.
    pub fn server(&self, port: u16) -> &RedisServer {
        self.servers
            .iter()
            .find(|s| s.port() == port)
            .unwrap_or_else(|| panic!("latchkey-testkit: no server of the set on port {port}"))
    }

    /// The port of the primary as the Sentinels announce it now: the one
    /// that every running Sentinel names (waits, bounded, while they differ).
    ///
    /// # Panics
    /// When they do not agree within 30 s.
    pub fn primary_port(&self) -> u16 {
        poll("the Sentinels agree on the primary", || self.announced())
    }

    /// The primary the Sentinels announce now.
    pub fn primary(&self) -> &RedisServer {
        self.server(self.primary_port())
    }

    /// Waits until every running replica of the announced primary has
    /// caught up with it (the primary's replication offset is the replica's).
    ///
    /// # Panics
    /// When that takes longer than 30 s.
    pub fn wait_replicas_synced(&self) {
        let primary = self.primary_port();
        poll("the replicas are in sync", || {
            let info = self.server(primary).command(&["INFO", "replication"]);
            let info = info.map_err(|e| e.to_string())?;
            let offset = field(&info, "master_repl_offset").ok_or("no offset")?;
            for replica in self.servers.iter().filter(|s| s.port() != primary) {
                if !replica.is_running() {
                    continue;
                }
                let r = replica.command(&["INFO", "replication"]);
                let r = r.map_err(|e| e.to_string())?;
                let linked = field(&r, "master_link_status") == Some("up")
                    && field(&r, "master_port") == Some(&primary.to_string());
                if !linked || field(&r, "slave_repl_offset") != Some(offset) {
                    return Err(format!("replica {} behind or unlinked", replica.port()));
                }
            }
            Ok(())
        });
    }

    /// Asks a Sentinel for a failover (`SENTINEL FAILOVER`; again while it
    /// answers that no replica is fit yet) and waits until
    /// every Sentinel announces a new primary that says it is one; returns
    /// its port. The old primary is made a replica of it later: Sentinel
    /// leaves a running old primary alone for about 8 s before it sends it
    /// `REPLICAOF` (and closes its clients' connections).
    ///
    /// # Panics
    /// When the failover is refused or not announced within 30 s.
    pub fn failover(&self) -> u16 {
        let old = self.primary_port();
        // A Sentinel refuses while its view of the replicas is stale (it
        // reads a replica's INFO every 10 s): `NOGOODSLAVE` right after a
        // replica (re)joined; `INPROG` while a failover runs. Ask again.
        poll("a Sentinel accepts SENTINEL FAILOVER", || {
            let reply = self
                .running_sentinel()
                .command(&["SENTINEL", "FAILOVER", &self.master]);
            match reply {
                Ok(_) => Ok(()),
                Err(e)
                    if ["NOGOODSLAVE", "INPROG"]
                        .iter()
                        .any(|c| e.to_string().contains(c)) =>
                {
                    Err(e.to_string())
                }
                Err(e) => panic!("latchkey-testkit: SENTINEL FAILOVER refused: {e}"),
            }
        });
        self.wait_new_primary(old)
    }

    /// Crashes the primary (`kill -9`) and waits until every Sentinel
    /// announces a new primary that says it is one; returns its port.
    ///
    /// # Panics
    /// When no new primary is announced within 30 s.
    pub fn kill_primary(&mut self) -> u16 {
        let old = self.primary_port();
        self.server_mut(old).kill();
        self.wait_new_primary(old)
    }

    /// The data server on `port`, to kill, stop, pause or restart it.
    ///
    /// # Panics
    /// When no server of the set has that port.
    pub fn server_mut(&mut self, port: u16) -> &mut RedisServer {
        self.servers
            .iter_mut()
            .find(|s| s.port() == port)
            .unwrap_or_else(|| panic!("latchkey-testkit: no server of the set on port {port}"))
    }

    fn wait_new_primary(&self, old: u16) -> u16 {
        poll("the Sentinels announce a new primary", || {
            let port = self.announced()?;
            if port == old {
                return Err(format!("still {old}"));
            }
            let info = self.server(port).command(&["INFO", "replication"]);
            let info = info.map_err(|e| e.to_string())?;
            match field(&info, "role") {
                Some("master") => Ok(port),
                other => Err(format!("{port} says it is {other:?}")),
            }
        })
    }

    /// The primary every running Sentinel names, or why not.
    fn announced(&self) -> Result<u16, String> {
        let mut agreed = None;
        for sentinel in self.sentinels.iter().filter(|s| s.is_running()) {
            let reply = sentinel.command_with_timeout(
                &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", &self.master],
                PROBE_TIMEOUT,
            );
            let reply = reply.map_err(|e| e.to_string())?;
            let port = reply
                .lines()
                .nth(1)
                .and_then(|p| p.parse::<u16>().ok())
                .ok_or_else(|| format!("no address in {reply:?}"))?;
            match agreed {
                Some(p) if p != port => return Err(format!("{p} or {port}")),
                _ => agreed = Some(port),
            }
        }
        agreed.ok_or_else(|| "no Sentinel is running".to_owned())
    }

    fn running_sentinel(&self) -> &RedisServer {
        self.sentinels
            .iter()
            .find(|s| s.is_running())
            .expect("latchkey-testkit: no Sentinel is running")
    }
}

/// `SENTINEL MASTER name` as field → value.
fn master_fields(
    sentinel: &RedisServer,
    master: &str,
) -> Result<std::collections::HashMap<String, String>, String> {
    let reply = sentinel
        .command_with_timeout(&["SENTINEL", "MASTER", master], PROBE_TIMEOUT)
        .map_err(|e: io::Error| e.to_string())?;
    let lines: Vec<&str> = reply.lines().collect();
    Ok(lines
        .chunks(2)
        .filter_map(|pair| Some((pair.first()?.to_string(), pair.get(1)?.to_string())))
        .collect())
}

/// The value of `name:` in an `INFO` reply.
fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.trim_end().strip_prefix(name)?.strip_prefix(':'))
}

/// Polls `check` until it is `Ok`; panics naming `what` and the last reason
/// after [`SENTINEL_PATIENCE`].
fn poll<T>(what: &str, mut check: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + SENTINEL_PATIENCE;
    loop {
        match check() {
            Ok(value) => return value,
            Err(reason) if Instant::now() >= deadline => {
                panic!("latchkey-testkit: timed out waiting until {what}: {reason}")
            }
            Err(_) => thread::sleep(POLL_INTERVAL),
        }
    }
}
