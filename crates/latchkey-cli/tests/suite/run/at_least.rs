//! `latchkey run --hold-at-least D`: a command that ends sooner leaves the
//! lock held until D from its acquisition; its exit code is still run's.

use crate::common;

use std::time::Duration;

use common::*;

const QUICK: Duration = Duration::from_secs(15);

#[test]
fn a_short_command_keeps_the_lock_for_the_least_time() {
    let redis = RedisServer::start();
    let out = output(
        latchkey(&redis).args([
            "run",
            "nightly",
            "--hold-at-least",
            "30s",
            "--",
            "sh",
            "-c",
            "exit 3",
        ]),
        QUICK,
    );
    assert_eq!(code(out.status), 3, "{}", stderr(&out));
    let pttl: i64 = redis
        .command(&["PTTL", "test:nightly"])
        .unwrap()
        .parse()
        .unwrap();
    assert!(pttl > 20_000 && pttl <= 30_000, "PTTL {pttl}");
    // Another machine's run finds it busy.
    let busy = output(
        latchkey(&redis).args(["run", "nightly", "--no-wait", "--", "true"]),
        QUICK,
    );
    assert_eq!(code(busy.status), 1, "{}", stderr(&busy));
}

#[test]
fn a_bad_least_time_is_bad_input() {
    let redis = RedisServer::start();
    let out = output(
        latchkey(&redis).args(["run", "x", "--hold-at-least", "0s", "--", "true"]),
        QUICK,
    );
    assert_eq!(code(out.status), 2, "{}", stderr(&out));
    assert_one_error_line(&out);
}
