//! The command line on a real Redis Cluster (3 primaries on loopback): one
//! node's URL is enough for `run`, `acquire`, `release`, `status`, `list`;
//! what does not work on a cluster is refused with exit 2 and says so;
//! `doctor` checks every primary and PASSes a healthy cluster.

use crate::common;

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
fn what_a_cluster_cannot_do_is_refused_and_doctor_checks_every_primary() {
    let mut cluster = RedisCluster::builder()
        .primaries(3)
        .replicas_per_primary(0)
        .node_timeout(Duration::from_millis(1000))
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
    let pattern = output(
        latchkey_at(&url).args(["wait", "--pattern", "job*", "--timeout", "1s"]),
        QUICK,
    );
    assert_eq!(code(pattern.status), 2, "{}", stderr(&pattern));
    assert!(
        stderr(&pattern).contains("Redis Cluster"),
        "{}",
        stderr(&pattern)
    );

    // A healthy cluster PASSes: the cluster line, and every primary's own
    // server checks (each line names its node); nothing FAILs.
    let doctor = output(latchkey_at(&url).args(["doctor", "--pings", "5"]), QUICK);
    let report = stdout(&doctor);
    assert!(doctor.status.success(), "{report}{}", stderr(&doctor));
    let line = report
        .lines()
        .find(|l| l.contains("cluster"))
        .unwrap_or_else(|| panic!("no cluster line in {report}"));
    assert!(line.starts_with("PASS"), "{line}");
    for primary in cluster.primaries() {
        let node = format!("127.0.0.1:{}", primary.port());
        assert!(
            report
                .lines()
                .any(|l| l.starts_with("PASS") && l.contains("eviction") && l.contains(&node)),
            "no eviction check of {node} in {report}"
        );
    }
    assert!(!report.contains("FAIL"), "{report}");

    // A primary down (and no replica to replace it): some slots are not
    // served, the cluster line WARNs, and the dead node's checks FAIL.
    let seed_port = cluster.nodes()[0].port();
    let victim = cluster
        .nodes_mut()
        .iter_mut()
        .find(|n| n.port() != seed_port)
        .unwrap();
    let victim_port = victim.port();
    victim.kill();
    latchkey_testkit::eventually_blocking("the cluster notices the dead primary", || {
        cluster.nodes()[0]
            .command(&["CLUSTER", "INFO"])
            .unwrap_or_default()
            .contains("cluster_state:fail")
    });
    let doctor = output(latchkey_at(&url).args(["doctor", "--pings", "5"]), QUICK);
    let report = stdout(&doctor);
    let line = report
        .lines()
        .find(|l| l.contains("cluster"))
        .unwrap_or_else(|| panic!("no cluster line in {report}"));
    assert!(line.starts_with("WARN") && line.contains("fail"), "{line}");
    assert!(
        report
            .lines()
            .any(|l| l.starts_with("FAIL") && l.contains(&victim_port.to_string())),
        "{report}"
    );
    assert_eq!(code(doctor.status), 1, "{report}");
}
