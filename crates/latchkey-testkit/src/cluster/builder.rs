//! Starting a [`RedisCluster`]: its nodes, then `redis-cli --cluster create`.

use std::fs::{self, File};
use std::io;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::{ClusterNode, RedisCluster, CLUSTER_PATIENCE, POLL_INTERVAL};
use crate::{spawn, RedisServer};

/// `redis-cli --cluster create` needs at least this many primaries.
const MIN_PRIMARIES: usize = 3;

/// Configures a [`RedisCluster`] before starting it; see
/// [`RedisCluster::builder`].
#[derive(Clone, Debug)]
#[must_use]
pub struct ClusterBuilder {
    primaries: usize,
    replicas_per_primary: usize,
    node_timeout: Duration,
    extra: Vec<(String, String)>,
    /// Every node TLS only, the bus and replication too.
    tls: Option<crate::TlsCerts>,
}

impl Default for ClusterBuilder {
    fn default() -> Self {
        ClusterBuilder {
            primaries: 3,
            replicas_per_primary: 1,
            node_timeout: Duration::from_millis(2000),
            extra: Vec::new(),
            tls: None,
        }
    }
}

impl ClusterBuilder {
    /// How many primaries share the slots (at least 3, as `redis-cli
    /// --cluster create` requires; default 3).
    pub fn primaries(mut self, n: usize) -> Self {
        self.primaries = n;
        self
    }

    /// Replicas of each primary (default 1). 0 starts fastest, for tests
    /// that need no failover.
    pub fn replicas_per_primary(mut self, r: usize) -> Self {
        self.replicas_per_primary = r;
        self
    }

    /// `cluster-node-timeout` (default 2 s): how long a node may be
    /// unreachable before it is failed, so how soon a killed primary's
    /// replica takes over on its own. Shorter risks spurious failovers on a
    /// loaded host.
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout;
        self
    }

    /// Adds a config directive to every node, as [`ServerBuilder::arg`](crate::ServerBuilder::arg).
    pub fn arg(mut self, name: &str, value: &str) -> Self {
        self.extra.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Makes every node serve TLS only (mutual TLS with `certs`, as
    /// [`ServerBuilder::tls`](crate::ServerBuilder::tls) with
    /// [`ClientAuth::Required`](crate::ClientAuth::Required)), with the
    /// cluster bus and replication over TLS too; the nodes' URLs are then
    /// `rediss://`.
    pub fn tls(mut self, certs: &crate::TlsCerts) -> Self {
        self.tls = Some(certs.clone());
        self
    }

    /// Starts the nodes, joins them into a cluster and waits until it is
    /// healthy (see [`RedisCluster::wait_ok`]).
    ///
    /// # Panics
    ///
    /// With fewer than 3 primaries, or with the reason if a node does not
    /// start, `redis-cli` is missing or fails (quoting its output), or the
    /// cluster does not become healthy within 30 s (saying what is wrong).
    /// Nodes started so far are cleaned up.
    pub fn start(self) -> RedisCluster {
        assert!(
            self.primaries >= MIN_PRIMARIES,
            "latchkey-testkit: a cluster needs at least {MIN_PRIMARIES} primaries \
             (redis-cli --cluster create refuses fewer), not {}",
            self.primaries
        );
        let count = self.primaries * (1 + self.replicas_per_primary);
        let timeout_ms = self.node_timeout.as_millis().max(1).to_string();
        let nodes = (0..count)
            .map(|_| {
                let mut builder = RedisServer::builder()
                    .cluster_node()
                    .arg("cluster-node-timeout", &timeout_ms);
                if let Some(certs) = &self.tls {
                    builder = builder
                        .tls(certs, crate::ClientAuth::Required)
                        .arg("tls-cluster", "yes")
                        .arg("tls-replication", "yes");
                }
                for (name, value) in &self.extra {
                    builder = builder.arg(name, value);
                }
                let server = builder.start();
                let id = server
                    .command(&["CLUSTER", "MYID"])
                    .unwrap_or_else(|e| panic!("latchkey-testkit: CLUSTER MYID failed: {e}"));
                ClusterNode { server, id }
            })
            .collect();
        let cluster = RedisCluster { nodes };
        cluster.create(self.replicas_per_primary, self.tls.as_ref());
        cluster.wait_ok();
        cluster
    }
}

impl RedisCluster {
    /// `redis-cli --cluster create` over all nodes: assigns the slots and
    /// the replicas and introduces the nodes to each other.
    fn create(&self, replicas_per_primary: usize, tls: Option<&crate::TlsCerts>) {
        let log_path = self.nodes[0].server.dir().join("cluster-create.log");
        let log = File::create(&log_path).unwrap_or_else(|e| {
            panic!(
                "latchkey-testkit: cannot create {}: {e}",
                log_path.display()
            )
        });
        let stderr = log
            .try_clone()
            .expect("latchkey-testkit: cannot clone a file handle");
        let mut cmd = Command::new("redis-cli");
        if let Some(certs) = tls {
            cmd.arg("--tls")
                .arg("--cacert")
                .arg(certs.ca())
                .arg("--cert")
                .arg(certs.client_cert())
                .arg("--key")
                .arg(certs.client_key());
        }
        cmd.args(["--cluster", "create"]);
        cmd.args(self.nodes.iter().map(|node| node.addr().to_string()));
        cmd.arg("--cluster-replicas")
            .arg(replicas_per_primary.to_string());
        cmd.arg("--cluster-yes");
        cmd.stdin(Stdio::null()).stdout(log).stderr(stderr);
        let mut child = spawn::spawn(cmd).unwrap_or_else(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                panic!(
                    "latchkey-testkit: redis-cli not found on PATH: install it with \
                     `apt-get install redis-tools` (Debian's redis-server brings it)"
                )
            }
            panic!("latchkey-testkit: cannot run redis-cli: {e}")
        });
        let deadline = Instant::now() + CLUSTER_PATIENCE;
        let failure = loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return,
                Ok(Some(status)) => break status.to_string(),
                Ok(None) if Instant::now() < deadline => thread::sleep(POLL_INTERVAL),
                Ok(None) | Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break format!("did not finish within {CLUSTER_PATIENCE:?}");
                }
            }
        };
        let output = fs::read_to_string(&log_path).unwrap_or_default();
        panic!(
            "latchkey-testkit: redis-cli --cluster create ({} nodes): {failure}:\n{}",
            crate::ServerProgram::name_of_this_run(),
            strip_colours(&output)
        );
    }
}

/// Drops ANSI colour codes (`ESC [ ... m`), which redis-cli writes even to a
/// file.
fn strip_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|&c| c == 'm');
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_redis_cli_colours() {
        let text = "\u{1b}[31;1m[ERR] Node 127.0.0.1:7000 is not empty.\u{1b}[0m\n";
        assert_eq!(
            strip_colours(text),
            "[ERR] Node 127.0.0.1:7000 is not empty.\n"
        );
    }

    #[test]
    #[should_panic(expected = "at least 3 primaries")]
    fn refuses_fewer_than_three_primaries_before_starting_anything() {
        let _ = RedisCluster::builder().primaries(2).start();
    }
}
