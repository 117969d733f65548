//! `latchkey doctor` on a Redis Cluster: the server checks on every primary,
//! and the cluster's own health.
//!
//! A lock lives on the primary that serves its slot, so each primary must be
//! safe on its own: `version`, `eviction`, `persistence`, `replication`,
//! `clock` and `latency` run against each of them (found with `CLUSTER
//! NODES`, reached directly with the URL's credentials and TLS options), one line per check
//! and node, the node named first. The `cluster` line PASSes when `CLUSTER
//! INFO` says `cluster_state:ok`, all 16384 slots are assigned and no
//! primary is marked failed; otherwise some locks' commands are refused
//! (`CLUSTERDOWN`): WARN. `acl`, `primitives`, `scripts`, `append` and `subscribe` run
//! once, through the cluster client, as a lock would.
//!
//! What a cluster does differently (sharded pub/sub; `signal --one`, waiter
//! counts and pattern waits refused) is said in the `cluster` line: a
//! property of the deployment, not a fault, so not a WARN.

use latchkey::Client;
use redis::ConnectionAddr;

use crate::commands::doctor::acl;
use crate::commands::doctor::check::Check;
use crate::commands::doctor::server::{self as doctor, Info};

/// All checks for a cluster reached through `url`.
pub(crate) async fn checks(
    client: &Client,
    raw: redis::RedisResult<redis::Client>,
    url: &str,
    pings: u32,
) -> Vec<Check> {
    let mut conn = client.connection();
    let nodes: redis::RedisResult<String> = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut conn)
        .await;
    let info: redis::RedisResult<String> = redis::cmd("CLUSTER")
        .arg("INFO")
        .query_async(&mut conn)
        .await;
    let mut checks = Vec::new();
    let primaries = match &nodes {
        Ok(text) => primaries(text),
        Err(_) => Vec::new(),
    };
    checks.push(health(&nodes, &info, primaries.len()));
    for primary in &primaries {
        checks.extend(node_checks(&raw, primary, pings).await);
    }
    let user = crate::commands::doctor::target::whoami(&mut conn, url).await;
    checks.push(crate::commands::doctor::rule::check(client, &mut conn, &user).await);
    checks.push(crate::commands::doctor::rule::primitives(client, &mut conn, &user).await);
    checks.push(acl::scripts(client, &mut conn, &user).await);
    checks.push(acl::append(client, &mut conn, &user).await);
    checks.push(acl::subscribe_with(client, raw, &user).await);
    checks
}

/// A primary of the cluster, as `CLUSTER NODES` lists it.
struct Primary {
    host: String,
    port: u16,
    failed: bool,
}

fn primaries(nodes: &str) -> Vec<Primary> {
    nodes
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (addr, flags) = (fields.get(1)?, fields.get(2)?);
            let flags: Vec<&str> = flags.split(',').collect();
            if !flags.contains(&"master") || flags.contains(&"noaddr") {
                return None;
            }
            // `ip:port@cport[,hostname]`
            let (host, port) = addr.split('@').next()?.rsplit_once(':')?;
            Some(Primary {
                host: host.to_owned(),
                port: port.parse().ok()?,
                failed: flags.contains(&"fail") || flags.contains(&"fail?"),
            })
        })
        .collect()
}

fn health(
    nodes: &redis::RedisResult<String>,
    info: &redis::RedisResult<String>,
    primaries: usize,
) -> Check {
    const NAME: &str = "cluster";
    let (nodes, info) = match (nodes, info) {
        (Ok(nodes), Ok(info)) => (nodes, info),
        (Err(e), _) | (_, Err(e)) => return Check::warn(
            NAME,
            format!("a Redis Cluster, but CLUSTER NODES/INFO failed: {e}"),
            "allow CLUSTER for this user, or check the cluster by hand (redis-cli --cluster check)",
        ),
    };
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
            .unwrap_or("?")
            .to_owned()
    };
    let (state, assigned) = (field("cluster_state"), field("cluster_slots_assigned"));
    let failed = self::primaries(nodes).iter().filter(|p| p.failed).count();
    if state != "ok" || assigned != "16384" || failed > 0 {
        return Check::warn(
            NAME,
            format!("cluster_state {state}, {assigned} of 16384 slots assigned, {failed} primary(ies) marked failed: locks in uncovered slots are refused (CLUSTERDOWN)"),
            "redis-cli --cluster check / fix, and replace failed primaries",
        );
    }
    Check::pass(
        NAME,
        format!("a healthy Redis Cluster of {primaries} primaries (cluster_state ok, all slots assigned): locks, fencing, the watchdog and waiting work, each lock's keys in one slot; wake-ups and signals use sharded pub/sub; `signal --one`, waiter counts and pattern waits are refused"),
    )
}

/// The server checks against one primary, reached directly.
async fn node_checks(
    seed: &redis::RedisResult<redis::Client>,
    primary: &Primary,
    pings: u32,
) -> Vec<Check> {
    let node = format!("{}:{}", primary.host, primary.port);
    let named = |mut check: Check| {
        check.reason = format!("{node}: {}", check.reason);
        check
    };
    // The seed's client, TLS options and credentials included, aimed at
    // this primary.
    let direct = match seed {
        Ok(seed) => {
            let info = seed.get_connection_info().clone();
            let addr = match info.addr().clone() {
                ConnectionAddr::TcpTls {
                    insecure,
                    tls_params,
                    ..
                } => ConnectionAddr::TcpTls {
                    host: primary.host.clone(),
                    port: primary.port,
                    insecure,
                    tls_params,
                },
                _ => ConnectionAddr::Tcp(primary.host.clone(), primary.port),
            };
            redis::Client::open(info.set_addr(addr))
        }
        Err(e) => Err(e.clone()),
    };
    let mut conn = match direct {
        Ok(client) => match client.get_multiplexed_async_connection().await {
            Ok(conn) => conn,
            Err(e) => return vec![named(unreachable(e))],
        },
        Err(e) => return vec![named(unreachable(e))],
    };
    let info = Info::fetch(&mut conn).await;
    let config_refused = crate::commands::doctor::managed::config_refused(&mut conn).await;
    vec![
        named(doctor::version(&info)),
        named(doctor::eviction(&info, config_refused.as_deref())),
        named(doctor::persistence(&info, &mut conn).await),
        named(doctor::replication(&info)),
        named(doctor::clock(&mut conn).await),
        named(doctor::latency(&mut conn, pings).await),
    ]
}

fn unreachable(e: redis::RedisError) -> Check {
    Check::fail(
        "node",
        format!("cannot reach this primary directly: {e}"),
        "make every primary's announced address reachable from here",
    )
}
