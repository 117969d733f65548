//! A redis-rs error as latchkey's messages show it: without the names of
//! redis-rs's own error kinds that its messages end with
//! (` - InvalidClientConfig`, ` - Io`), which name the client's types, not
//! what went wrong; and a URL that did not parse is told what a URL looks
//! like. Every message that quotes a redis-rs error goes through here, so
//! the CLI and the bindings print the same line.

use std::fmt;

use super::Error;

/// The kind names redis-rs appends to its messages.
const REDIS_KINDS: &[&str] = &[
    "Parse",
    "AuthenticationFailed",
    "UnexpectedReturnType",
    "InvalidClientConfig",
    "Io",
    "Client",
    "Extension",
    "MasterNameNotFoundBySentinel",
    "NoValidReplicasFoundBySentinel",
    "EmptySentinelList",
    "ClusterConnectionNotFound",
    "Serialize",
    "RESP3NotSupported",
];

/// What a URL looks like, for one that did not parse.
const URL_FORMS: &str = "expected redis://[user[:password]@]host[:port][/db], \
    rediss://… for TLS, or unix:///path/to/socket";

/// A redis-rs error, displayed as latchkey's messages quote it.
pub(crate) struct Said<'a>(pub(crate) &'a redis::RedisError);

impl fmt::Display for Said<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&plain(&self.0.to_string()))
    }
}

/// `message` without redis-rs's kind names.
fn plain(message: &str) -> String {
    let mut out = message.to_owned();
    for kind in REDIS_KINDS {
        let tag = format!(" - {kind}");
        while let Some(at) = out.find(&tag) {
            let end = at + tag.len();
            // The whole name: followed by the end, or its detail's ": ".
            if out[end..].is_empty() || out[end..].starts_with(':') {
                out.replace_range(at..end, "");
            } else {
                break;
            }
        }
    }
    out.replace("Redis URL did not parse", URL_FORMS)
}

impl Error {
    /// A URL (or its TLS or Sentinel settings) redis-rs refused.
    pub(crate) fn bad_url(url: &str, err: &redis::RedisError) -> Error {
        Error::InvalidInput(format!(
            "bad Redis URL {:?}: {}",
            crate::vocab::url::redact_url(url),
            Said(err)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::{plain, Said};

    #[test]
    fn kind_names_go_and_the_detail_stays() {
        assert_eq!(
            plain("Redis URL did not parse - InvalidClientConfig"),
            format!("{}", super::URL_FORMS)
        );
        assert_eq!(
            plain("broken pipe - Io: the detail"),
            "broken pipe: the detail"
        );
        // A word that only begins like a kind name is left alone.
        assert_eq!(plain("a - Iowa field"), "a - Iowa field");
        let err =
            redis::RedisError::from((redis::ErrorKind::InvalidClientConfig, "no Sentinel given"));
        assert!(
            !Said(&err).to_string().contains("InvalidClientConfig"),
            "{}",
            Said(&err)
        );
    }
}
