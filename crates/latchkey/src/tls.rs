//! TLS for `rediss://` connections (layer 2, transport): the CA and client
//! certificate options of a [`ClientBuilder`](crate::ClientBuilder), checked
//! and turned into the `redis::Client` that every connection of a session is
//! made from (command, subscriber, cluster), so all of them speak TLS alike.
//!
//! Certificates and keys are PEM, given as file paths or as bytes. Files are
//! read when the client connects (not when the option is set), so a missing
//! file is an [`Error::InvalidInput`] naming it; a file that holds no
//! certificate, a key that does not match its certificate, and every
//! handshake failure are [`Error::Tls`].
//!
//! The TLS server name is the URL's host: redis-rs 1.8 verifies the server's
//! certificate against it and has no separate server-name (SNI) setting, so
//! there is no override. Connect by a name the certificate carries (an
//! `/etc/hosts` entry can point that name at the address); see
//! `docs/security.md`.

use std::path::PathBuf;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::{Error, Result};

/// PEM data, from a file or given directly.
#[derive(Clone)]
pub(crate) enum Pem {
    File(PathBuf),
    Bytes(Vec<u8>),
}

impl std::fmt::Debug for Pem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pem::File(path) => f.debug_tuple("File").field(path).finish(),
            // A private key may be among them: never printed.
            Pem::Bytes(bytes) => write!(f, "Bytes(<{} bytes>)", bytes.len()),
        }
    }
}

impl Pem {
    /// The PEM text; an unreadable file is bad input, named with `what`.
    fn read(&self, what: &str) -> Result<Vec<u8>> {
        match self {
            Pem::Bytes(bytes) => Ok(bytes.clone()),
            Pem::File(path) => std::fs::read(path).map_err(|e| {
                Error::InvalidInput(format!("cannot read the {what} {}: {e}", path.display()))
            }),
        }
    }

    /// Where the PEM came from, for messages.
    fn origin(&self, what: &str) -> String {
        match self {
            Pem::File(path) => format!("the {what} {}", path.display()),
            Pem::Bytes(_) => format!("the {what} given"),
        }
    }
}

/// The TLS options of a client; all unset means redis-rs's defaults (for a
/// `rediss://` URL: the system's trusted CAs, no client certificate).
#[derive(Debug, Clone, Default)]
pub(crate) struct TlsOptions {
    pub(crate) ca: Option<Pem>,
    /// Certificate (chain) and private key.
    pub(crate) client: Option<(Pem, Pem)>,
}

impl TlsOptions {
    fn is_set(&self) -> bool {
        self.ca.is_some() || self.client.is_some()
    }

    /// The certificates read and checked: each file holds what it should,
    /// and the client key belongs to the client certificate.
    fn certificates(&self) -> Result<redis::TlsCertificates> {
        let root_cert = match &self.ca {
            None => None,
            Some(ca) => {
                let pem = ca.read("CA file")?;
                let certs = certificates(&pem, &ca.origin("CA file"))?;
                let mut roots = rustls::RootCertStore::empty();
                for cert in certs {
                    roots.add(cert).map_err(|e| Error::Tls {
                        reason: format!(
                            "{} holds an unusable CA certificate: {e}",
                            ca.origin("CA file")
                        ),
                    })?;
                }
                Some(pem)
            }
        };
        let client_tls = match &self.client {
            None => None,
            Some((cert, key)) => {
                let cert_pem = cert.read("client certificate file")?;
                let key_pem = key.read("client key file")?;
                let chain = certificates(&cert_pem, &cert.origin("client certificate file"))?;
                let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| Error::Tls {
                    reason: format!(
                        "{} holds no PEM private key ({e})",
                        key.origin("client key file")
                    ),
                })?;
                check_pair(chain, private)?;
                Some(redis::ClientTlsConfig {
                    client_cert: cert_pem,
                    client_key: key_pem,
                })
            }
        };
        Ok(redis::TlsCertificates {
            client_tls,
            root_cert,
        })
    }
}

/// The certificates in `pem`; none is an error.
fn certificates(pem: &[u8], origin: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::Tls {
            reason: format!("{origin} is not valid PEM ({e})"),
        })?;
    if certs.is_empty() {
        return Err(Error::Tls {
            reason: format!("{origin} holds no PEM certificate"),
        });
    }
    Ok(certs)
}

/// Whether rustls accepts `chain` with `key` as a client identity (the key
/// must be the certificate's), before anything is sent.
fn check_pair(chain: Vec<CertificateDer<'static>>, key: PrivateKeyDer<'static>) -> Result<()> {
    install_crypto_provider();
    rustls::ClientConfig::builder()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_client_auth_cert(chain, key)
        .map(drop)
        .map_err(|e| Error::Tls {
            reason: crate::error_tls::explain(&e),
        })
}

/// Makes `ring` the process's rustls crypto provider unless one is already
/// installed (by the application, or by us before): redis-rs builds its
/// TLS configurations with the process default.
fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: one is installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// The redis-rs client for `url` with `tls`: a `rediss://` URL always gets
/// a crypto provider; TLS options need a `rediss://` URL.
pub(crate) fn redis_client(url: &str, tls: &TlsOptions) -> Result<redis::Client> {
    let bad_url = |e: redis::RedisError| Error::InvalidInput(format!("bad Redis URL {url:?}: {e}"));
    let client = redis::Client::open(url).map_err(bad_url)?;
    let is_tls = matches!(
        client.get_connection_info().addr(),
        redis::ConnectionAddr::TcpTls { .. }
    );
    if !is_tls {
        if tls.is_set() {
            return Err(Error::InvalidInput(format!(
                "TLS options (CA, client certificate) need a rediss:// URL, not {url:?}"
            )));
        }
        return Ok(client);
    }
    install_crypto_provider();
    if !tls.is_set() {
        return Ok(client);
    }
    redis::Client::build_with_tls(url, tls.certificates()?).map_err(|e| {
        match crate::error_tls::tls_failure(&e) {
            Some(reason) => Error::Tls { reason },
            None => bad_url(e),
        }
    })
}

/// The clients of `urls` (replicas): the server's TLS options apply to the
/// `rediss://` ones.
pub(crate) fn replica_clients(urls: &[String], tls: &TlsOptions) -> Result<Vec<redis::Client>> {
    let plain = TlsOptions::default();
    urls.iter()
        .map(|url| {
            let tls = if url.starts_with("rediss:") {
                tls
            } else {
                &plain
            };
            redis_client(url, tls).map_err(|e| match e {
                Error::InvalidInput(why) => Error::InvalidInput(format!("replica {url:?}: {why}")),
                other => other,
            })
        })
        .collect()
}

/// The certificates for a cluster client (`None`: no TLS options).
pub(crate) fn cluster_certificates(tls: &TlsOptions) -> Result<Option<redis::TlsCertificates>> {
    if tls.is_set() {
        tls.certificates().map(Some)
    } else {
        Ok(None)
    }
}
