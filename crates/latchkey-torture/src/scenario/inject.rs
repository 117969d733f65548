//! Carrying out a fault's actions on a running scenario: kill, stop and
//! continue a worker, switch its proxies, move its clock, send an admin
//! command, crash or restart a private server.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::{LockServer, Runner};
use crate::faults::Action;
use crate::rng::Rng;
use latchkey_testkit::RedisCluster;

impl Runner<'_> {
    /// Does `action` (a step of a fault's injection or its undoing).
    pub(super) async fn act(&mut self, action: &Action, rng: &mut Rng) -> Result<(), String> {
        match action {
            Action::Kill(id) => {
                let slot = &mut self.slots[*id as usize];
                if let Some(mut child) = slot.child.take() {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                }
                slot.pid = None;
                slot.spec.seed = rng.fork();
                self.spawn(*id)
            }
            Action::Stop(id) => self.signal(*id, libc::SIGSTOP),
            Action::Cont(id) => self.signal(*id, libc::SIGCONT),
            Action::Proxy(id, mode) => {
                let slot = &self.slots[*id as usize];
                if slot.proxies.is_empty() {
                    return Err("no proxy on this link".into());
                }
                for proxy in &slot.proxies {
                    proxy.set_mode(*mode);
                }
                Ok(())
            }
            Action::Clock(id, offset) => {
                let file = self.slots[*id as usize]
                    .clock_file
                    .as_ref()
                    .ok_or("no libfaketime for this worker")?;
                std::fs::write(file, format!("{offset:+}\n"))
                    .map_err(|e| format!("cannot write {}: {e}", file.display()))
            }
            Action::Command(args) => {
                for server in &self.servers {
                    match server {
                        LockServer::Cluster(cluster, _) => {
                            let urls = cluster_urls(cluster);
                            on_cluster(&urls, args).await?;
                        }
                        _ => admin(&admin_url(server).await?, args).await?,
                    }
                }
                Ok(())
            }
            Action::Failover if matches!(self.servers.first(), Some(LockServer::Sentinel(..))) => {
                let Some(LockServer::Sentinel(set, _)) = self.servers.first() else {
                    return Err("a failover needs --sentinel-set".into());
                };
                let set = set.clone();
                tokio::task::spawn_blocking(move || {
                    let set = set.lock().unwrap_or_else(PoisonError::into_inner);
                    // A failover needs a replica in sync: after the last
                    // one, the old primary once Sentinel has made it one
                    // (about 10 s later).
                    set.wait_replicas_synced();
                    set.failover();
                })
                .await
                .map_err(|e| format!("failing over: {e}"))
            }
            Action::KillPrimary | Action::StartNodes | Action::Failover | Action::MigrateSlot => {
                let Some(LockServer::Cluster(cluster, _)) = self.servers.first() else {
                    return Err("a failover needs --cluster or --sentinel-set".into());
                };
                let (cluster, action) = (cluster.clone(), action.clone());
                let slot = latchkey_testkit::key_slot(self.lock_key.as_bytes());
                let pick = rng.below(2) as usize;
                tokio::task::spawn_blocking(move || {
                    let mut cluster = cluster.lock().unwrap_or_else(PoisonError::into_inner);
                    // The test kit panics (with the reason) when the cluster
                    // does not do what it is told in time.
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        change_cluster(&mut cluster, &action, slot, pick)
                    }))
                    .map_err(|panic| {
                        panic
                            .downcast_ref::<String>()
                            .cloned()
                            .unwrap_or_else(|| "the cluster change failed".into())
                    })
                })
                .await
                .map_err(|e| format!("changing the cluster: {e}"))?
                .and_then(|changed| changed)
            }
            Action::Crash(i) | Action::Start(i) => {
                let Some(LockServer::Private(server, _)) = self.servers.get(*i) else {
                    return Err("only a private server can be crashed or restarted".into());
                };
                let server = server.clone();
                let crash = matches!(action, Action::Crash(_));
                tokio::task::spawn_blocking(move || {
                    let mut server = server.lock().unwrap_or_else(PoisonError::into_inner);
                    if crash {
                        server.kill();
                    } else {
                        server.restart();
                    }
                })
                .await
                .map_err(|e| format!("restarting redis-server: {e}"))
            }
        }
    }

    pub(super) fn signal(&self, id: u32, signal: libc::c_int) -> Result<(), String> {
        let slot = &self.slots[id as usize];
        // The child is not reaped while we hold it, so its pid is still its own.
        let pid = slot
            .pid
            .and_then(|p| libc::pid_t::try_from(p).ok())
            .ok_or("worker is not running")?;
        // SAFETY: kill(2) has no memory-safety preconditions.
        if unsafe { libc::kill(pid, signal) } != 0 {
            return Err(format!("kill({pid}): {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }
}

/// Where admin commands for `server` go: its URL, or for a Sentinel set
/// the primary's now.
async fn admin_url(server: &LockServer) -> Result<String, String> {
    let LockServer::Sentinel(set, _) = server else {
        return Ok(server.url().to_owned());
    };
    let set = set.clone();
    tokio::task::spawn_blocking(move || {
        set.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .primary()
            .url()
    })
    .await
    .map_err(|e| format!("asking the Sentinels: {e}"))
}

/// Runs one admin command on a lock server, on a connection of its own
/// (not through any proxy).
pub(super) async fn admin(url: &str, args: &[String]) -> Result<(), String> {
    let timeout = Duration::from_secs(2);
    let (name, rest) = args.split_first().ok_or("empty command")?;
    let client = redis::Client::open(url).map_err(|e| format!("bad URL: {e}"))?;
    let mut conn = tokio::time::timeout(timeout, client.get_multiplexed_async_connection())
        .await
        .map_err(|_| "connecting timed out".to_owned())?
        .map_err(|e| format!("connecting: {e}"))?;
    let mut cmd = redis::cmd(name);
    for arg in rest {
        cmd.arg(arg);
    }
    let _: redis::Value = tokio::time::timeout(timeout, cmd.query_async(&mut conn))
        .await
        .map_err(|_| format!("{name} timed out"))?
        .map_err(|e| format!("{name}: {e}"))?;
    Ok(())
}

/// The URLs of a cluster's running nodes.
fn cluster_urls(cluster: &Mutex<RedisCluster>) -> Vec<String> {
    let cluster = cluster.lock().unwrap_or_else(PoisonError::into_inner);
    cluster
        .nodes()
        .iter()
        .filter(|n| n.is_running())
        .map(|n| n.url())
        .collect()
}

/// Runs `args` on every running node of a cluster: a keyed command takes
/// effect on the node that serves the key (the others answer `MOVED`), an
/// unkeyed one (`SCRIPT FLUSH`, `CLIENT KILL`) on all. Fails only when no
/// node took it.
async fn on_cluster(urls: &[String], args: &[String]) -> Result<(), String> {
    let mut last = Err("no node is running".to_owned());
    for url in urls {
        match admin(url, args).await {
            Ok(()) => last = Ok(()),
            Err(e) if last.is_err() => last = Err(e),
            Err(_) => {}
        }
    }
    last
}

/// Carries out a cluster fault (blocking: the test kit waits for the
/// cluster to agree). `pick` chooses among candidates.
fn change_cluster(
    cluster: &mut RedisCluster,
    action: &Action,
    slot: u16,
    pick: usize,
) -> Result<(), String> {
    match action {
        Action::KillPrimary => {
            let port = cluster.primary_for_slot(slot).port();
            let node = cluster
                .nodes_mut()
                .iter_mut()
                .find(|n| n.port() == port)
                .ok_or("no primary for the lock's slot")?;
            node.kill();
            Ok(())
        }
        Action::StartNodes => {
            for node in cluster.nodes_mut().iter_mut().filter(|n| !n.is_running()) {
                node.restart();
            }
            cluster.wait_ok();
            Ok(())
        }
        Action::Failover => {
            let primary = cluster.primary_for_slot(slot);
            let replicas = cluster.replicas_of(primary);
            let replica = replicas
                .iter()
                .find(|r| r.is_running())
                .ok_or("the lock's primary has no running replica")?;
            cluster.failover(replica);
            Ok(())
        }
        Action::MigrateSlot => {
            let from = cluster.primary_for_slot(slot).port();
            let targets: Vec<_> = cluster
                .primaries()
                .into_iter()
                .filter(|p| p.port() != from && p.is_running())
                .collect();
            let to = targets
                .get(pick % targets.len().max(1))
                .ok_or("no other primary to move the slot to")?;
            cluster.migrate_slot(slot, to);
            Ok(())
        }
        _ => Err("not a cluster change".into()),
    }
}
