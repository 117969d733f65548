//! Routing a worker's lock connection through a fault proxy of its own.
//!
//! ```text
//! redis://:pw@db.internal:6380/2  --(proxy on 127.0.0.1:41234)-->  redis://:pw@127.0.0.1:41234/2
//! ```
//!
//! The proxy forwards raw TCP, so credentials and the database number pass
//! through unchanged; only the host and port in the URL are replaced. TLS
//! (`rediss://`) and Unix sockets cannot be proxied this way: such runs skip
//! the network faults.

use std::net::SocketAddr;

/// The host and port of a `redis://` URL (port 6379 if none); `None` for
/// other schemes.
pub fn host_port(url: &str) -> Option<(String, u16)> {
    let rest = url.strip_prefix("redis://")?;
    let authority = rest.split('/').next()?;
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(v6) = hostport.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => 6379,
            None => return None,
        };
        return Some((host.to_owned(), port));
    }
    match hostport.rsplit_once(':') {
        Some((host, port)) => Some((host.to_owned(), port.parse().ok()?)),
        None if !hostport.is_empty() => Some((hostport.to_owned(), 6379)),
        None => None,
    }
}

/// `url` with its host and port replaced by the proxy's `127.0.0.1:port`.
pub fn via_proxy(url: &str, port: u16) -> Option<String> {
    let rest = url.strip_prefix("redis://")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    let userinfo = authority.rsplit_once('@').map(|(u, _)| format!("{u}@"));
    Some(format!(
        "redis://{}127.0.0.1:{port}{path}",
        userinfo.unwrap_or_default()
    ))
}

/// The address a proxy should forward to for `url`.
pub async fn upstream(url: &str) -> Result<SocketAddr, String> {
    let (host, port) =
        host_port(url).ok_or_else(|| format!("cannot proxy {url}: only redis:// URLs can"))?;
    let mut addrs = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot resolve {host}: {e}"))?;
    addrs.next().ok_or_else(|| format!("{host} has no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_taken_apart() {
        assert_eq!(
            host_port("redis://127.0.0.1:7000/"),
            Some(("127.0.0.1".into(), 7000))
        );
        assert_eq!(host_port("redis://:p@ss@db:1/0"), Some(("db".into(), 1)));
        assert_eq!(host_port("redis://db"), Some(("db".into(), 6379)));
        assert_eq!(host_port("redis://[::1]:7/"), Some(("::1".into(), 7)));
        assert_eq!(host_port("rediss://db:1/"), None);
        assert_eq!(host_port("redis://db:x/"), None);
    }

    #[test]
    fn proxied_urls_keep_credentials_and_database() {
        assert_eq!(
            via_proxy("redis://:pw@db:6380/2", 41),
            Some("redis://:pw@127.0.0.1:41/2".into())
        );
        assert_eq!(
            via_proxy("redis://db", 41),
            Some("redis://127.0.0.1:41/".into())
        );
        assert_eq!(via_proxy("unix:///tmp/r.sock", 41), None);
    }
}
