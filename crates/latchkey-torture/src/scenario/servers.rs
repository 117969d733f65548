//! Where a scenario's lock lives: a private redis-server (or three, for
//! Redlock), a private Redis Cluster (`--cluster`) or Sentinel set
//! (`--sentinel-set`), or the user's servers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use latchkey_testkit::{RedisCluster, RedisServer, SentinelSet};

use crate::faults::Needs;
use crate::resource::Keys;

use super::inject::admin;

/// Where the lock lives: servers of our own, or the user's.
#[derive(Debug, Clone)]
pub enum Place {
    Private,
    /// A Redis Cluster of our own: 3 primaries with a replica each.
    Cluster,
    /// A private Sentinel set (`--sentinel-set`); `replicas`: acquisitions
    /// wait for the replica (`--with-replicas`).
    Sentinel {
        replicas: bool,
    },
    User(Vec<String>),
}

pub(super) enum LockServer {
    /// Ours: we may crash and restart it. Behind a mutex because the test
    /// kit's restart blocks and so runs on a blocking thread.
    Private(Arc<Mutex<RedisServer>>, String),
    /// Ours, a cluster (its seed node's URL): we kill, fail over and
    /// reshard it, on blocking threads too.
    Cluster(Arc<Mutex<RedisCluster>>, String),
    /// Ours, reached through its Sentinels (a `redis+sentinel://` URL).
    Sentinel(Arc<Mutex<SentinelSet>>, String),
    User(String),
}

impl LockServer {
    pub(super) fn url(&self) -> &str {
        match self {
            LockServer::Private(_, url)
            | LockServer::Cluster(_, url)
            | LockServer::Sentinel(_, url)
            | LockServer::User(url) => url,
        }
    }

    pub(super) fn is_cluster(&self) -> bool {
        matches!(self, LockServer::Cluster(..))
    }

    pub(super) fn is_sentinel(&self) -> bool {
        matches!(self, LockServer::Sentinel(..))
    }
}

pub(super) async fn start_servers(place: &Place, needs: Needs) -> Result<Vec<LockServer>, String> {
    match place {
        Place::User(urls) => Ok(urls.iter().cloned().map(LockServer::User).collect()),
        Place::Sentinel { .. } => {
            let set = tokio::task::spawn_blocking(SentinelSet::start)
                .await
                .map_err(|e| format!("cannot start a private Sentinel set: {e}"))?;
            let url = format!(
                "redis+sentinel://{}/{}",
                set.sentinel_addrs().join(","),
                set.master_name()
            );
            Ok(vec![LockServer::Sentinel(Arc::new(Mutex::new(set)), url)])
        }
        Place::Cluster => {
            let cluster = tokio::task::spawn_blocking(|| {
                std::panic::catch_unwind(|| {
                    RedisCluster::builder()
                        .primaries(3)
                        .replicas_per_primary(1)
                        .node_timeout(Duration::from_millis(1000))
                        .start()
                })
            })
            .await
            .map_err(|e| format!("starting a cluster: {e}"))?
            .map_err(|_| "cannot start a private Redis Cluster".to_owned())?;
            let url = cluster.seed_url();
            Ok(vec![LockServer::Cluster(
                Arc::new(Mutex::new(cluster)),
                url,
            )])
        }
        Place::Private => {
            let n = if needs.redlock { 3 } else { 1 };
            let mut servers = Vec::with_capacity(n);
            for _ in 0..n {
                let aof = needs.aof;
                let server = tokio::task::spawn_blocking(move || {
                    RedisServer::builder().aof(aof).try_start()
                })
                .await
                .map_err(|e| format!("starting redis-server: {e}"))?
                .map_err(|e| format!("cannot start a private redis-server: {e}"))?;
                let url = server.url();
                servers.push(LockServer::Private(Arc::new(Mutex::new(server)), url));
            }
            Ok(servers)
        }
    }
}

/// Leaves a user's server as the scenario found it: deletes the resources,
/// each lock key of `lock_keys` with its counter (docs/protocol.md), and
/// the other keys of the workload's primitive under the first lock key's
/// stem.
pub(super) async fn clean_up(
    servers: &[LockServer],
    resource_url: &str,
    resources: &[Keys],
    lock_keys: &[String],
    workload: &str,
) {
    for keys in resources {
        let _ = crate::resource::delete(resource_url, keys, Duration::from_secs(2)).await;
    }
    for server in servers {
        for key in lock_keys {
            let fence = latchkey::protocol::primitive_key(
                b"",
                key.as_bytes(),
                latchkey::protocol::FENCE_SUFFIX,
            );
            let fence = String::from_utf8_lossy(&fence).into_owned();
            let _ = admin(server.url(), &["DEL".into(), key.clone(), fence]).await;
        }
        // The other keys of a primitive, under the same stem.
        let Some(stem) = lock_keys[0].rfind("}:").map(|i| &lock_keys[0][..=i]) else {
            continue;
        };
        let others: &[&str] = match workload {
            "election" => &[":election"],
            "semaphore" => &[":permits:fence"],
            "rwlock" => &[
                ":rw:readers",
                ":rw:writers-waiting",
                ":rw:readers-waiting",
                ":rw:readers-next",
                ":rw:fence",
            ],
            _ => &[],
        };
        for suffix in others {
            let _ = admin(server.url(), &["DEL".into(), format!("{stem}{suffix}")]).await;
        }
    }
}
