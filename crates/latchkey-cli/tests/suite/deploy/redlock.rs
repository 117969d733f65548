//! Several `--redis` URLs: the lock is a Redlock over those servers.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::*;

const QUICK: Duration = Duration::from_secs(15);

fn latchkey_over(servers: &[RedisServer]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_latchkey"));
    for server in servers {
        cmd.args(["--redis", &server.url()]);
    }
    cmd.args(["--prefix", PREFIX])
        .env_remove("LATCHKEY_REDIS_URL")
        .env_remove("LATCHKEY_PREFIX");
    cmd
}

#[test]
fn several_urls_lock_a_majority() {
    let servers = RedisServer::start_many(3);
    let key = format!("{PREFIX}batch");

    let out = output(
        latchkey_over(&servers).args(["acquire", "batch", "--ttl", "10s"]),
        QUICK,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    let token = stdout(&out).lines().next().unwrap().to_owned();
    let holding = servers
        .iter()
        .filter(|s| s.command(&["GET", &key]).unwrap() == token)
        .count();
    assert!(holding >= 2, "a majority holds the token: {holding} of 3");

    let busy = output(
        latchkey_over(&servers).args(["run", "batch", "--no-wait", "--", "true"]),
        QUICK,
    );
    assert_eq!(code(busy.status), 1, "{}", stderr(&busy));

    let out = output(
        latchkey_over(&servers).args(["release", "batch", &token]),
        QUICK,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    for server in &servers {
        assert_eq!(server.command(&["EXISTS", &key]).unwrap(), "0");
    }
    let out = output(
        latchkey_over(&servers).args(["run", "batch", "--", "true"]),
        QUICK,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
}

#[test]
fn without_a_majority_it_exits_69() {
    let mut servers = RedisServer::start_many(3);
    servers[1].kill();
    servers[2].kill();
    let out = output(
        // (Without --wait, `run` rides an outage out for 30 s first.)
        latchkey_over(&servers).args(["run", "batch", "--wait", "2s", "--", "true"]),
        QUICK,
    );
    assert_eq!(code(out.status), 69, "{}", stderr(&out));
    assert_one_error_line(&out);
}
