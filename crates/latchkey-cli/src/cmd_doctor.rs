//! `latchkey doctor`: is this Redis safe to keep locks in?
//!
//! ```text
//! $ latchkey doctor
//! PASS  version           Redis 7.0.15
//! FAIL  eviction          maxmemory-policy allkeys-lru evicts any key when memory is full, lock keys included: a held lock can vanish and a second holder get it. Fix: CONFIG SET maxmemory-policy noeviction (and in redis.conf)
//! WARN  persistence       no AOF: a restart frees every lock while holders still run, and forgets fencing counters. Fix: appendonly yes with appendfsync always, or keep a crashed Redis down longer than your longest lock TTL
//! ...
//! ```
//!
//! One line per check: PASS, WARN (safe only under conditions the reason
//! names) or FAIL (locks can be lost or cannot work). Exit 0 when nothing
//! FAILed, 1 otherwise; with several `--redis` URLs every server is checked.
//!
//! Why each verdict:
//! * **eviction** — every lock key has a TTL, so every `volatile-*` policy
//!   (`volatile-ttl` first of all: locks are the keys closest to expiry) may
//!   evict held locks, and every `allkeys-*` policy may evict locks *and*
//!   fencing counters: FAIL, even while `maxmemory` is 0, because a limit can
//!   be set at runtime by someone thinking about caches, not locks.
//!   `noeviction` makes a full server refuse writes (an acquire fails
//!   loudly): PASS.
//! * **persistence** — without AOF a restart frees every lock while its
//!   holder still runs (fencing tokens stay monotonic: they never fall
//!   below the server's clock in µs). `appendfsync always` keeps every
//!   acquisition: PASS; `everysec`/`no` can lose the latest ones: WARN.
//! * **replication** — replication is asynchronous: a failover can promote a
//!   replica that never saw a lock (WARN); pointing at a replica cannot work
//!   (FAIL).
//! * **cluster** — on a Redis Cluster every primary gets the server checks
//!   above (each line names its node), and the cluster itself PASSes when
//!   its state is `ok` with every slot served by a primary that is up; a
//!   cluster that is not (a failed primary, unassigned slots) can refuse
//!   a lock's commands: WARN (see `doctor_cluster.rs`).
//! * **clock** — lock validity never depends on wall clocks, but a server
//!   clock far from ours means one of them is not synchronised, and a
//!   server clock that jumps expires keys early or late: WARN beyond 1 s.
//! * **latency** — every acquire, renewal and release is a round trip:
//!   WARN when the p99 of PINGs exceeds 50 ms; FAIL when PINGs fail.
//! * **scripts** — acquiring and releasing a probe lock exercises `EVALSHA`,
//!   `EVAL`, `SET`, `GET`, `DEL`, `PUBLISH` and the key and channel
//!   permissions of the ACL user (trying is the only check that also works
//!   for users without `ACL DRYRUN` rights): FAIL on refusal, with the
//!   real fix for an out-of-memory server or a read-only replica, and an
//!   ACL rule valid for this user otherwise (see `doctor_acl.rs`).
//! * **append** — without `APPEND` waiters cannot mark a lock as waited
//!   for, and wake only by polling (at worst at the holder's TTL): WARN.
//! * **redlock** (several URLs) — an even number of servers tolerates no
//!   more failures than one server fewer: WARN.
//! * **subscribe** — waiters subscribe to release channels; without it they
//!   poll: WARN.
//! * **acl**, **primitives** — the user against `docs/security.md`'s rules
//!   (`ACL DRYRUN`; see `doctor_rule.rs`): `primitives` only WARNs, since
//!   plain locks need none of what it checks.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use latchkey::Client;
use redis::aio::ConnectionLike;

use crate::connect::{redact, Target};
use crate::duration::human;
use crate::exit::{self, Outcome};
use crate::{doctor_acl, doctor_rule, doctor_target};

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// How many PINGs to time for the latency check.
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub pings: u32,
}

/// The p99 round trip above which `latency` WARNs.
const SLOW_P99: Duration = Duration::from_millis(50);
/// The clock offset above which `clock` WARNs.
const CLOCK_WARN: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Pass,
    Warn,
    Fail,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Level::Pass => "PASS",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        })
    }
}

pub struct Check {
    pub(crate) level: Level,
    name: &'static str,
    pub(crate) reason: String,
    fix: Option<String>,
}

impl Check {
    pub fn pass(name: &'static str, reason: impl Into<String>) -> Check {
        Check {
            level: Level::Pass,
            name,
            reason: reason.into(),
            fix: None,
        }
    }

    pub fn warn(name: &'static str, reason: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            level: Level::Warn,
            name,
            reason: reason.into(),
            fix: Some(fix.into()),
        }
    }

    pub fn fail(name: &'static str, reason: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            level: Level::Fail,
            name,
            reason: reason.into(),
            fix: Some(fix.into()),
        }
    }

    pub(crate) fn print(&self) {
        let fix = self
            .fix
            .as_ref()
            .map(|f| format!(". Fix: {f}"))
            .unwrap_or_default();
        println!("{:<4}  {:<12}  {}{fix}", self.level, self.name, self.reason);
    }
}

pub async fn doctor(target: &Target, args: DoctorArgs) -> Outcome {
    let urls = target.urls();
    let mut failed = false;
    if let Some(why) = crate::connect::redlock_size_warning(urls.len()) {
        Check::warn(
            "redlock",
            why,
            "use an odd number of independent servers, at least 3",
        )
        .print();
    }
    for url in &urls {
        if urls.len() > 1 {
            println!("== {} ==", redact(url));
        }
        let client = match doctor_target::connect(target, url).await? {
            Ok(client) => client,
            Err(refused) => {
                refused.print();
                failed = true;
                continue;
            }
        };
        for check in checks(&client, target, url, args.pings).await {
            check.print();
            failed |= check.level == Level::Fail;
        }
    }
    Ok(if failed { exit::CONFLICT } else { exit::OK })
}

async fn checks(client: &Client, target: &Target, url: &str, pings: u32) -> Vec<Check> {
    let mut conn = client.connection();
    if conn.is_cluster() {
        let raw = target.tls.redis_client(url);
        return crate::doctor_cluster::checks(client, raw, url, pings).await;
    }
    let info = Info::fetch(&mut conn).await;
    let user = doctor_target::whoami(&mut conn, url).await;
    // After a command went through: the primary a Sentinel named is known.
    let raw = doctor_target::probe_url(target, url, client);
    vec![
        version(&info),
        eviction(&info),
        persistence(&info, &mut conn).await,
        replication(&info),
        Check::pass("cluster", "not a cluster"),
        clock(&mut conn).await,
        latency(&mut conn, pings).await,
        doctor_rule::check(client, &mut conn, &user).await,
        doctor_rule::primitives(client, &mut conn, &user).await,
        doctor_acl::scripts(client, &mut conn, &user).await,
        doctor_acl::append(client, &mut conn, &user).await,
        doctor_acl::subscribe(client, &target.tls, raw, &user).await,
    ]
}

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
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major >= 7 {
        Check::pass("version", format!("Redis {version}"))
    } else {
        // `SET key token NX PX ttl GET` (a plain acquisition) is 7.0+.
        Check::fail(
            "version",
            format!("Redis {version}: acquiring needs SET … NX … GET (Redis 7.0+)"),
            "upgrade to Redis 7.0 or later",
        )
    }
}

pub(crate) fn eviction(info: &Info) -> Check {
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
    let fix = "CONFIG SET maxmemory-policy noeviction (and set it in redis.conf), or keep locks in a Redis of their own";
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
        let snapshots = info.get(NAME, "rdb_last_save_time").is_ok()
            && config(conn, "save").await.is_some_and(|s| !s.is_empty());
        let what = if snapshots {
            "RDB snapshots only"
        } else {
            "no persistence"
        };
        return Check::warn(
            NAME,
            format!("{what}, no AOF: a restart frees locks while their holders still run (fencing tokens stay monotonic: they never fall below the server clock)"),
            fix,
        );
    }
    match config(conn, "appendfsync").await.as_deref() {
        Some("always") => Check::pass(NAME, "AOF with appendfsync always: locks and fencing counters survive a crash"),
        Some(policy) => Check::warn(
            NAME,
            format!("AOF with appendfsync {policy}: a crash can lose the latest acquisitions, freeing locks whose holders still run"),
            fix,
        ),
        None => Check::warn(NAME, "AOF is on, but CONFIG GET appendfsync is not allowed: fsync policy unknown", "check appendfsync by hand; always is safest"),
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
    if offset <= CLOCK_WARN {
        Check::pass(NAME, reason)
    } else {
        Check::warn(
            NAME,
            format!("{reason}: one clock is not synchronised; lock ages are off, and a server clock that jumps expires locks early or late"),
            "run NTP (chrony, systemd-timesyncd) on the Redis host and here",
        )
    }
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
    if p99 <= SLOW_P99 {
        Check::pass(NAME, reason)
    } else {
        Check::warn(
            NAME,
            format!("{reason}: every acquire, renewal and release costs one round trip"),
            "run latchkey close to Redis, and keep lock TTLs at least 100 times the p99",
        )
    }
}

/// `CONFIG GET name`, or `None` when CONFIG is not allowed (managed services).
async fn config(conn: &mut impl ConnectionLike, name: &str) -> Option<String> {
    let reply: redis::RedisResult<Vec<String>> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query_async(conn)
        .await;
    reply.ok().and_then(|pair| pair.into_iter().nth(1))
}
