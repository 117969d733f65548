//! TLS options of every subcommand: `--tls-ca`, `--tls-cert`, `--tls-key`,
//! `--tls-server-name` (and `LATCHKEY_TLS_CA`, `LATCHKEY_TLS_CERT`,
//! `LATCHKEY_TLS_KEY`, `LATCHKEY_TLS_SERVER_NAME`), for `rediss://` URLs.
//!
//! ```text
//! latchkey --redis rediss://redis.internal:6380 --tls-ca ca.pem \
//!     --tls-cert client.pem --tls-key client.key run nightly -- ./report.sh
//! ```
//!
//! The files are read when connecting: a missing one is a usage error
//! (exit 2), one that holds no certificate or key, and every refused
//! handshake, a TLS error (exit 69). The TLS server name is the URL's host
//! unless `--tls-server-name` names another (an empty or invalid name, or one
//! with a `redis://` URL or a Redis Cluster, is a usage error, exit 2; see
//! docs/security.md).

use std::path::PathBuf;

use clap::Args;
use latchkey::ClientBuilder;

use crate::support::exit::Failure;
use crate::GLOBAL_HEADING;

#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = GLOBAL_HEADING)]
pub struct TlsArgs {
    /// CA certificate(s) (PEM) to trust for a rediss:// server, instead of
    /// the system's.
    #[arg(
        long,
        value_name = "FILE",
        global = true,
        hide_env_values = true,
        env = "LATCHKEY_TLS_CA"
    )]
    pub tls_ca: Option<PathBuf>,

    /// Client certificate (PEM) for mutual TLS; needs --tls-key.
    #[arg(
        long,
        value_name = "FILE",
        global = true,
        hide_env_values = true,
        env = "LATCHKEY_TLS_CERT"
    )]
    pub tls_cert: Option<PathBuf>,

    /// The client certificate's private key (PEM); needs --tls-cert.
    #[arg(
        long,
        value_name = "FILE",
        global = true,
        hide_env_values = true,
        env = "LATCHKEY_TLS_KEY"
    )]
    pub tls_key: Option<PathBuf>,

    /// Check the server's certificate against NAME, and send NAME as SNI,
    /// instead of the URL's host (still connecting to the URL's address).
    #[arg(
        long,
        value_name = "NAME",
        global = true,
        hide_env_values = true,
        env = "LATCHKEY_TLS_SERVER_NAME"
    )]
    pub tls_server_name: Option<String>,
}

impl TlsArgs {
    /// A usage error for half a client identity, before anything connects.
    /// (An empty flag is clap's usage error; an empty variable counts as
    /// unset, which fails closed: the system's CAs do not trust a private CA.)
    pub fn check(&self) -> Result<(), Failure> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(_), None) => Err(Failure::usage(
                "--tls-cert needs --tls-key (LATCHKEY_TLS_KEY): the certificate's private key",
            )),
            (None, Some(_)) => Err(Failure::usage(
                "--tls-key needs --tls-cert (LATCHKEY_TLS_CERT): the client certificate",
            )),
            _ => Ok(()),
        }
    }

    /// A plain redis-rs client for `url` with these options, for the
    /// doctor's raw probes (the library's own connections get them through
    /// [`apply`](Self::apply)).
    pub fn redis_client(&self, url: &str) -> redis::RedisResult<redis::Client> {
        let tls = url.starts_with("rediss:");
        if tls && self.tls_server_name.is_some() {
            return Err(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "this probe does not take --tls-server-name (the library's own connections do)",
            )));
        }
        if !tls || (self.tls_ca.is_none() && self.tls_cert.is_none()) {
            return redis::Client::open(url);
        }
        let read = |path: &PathBuf| std::fs::read(path).map_err(redis::RedisError::from);
        let root_cert = self.tls_ca.as_ref().map(read).transpose()?;
        let client_tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                client_cert: read(cert)?,
                client_key: read(key)?,
            }),
            _ => None,
        };
        let certs = redis::TlsCertificates {
            client_tls,
            root_cert,
        };
        redis::Client::build_with_tls(url, certs)
    }

    /// `builder` with these options.
    pub fn apply(&self, mut builder: ClientBuilder) -> ClientBuilder {
        if let Some(ca) = &self.tls_ca {
            builder = builder.tls_ca_file(ca);
        }
        if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
            builder = builder.tls_client_cert_files(cert, key);
        }
        if let Some(name) = &self.tls_server_name {
            builder = builder.tls_server_name(name);
        }
        builder
    }
}
