//! `latchkey serve --listen-tls-cert --listen-tls-key`: HTTPS with
//! certificates made at test time, a rustls client, plain HTTP refused on
//! the TLS port, and bad files refused at start with one line and exit 2.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use latchkey_testkit::TlsCerts;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value};

use super::http_client::{split, Served};
use super::session::text;
use crate::common::*;

/// `latchkey serve` over HTTPS with the kit's server certificate.
fn served_tls(redis: &RedisServer, certs: &TlsCerts, env: &[(&str, &str)]) -> Served {
    let cert = certs.server_cert().to_string_lossy().into_owned();
    let key = certs.server_key().to_string_lossy().into_owned();
    Served::start(
        redis,
        &["--listen-tls-cert", &cert, "--listen-tls-key", &key],
        env,
    )
}

/// One HTTPS request (`Connection: close`) trusting only `ca`, checking the
/// certificate against `localhost`: the status and the JSON reply.
fn https(
    ca: &Path,
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, Value) {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).expect("read the CA") {
        roots
            .add(cert.expect("a CA certificate"))
            .expect("trust the CA");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from("localhost").expect("server name");
    let tls = rustls::ClientConnection::new(Arc::new(config), name).expect("a TLS client");
    let tcp = TcpStream::connect(addr).expect("connect to latchkey serve");
    tcp.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut stream = rustls::StreamOwned::new(tls, tcp);
    let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{auth}\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send over TLS");
    let mut reply = String::new();
    // The server closes after its reply; a close without close_notify is
    // an error to rustls, but the reply is whole by then.
    if let Err(e) = stream.read_to_string(&mut reply) {
        assert!(reply.contains("\r\n\r\n"), "read the reply: {e}: {reply:?}");
    }
    let (status, json) = split(&reply);
    let json = serde_json::from_str(json).unwrap_or_else(|e| panic!("JSON ({e}): {reply:?}"));
    (status, json)
}

#[test]
fn a_lock_is_taken_and_released_over_https_and_plain_http_gets_no_reply() {
    let certs = TlsCerts::generate();
    let redis = RedisServer::start();
    let served = served_tls(&redis, &certs, &[("LATCHKEY_SERVE_TOKENS", "s3cret")]);
    assert!(served.https, "it says it serves https://");
    let ca = certs.ca();

    let (status, refused) = https(
        &ca,
        &served.addr,
        "POST",
        "/v1/locks/tls/acquire",
        None,
        r#"{"ttl": "1m"}"#,
    );
    assert_eq!(
        (status, text(&refused, "code")),
        (401, "AUTH".to_owned()),
        "tokens still asked over TLS"
    );
    let (status, held) = https(
        &ca,
        &served.addr,
        "POST",
        "/v1/locks/tls/acquire",
        Some("s3cret"),
        r#"{"ttl": "1m"}"#,
    );
    assert_eq!((status, &held["acquired"]), (200, &json!(true)), "{held}");
    let token = text(&held, "token");
    assert_eq!(redis.command(&["GET", "test:tls"]).unwrap(), token);

    // Plain HTTP to the TLS port: no HTTP reply, and nothing done.
    let mut plain = TcpStream::connect(&served.addr).expect("connect");
    plain
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let release = json!({"token": token}).to_string();
    // The server may refuse the first bytes and close before the rest is
    // written (the write then fails): either way, no reply and no release.
    let _ = write!(
        plain,
        "POST /v1/locks/tls/release HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         Authorization: Bearer s3cret\r\nContent-Length: {}\r\n\r\n{release}",
        release.len()
    );
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    assert!(
        !answer.starts_with(b"HTTP/"),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
    assert_eq!(
        redis.command(&["GET", "test:tls"]).unwrap(),
        token,
        "still held"
    );

    let (status, released) = https(
        &ca,
        &served.addr,
        "POST",
        "/v1/locks/tls/release",
        Some("s3cret"),
        &release,
    );
    assert_eq!(
        (status, &released["released"]),
        (200, &json!(true)),
        "{released}"
    );
    assert_eq!(redis.command(&["EXISTS", "test:tls"]).unwrap(), "0");
}

#[test]
fn a_client_that_does_not_trust_the_ca_is_refused_by_its_own_check() {
    let certs = TlsCerts::generate();
    let other = TlsCerts::generate();
    let redis = RedisServer::start();
    let served = served_tls(&redis, &certs, &[]);
    let ca = other.ca();
    let addr = served.addr.clone();
    let outcome = std::thread::spawn(move || https(&ca, &addr, "GET", "/v1/locks/x", None, ""));
    assert!(
        outcome.join().is_err(),
        "a certificate from another CA was trusted"
    );
    // The server goes on serving those who trust it.
    let (status, _) = https(&certs.ca(), &served.addr, "GET", "/v1/locks/x", None, "");
    assert_eq!(status, 200);
}

#[test]
fn bad_certificate_or_key_files_are_one_line_and_exit_2() {
    let certs = TlsCerts::generate();
    let redis = RedisServer::start();
    let scratch = Scratch::new("serve-tls");
    let empty = scratch.path("empty.pem");
    std::fs::write(&empty, "").expect("write");
    let missing = scratch.path("missing.pem");
    let (cert, key, client_key) = (certs.server_cert(), certs.server_key(), certs.client_key());
    let cases: [(&Path, &Path, &str); 4] = [
        (&missing, &key, "missing.pem"),
        (&cert, &missing, "missing.pem"),
        (&empty, &key, "no PEM certificate"),
        // A key that is not the certificate's.
        (&cert, &client_key, "not the key of"),
    ];
    for (cert, key, needle) in cases {
        let out = output(
            latchkey(&redis)
                .args(["serve", "--listen", "127.0.0.1:0", "--listen-tls-cert"])
                .arg(cert)
                .arg("--listen-tls-key")
                .arg(key),
            Duration::from_secs(15),
        );
        assert_eq!(code(out.status), 2, "{cert:?} {key:?}: {}", stderr(&out));
        assert_one_error_line(&out);
        assert!(stderr(&out).contains(needle), "{needle}: {}", stderr(&out));
    }
    // A certificate without its key is clap's usage error.
    let out = output(
        latchkey(&redis)
            .args(["serve", "--listen", "127.0.0.1:0", "--listen-tls-cert"])
            .arg(&cert),
        Duration::from_secs(15),
    );
    assert_eq!(code(out.status), 2, "{}", stderr(&out));
}

#[test]
fn with_tls_and_no_tokens_only_a_loopback_listener_is_accepted() {
    let certs = TlsCerts::generate();
    let redis = RedisServer::start();
    let out = output(
        latchkey(&redis)
            .args(["serve", "--listen", "0.0.0.0:0", "--listen-tls-cert"])
            .arg(certs.server_cert())
            .arg("--listen-tls-key")
            .arg(certs.server_key())
            .env_remove("LATCHKEY_SERVE_TOKENS"),
        Duration::from_secs(15),
    );
    assert_eq!(code(out.status), 2);
    assert_one_error_line(&out);
    assert!(
        stderr(&out).contains("not a loopback address"),
        "{}",
        stderr(&out)
    );
}
