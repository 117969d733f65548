//! `--tls-ca`, `--tls-cert`, `--tls-key` (and `LATCHKEY_TLS_*`) against
//! TLS-only servers: the lock, run, wait and signal paths over (mutual)
//! TLS, and every refusal as one line with exit 69 (TLS) or 2 (bad input).

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use latchkey_testkit::{eventually_blocking, ClientAuth, TlsCerts};

mod server_name;

const QUICK: Duration = Duration::from_secs(15);

/// `latchkey` for `server` (no TLS options from the environment).
fn bare(server: &RedisServer) -> Command {
    latchkey(server)
}

/// `latchkey` with the CA and, if `mutual`, the client certificate, as flags.
fn with_flags(server: &RedisServer, certs: &TlsCerts, mutual: bool) -> Command {
    let mut cmd = bare(server);
    cmd.arg("--tls-ca").arg(certs.ca());
    if mutual {
        cmd.arg("--tls-cert")
            .arg(certs.client_cert())
            .arg("--tls-key")
            .arg(certs.client_key());
    }
    cmd
}

fn ok(cmd: &mut Command) -> String {
    let out = output(cmd, QUICK);
    assert_eq!(code(out.status), 0, "stderr: {}", stderr(&out));
    stdout(&out)
}

#[test]
fn acquire_status_and_release_over_mutual_tls_with_flags() {
    let certs = TlsCerts::generate();
    let server = RedisServer::builder()
        .tls(&certs, ClientAuth::Required)
        .start();
    let printed =
        ok(with_flags(&server, &certs, true).args(["acquire", "tls-job", "--ttl", "30s"]));
    let token = printed.lines().next().expect("owner token").to_owned();
    assert_eq!(server.command(&["GET", "test:tls-job"]).unwrap(), token);
    let status = ok(with_flags(&server, &certs, true).args(["status", "tls-job"]));
    assert!(status.contains("held"), "{status}");
    ok(with_flags(&server, &certs, true).args(["release", "tls-job", &token]));
    assert_eq!(server.command(&["EXISTS", "test:tls-job"]).unwrap(), "0");
}

#[test]
fn run_over_tls_with_the_environment_variables() {
    let certs = TlsCerts::generate();
    let server = RedisServer::builder()
        .tls(&certs, ClientAuth::Required)
        .start();
    let mut cmd = bare(&server);
    cmd.env("LATCHKEY_TLS_CA", certs.ca())
        .env("LATCHKEY_TLS_CERT", certs.client_cert())
        .env("LATCHKEY_TLS_KEY", certs.client_key())
        .args(["run", "tls-run", "--ttl", "5s", "--", "sh", "-c"])
        // The command sees its lock held in Redis, over the same TLS.
        .arg("test -n \"$LATCHKEY_TOKEN\" && echo ran");
    let printed = ok(&mut cmd);
    assert!(printed.contains("ran"), "{printed}");
    assert_eq!(server.command(&["EXISTS", "test:tls-run"]).unwrap(), "0");
}

#[test]
fn wait_and_signal_over_tls() {
    let certs = TlsCerts::generate();
    let server = RedisServer::builder().tls(&certs, ClientAuth::No).start();
    let waiter = with_flags(&server, &certs, false)
        .args(["wait", "tls-deploy", "--timeout", "10s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn latchkey wait");
    eventually_blocking("the waiter listens", || {
        server.subscribers("test:signal:tls-deploy") == 1
    });
    let sent = ok(with_flags(&server, &certs, false).args(["signal", "tls-deploy", "v7"]));
    assert_eq!(sent, "1\n");
    let out = waiter.wait_with_output().expect("wait for the waiter");
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out), "v7\n");
}

#[test]
fn a_server_certificate_from_an_unknown_ca_exits_69_with_one_line() {
    let certs = TlsCerts::generate();
    let stranger = TlsCerts::generate();
    let server = RedisServer::builder().tls(&certs, ClientAuth::No).start();
    let out = output(
        with_flags(&server, &stranger, false).args(["status", "x"]),
        QUICK,
    );
    assert_eq!(code(out.status), 69, "{}", stderr(&out));
    assert_one_error_line(&out);
    let err = stderr(&out);
    assert!(err.contains("TLS failed"), "{err}");
    assert!(err.contains("not signed by a CA we trust"), "{err}");
    assert!(err.contains("--tls-ca"), "{err}");
}

#[test]
fn a_client_without_a_certificate_against_mutual_tls_exits_69() {
    let certs = TlsCerts::generate();
    let server = RedisServer::builder()
        .tls(&certs, ClientAuth::Required)
        .start();
    let out = output(
        with_flags(&server, &certs, false).args(["acquire", "x", "--ttl", "5s"]),
        QUICK,
    );
    assert_eq!(code(out.status), 69, "{}", stderr(&out));
    assert_one_error_line(&out);
    let err = stderr(&out);
    assert!(err.contains("requires a client certificate"), "{err}");
    assert!(err.contains("--tls-cert"), "{err}");
}

#[test]
fn a_file_that_is_not_a_certificate_exits_69() {
    let certs = TlsCerts::generate();
    let server = RedisServer::builder().tls(&certs, ClientAuth::No).start();
    let out = output(
        bare(&server)
            .arg("--tls-ca")
            .arg(certs.client_key())
            .args(["status", "x"]),
        QUICK,
    );
    assert_eq!(code(out.status), 69, "{}", stderr(&out));
    assert_one_error_line(&out);
    assert!(
        stderr(&out).contains("holds no PEM certificate"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn missing_files_and_half_an_identity_are_usage_errors() {
    let certs = TlsCerts::generate();
    let server = RedisServer::builder().tls(&certs, ClientAuth::No).start();
    let missing = certs.dir().join("nope.pem");
    let cases: Vec<(Vec<std::ffi::OsString>, &str)> = vec![
        (vec!["--tls-ca".into(), missing.clone().into()], "nope.pem"),
        (
            vec!["--tls-cert".into(), certs.client_cert().into()],
            "--tls-cert needs --tls-key",
        ),
        (
            vec!["--tls-key".into(), certs.client_key().into()],
            "--tls-key needs --tls-cert",
        ),
        (vec!["--tls-ca".into(), "".into()], "--tls-ca"),
    ];
    for (args, needle) in cases {
        let out = output(bare(&server).args(&args).args(["status", "x"]), QUICK);
        assert_eq!(code(out.status), 2, "{args:?}: {}", stderr(&out));
        assert_one_error_line(&out);
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn doctor_probes_over_mutual_tls_too() {
    let certs = TlsCerts::generate();
    let server = RedisServer::builder()
        .tls(&certs, ClientAuth::Required)
        .start();
    let out = output(
        with_flags(&server, &certs, true).args(["doctor", "--pings", "5"]),
        QUICK,
    );
    let text = stdout(&out);
    // Its own pub/sub probe connects with the same certificates.
    for check in ["scripts", "subscribe"] {
        let line = text
            .lines()
            .find(|line| line.get(6..).is_some_and(|rest| rest.starts_with(check)))
            .unwrap_or_else(|| panic!("no {check} line in {text}; stderr {}", stderr(&out)));
        assert!(line.starts_with("PASS"), "{line}");
    }
}

/// Runs `openssl ARGS` in `dir`; `false` when openssl is not installed.
fn openssl(dir: &std::path::Path, args: &[&str]) -> bool {
    match Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
    {
        Ok(out) => {
            assert!(out.status.success(), "openssl {args:?}: {}", stderr(&out));
            true
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => panic!("openssl: {e}"),
    }
}

#[test]
fn an_x509_v1_client_certificate_is_named_with_how_to_reissue_it() {
    let scratch = Scratch::new("tls-v1-client");
    let dir = scratch.path("");
    // A CA of our own, and a client key and request, made as the issue's
    // user did: `openssl x509 -req` without -extfile makes a v1 certificate.
    let made = openssl(
        &dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-subj",
            "/CN=latchkey-test-ca",
            "-days",
            "1",
        ],
    );
    if !made {
        eprintln!("skipped: openssl is not installed (it makes the v1 certificate)");
        return;
    }
    openssl(
        &dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "client.key",
            "-out",
            "client.csr",
            "-subj",
            "/CN=app",
        ],
    );
    let sign = |out: &str, ext: Option<&str>| {
        let mut args = vec![
            "x509",
            "-req",
            "-in",
            "client.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-out",
            out,
        ];
        if let Some(ext) = ext {
            args.extend(["-extfile", ext]);
        }
        openssl(&dir, &args);
    };
    sign("client-v1.pem", None);

    // The server trusts our CA for clients (beside the kit's, which its
    // admin connection uses); we trust the kit's CA for the server.
    let certs = TlsCerts::generate();
    let server_ca = scratch.path("server-ca.pem");
    std::fs::copy(certs.ca(), &server_ca).unwrap();
    let bundle = [certs.read(&certs.ca()), certs.read(&dir.join("ca.pem"))].concat();
    std::fs::write(certs.ca(), bundle).unwrap();
    let server = RedisServer::builder()
        .tls(&certs, ClientAuth::Required)
        .start();
    let with_cert = |cert: &str| {
        let mut cmd = bare(&server);
        cmd.arg("--tls-ca")
            .arg(&server_ca)
            .arg("--tls-cert")
            .arg(dir.join(cert))
            .arg("--tls-key")
            .arg(dir.join("client.key"))
            .args(["status", "v1"]);
        output(&mut cmd, QUICK)
    };

    let refused = with_cert("client-v1.pem");
    assert_eq!(code(refused.status), 69, "{}", stderr(&refused));
    assert_one_error_line(&refused);
    let message = stderr(&refused);
    for needle in ["client-v1.pem", "X.509 v1", "reissue", "-extfile"] {
        assert!(message.contains(needle), "{needle:?} missing: {message}");
    }
    assert!(!message.contains("server's certificate"), "{message}");

    // The advice works: the same key and CA, reissued with an extension file.
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage = clientAuth\n").unwrap();
    sign("client-v3.pem", Some("client.ext"));
    let accepted = with_cert("client-v3.pem");
    assert_eq!(code(accepted.status), 0, "{}", stderr(&accepted));
}
