//! What a refused connection says: where it was refused (`host:port`, no
//! user or password), in one line, and what a wrong URL gets wrong.

use super::core::Core;

/// `host:port` of a Redis URL (the default port when it names none), or
/// the path of a `unix://` one.
fn host_port(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    if scheme.contains("unix") {
        return rest.split('?').next().unwrap_or(rest).to_owned();
    }
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let has_port = match host.rfind(']') {
        Some(end) => host[end..].contains(':'),
        None => host.contains(':'),
    };
    match has_port {
        true => host.to_owned(),
        false => format!("{host}:6379"),
    }
}

impl Core {
    /// Where this core connects, for a refusal's message: `host:port` of
    /// each URL (or of the sentinels), no user or password.
    fn address(&self) -> String {
        match &self.options.sentinel {
            Some((sentinels, master)) => {
                format!("sentinels {} (master {master:?})", sentinels.join(", "))
            }
            None => std::iter::once(&self.options.url)
                .chain(&self.options.seeds)
                .map(|url| host_port(url))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// A connection refused names where it was refused, in one line; what
    /// a wrong URL gets says what is wrong with it.
    pub(super) fn connect_failed(&self, e: latchkey::Error) -> latchkey::Error {
        let at = self.address();
        match e {
            latchkey::Error::Unreachable(cause) => {
                let said = cause.to_string();
                // The library's message leaves out redis-rs's kind names;
                // a reply that did not parse is a server that is no Redis.
                let detail = match said.contains("Parse error") || said.contains("Incompatible type") {
                    true => format!("{at}: the server there does not speak Redis's protocol (is it a Redis port?)"),
                    false => format!("{at}: {cause}"),
                };
                latchkey::Error::Unreachable(redis::RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    detail,
                )))
            }
            e if e.code() == "REDIS_ERROR" && e.to_string().contains("DB index is out of range") => {
                latchkey::Error::InvalidInput(format!(
                    "the database the URL names does not exist at {at} (DB index is out of range: see the server's `databases` setting)"
                ))
            }
            latchkey::Error::Timeout {
                op: "connect",
                after,
                ..
            }
                if self.options.url.starts_with("rediss://") =>
            {
                latchkey::Error::Tls {
                    reason: format!(
                        "no TLS handshake with {at} within {after:?}: does the server serve TLS there? (rediss:// asks for TLS, redis:// for a plain connection)"
                    ),
                }
            }
            other => other,
        }
    }
}
