//! The command line over Sentinel (a primary, a replica and 3 Sentinels on
//! loopback): `--sentinel`/`--master` (and their env vars, and the
//! `redis+sentinel://` URL) reach the primary the Sentinels name, also after
//! a failover; `--replicas` waits for the replica, and too few is exit 69.

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use latchkey_testkit::{ClientAuth, SentinelSet, TlsCerts};

const QUICK: Duration = Duration::from_secs(20);

/// `latchkey --sentinel A --sentinel B ... --master NAME --prefix test:`.
fn latchkey_sentinel(set: &SentinelSet) -> Command {
    let mut cmd = bare();
    for addr in set.sentinel_addrs() {
        cmd.args(["--sentinel", &addr]);
    }
    cmd.args(["--master", set.master_name(), "--prefix", PREFIX]);
    cmd
}

fn bare() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_latchkey"));
    cmd.env_remove("LATCHKEY_REDIS_URL")
        .env_remove("LATCHKEY_PREFIX")
        .env_remove("LATCHKEY_SENTINEL")
        .env_remove("LATCHKEY_SENTINEL_MASTER")
        .stdin(Stdio::null());
    cmd
}

#[test]
fn acquire_status_release_across_a_failover_with_replicas() {
    let set = SentinelSet::start();
    let acquired = output(
        latchkey_sentinel(&set).args(["acquire", "job", "--ttl", "30s", "--replicas", "1"]),
        QUICK,
    );
    assert!(acquired.status.success(), "{}", stderr(&acquired));
    let token = stdout(&acquired)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    let first = set.primary_port();
    assert_eq!(
        set.server(first).command(&["GET", "test:job"]).unwrap(),
        token
    );

    let second = set.failover();
    // A new process, configured by the environment, finds the new primary;
    // the lock was acknowledged by the replica, so it is there.
    let status = output(
        bare()
            .env("LATCHKEY_SENTINEL", set.sentinel_addrs().join(","))
            .env("LATCHKEY_SENTINEL_MASTER", set.master_name())
            .args(["--prefix", PREFIX, "status", "job"]),
        QUICK,
    );
    assert!(status.status.success(), "{}", stderr(&status));
    assert!(stdout(&status).contains("held by"), "{}", stdout(&status));
    let released = output(
        latchkey_sentinel(&set).args(["release", "job", &token]),
        QUICK,
    );
    assert!(released.status.success(), "{}", stderr(&released));
    assert_eq!(
        set.server(second).command(&["EXISTS", "test:job"]).unwrap(),
        "0"
    );

    // The URL form, and `run`.
    let url = format!(
        "redis+sentinel://{}/{}",
        set.sentinel_addrs().join(","),
        set.master_name()
    );
    let ran = output(
        bare().args([
            "--redis", &url, "--prefix", PREFIX, "run", "job", "--", "true",
        ]),
        QUICK,
    );
    assert!(ran.status.success(), "{}", stderr(&ran));

    // Two replicas asked, one there: exit 69, one line, and nothing held.
    let refused = output(
        latchkey_sentinel(&set).args(["run", "job", "--no-wait", "--replicas", "2", "--", "true"]),
        QUICK,
    );
    assert_eq!(code(refused.status), 69, "{}", stderr(&refused));
    assert_eq!(
        stderr(&refused).trim().lines().count(),
        1,
        "{}",
        stderr(&refused)
    );
    assert!(
        stderr(&refused).contains("replicas"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(
        set.server(second).command(&["EXISTS", "test:job"]).unwrap(),
        "0"
    );
}

#[test]
fn sentinel_options_misused_are_usage_errors() {
    for args in [
        &["--sentinel", "127.0.0.1:1", "status", "x"][..],
        &["--master", "m", "status", "x"][..],
        &[
            "--sentinel",
            "127.0.0.1:notaport",
            "--master",
            "m",
            "status",
            "x",
        ][..],
        &[
            "--sentinel",
            "127.0.0.1:1",
            "--master",
            "m",
            "--redis",
            "redis://a:1,redis://b:2",
            "status",
            "x",
        ][..],
    ] {
        let out = output(bare().args(args), QUICK);
        assert_eq!(code(out.status), 2, "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out).trim().lines().count(), 1, "{}", stderr(&out));
    }
    // Nobody there: the outage code, one line.
    let port = latchkey_testkit::free_port();
    let out = output(
        bare().args([
            "--sentinel",
            &format!("127.0.0.1:{port}"),
            "--master",
            "m",
            "status",
            "x",
        ]),
        QUICK,
    );
    assert_eq!(code(out.status), 69, "{}", stderr(&out));
    assert_eq!(stderr(&out).trim().lines().count(), 1, "{}", stderr(&out));
}

#[test]
fn torture_on_a_sentinel_set_survives_a_failover() {
    let started = std::time::Instant::now();
    let out = output(
        bare().args([
            "torture",
            "--quick",
            "--sentinel-set",
            "--fault",
            "failover",
        ]),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let report = stdout(&out);
    let row = report
        .lines()
        .find(|l| l.starts_with("failover "))
        .unwrap_or_else(|| panic!("no failover row in\n{report}"));
    assert!(row.trim_end().ends_with("PASS"), "{row}");
    assert!(!row.contains("skipped"), "{row}");
    let faults: u32 = row
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_default();
    assert!(faults >= 1, "no failover was injected: {row}");
    eprintln!("torture --sentinel-set --quick: {:?}", started.elapsed());
}

/// Sentinel with TLS (the Sentinels reached plainly, the primaries over
/// TLS): `--redis rediss://…` beside the Sentinels gives the primary's
/// settings, TLS included, and `--tls-ca` trusts its CA; the default
/// `redis://` URL with TLS files is a usage error that says so.
#[test]
fn a_tls_primary_named_by_the_sentinels() {
    let certs = TlsCerts::generate();
    let set = SentinelSet::builder().tls(&certs, ClientAuth::No).start();
    let ca = certs.ca();
    let ca = ca.to_str().expect("a UTF-8 path");
    let acquired = output(
        latchkey_sentinel(&set).args([
            "--redis",
            "rediss://127.0.0.1/",
            "--tls-ca",
            ca,
            "acquire",
            "tls-job",
            "--ttl",
            "30s",
        ]),
        QUICK,
    );
    assert!(acquired.status.success(), "{}", stderr(&acquired));
    let token = stdout(&acquired)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        set.server(set.primary_port())
            .command(&["GET", "test:tls-job"])
            .unwrap(),
        token
    );

    let plain = output(
        latchkey_sentinel(&set).args(["--tls-ca", ca, "status", "tls-job"]),
        QUICK,
    );
    assert_eq!(plain.status.code(), Some(2), "{}", stderr(&plain));
    assert_eq!(stderr(&plain).lines().count(), 1, "{}", stderr(&plain));
}
