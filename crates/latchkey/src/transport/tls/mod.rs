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
//! The TLS server name is the URL's host unless a server-name override is
//! given ([`ClientBuilder::tls_server_name`](crate::ClientBuilder::tls_server_name)):
//! then the certificate is checked against that name, which is also sent as
//! SNI, while the connection still goes to the URL's address
//! (`crate::transport::tls::server_name` says how, on top of redis-rs 1.8, which has no such
//! setting). The override applies to every `rediss://` connection made from
//! the client's URL (command, subscriber, replicas, the primary the
//! Sentinels name), and is refused on a Redis Cluster, whose nodes are
//! reached by the addresses they announce; see `docs/security.md`.

pub(crate) mod server_name;

use std::path::PathBuf;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::transport::tls::server_name::{Override, Target};
use crate::vocab::error::{Error, Result};

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
    /// The name to check the server's certificate against (and send as
    /// SNI) instead of the URL's host.
    pub(crate) server_name: Option<String>,
}

impl TlsOptions {
    fn is_set(&self) -> bool {
        self.ca.is_some() || self.client.is_some() || self.server_name.is_some()
    }

    /// The server-name override, checked, with a rustls configuration of
    /// the same CA and client certificate (`None`: no override).
    pub(crate) fn server_override(&self) -> Result<Option<Override>> {
        let Some(name) = &self.server_name else {
            return Ok(None);
        };
        crate::transport::tls::server_name::check_name(name)?;
        Ok(Some(Override::new(name)))
    }

    /// The client certificate chain and key, read and parsed.
    #[allow(clippy::type_complexity)]
    fn identity(&self) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>> {
        let Some((cert, key)) = &self.client else {
            return Ok(None);
        };
        let cert_pem = cert.read("client certificate file")?;
        let key_pem = key.read("client key file")?;
        let chain = certificates(&cert_pem, &cert.origin("client certificate file"))?;
        let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| Error::Tls {
            reason: format!(
                "{} holds no PEM private key ({e})",
                key.origin("client key file")
            ),
        })?;
        Ok(Some((chain, private)))
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
        let client_tls = match (&self.client, self.identity()?) {
            (Some((cert, key)), Some((chain, private))) => {
                check_pair(chain, private, &cert.origin("client certificate file"))?;
                Some(redis::ClientTlsConfig {
                    client_cert: cert.read("client certificate file")?,
                    client_key: key.read("client key file")?,
                })
            }
            _ => None,
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
/// must be the certificate's), before anything is sent. `origin` names the
/// certificate file: a refusal here is about *our* certificate, never the
/// server's.
fn check_pair(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    origin: &str,
) -> Result<()> {
    if chain.first().is_some_and(|cert| is_x509_v1(cert)) {
        // rustls (webpki) parses only v3 certificates, and refuses a v1 one
        // as UnsupportedCertVersion; OpenSSL (redis-cli) accepts it. Say
        // which file it is and how to reissue it.
        return Err(Error::Tls {
            reason: format!(
                "{origin} is an X.509 v1 certificate (no extensions: what `openssl x509 -req` \
                 makes unless given -extfile), which rustls cannot use as a client certificate; \
                 reissue it as v3 from the same key and CA, e.g. `openssl x509 -req -in client.csr \
                 -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 -extfile client.ext \
                 -out client.pem` with client.ext holding `extendedKeyUsage = clientAuth`"
            ),
        });
    }
    install_crypto_provider();
    rustls::ClientConfig::builder()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_client_auth_cert(chain, key)
        .map(drop)
        .map_err(|e| Error::Tls {
            reason: match &e {
                rustls::Error::InvalidCertificate(why) => {
                    format!("{origin} cannot be used as a client certificate ({why:?}) [{e}]")
                }
                _ => crate::vocab::error::tls::explain(&e),
            },
        })
}

/// Whether `cert` (DER) is an X.509 v1 certificate: its `TBSCertificate`
/// starts with the serial number, where v2 and v3 start with the explicit
/// `[0]` version field (tag 0xA0). Not DER that parses as a certificate at
/// all: `false` (rustls then says what is wrong with it).
fn is_x509_v1(cert: &[u8]) -> bool {
    /// The contents of the SEQUENCE `der` starts with (to its end: only the
    /// first byte is looked at).
    fn enter(der: &[u8]) -> Option<&[u8]> {
        let (&tag, rest) = der.split_first()?;
        let (&len, rest) = rest.split_first()?;
        if tag != 0x30 {
            return None;
        }
        // Short form: the length itself; long form: 0x80 | bytes of length.
        let length_bytes = if len & 0x80 == 0 {
            0
        } else {
            usize::from(len & 0x7f)
        };
        rest.get(length_bytes..)
    }
    enter(cert)
        .and_then(enter)
        .and_then(|tbs| tbs.first())
        .is_some_and(|&first| first == 0x02)
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

/// The server at `url` with `tls` (and `over`, `tls`'s server-name
/// override if it has one: see [`TlsOptions::server_override`]).
pub(crate) fn redis_client(url: &str, tls: &TlsOptions, over: Option<&Override>) -> Result<Target> {
    let client = tls_client(url, tls)?;
    match over {
        Some(over) => over
            .target(client.get_connection_info().clone())
            .map_err(|e| Error::bad_url(url, &e)),
        _ => Ok(Target::plain(client)),
    }
}

/// The redis-rs client for `url` with `tls`: a `rediss://` URL always gets
/// a crypto provider; TLS options need a `rediss://` URL.
fn tls_client(url: &str, tls: &TlsOptions) -> Result<redis::Client> {
    let bad_url = |e: redis::RedisError| Error::bad_url(url, &e);
    let client = redis::Client::open(url).map_err(bad_url)?;
    let is_tls = matches!(
        client.get_connection_info().addr(),
        redis::ConnectionAddr::TcpTls { .. }
    );
    if !is_tls {
        if tls.is_set() {
            return Err(Error::InvalidInput(format!(
                "TLS options (CA, client certificate, server name) need a rediss:// URL, not {:?}",
                crate::vocab::url::redact_url(url)
            )));
        }
        return Ok(client);
    }
    install_crypto_provider();
    if !tls.is_set() {
        return Ok(client);
    }
    redis::Client::build_with_tls(url, tls.certificates()?).map_err(|e| {
        match crate::vocab::error::tls::tls_failure(&e) {
            Some(reason) => Error::Tls { reason },
            None => bad_url(e),
        }
    })
}

/// The clients of `urls` (replicas): the server's TLS options (the
/// server-name override `over` included) apply to the `rediss://` ones.
pub(crate) fn replica_clients(
    urls: &[String],
    tls: &TlsOptions,
    over: Option<&Override>,
) -> Result<Vec<Target>> {
    let plain = TlsOptions::default();
    urls.iter()
        .map(|url| {
            let (tls, over) = if url.starts_with("rediss:") {
                (tls, over)
            } else {
                (&plain, None)
            };
            redis_client(url, tls, over).map_err(|e| match e {
                Error::InvalidInput(why) => Error::InvalidInput(format!(
                    "replica {:?}: {why}",
                    crate::vocab::url::redact_url(url)
                )),
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

#[cfg(test)]
mod tests {
    use super::is_x509_v1;

    #[test]
    fn a_v1_certificate_is_told_from_a_v3_one_by_its_version_field() {
        // Certificate SEQUENCE, TBSCertificate SEQUENCE (long-form lengths),
        // then the serial number (v1) or the [0] version field (v3).
        let v1 = [
            0x30, 0x82, 0x02, 0xaa, 0x30, 0x82, 0x01, 0x92, 0x02, 0x14, 0x74,
        ];
        let v3 = [
            0x30, 0x82, 0x02, 0xaa, 0x30, 0x82, 0x01, 0x92, 0xa0, 0x03, 0x02, 0x01, 0x02,
        ];
        let short = [0x30, 0x10, 0x30, 0x0e, 0x02, 0x01, 0x01];
        assert!(is_x509_v1(&v1));
        assert!(!is_x509_v1(&v3));
        assert!(is_x509_v1(&short));
        for garbage in [&[][..], &[0x30], &[0x04, 0x02, 0x30, 0x00], &[0x30, 0x84]] {
            assert!(!is_x509_v1(garbage), "{garbage:?}");
        }
    }
}
