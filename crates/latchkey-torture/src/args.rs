//! The command line of `latchkey torture`: [`TortureArgs`] (a clap
//! `Args`, flattened into the CLI as its `torture` subcommand) and its
//! help.

use std::time::Duration;

use crate::cli_text::parse_duration;
use crate::faults::Fault;

pub(crate) const HELP: &str = "\
Faults (--fault NAME, repeatable; default: all, each alone, then mixed):
  kill              kill -9 the holder (it is restarted as a new process)
  pause             SIGSTOP the holder for 2 x TTL, then SIGCONT
  restart           crash and restart Redis without persistence
  restart-aof       crash and restart Redis with AOF, fsync always
  blackhole         silence the holder's network link for 1.5 x TTL
  delay             delay the holder's link by TTL/5 each way for 2 x TTL
  clock             jump the holder's wall clock by an hour (needs libfaketime)
  script-flush      SCRIPT FLUSH
  delete-key        DEL the lock key under the holder
  overwrite-key     SET the lock key to a foreign value under the holder
  pubsub-kill       CLIENT KILL TYPE pubsub
  redlock-minority  Redlock over 3 instances: crash one, restart it empty
With --cluster (a private 3-primary cluster, a replica each; the single-server
faults above are left out):
  primary-kill      kill -9 the lock's primary; its replica takes over
  failover          CLUSTER FAILOVER on the lock's replica
  slot-migration    move the lock's slot, keys included, to another primary
With --sentinel-set:
  failover          SENTINEL FAILOVER (each takes about 10 s)

A control scenario (no fencing, pause) always runs and must show violations.
--workload election: the workers campaign in an election instead (the term is
the fencing token; delete-key and overwrite-key hit the leader's lease);
--workload semaphore: one permit of a semaphore (delete-key and overwrite-key
hit its permits); --workload rwlock: the write side of a read-write lock (they
hit its writer key); --workload multi: several locks at once (Client::lock_all:
the scenario's lock and one or two more, each worker naming its set in its own
order; the faults hit the lock every set shares; each lock's resource is
checked with that lock's fencing token). Each holds with a fencing token issued
with the hold (multi: half of the workers, the others on request); single
server or cluster only (no Redlock, no redlock-minority). With --cluster the
multi workload's locks are in different slots: taken one after the other.
--workload cached: a lock that the odd workers keep while idle
(Lock::with_caching, for 4 TTLs) and the even ones take plainly: each local
hold of a keeper asks Redis for its own fencing token; a keeper gives the lock
back when another worker's wait marks it (wanted).

Exit codes:
    0  every must-hold figure held
    1  a must-hold figure failed (see the verdict column)
    2  usage error
   69  Redis unavailable, or no redis-server to start
   70  internal error";

/// `latchkey torture`.
#[derive(clap::Args, Debug)]
#[command(after_help = HELP)]
pub struct TortureArgs {
    /// The CI profile: every scenario for 2.5s with a 500ms TTL (under a minute in all).
    #[arg(long)]
    pub(crate) quick: bool,

    /// Plain writes instead of fenced ones in every scenario; violations are
    /// then expected: reported, not failures.
    #[arg(long)]
    pub(crate) no_fencing: bool,

    /// Run on a private Redis Cluster (3 primaries, a replica each) instead
    /// of a single server, with the cluster's faults (primary-kill,
    /// failover, slot-migration) beside those of any server.
    #[arg(long)]
    pub(crate) cluster: bool,

    /// What the workers contend for: `lock` (a lock, the default),
    /// `election` (campaign, lead with the term as fencing token, resign),
    /// `semaphore` (one permit of N = 1), `rwlock` (the write side) or
    /// `multi` (several locks at once, `Client::lock_all`) or `cached`
    /// (half of the workers keep the lock while idle, `Lock::with_caching`).
    #[arg(long, value_name = "KIND", default_value = "lock", value_parser = ["lock", "election", "semaphore", "rwlock", "multi", "cached"])]
    pub(crate) workload: String,

    /// Inject only this fault (repeatable): each alone, then all mixed.
    #[arg(long = "fault", value_name = "NAME", value_parser = parse_fault)]
    pub(crate) faults: Vec<Fault>,

    /// Seed of the fault schedule and the workers' timings, for a replay.
    #[arg(long, value_name = "N")]
    pub(crate) seed: Option<u64>,

    /// Worker processes contending for the lock.
    #[arg(long, value_name = "W", default_value_t = 4, value_parser = clap::value_parser!(u32).range(2..=64))]
    pub(crate) workers: u32,

    /// How long each scenario runs [default: 60s; with --quick: 2.5s; the
    /// control at least 6s].
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub(crate) duration: Option<Duration>,

    /// The lock on a private Sentinel set (a primary, a replica, 3
    /// Sentinels), reached through the Sentinels; adds the failover fault.
    /// Not with --redis. (Not `--sentinel`: that names the user's Sentinels.)
    #[arg(long = "sentinel-set")]
    pub(crate) sentinel_set: bool,

    /// With --sentinel-set: every acquisition waits until the replica
    /// acknowledges it (Lock::with_replicas).
    #[arg(long = "with-replicas", requires = "sentinel_set")]
    pub(crate) with_replicas: bool,

    /// The lock's TTL [default: 1s; with --quick: 500ms].
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub(crate) ttl: Option<Duration>,

    /// Every worker uses a fair lock (`Lock::fair`: a queue in Redis, the
    /// lock handed to the next waiter by the release); Redlock scenarios
    /// are skipped (a Redlock cannot be fair).
    #[arg(long)]
    pub(crate) fair: bool,
}

fn parse_fault(name: &str) -> Result<Fault, String> {
    Fault::parse(name).ok_or_else(|| {
        let names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
        format!("unknown fault {name:?}; known: {}", names.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_names_every_fault() {
        for f in Fault::ALL {
            assert!(
                HELP.contains(&format!("\n  {:<18}", f.name())),
                "{f:?} missing from --help"
            );
        }
    }
}
