//! Bad input and configuration mistakes: one line, the documented exit
//! code, and the user's own words in the message.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::*;

const QUICK: Duration = Duration::from_secs(15);

/// `latchkey ARGS` with a clean environment and no `--redis`.
fn bare() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_latchkey"));
    cmd.env_remove("LATCHKEY_REDIS_URL")
        .env_remove("LATCHKEY_PREFIX")
        .stdin(std::process::Stdio::null());
    cmd
}

#[test]
fn an_empty_redis_url_is_a_usage_error_not_the_local_default() {
    for url in ["", " ", ",", "redis://127.0.0.1:1,"] {
        let out = output(bare().args(["--redis", url, "status", "x"]), QUICK);
        assert_eq!(code(out.status), 2, "{url:?}: {}", stderr(&out));
        assert_one_error_line(&out);
        assert!(stderr(&out).contains("empty Redis URL"), "{}", stderr(&out));
    }
    for value in ["", " "] {
        let out = output(
            bare()
                .env("LATCHKEY_REDIS_URL", value)
                .args(["status", "x"]),
            QUICK,
        );
        assert_eq!(code(out.status), 2, "{value:?}: {}", stderr(&out));
        assert_one_error_line(&out);
        assert!(stderr(&out).contains("empty Redis URL"), "{}", stderr(&out));
    }
}

#[test]
fn a_url_that_does_not_parse_is_told_what_a_url_looks_like() {
    let out = output(
        bare().args(["--redis", "redis://127.0.0.1:x/", "status", "x"]),
        QUICK,
    );
    assert_eq!(code(out.status), 2, "{}", stderr(&out));
    assert_one_error_line(&out);
    let said = stderr(&out);
    assert!(said.contains("redis://127.0.0.1:x/"), "{said}");
    assert!(
        said.contains("expected redis://[user[:password]@]host"),
        "{said}"
    );
    // Not the Redis client's own type names.
    assert!(!said.contains("InvalidClientConfig"), "{said}");
}

#[test]
fn a_ttl_out_of_bounds_is_quoted_as_typed() {
    let redis = RedisServer::start();
    for (ttl, quoted) in [("0ms", "\"0ms\""), ("25h", "\"25h\""), ("1ms", "\"1ms\"")] {
        for args in [
            &["acquire", "x", "--ttl", ttl][..],
            &["run", "x", "--ttl", ttl, "--", "true"],
            &["extend", "x", "token", "--ttl", ttl],
        ] {
            let out = output(latchkey(&redis).args(args), QUICK);
            assert_eq!(code(out.status), 2, "{args:?}: {}", stderr(&out));
            assert_one_error_line(&out);
            assert!(
                stderr(&out).contains(&format!("invalid ttl {quoted}")),
                "{args:?}: {}",
                stderr(&out)
            );
        }
    }
}

#[test]
fn a_database_the_server_lacks_is_a_usage_error_with_the_cause() {
    let redis = RedisServer::start();
    let url = format!("redis://127.0.0.1:{}/99", redis.port());
    for args in [&["status", "x"][..], &["acquire", "x", "--ttl", "1s"]] {
        let out = output(latchkey_at(&url).args(args), QUICK);
        assert_eq!(code(out.status), 2, "{args:?}: {}", stderr(&out));
        assert_one_error_line(&out);
        assert!(
            stderr(&out).contains("database does not exist")
                && stderr(&out).contains("DB index is out of range"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn verbose_output_into_a_pipe_has_no_colours() {
    let redis = RedisServer::start();
    let out = output(
        latchkey(&redis).args(["-v", "acquire", "plain", "--ttl", "5s"]),
        QUICK,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("DEBUG"), "tracing output expected: {err}");
    assert!(!err.contains('\u{1b}'), "ANSI escapes in a pipe: {err:?}");
}
