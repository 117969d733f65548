//! Usage errors say what is wrong in the user's terms: the bound as a
//! number, a negative count as negative, a duration as it was typed. All of
//! them exit 2 before anything connects (no Redis needed).

use std::process::Command;

/// `latchkey ARGS` against a port where nothing listens: (exit code, stderr).
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .args(["--redis", "redis://127.0.0.1:1"])
        .args(args)
        .env_remove("LATCHKEY_REDIS_URL")
        .output()
        .expect("run latchkey");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn counts_out_of_bounds_say_the_bounds_as_numbers() {
    for (args, why) in [
        (
            &["run", "--permits", "100001", "x", "--", "true"][..],
            "too large",
        ),
        (
            &["run", "--permits", "0", "x", "--", "true"],
            "0 is too small",
        ),
        (&["latch", "x", "--count", "100001"], "too large"),
        (&["barrier", "x", "--parties", "0"], "0 is too small"),
    ] {
        let (code, stderr) = refused(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("it must be a whole number from 1 to 100000") && stderr.contains(why),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("MAX_COUNT"), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
}

#[test]
fn negative_counts_are_called_negative_not_unexpected_arguments() {
    for args in [
        &["run", "--permits", "-1", "x", "--", "true"][..],
        &["latch", "x", "--count", "-3"],
        &["barrier", "x", "--parties", "-2"],
    ] {
        let (code, stderr) = refused(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("unexpected argument"),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains("negative") && stderr.contains("from 1 to 100000"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn a_waiter_lease_out_of_bounds_is_echoed_as_typed() {
    for typed in ["0s", "10ms", "25h"] {
        let (code, stderr) =
            refused(&["run", "--fair", "--waiter-lease", typed, "x", "--", "true"]);
        assert_eq!(code, Some(2), "{typed}: {stderr}");
        assert!(
            stderr.contains(&format!("invalid waiter lease \"{typed}\"")),
            "{typed}: {stderr}"
        );
        assert!(stderr.contains("between 60ms and 24h"), "{typed}: {stderr}");
        assert!(!stderr.contains("0ns"), "{typed}: {stderr}");
    }
}

#[test]
fn other_negative_numbers_say_what_is_allowed() {
    for (args, says) in [
        (
            &["run", "--replicas", "-1", "x", "--", "true"][..],
            "0 or more (negative)",
        ),
        (
            &["acquire", "x", "--ttl", "1s", "--replicas", "-2"],
            "0 or more (negative)",
        ),
        (
            &["run", "-E", "-1", "x", "--", "true"],
            "-1 is not in 0..=255",
        ),
        (
            &["acquire", "x", "--ttl", "1s", "-E", "-1"],
            "-1 is not in 0..=255",
        ),
        (&["doctor", "--pings", "-5"], "-5 is not in 1..=100000"),
    ] {
        let (code, stderr) = refused(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("unexpected argument"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn a_take_above_the_permits_is_refused_before_connecting() {
    let (code, stderr) = refused(&["run", "--permits", "3", "--take", "4", "x", "--", "true"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--take 4 is more than --permits 3"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let (code, stderr) = refused(&["run", "--take", "2", "x", "--", "true"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--permits"), "{stderr}");
}
