//! The TLS server-name override (layer 2, transport): connect to one
//! address, but check the server's certificate against, and send as SNI,
//! another name ([`ClientBuilder::tls_server_name`](crate::ClientBuilder::tls_server_name)).
//!
//! redis-rs takes the TLS server name from the URL's host and has no
//! separate setting, so the override renames the host: a connection to
//! `rediss://10.0.0.5:6380` with the name `redis.internal` is made as
//! `rediss://redis.internal:6380` (rustls then checks the certificate
//! against `redis.internal` and sends it as SNI), with a [`Redirect`] as the
//! connection's DNS resolver that sends `redis.internal` to `10.0.0.5` (any
//! other name resolves as usual). A [`Target`] is such a pair: a redis-rs
//! client and where its name really points.
//!
//! redis-rs takes a DNS resolver only for multiplexed and cluster
//! connections, not for its `ConnectionManager`. So under an override the
//! command connection is a [`PinnedConnection`](crate::transport::pinned::PinnedConnection)
//! (multiplexed connections, reconnected on failure); the subscriber's is a
//! multiplexed connection already ([`Target::config`] gives it the resolver).

use std::net::SocketAddr;
use std::sync::Arc;

use redis::io::AsyncDNSResolver;
use redis::{AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, RedisFuture, RedisResult};
use rustls::pki_types::ServerName;

use crate::vocab::error::{Error, Result};

/// A checked server-name override.
#[derive(Clone)]
pub(crate) struct Override {
    name: Arc<str>,
}

impl std::fmt::Debug for Override {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Override").field(&self.name).finish()
    }
}

/// `name` if it can be a TLS server-name override: a DNS name (an address
/// belongs in the URL, which is checked against it already).
pub(crate) fn check_name(name: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::InvalidInput(format!(
            "the TLS server name {name:?} {why}"
        )))
    };
    if name.trim().is_empty() {
        return bad("is empty; give the DNS name the server's certificate carries");
    }
    match ServerName::try_from(name) {
        Ok(ServerName::DnsName(_)) => Ok(()),
        Ok(_) => bad("is an IP address; put the address in the URL instead (the server name overrides it with a DNS name the certificate carries)"),
        Err(_) => bad("is not a valid DNS name"),
    }
}

impl Override {
    /// The override `name` (checked by [`check_name`]).
    pub(crate) fn new(name: &str) -> Override {
        Override { name: name.into() }
    }

    /// The server of `info` reached under this name: a `rediss://` one is
    /// renamed and redirected to its real host; any other is left alone.
    pub(crate) fn target(&self, info: ConnectionInfo) -> RedisResult<Target> {
        let ConnectionAddr::TcpTls {
            host,
            port,
            insecure,
            tls_params,
        } = info.addr().clone()
        else {
            return Ok(Target::plain(redis::Client::open(info)?));
        };
        let renamed = ConnectionAddr::TcpTls {
            host: self.name.to_string(),
            port,
            insecure,
            tls_params,
        };
        Ok(Target {
            client: redis::Client::open(info.set_addr(renamed))?,
            redirect: Some(Redirect {
                over: self.clone(),
                real: host,
                port,
            }),
        })
    }
}

/// A DNS resolver that sends the override's name to the real host (see the
/// module docs); every other name resolves as usual.
#[derive(Clone, Debug)]
pub(crate) struct Redirect {
    over: Override,
    /// The host of the URL (or the one the Sentinels named).
    real: String,
    port: u16,
}

impl AsyncDNSResolver for Redirect {
    fn resolve<'a, 'b: 'a>(
        &'a self,
        host: &'b str,
        port: u16,
    ) -> RedisFuture<'a, Box<dyn Iterator<Item = SocketAddr> + Send + 'a>> {
        let host = if host.eq_ignore_ascii_case(&self.over.name) {
            self.real.as_str()
        } else {
            host
        };
        Box::pin(async move {
            let addrs = lookup(host, port).await?;
            Ok(Box::new(addrs.into_iter()) as Box<dyn Iterator<Item = SocketAddr> + Send>)
        })
    }
}

async fn lookup(host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok(tokio::net::lookup_host((host, port)).await?.collect())
}

/// A server to connect to: its redis-rs client and, under a server-name
/// override, where the name really points (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct Target {
    pub(crate) client: redis::Client,
    redirect: Option<Redirect>,
}

impl Target {
    /// `client` as it is, without an override.
    pub(crate) fn plain(client: redis::Client) -> Target {
        Target {
            client,
            redirect: None,
        }
    }

    /// Whether connections to this server need the override's resolver.
    pub(crate) fn is_redirected(&self) -> bool {
        self.redirect.is_some()
    }

    /// `config` with the override's resolver, if any.
    pub(crate) fn config(&self, config: AsyncConnectionConfig) -> AsyncConnectionConfig {
        match &self.redirect {
            Some(redirect) => config.set_dns_resolver(redirect.clone()),
            None => config,
        }
    }

    /// A multiplexed connection to the server, bounded by `config`'s timeouts.
    pub(crate) async fn connect(
        &self,
        config: AsyncConnectionConfig,
    ) -> RedisResult<redis::aio::MultiplexedConnection> {
        self.client
            .get_multiplexed_async_connection_with_config(&self.config(config))
            .await
    }

    /// `host:port` of the server (the real one), for messages.
    pub(crate) fn server(&self) -> String {
        match &self.redirect {
            Some(r) if r.real.contains(':') && !r.real.starts_with('[') => {
                format!("[{}]:{} (TLS name {})", r.real, r.port, r.over.name)
            }
            Some(r) => format!("{}:{} (TLS name {})", r.real, r.port, r.over.name),
            None => self.client.get_connection_info().addr().to_string(),
        }
    }
}
