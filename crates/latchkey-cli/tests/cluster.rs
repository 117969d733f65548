//! The command line on a real Redis Cluster (3 primaries on loopback): one
//! node's URL is enough for `run`, `acquire`, `release`, `status`, `list`;
//! what does not work on a cluster yet is refused with exit 2 and says so;
//! `doctor`'s cluster line is a WARN that names it.

mod common;

use std::time::Duration;

use common::*;
use latchkey_testkit::RedisCluster;

const QUICK: Duration = Duration::from_secs(20);

#[test]
fn run_acquire_status_and_release_on_a_cluster() {
    let cluster = RedisCluster::builder()
        .primaries(3)
        .replicas_per_primary(0)
        .start();
    let url = cluster.seed_url();
    // Names on every primary: the seed node serves only a third of the slots.
    for name in ["report-a", "report-b", "report-c", "report-d", "report-e"] {
        let ran = output(
            latchkey_at(&url).args(["run", name, "--ttl", "5s", "--", "true"]),
            QUICK,
        );
        assert!(ran.status.success(), "{name}: {}", stderr(&ran));

        let acquired = output(
            latchkey_at(&url).args(["acquire", name, "--ttl", "30s"]),
            QUICK,
        );
        assert!(acquired.status.success(), "{name}: {}", stderr(&acquired));
        let token = stdout(&acquired)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned();
        let status = output(latchkey_at(&url).args(["status", name]), QUICK);
        assert!(status.status.success(), "{name}: {}", stderr(&status));
        let busy = output(
            latchkey_at(&url).args(["run", name, "--no-wait", "--", "true"]),
            QUICK,
        );
        assert_eq!(code(busy.status), 1, "{name}: held, yet {}", stderr(&busy));
        let released = output(latchkey_at(&url).args(["release", name, &token]), QUICK);
        assert!(released.status.success(), "{name}: {}", stderr(&released));
    }
}

#[test]
fn what_a_cluster_cannot_do_yet_is_refused_and_doctor_says_so() {
    let cluster = RedisCluster::builder()
        .primaries(3)
        .replicas_per_primary(0)
        .start();
    let url = cluster.seed_url();
    let listed = output(latchkey_at(&url).args(["list"]), QUICK);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let one = output(
        latchkey_at(&url).args(["signal", "--one", "jobs", "x"]),
        QUICK,
    );
    assert_eq!(code(one.status), 2, "{}", stderr(&one));
    assert!(stderr(&one).contains("Redis Cluster"), "{}", stderr(&one));
    let doctor = output(latchkey_at(&url).args(["doctor"]), QUICK);
    let report = stdout(&doctor);
    let line = report
        .lines()
        .find(|l| l.contains("cluster"))
        .unwrap_or_else(|| panic!("no cluster line in {report}"));
    assert!(line.contains("WARN"), "{line}");
}
