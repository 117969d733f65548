//! TLS servers: a private CA, server and client certificates made at test
//! time, and `redis-server` serving TLS only (`--tls-port`, `--port 0`).
//!
//! ```
//! # #[cfg(feature = "tls")] {
//! use latchkey_testkit::{ClientAuth, RedisServer, TlsCerts};
//!
//! let certs = TlsCerts::generate();
//! let redis = RedisServer::builder().tls(&certs, ClientAuth::Required).start();
//! assert!(redis.url().starts_with("rediss://127.0.0.1:"));
//! // The kit's own admin commands speak TLS too (with the client certificate).
//! assert_eq!(redis.command(&["PING"]).unwrap(), "PONG");
//! # }
//! ```
//!
//! [`TlsCerts::generate`] (feature `tls`, which brings `rcgen`) writes a CA,
//! a server certificate for `localhost` and `127.0.0.1` signed by it, and a
//! client certificate signed by it, as PEM files in a directory of their own
//! that is removed when the last user of the certificates is dropped.
//! Another `generate` makes another CA: a client that trusts one refuses a
//! server whose certificate the other signed. [`TlsCerts::generate_for`]
//! makes the server certificate for other names only (a DNS name such as
//! `redis.test.invalid`, not the loopback address the server listens on:
//! what a TLS server-name override is for); the kit's own admin connection
//! then checks it against the first of them.

use std::fs;
use std::io;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// Whether a TLS server asks clients for a certificate (`tls-auth-clients`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// `no`: plain server-authenticated TLS.
    No,
    /// `optional`: a client may present a certificate; if it does, it must
    /// be signed by the CA.
    Optional,
    /// `yes`: mutual TLS, every client must present a certificate signed by
    /// the CA.
    Required,
}

impl ClientAuth {
    fn directive(self) -> &'static str {
        match self {
            ClientAuth::No => "no",
            ClientAuth::Optional => "optional",
            ClientAuth::Required => "yes",
        }
    }
}

/// A CA and the certificates it signed, as PEM files; see the module docs.
/// Clones share the files, which are removed when the last clone is dropped.
#[derive(Clone, Debug)]
pub struct TlsCerts {
    dir: Arc<CertDir>,
}

#[derive(Debug)]
struct CertDir(PathBuf, String);

impl Drop for CertDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

impl TlsCerts {
    /// The directory the PEM files are in.
    pub fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// The CA certificate (what a client passes as its CA file).
    pub fn ca(&self) -> PathBuf {
        self.dir().join("ca.pem")
    }

    /// The server's certificate, for `localhost` and `127.0.0.1` (or the
    /// names given to [`generate_for`](Self::generate_for)).
    pub fn server_cert(&self) -> PathBuf {
        self.dir().join("server.pem")
    }

    /// The server's private key.
    pub fn server_key(&self) -> PathBuf {
        self.dir().join("server.key")
    }

    /// A client certificate signed by the CA.
    pub fn client_cert(&self) -> PathBuf {
        self.dir().join("client.pem")
    }

    /// The client certificate's private key.
    pub fn client_key(&self) -> PathBuf {
        self.dir().join("client.key")
    }

    /// Reads one of the files (for clients that take PEM bytes).
    ///
    /// # Panics
    /// If the file cannot be read (it was written by [`generate`](Self::generate)).
    pub fn read(&self, path: &Path) -> Vec<u8> {
        fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
    }

    /// A CA, a server certificate (`localhost`, `127.0.0.1`) and a client
    /// certificate, fresh (new keys) every call.
    ///
    /// # Panics
    /// If a certificate cannot be made or written.
    #[cfg(feature = "tls")]
    pub fn generate() -> TlsCerts {
        TlsCerts::generate_for(&["localhost", "127.0.0.1"])
    }

    /// As [`generate`](Self::generate), with a server certificate for
    /// `names` only (DNS names or IP addresses; the first is what the kit's
    /// admin connection checks it against).
    ///
    /// # Panics
    /// If `names` is empty, or a certificate cannot be made or written.
    #[cfg(feature = "tls")]
    pub fn generate_for(names: &[&str]) -> TlsCerts {
        assert!(!names.is_empty(), "a server certificate needs a name");
        generate::all(names).unwrap_or_else(|e| panic!("latchkey-testkit: TLS certificates: {e}"))
    }

    /// The rustls configuration of the kit's admin connection: trusts the
    /// CA and presents the client certificate.
    fn admin_config(&self) -> io::Result<rustls::ClientConfig> {
        let invalid =
            |e: &dyn std::fmt::Display| io::Error::new(io::ErrorKind::InvalidData, e.to_string());
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(self.ca()).map_err(|e| invalid(&e))? {
            roots
                .add(cert.map_err(|e| invalid(&e))?)
                .map_err(|e| invalid(&e))?;
        }
        let chain = CertificateDer::pem_file_iter(self.client_cert())
            .map_err(|e| invalid(&e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(&e))?;
        let key = PrivateKeyDer::from_pem_file(self.client_key()).map_err(|e| invalid(&e))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(&e))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| invalid(&e))
    }
}

/// A server's TLS settings, kept in its [`ServerBuilder`](crate::ServerBuilder).
#[derive(Clone, Debug)]
pub(crate) struct ServerTls {
    certs: TlsCerts,
    auth: ClientAuth,
}

impl crate::ServerBuilder {
    /// Serves TLS only: `--tls-port` on the server's port, `--port 0`, with
    /// `certs`' server certificate and CA, asking clients for a certificate
    /// as `auth` says. [`RedisServer::url`](crate::RedisServer::url) is then
    /// `rediss://127.0.0.1:PORT/`, and the kit's own commands
    /// ([`RedisServer::command`](crate::RedisServer::command), readiness)
    /// speak TLS with `certs`' client certificate.
    pub fn tls(self, certs: &TlsCerts, auth: ClientAuth) -> Self {
        self.with_tls(ServerTls {
            certs: certs.clone(),
            auth,
        })
    }
}

impl ServerTls {
    /// The `redis-server` arguments: TLS on `port`, no plain TCP port.
    /// They follow `--port`, so they override it.
    pub(crate) fn args(&self, port: u16) -> Vec<std::ffi::OsString> {
        let certs = &self.certs;
        let mut args: Vec<std::ffi::OsString> = Vec::new();
        let mut pair = |name: &str, value: std::ffi::OsString| {
            args.push(name.into());
            args.push(value);
        };
        pair("--port", "0".into());
        pair("--tls-port", port.to_string().into());
        pair("--tls-cert-file", certs.server_cert().into());
        pair("--tls-key-file", certs.server_key().into());
        pair("--tls-ca-cert-file", certs.ca().into());
        pair("--tls-auth-clients", self.auth.directive().into());
        args
    }

    /// The kit's admin connection settings (read from the files each time:
    /// admin commands are few).
    pub(crate) fn admin(&self) -> io::Result<AdminTls> {
        let name = ServerName::try_from(self.certs.dir.1.clone())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(AdminTls(Arc::new(self.certs.admin_config()?), name))
    }
}

/// A TLS Sentinel set's settings, kept in its
/// [`SentinelBuilder`](crate::SentinelBuilder) (see `sentinel.rs`'s docs).
#[derive(Clone, Debug)]
pub(crate) struct SetTls {
    certs: TlsCerts,
    auth: ClientAuth,
}

/// Tries at a Sentinel's TLS port: another process may take the free port
/// picked for it before the Sentinel binds it.
const SENTINEL_TLS_PORT_ATTEMPTS: usize = 5;

impl crate::SentinelBuilder {
    /// Makes the primary and the replicas serve TLS only, with `certs`,
    /// asking clients for a certificate as `auth` says (as
    /// [`ServerBuilder::tls`](crate::ServerBuilder::tls)), and replicate
    /// over TLS (`tls-replication yes`). The Sentinels keep their plain
    /// port for clients ([`SentinelSet::sentinel_addrs`](crate::SentinelSet::sentinel_addrs))
    /// and reach the data nodes over TLS, presenting the server certificate.
    /// They reach each other over TLS too, at the port their hello messages
    /// announce, so each also has a TLS-only port of its own, for its peers
    /// (without it a crashed primary is never failed over: the votes do not
    /// get through). A client of the set connects to the primary the
    /// Sentinels name over TLS (its [`RedisServer::url`](crate::RedisServer::url)
    /// is `rediss://`), trusting [`TlsCerts::ca`]. Everything else of the
    /// set works alike: the kit's own commands to the data nodes speak TLS.
    #[cfg(feature = "tls")]
    pub fn tls(self, certs: &TlsCerts, auth: ClientAuth) -> Self {
        self.with_tls(SetTls {
            certs: certs.clone(),
            auth,
        })
    }
}

impl SetTls {
    /// A data node: TLS only, replicating over TLS.
    pub(crate) fn data_node(&self) -> crate::ServerBuilder {
        crate::RedisServer::builder()
            .tls(&self.certs, self.auth)
            .arg("tls-replication", "yes")
    }

    /// A Sentinel with `conf` and the TLS directives: `tls-replication yes`
    /// (it reaches the data nodes and its peers over TLS, presenting the
    /// server certificate), and a TLS port of its own beside its plain
    /// one, because its hello messages announce the TLS port to its peers.
    pub(crate) fn start_sentinel(&self, conf: &str) -> crate::RedisServer {
        let certs = &self.certs;
        let mut attempt = 1;
        loop {
            let tls_port = crate::free_port();
            let conf = format!(
                "{conf}tls-port {tls_port}\n\
                 tls-replication yes\n\
                 tls-cert-file {}\n\
                 tls-key-file {}\n\
                 tls-ca-cert-file {}\n\
                 tls-auth-clients {}\n",
                certs.server_cert().display(),
                certs.server_key().display(),
                certs.ca().display(),
                self.auth.directive(),
            );
            match crate::RedisServer::builder().sentinel(conf).try_start() {
                Ok(sentinel) => return sentinel,
                // Its TLS port was taken meanwhile: another one.
                Err(e)
                    if e.to_string().contains("Address already in use")
                        && attempt < SENTINEL_TLS_PORT_ATTEMPTS =>
                {
                    attempt += 1;
                }
                Err(e) => panic!("latchkey-testkit: a TLS Sentinel: {e}"),
            }
        }
    }
}

/// The kit's admin connection over TLS (readiness, `command`).
#[derive(Clone)]
pub(crate) struct AdminTls(Arc<rustls::ClientConfig>, ServerName<'static>);

impl std::fmt::Debug for AdminTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminTls")
    }
}

impl AdminTls {
    /// `tcp` with a TLS session to the server on top.
    pub(crate) fn wrap(
        &self,
        tcp: TcpStream,
    ) -> io::Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>> {
        let conn = rustls::ClientConnection::new(self.0.clone(), self.1.clone())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok(rustls::StreamOwned::new(conn, tcp))
    }
}

#[cfg(feature = "tls")]
mod generate {
    use std::fs;
    use std::io;
    use std::sync::atomic::{AtomicU64, Ordering};

    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };

    use super::TlsCerts;

    pub(super) fn all(names: &[&str]) -> io::Result<TlsCerts> {
        let dir = fresh_dir()?;
        let first = names.first().map(|n| n.to_string()).unwrap_or_default();
        let certs = TlsCerts {
            dir: std::sync::Arc::new(super::CertDir(dir, first)),
        };
        let err = |e: rcgen::Error| io::Error::other(e.to_string());

        let ca_key = KeyPair::generate().map_err(err)?;
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        // A name of its own: a client that trusts another CA finds no
        // issuer of this name (unknown issuer), as with a real stranger.
        let name = format!("latchkey test CA {}", certs.dir().display());
        ca.distinguished_name.push(DnType::CommonName, name);
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca.self_signed(&ca_key).map_err(err)?;
        let issuer = Issuer::new(ca, ca_key);

        let leaf = |names: Vec<String>, purposes: Vec<ExtendedKeyUsagePurpose>, cn: &str| {
            let key = KeyPair::generate().map_err(err)?;
            let mut params = CertificateParams::new(names).map_err(err)?;
            params.distinguished_name.push(DnType::CommonName, cn);
            params.extended_key_usages = purposes;
            let cert = params.signed_by(&key, &issuer).map_err(err)?;
            Ok::<_, io::Error>((cert.pem(), key.serialize_pem()))
        };
        let (server, server_key) = leaf(
            names.iter().map(|n| n.to_string()).collect(),
            // A cluster node or replica is a TLS client of its peers too,
            // with the same certificate (`tls-cert-file`).
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
            "latchkey test server",
        )?;
        let (client, client_key) = leaf(
            vec!["latchkey-test-client".into()],
            vec![ExtendedKeyUsagePurpose::ClientAuth],
            "latchkey test client",
        )?;
        fs::write(certs.ca(), ca_cert.pem())?;
        fs::write(certs.server_cert(), server)?;
        fs::write(certs.server_key(), server_key)?;
        fs::write(certs.client_cert(), client)?;
        fs::write(certs.client_key(), client_key)?;
        Ok(certs)
    }

    fn fresh_dir() -> io::Result<std::path::PathBuf> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir()
                .join(format!("latchkey-testkit-tls-{}-{n}", std::process::id()));
            match fs::create_dir(&dir) {
                Ok(()) => return Ok(dir),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }
}
