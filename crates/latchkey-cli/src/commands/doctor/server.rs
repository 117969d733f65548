//! `latchkey doctor`'s checks of one server (a Redis Cluster runs them on
//! each primary): `version`, `eviction`, `persistence`, `replication`,
//! `clock`, `latency`; why each verdict is in `mod.rs`.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::aio::ConnectionLike;

use crate::commands::doctor::check::Check;
use crate::commands::doctor::managed::{config, parameter_group};
use crate::support::duration::human;

/// The p99 round trip above which `latency` WARNs.
const SLOW_P99: Duration = Duration::from_millis(50);
/// The clock offset above which `clock` WARNs.
const CLOCK_WARN: Duration = Duration::from_secs(1);

/// The `INFO` fields we look at, or why we could not read them.
pub(crate) struct Info(Result<HashMap<String, String>, String>);

impl Info {
    pub(crate) async fn fetch(conn: &mut impl ConnectionLike) -> Info {
        let mut fields = HashMap::new();
        // One section per call: Redis before 7.0 takes only one.
        for section in ["server", "memory", "persistence", "replication", "cluster"] {
            let text: String = match redis::cmd("INFO").arg(section).query_async(conn).await {
                Ok(text) => text,
                Err(e) => return Info(Err(format!("cannot read INFO {section}: {e}"))),
            };
            for line in text.lines() {
                if let Some((k, v)) = line.trim().split_once(':') {
                    fields.insert(k.to_owned(), v.to_owned());
                }
            }
        }
        Info(Ok(fields))
    }

    /// The field, or a WARN check explaining why it is unknown.
    fn get(&self, name: &'static str, field: &str) -> Result<&str, Check> {
        match &self.0 {
            Ok(fields) => fields.get(field).map(String::as_str).ok_or_else(|| {
                Check::warn(
                    name,
                    format!("INFO has no {field} field"),
                    "check this by hand",
                )
            }),
            Err(why) => Err(Check::warn(
                name,
                why.clone(),
                "allow INFO for this user, or check by hand",
            )),
        }
    }
}

pub(crate) fn version(info: &Info) -> Check {
    let version = match info.get("version", "redis_version") {
        Ok(v) => v,
        Err(check) => return check,
    };
    // Valkey 8 and later report the Redis version they are compatible with
    // (7.2.4) as redis_version, and their own as valkey_version.
    let valkey = info
        .get("version", "server_name")
        .is_ok_and(|n| n == "valkey");
    if let Ok(own) = info.get("version", "valkey_version") {
        return Check::pass("version", format!("Valkey {own}"));
    }
    let name = if valkey { "Valkey" } else { "Redis" };
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    let least = if valkey { (7, 2) } else { (7, 0) };
    if (major, minor) >= least {
        Check::pass("version", format!("{name} {version}"))
    } else {
        // `SET key token NX PX ttl GET` (a plain acquisition) is 7.0+; the
        // library refuses such a server at connect, so this is for a
        // version that only INFO tells.
        Check::fail(
            "version",
            format!("{name} {version}: latchkey needs Redis 7.0 or later, or Valkey 7.2 or later (SET … NX … GET)"),
            "upgrade the server",
        )
    }
}

/// `config_refused`: why `CONFIG GET` is refused, if it is (a managed
/// service): the fix then names the parameter to set.
pub(crate) fn eviction(info: &Info, config_refused: Option<&str>) -> Check {
    const NAME: &str = "eviction";
    let policy = match info.get(NAME, "maxmemory_policy") {
        Ok(p) => p,
        Err(check) => return check,
    };
    let limit = match info
        .get(NAME, "maxmemory")
        .ok()
        .and_then(|m| m.parse::<u64>().ok())
    {
        Some(0) => " (maxmemory is 0 now, but a limit can be set at any time)",
        _ => "",
    };
    let fix = match config_refused {
        None => "CONFIG SET maxmemory-policy noeviction (and set it in redis.conf), or keep locks in a Redis of their own".to_owned(),
        Some(_) => format!("{} (ElastiCache's default groups use volatile-lru), or keep locks in a Redis of their own", parameter_group("maxmemory-policy to noeviction")),
    };
    let fix = fix.as_str();
    if policy == "noeviction" {
        Check::pass(
            NAME,
            "maxmemory-policy noeviction: a full server refuses writes instead of evicting lock keys",
        )
    } else if policy.starts_with("allkeys-") {
        Check::fail(
            NAME,
            format!("maxmemory-policy {policy} evicts any key when memory is full, lock keys and fencing counters included: a held lock can vanish and a second holder get it{limit}"),
            fix,
        )
    } else if policy.starts_with("volatile-") {
        Check::fail(
            NAME,
            format!("maxmemory-policy {policy} evicts keys with a TTL when memory is full, and every lock key has one: a held lock can vanish and a second holder get it{limit}"),
            fix,
        )
    } else {
        Check::warn(
            NAME,
            format!("unknown maxmemory-policy {policy}"),
            "use noeviction",
        )
    }
}

pub(crate) async fn persistence(info: &Info, conn: &mut impl ConnectionLike) -> Check {
    const NAME: &str = "persistence";
    let fix = "appendonly yes with appendfsync always, or keep a crashed Redis down for longer than your longest lock TTL before restarting it";
    let aof = match info.get(NAME, "aof_enabled") {
        Ok(aof) => aof == "1",
        Err(check) => return check,
    };
    if !aof {
        let (what, fix) = match config(conn, "save").await {
            Ok(save) if info.get(NAME, "rdb_last_save_time").is_ok() && save.as_deref().is_some_and(|s| !s.is_empty()) => {
                ("RDB snapshots only".to_owned(), fix.to_owned())
            }
            Ok(_) => ("no persistence".to_owned(), fix.to_owned()),
            Err(why) => (
                format!("RDB snapshots could not be checked ({why}), and no AOF"),
                format!("{}, where the service offers AOF; or keep a crashed server down for longer than your longest lock TTL", parameter_group("appendonly yes and appendfsync always")),
            ),
        };
        return Check::warn(
            NAME,
            format!("{what}: a restart frees locks while their holders still run (fencing tokens stay monotonic: they never fall below the server clock)"),
            fix,
        );
    }
    match config(conn, "appendfsync").await {
        Ok(Some(policy)) if policy == "always" => Check::pass(NAME, "AOF with appendfsync always: locks and fencing counters survive a crash"),
        Ok(Some(policy)) => Check::warn(
            NAME,
            format!("AOF with appendfsync {policy}: a crash can lose the latest acquisitions, freeing locks whose holders still run"),
            fix,
        ),
        Ok(None) => Check::warn(NAME, "AOF is on, but the server has no appendfsync parameter: fsync policy unknown", "check appendfsync by hand; always is safest"),
        Err(why) => Check::warn(
            NAME,
            format!("AOF is on, but its fsync policy could not be checked: {why}"),
            format!("check appendfsync in the service's settings; always is safest ({})", parameter_group("appendfsync always")),
        ),
    }
}

pub(crate) fn replication(info: &Info) -> Check {
    const NAME: &str = "replication";
    let role = match info.get(NAME, "role") {
        Ok(role) => role,
        Err(check) => return check,
    };
    if role != "master" {
        let primary = match (info.get(NAME, "master_host"), info.get(NAME, "master_port")) {
            (Ok(h), Ok(p)) => format!(" of {h}:{p}"),
            _ => String::new(),
        };
        return Check::fail(
            NAME,
            format!("this server is a replica{primary}: locks must be taken on the primary"),
            "point latchkey at the primary",
        );
    }
    let replicas: u32 = info
        .get(NAME, "connected_slaves")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    if replicas == 0 {
        Check::pass(NAME, "primary without replicas: no failover can lose a lock (but the server is a single point of failure)")
    } else {
        Check::warn(
            NAME,
            format!("{replicas} replica(s), replicated asynchronously: a failover can promote a replica that never saw a lock, and two holders run at once"),
            "use Redlock over independent primaries (several --redis URLs), or pass fencing tokens to the protected resource",
        )
    }
}

pub(crate) async fn clock(conn: &mut impl ConnectionLike) -> Check {
    const NAME: &str = "clock";
    let before = SystemTime::now();
    let sent = Instant::now();
    let reply: redis::RedisResult<(u64, u64)> = redis::cmd("TIME").query_async(conn).await;
    let rtt = sent.elapsed();
    let (secs, micros) = match reply {
        Ok(t) => t,
        Err(e) => {
            return Check::warn(
                NAME,
                format!("TIME failed: {e}"),
                "allow TIME for this user",
            )
        }
    };
    let server = Duration::from_secs(secs) + Duration::from_micros(micros);
    // The server read its clock somewhere during the round trip: assume the middle.
    let ours = before.duration_since(UNIX_EPOCH).unwrap_or_default() + rtt / 2;
    let (offset, direction) = if server >= ours {
        (server - ours, "ahead of")
    } else {
        (ours - server, "behind")
    };
    let reason = format!(
        "server clock is {} {direction} ours (± {})",
        human(offset),
        human(rtt / 2)
    );
    let trouble = (
        "one clock is not synchronised; lock ages are off, and a server clock that jumps expires locks early or late",
        "run NTP (chrony, systemd-timesyncd) on the Redis host and here",
    );
    Check::warn_unless(offset <= CLOCK_WARN, NAME, reason, trouble)
}

pub(crate) async fn latency(conn: &mut impl ConnectionLike, pings: u32) -> Check {
    const NAME: &str = "latency";
    let mut rtts = Vec::with_capacity(pings as usize);
    for _ in 0..pings {
        let sent = Instant::now();
        let reply: redis::RedisResult<String> = redis::cmd("PING").query_async(conn).await;
        if let Err(e) = reply {
            return Check::fail(
                NAME,
                format!("PING failed: {e}"),
                "check the network and the server's load",
            );
        }
        rtts.push(sent.elapsed());
    }
    rtts.sort();
    let at = |q: f64| rtts[((rtts.len() - 1) as f64 * q).round() as usize];
    let (p50, p99) = (at(0.50), at(0.99));
    let reason = format!(
        "round trip p50 {}, p99 {} over {pings} PINGs",
        human(p50),
        human(p99)
    );
    let trouble = (
        "every acquire, renewal and release costs one round trip",
        "run latchkey close to Redis, and keep lock TTLs at least 100 times the p99",
    );
    Check::warn_unless(p99 <= SLOW_P99, NAME, reason, trouble)
}
