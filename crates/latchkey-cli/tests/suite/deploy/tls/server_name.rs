//! `--tls-server-name` (and `LATCHKEY_TLS_SERVER_NAME`) against a server
//! whose certificate carries only the DNS name `redis.test.invalid`, not
//! the loopback address it listens on.

use std::process::Stdio;

use super::*;

const NAME: &str = "redis.test.invalid";

fn named_server() -> (TlsCerts, RedisServer) {
    let certs = TlsCerts::generate_for(&[NAME]);
    let server = RedisServer::builder().tls(&certs, ClientAuth::No).start();
    (certs, server)
}

#[test]
fn the_address_is_refused_without_the_name_and_served_with_it() {
    let (certs, server) = named_server();
    let out = output(
        with_flags(&server, &certs, false).args(["status", "x"]),
        QUICK,
    );
    assert_eq!(code(out.status), 69, "{}", stderr(&out));
    assert_one_error_line(&out);
    assert!(
        stderr(&out).contains("not valid for the host in the URL"),
        "{}",
        stderr(&out)
    );

    let printed = ok(with_flags(&server, &certs, false)
        .args(["--tls-server-name", NAME])
        .args(["acquire", "sni-job", "--ttl", "30s"]));
    let token = printed.lines().next().expect("owner token").to_owned();
    assert_eq!(server.command(&["GET", "test:sni-job"]).unwrap(), token);
    ok(with_flags(&server, &certs, false)
        .args(["--tls-server-name", NAME])
        .args(["release", "sni-job", &token]));
    assert_eq!(server.command(&["EXISTS", "test:sni-job"]).unwrap(), "0");
}

#[test]
fn wait_and_signal_with_the_name_from_the_environment() {
    let (certs, server) = named_server();
    let waiter = with_flags(&server, &certs, false)
        .env("LATCHKEY_TLS_SERVER_NAME", NAME)
        .args(["wait", "sni-deploy", "--timeout", "10s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn latchkey wait");
    eventually_blocking("the waiter listens", || {
        server.subscribers("test:signal:sni-deploy") == 1
    });
    let sent = ok(with_flags(&server, &certs, false)
        .env("LATCHKEY_TLS_SERVER_NAME", NAME)
        .args(["signal", "sni-deploy", "v8"]));
    assert_eq!(sent, "1\n");
    let out = waiter.wait_with_output().expect("wait for the waiter");
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out), "v8\n");
}

#[test]
fn a_wrong_name_exits_69() {
    let (certs, server) = named_server();
    let out = output(
        with_flags(&server, &certs, false)
            .args(["--tls-server-name", "other.test.invalid"])
            .args(["status", "x"]),
        QUICK,
    );
    assert_eq!(code(out.status), 69, "{}", stderr(&out));
    assert_one_error_line(&out);
    assert!(
        stderr(&out).contains("--tls-server-name"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("not valid for the host in the URL"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bad_names_and_a_plain_url_are_usage_errors() {
    let (certs, server) = named_server();
    for (name, needle) in [
        ("", "empty"),
        ("not a name!", "not a valid DNS name"),
        ("127.0.0.1", "IP address"),
    ] {
        let out = output(
            with_flags(&server, &certs, false)
                .args(["--tls-server-name", name])
                .args(["status", "x"]),
            QUICK,
        );
        assert_eq!(code(out.status), 2, "{name:?}: {}", stderr(&out));
        assert_one_error_line(&out);
        assert!(stderr(&out).contains(needle), "{name:?}: {}", stderr(&out));
    }
    let out = output(
        latchkey_at("redis://127.0.0.1:1/")
            .args(["--tls-server-name", NAME])
            .args(["status", "x"]),
        QUICK,
    );
    assert_eq!(code(out.status), 2, "{}", stderr(&out));
    assert_one_error_line(&out);
    assert!(stderr(&out).contains("rediss://"), "{}", stderr(&out));
}
