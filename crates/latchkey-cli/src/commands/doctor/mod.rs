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
//!   a lock's commands: WARN (see `cluster.rs`).
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
//!   ACL rule valid for this user otherwise (see `acl.rs`).
//! * **append** — without `APPEND` waiters cannot mark a lock as waited
//!   for, and wake only by polling (at worst at the holder's TTL): WARN.
//! * **redlock** (several URLs) — an even number of servers tolerates no
//!   more failures than one server fewer: WARN.
//! * **subscribe** — waiters subscribe to release channels; without it they
//!   poll: WARN.
//! * **acl**, **primitives** — the user against `docs/security.md`'s rules
//!   (`ACL DRYRUN`; see `rule.rs`): `primitives` only WARNs, since
//!   plain locks need none of what it checks.

mod acl;
mod check;
mod cluster;
mod managed;
mod rule;
mod server;
mod target;

use clap::Args;
use latchkey::Client;

use crate::commands::doctor::check::{Check, Level};
use crate::commands::doctor::server::{
    clock, eviction, latency, persistence, replication, version, Info,
};
use crate::support::exit::{self, Outcome};
use crate::support::target::{redact, Target};

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// How many PINGs to time for the latency check.
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000), allow_negative_numbers = true)]
    pub pings: u32,
}

pub async fn doctor(target: &Target, args: DoctorArgs) -> Outcome {
    let urls = target.urls();
    let mut failed = false;
    if let Some(why) = crate::support::target::redlock_size_warning(urls.len()) {
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
        let client = match target::connect(target, url).await? {
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
        // A probe lock whose release failed is retried in the background
        // (`target::connect` does not register the client for the
        // exit's flush): let it land rather than leave the probe held.
        client.flush(std::time::Duration::from_secs(3)).await;
    }
    Ok(if failed { exit::CONFLICT } else { exit::OK })
}

async fn checks(client: &Client, target: &Target, url: &str, pings: u32) -> Vec<Check> {
    let mut conn = client.connection();
    if conn.is_cluster() {
        let raw = target.tls.redis_client(url);
        return crate::commands::doctor::cluster::checks(client, raw, url, pings).await;
    }
    let info = Info::fetch(&mut conn).await;
    let config_refused = managed::config_refused(&mut conn).await;
    let user = target::whoami(&mut conn, url).await;
    // After a command went through: the primary a Sentinel named is known.
    let raw = target::probe_url(target, url, client);
    vec![
        version(&info),
        eviction(&info, config_refused.as_deref()),
        persistence(&info, &mut conn).await,
        replication(&info),
        Check::pass("cluster", "not a cluster"),
        clock(&mut conn).await,
        latency(&mut conn, pings).await,
        rule::check(client, &mut conn, &user).await,
        rule::primitives(client, &mut conn, &user).await,
        acl::scripts(client, &mut conn, &user).await,
        acl::append(client, &mut conn, &user).await,
        acl::subscribe(client, &target.tls, raw, &user).await,
    ]
}
