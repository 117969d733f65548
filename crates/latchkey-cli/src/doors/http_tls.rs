//! HTTPS for `latchkey serve`: `--listen-tls-cert FILE --listen-tls-key FILE`
//! (PEM), served with rustls as the client's `rediss://` connections are
//! (the `ring` provider, no C toolchain beyond cc).
//!
//! Why a listener of our own rather than `axum-server` (or a hand-rolled
//! hyper-util loop): axum 0.8's `serve` takes any [`Listener`], so a
//! listener that yields TLS streams keeps axum's connection handling and
//! graceful shutdown as they are, and the only crate added is
//! `tokio-rustls`, already built for the Redis client. `axum-server` would
//! bring its own serving loop, `arc-swap` and a second way of shutting down.
//!
//! Handshakes run in tasks of their own, never in `accept`: a client that
//! connects and says nothing (or speaks plain HTTP) must not hold up the
//! next caller. A handshake that takes longer than [`HANDSHAKE`] is dropped.
//!
//! The flags are not `--tls-cert`/`--tls-key`: those are every subcommand's
//! options for the Redis connection's client certificate (`support/tls_args.rs`).

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::serve::Listener;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::support::exit::Failure;

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// Finished handshakes waiting for axum to take them; a full queue holds the
/// handshaking tasks back rather than growing.
const READY: usize = 64;

/// The server configuration from a certificate chain and its private key,
/// both PEM. Every failure (a missing file, no certificate in it, no key,
/// a key that is not the certificate's) is a usage error naming the flag.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, Failure> {
    let bad = |flag: &str, path: &Path, why: &dyn std::fmt::Display| {
        Failure::usage(format!("{flag} {}: {why}", path.display()))
    };
    let cert_pem = std::fs::read(cert).map_err(|e| bad("--listen-tls-cert", cert, &e))?;
    let key_pem = std::fs::read(key).map_err(|e| bad("--listen-tls-key", key, &e))?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad("--listen-tls-cert", cert, &e))?;
    if chain.is_empty() {
        return Err(bad("--listen-tls-cert", cert, &"no PEM certificate in it"));
    }
    let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        bad(
            "--listen-tls-key",
            key,
            &format!("no PEM private key ({e})"),
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Failure::usage(format!("serve: TLS: {e}")))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| {
            Failure::usage(format!(
                "--listen-tls-key {}: not the key of --listen-tls-cert {} ({e})",
                key.display(),
                cert.display()
            ))
        })?;
    // Only HTTP/1.1 is built (axum's `http1`): say so, so that a client
    // offering h2 does not pick it.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// `listener`'s connections after their TLS handshake, for `axum::serve`.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    accepting: AbortHandle,
}

impl TlsListener {
    /// Starts accepting on `listener` (in a task that ends with the
    /// listener).
    pub fn new(listener: TcpListener, acceptor: TlsAcceptor) -> io::Result<TlsListener> {
        let local = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(READY);
        let accepting = tokio::spawn(accept(listener, acceptor, tx)).abort_handle();
        Ok(TlsListener {
            ready,
            local,
            accepting,
        })
    }
}

impl Drop for TlsListener {
    /// The accepting task holds the port: stop it with the listener.
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(accepted) => accepted,
            // The accepting task holds the sender until it is aborted,
            // which is when this listener is dropped: not reached, and
            // never a busy loop if it were.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}

/// Accepts TCP connections and hands each to a handshake task.
async fn accept(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // Out of file descriptors and the like: as axum's own
                // listener does, wait a little rather than spin.
                tracing::warn!(error = %e, "serve: accept failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => {
                    let _ = ready.send((tls, peer)).await;
                }
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "serve: TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "serve: TLS handshake timed out"),
            }
        });
    }
}

/// An error of one connection (the next accept may succeed at once).
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_or_empty_files_are_usage_errors_naming_the_flag() {
        let missing = Path::new("/nonexistent/latchkey-cert.pem");
        let Err(failure) = acceptor(missing, missing) else {
            panic!("a missing file was accepted");
        };
        assert_eq!(failure.code, crate::support::exit::USAGE);
        assert!(
            failure
                .message
                .starts_with("--listen-tls-cert /nonexistent"),
            "{}",
            failure.message
        );
        let Err(failure) = acceptor(Path::new("/dev/null"), Path::new("/dev/null")) else {
            panic!("an empty file was accepted");
        };
        assert_eq!(failure.code, crate::support::exit::USAGE);
        assert!(
            failure.message.contains("no PEM certificate"),
            "{}",
            failure.message
        );
    }
}
