//! The faults, and the schedule of one injection: what to do, how long to
//! leave it, and how to undo it.
//!
//! ```text
//! pause:  SIGSTOP the holder ── 2 × TTL ── SIGCONT
//! delete-key:  DEL the lock key (instantaneous)
//! redlock-minority:  kill -9 one of 3 instances ── TTL ── restart it (empty)
//! ```
//!
//! [`steps`] is pure (a fault, a victim, the TTL and a random source in; a
//! list of [`Action`]s out), so a seed replays the same schedule; the
//! scenario runner carries the actions out.

use std::time::Duration;

use latchkey_testkit::ProxyMode;

use super::rng::Rng;

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    Kill,
    Pause,
    Restart,
    RestartAof,
    Blackhole,
    Delay,
    Clock,
    ScriptFlush,
    DeleteKey,
    OverwriteKey,
    PubsubKill,
    RedlockMinority,
    PrimaryKill,
    Failover,
    SlotMigration,
}

/// What a fault needs from the environment; a scenario whose fault cannot
/// have it is skipped with a note.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    /// A redis-server of our own (we restart it, or run commands that touch
    /// every client of the server).
    pub private_server: bool,
    /// A TCP proxy per worker (not possible for `rediss://`).
    pub proxy: bool,
    /// libfaketime.
    pub faketime: bool,
    /// Three Redlock instances of our own.
    pub redlock: bool,
    /// The lock server runs with AOF, fsync always.
    pub aof: bool,
    /// A Redis Cluster of our own (`--cluster`): 3 primaries, a replica each.
    pub cluster: bool,
    /// One server (or Redlock's several): not a cluster.
    pub single: bool,
    /// A deployment that can fail over: a private cluster (`--cluster`) or
    /// Sentinel set (`--sentinel-set`).
    pub replicated: bool,
}

impl Fault {
    pub const ALL: [Fault; 15] = [
        Fault::Kill,
        Fault::Pause,
        Fault::Restart,
        Fault::RestartAof,
        Fault::Blackhole,
        Fault::Delay,
        Fault::Clock,
        Fault::ScriptFlush,
        Fault::DeleteKey,
        Fault::OverwriteKey,
        Fault::PubsubKill,
        Fault::RedlockMinority,
        Fault::PrimaryKill,
        Fault::Failover,
        Fault::SlotMigration,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::Pause => "pause",
            Fault::Restart => "restart",
            Fault::RestartAof => "restart-aof",
            Fault::Blackhole => "blackhole",
            Fault::Delay => "delay",
            Fault::Clock => "clock",
            Fault::ScriptFlush => "script-flush",
            Fault::DeleteKey => "delete-key",
            Fault::OverwriteKey => "overwrite-key",
            Fault::PubsubKill => "pubsub-kill",
            Fault::RedlockMinority => "redlock-minority",
            Fault::PrimaryKill => "primary-kill",
            Fault::Failover => "failover",
            Fault::SlotMigration => "slot-migration",
        }
    }

    pub fn parse(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.name() == name)
    }

    /// One line for `--help` and the report.
    pub fn about(self) -> &'static str {
        match self {
            Fault::Kill => "kill -9 the holder (it is restarted as a new process)",
            Fault::Pause => "SIGSTOP the holder for 2 x TTL, then SIGCONT",
            Fault::Restart => "crash (kill -9) and restart Redis without persistence: the lock and the fencing counter vanish",
            Fault::RestartAof => "crash and restart Redis with AOF, fsync always: both survive",
            Fault::Blackhole => "silence the holder's network link for 1.5 x TTL",
            Fault::Delay => "delay the holder's link by TTL/5 each way for 2 x TTL",
            Fault::Clock => "jump the holder's wall clock by an hour, forward or back, for 2 x TTL (libfaketime)",
            Fault::ScriptFlush => "SCRIPT FLUSH on the lock server",
            Fault::DeleteKey => "DEL the lock key under the holder",
            Fault::OverwriteKey => "SET the lock key to a foreign value (with a TTL) under the holder",
            Fault::PubsubKill => "CLIENT KILL TYPE pubsub: drop every wake-up connection",
            Fault::RedlockMinority => "Redlock over 3 instances: kill -9 one, restart it empty after a TTL",
            Fault::PrimaryKill => "cluster: kill -9 the lock's primary; its replica takes over; the old one rejoins as a replica",
            Fault::Failover => "a manual failover (nothing lost): CLUSTER FAILOVER on the lock's replica (--cluster), SENTINEL FAILOVER (--sentinel-set; then the old primary rejoins as a replica)",
            Fault::SlotMigration => "cluster: move the lock's slot, keys included, to another primary",
        }
    }

    pub fn needs(self) -> Needs {
        let mut needs = Needs::default();
        match self {
            Fault::Restart => {
                needs.private_server = true;
                needs.single = true;
            }
            Fault::ScriptFlush | Fault::PubsubKill => needs.private_server = true,
            Fault::RestartAof => {
                needs.private_server = true;
                needs.single = true;
                needs.aof = true;
            }
            Fault::Blackhole | Fault::Delay => {
                // A cluster client reaches the nodes at the addresses they
                // announce, not through a proxy.
                needs.proxy = true;
                needs.single = true;
            }
            Fault::Clock => needs.faketime = true,
            Fault::RedlockMinority => {
                needs.private_server = true;
                needs.single = true;
                needs.redlock = true;
            }
            Fault::PrimaryKill | Fault::SlotMigration => {
                needs.private_server = true;
                needs.cluster = true;
            }
            Fault::Failover => {
                needs.private_server = true;
                needs.replicated = true;
            }
            Fault::Kill | Fault::Pause | Fault::DeleteKey | Fault::OverwriteKey => {}
        }
        needs
    }

    /// Faults aimed at whoever holds the lock: injected right after a
    /// worker has read the resource, so they land inside its critical section.
    pub fn targets_holder(self) -> bool {
        matches!(
            self,
            Fault::Kill
                | Fault::Pause
                | Fault::Blackhole
                | Fault::Delay
                | Fault::Clock
                | Fault::DeleteKey
                | Fault::OverwriteKey
                | Fault::Restart
                | Fault::RestartAof
                | Fault::Failover
        )
    }

    /// Faults that take the lock from its holder (it dies, stops, is cut off,
    /// or its key vanishes): the time to the next acquisition is measured
    /// and bounded.
    pub fn takes_the_lock(self) -> bool {
        matches!(
            self,
            Fault::Kill
                | Fault::Pause
                | Fault::Blackhole
                | Fault::DeleteKey
                | Fault::OverwriteKey
                | Fault::Restart
        )
    }
}

/// One step of a fault, carried out by the scenario runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// SIGKILL the worker; the runner starts a new process in its place.
    Kill(u32),
    /// SIGSTOP / SIGCONT the worker.
    Stop(u32),
    Cont(u32),
    /// Set the mode of the worker's proxies.
    Proxy(u32, ProxyMode),
    /// Set the worker's wall-clock offset (libfaketime), seconds.
    Clock(u32, i64),
    /// Run a command on every lock server.
    Command(Vec<String>),
    /// kill -9 a lock server / start it again (same port and config).
    Crash(usize),
    Start(usize),
    /// Cluster: kill -9 the primary of the lock's slot.
    KillPrimary,
    /// Cluster: start every node that is down (a killed primary rejoins as
    /// a replica of the one that replaced it).
    StartNodes,
    /// Cluster: `CLUSTER FAILOVER` on a replica of the lock's primary;
    /// Sentinel set: `SENTINEL FAILOVER`, once a replica is in sync (after
    /// a failover: the old primary, about 10 s later).
    Failover,
    /// Cluster: move the lock's slot to another primary.
    MigrateSlot,
}

/// One injection: do `start`, wait `hold`, do `clear`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steps {
    pub start: Vec<Action>,
    pub hold: Duration,
    pub clear: Vec<Action>,
    /// What was done, for the report (e.g. "clock +3600s").
    pub note: String,
}

/// The steps of `fault` against worker `victim` (the holder, for faults
/// that target it) on a lock with `ttl` whose key is `lock_key`, with
/// `servers` lock servers.
pub fn steps(
    fault: Fault,
    victim: u32,
    ttl: Duration,
    lock_key: &str,
    servers: usize,
    rng: &mut Rng,
) -> Steps {
    let command = |args: &[&str]| Action::Command(args.iter().map(|a| a.to_string()).collect());
    let (start, hold, clear, note) = match fault {
        Fault::Kill => (
            vec![Action::Kill(victim)],
            Duration::ZERO,
            vec![],
            format!("killed worker {victim}"),
        ),
        Fault::Pause => (
            vec![Action::Stop(victim)],
            ttl * 2,
            vec![Action::Cont(victim)],
            format!("stopped worker {victim}"),
        ),
        Fault::Restart | Fault::RestartAof => (
            vec![Action::Crash(0), Action::Start(0)],
            Duration::ZERO,
            vec![],
            "crashed and restarted Redis".into(),
        ),
        Fault::Blackhole => (
            vec![Action::Proxy(victim, ProxyMode::Blackhole)],
            ttl * 3 / 2,
            vec![Action::Proxy(victim, ProxyMode::Pass)],
            format!("blackholed worker {victim}"),
        ),
        Fault::Delay => (
            vec![Action::Proxy(victim, ProxyMode::Delay(ttl / 5))],
            ttl * 2,
            vec![Action::Proxy(victim, ProxyMode::Pass)],
            format!("delayed worker {victim}"),
        ),
        Fault::Clock => {
            let jump = if rng.below(2) == 0 { 3600 } else { -3600 };
            (
                vec![Action::Clock(victim, jump)],
                ttl * 2,
                vec![Action::Clock(victim, 0)],
                format!("worker {victim}'s clock {jump:+}s"),
            )
        }
        Fault::ScriptFlush => (
            vec![command(&["SCRIPT", "FLUSH"])],
            Duration::ZERO,
            vec![],
            "SCRIPT FLUSH".into(),
        ),
        Fault::DeleteKey => (
            vec![command(&["DEL", lock_key])],
            Duration::ZERO,
            vec![],
            "DEL".into(),
        ),
        Fault::OverwriteKey => {
            let ttl_ms = ttl.as_millis().to_string();
            (
                vec![command(&[
                    "SET",
                    lock_key,
                    "torture-intruder",
                    "PX",
                    &ttl_ms,
                ])],
                Duration::ZERO,
                vec![],
                "SET intruder".into(),
            )
        }
        Fault::PubsubKill => (
            vec![command(&["CLIENT", "KILL", "TYPE", "pubsub"])],
            Duration::ZERO,
            vec![],
            "CLIENT KILL TYPE pubsub".into(),
        ),
        Fault::RedlockMinority => {
            // A minority of N is at most (N - 1) / 2 instances; one is enough
            // to matter for 3 and keeps the schedule simple.
            let i = rng.below(servers.max(1) as u64) as usize;
            (
                vec![Action::Crash(i)],
                ttl,
                vec![Action::Start(i)],
                format!("crashed instance {i} of {servers}"),
            )
        }
        Fault::PrimaryKill => (
            vec![Action::KillPrimary],
            // Long enough for the replica to be promoted (cluster node
            // timeout 1 s, then an election) before the old one returns.
            ttl.max(Duration::from_secs(3)),
            vec![Action::StartNodes],
            "killed the lock's primary".into(),
        ),
        Fault::Failover => (
            vec![Action::Failover],
            Duration::ZERO,
            vec![],
            "failover".into(),
        ),
        Fault::SlotMigration => (
            vec![Action::MigrateSlot],
            Duration::ZERO,
            vec![],
            "migrated the lock's slot".into(),
        ),
    };
    Steps {
        start,
        hold,
        clear,
        note,
    }
}

/// One injection as it happened, in `mono_ns` time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub fault: Fault,
    pub victim: Option<u32>,
    pub start_ns: u64,
    pub end_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for fault in Fault::ALL {
            assert_eq!(Fault::parse(fault.name()), Some(fault));
        }
        assert_eq!(Fault::parse("nope"), None);
    }

    #[test]
    fn every_fault_is_undone() {
        let ttl = Duration::from_millis(1000);
        for fault in Fault::ALL {
            let mut rng = Rng::new(5);
            let s = steps(fault, 2, ttl, "latchkey:x", 3, &mut rng);
            assert!(!s.start.is_empty(), "{fault:?}");
            // Anything that lasts must be cleared: a stopped worker continued,
            // a proxy passed again, a clock put back, a crashed server started.
            for action in &s.start {
                let undone = match action {
                    Action::Stop(w) => s.clear.contains(&Action::Cont(*w)),
                    Action::Proxy(w, _) => s.clear.contains(&Action::Proxy(*w, ProxyMode::Pass)),
                    Action::Clock(w, _) => s.clear.contains(&Action::Clock(*w, 0)),
                    Action::Crash(i) => {
                        s.start.contains(&Action::Start(*i)) || s.clear.contains(&Action::Start(*i))
                    }
                    Action::KillPrimary => s.clear.contains(&Action::StartNodes),
                    _ => true,
                };
                assert!(undone, "{fault:?} leaves {action:?} in place");
            }
        }
    }

    #[test]
    fn pauses_outlast_the_ttl() {
        let ttl = Duration::from_millis(500);
        let s = steps(Fault::Pause, 0, ttl, "k", 1, &mut Rng::new(1));
        assert!(s.hold > ttl, "a pause shorter than the TTL proves nothing");
    }
}
