//! Which server answered (`INFO server`), and whether latchkey can work on
//! it: Redis 7.0 or later, or Valkey 7.2 or later. Checked at connect, so
//! that a server too old for `SET … NX … GET` is one clear error
//! ([`Error::UnsupportedServer`]) instead of a syntax error at the first
//! acquisition.
//!
//! Valkey 8 and 9 report `redis_version:7.2.4` (the Redis version they
//! are compatible with) beside their own `valkey_version`; Valkey 7.2
//! says `server_name:valkey` and gives its version as `redis_version`.
//! A server whose INFO carries no version at all (a
//! proxy that hides it) passes: the first refused command then says what
//! is wrong.

use crate::vocab::error::{Error, Result};

/// The oldest Redis latchkey works on: `SET … NX … GET` is 7.0's.
const MIN_REDIS: (u32, u32) = (7, 0);
/// The oldest Valkey: its first release, compatible with Redis 7.2.
const MIN_VALKEY: (u32, u32) = (7, 2);

/// A server as `INFO server` describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServerVersion {
    /// "Redis" or "Valkey".
    pub(crate) server: &'static str,
    /// The version it reports, as text (`7.0.15`, `8.1.8`).
    pub(crate) version: String,
}

impl ServerVersion {
    /// The server an `INFO` reply (any sections, `server` among them)
    /// describes; `None` without a version field.
    pub(crate) fn from_info(info: &str) -> Option<ServerVersion> {
        let field = |name: &str| {
            info.lines()
                .find_map(|line| line.trim().strip_prefix(name)?.strip_prefix(':'))
                .map(str::to_owned)
        };
        let valkey = field("server_name").is_some_and(|name| name == "valkey");
        if let Some(version) = field("valkey_version") {
            return Some(ServerVersion {
                server: "Valkey",
                version,
            });
        }
        field("redis_version").map(|version| ServerVersion {
            server: if valkey { "Valkey" } else { "Redis" },
            version,
        })
    }

    /// Whether latchkey can work on this server. A version it cannot read
    /// (no digits) is given the benefit of the doubt.
    pub(crate) fn is_supported(&self) -> bool {
        let mut parts = self.version.split('.').map(|p| p.parse::<u32>().ok());
        let (Some(Some(major)), minor) = (parts.next(), parts.next()) else {
            return true;
        };
        let minor = minor.flatten().unwrap_or(0);
        let least = if self.server == "Valkey" {
            MIN_VALKEY
        } else {
            MIN_REDIS
        };
        (major, minor) >= least
    }
}

/// `Ok` when the server whose `INFO` is `info` is one latchkey supports (or
/// says no version), else [`Error::UnsupportedServer`] naming `address`.
pub(crate) fn check(info: &str, address: &str) -> Result<()> {
    match ServerVersion::from_info(info) {
        Some(found) if !found.is_supported() => Err(Error::UnsupportedServer {
            server: found.server,
            version: found.version,
            address: address.to_owned(),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(info: &str) -> ServerVersion {
        ServerVersion::from_info(info).expect("a version")
    }

    #[test]
    fn tells_valkey_from_redis_and_applies_each_ones_floor() {
        let redis7 = server("# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n");
        assert_eq!(
            (redis7.server, redis7.version.as_str()),
            ("Redis", "7.0.15")
        );
        assert!(redis7.is_supported());
        assert!(server("redis_version:8.2.3\r\n").is_supported());
        // Valkey 8 reports the Redis version it is compatible with, too.
        let valkey8 =
            server("redis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.8\r\n");
        assert_eq!(
            (valkey8.server, valkey8.version.as_str()),
            ("Valkey", "8.1.8")
        );
        assert!(valkey8.is_supported());
        let old = server("redis_version:6.2.5\r\n");
        assert!(!old.is_supported());
        // KeyDB reports a 6.x Redis version: no SET NX GET.
        assert!(!server("redis_version:6.3.4\r\n").is_supported());
        assert!(!ServerVersion {
            server: "Valkey",
            version: "7.1.0".into()
        }
        .is_supported());
        assert!(server("redis_version:7.2.4\r\nserver_name:valkey\r\n").is_supported());
        assert!(server("redis_version:unknown\r\n").is_supported());
        assert_eq!(
            ServerVersion::from_info("# Cluster\r\ncluster_enabled:0\r\n"),
            None
        );
    }

    #[test]
    fn the_refusal_is_one_line_naming_the_version_and_the_floor() {
        let err = check("redis_version:6.2.5\r\n", "127.0.0.1:7000").unwrap_err();
        assert!(matches!(&err, Error::UnsupportedServer { version, .. } if version == "6.2.5"));
        assert_eq!(
            err.to_string(),
            "Redis 6.2.5 at 127.0.0.1:7000 is not supported: latchkey needs Redis 7.0 or later, \
             or Valkey 7.2 or later"
        );
        assert!(check("no version here", "x").is_ok());
    }
}
