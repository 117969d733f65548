//! The verbs every door serves, once: typed requests and replies (serde for
//! the wire, schemars for the schemas a door publishes) and one async fn per
//! verb over a [`latchkey::Client`]. A door (`mcp.rs`) only decodes a
//! request, calls the verb and encodes what it returns.
//!
//! Stateless by the owner token: a verb keeps nothing between calls. An
//! `acquire` leaves the lock held until its TTL and hands back the owner
//! token, which `extend` and `release` take; nothing here renews a lock (a
//! caller that stops calling loses it at the TTL, as a dead process does).
//!
//! Durations are text with a unit (`500ms`, `30s`, `10m`, `1h`), parsed as
//! the CLI's options are: a bare number could be seconds to one caller and
//! milliseconds to another.

pub(crate) mod elect;
pub(crate) mod inspect;
pub(crate) mod lease;
pub(crate) mod notify;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::support::duration;

/// Why a verb failed: latchkey's stable error code
/// ([`latchkey::Error::code`], e.g. `NOT_HELD`, `INVALID_TTL`,
/// `UNREACHABLE`) and a one-line message for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct VerbError {
    /// The stable code: match on it, never on the message.
    pub code: String,
    /// One line saying what went wrong and, where it helps, what to do.
    pub message: String,
}

impl VerbError {
    pub fn new(code: &str, message: impl Into<String>) -> VerbError {
        let message: String = message.into();
        // Messages from lower layers (redis-rs, the OS) may span lines.
        let one_line = message.split_whitespace().collect::<Vec<_>>().join(" ");
        VerbError {
            code: code.to_owned(),
            message: one_line,
        }
    }

    /// Bad arguments (a missing name, an unknown field, a wrong type).
    pub fn invalid(message: impl Into<String>) -> VerbError {
        let code = latchkey::Error::InvalidInput(String::new()).code();
        VerbError::new(code, message)
    }

    /// The message led by `what` (the server, the lock).
    pub fn about(mut self, what: &str) -> VerbError {
        self.message = format!("{what}: {}", self.message);
        self
    }
}

impl From<latchkey::Error> for VerbError {
    fn from(error: latchkey::Error) -> VerbError {
        VerbError::new(error.code(), error.to_string())
    }
}

/// A verb's request from a JSON object, as every door receives it: a
/// missing or unknown field, or a wrong type, is INVALID_INPUT.
pub fn decode<Request: serde::de::DeserializeOwned>(
    arguments: serde_json::Map<String, serde_json::Value>,
) -> Result<Request, VerbError> {
    serde_json::from_value(serde_json::Value::Object(arguments))
        .map_err(|e| VerbError::invalid(format!("bad arguments: {e}")))
}

/// The code of a bad TTL, the library's own (`INVALID_TTL`).
pub const INVALID_TTL: &str = "INVALID_TTL";
/// The code of a token that does not own the lock any more, the library's
/// own (`NOT_HELD`).
pub const NOT_HELD: &str = "NOT_HELD";

/// A lock TTL as text, within the library's bounds (the CLI's parser).
pub fn ttl(text: &str) -> Result<Duration, VerbError> {
    duration::parse_ttl(text).map_err(|why| VerbError::new(INVALID_TTL, why))
}

/// A wait as text (`0s` allowed: do not wait).
pub fn wait(text: &str) -> Result<Duration, VerbError> {
    duration::parse(text).map_err(VerbError::invalid)
}

/// `deadline` (monotonic) as milliseconds since the Unix epoch, for callers
/// on other machines: when the hold may already be someone else's.
pub fn unix_ms(deadline: Instant) -> u64 {
    let left = deadline.saturating_duration_since(Instant::now());
    (SystemTime::now() + left)
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codes_used_here_are_the_librarys() {
        for code in [INVALID_TTL, NOT_HELD, &VerbError::invalid("x").code] {
            assert!(latchkey::Error::CODES.contains(&code), "{code}");
        }
    }

    #[test]
    fn bad_durations_are_typed_errors() {
        assert_eq!(ttl("0ms").unwrap_err().code, INVALID_TTL);
        assert_eq!(ttl("-5s").unwrap_err().code, INVALID_TTL);
        assert_eq!(ttl("10").unwrap_err().code, INVALID_TTL);
        assert_eq!(ttl("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(wait("-1s").unwrap_err().code, "INVALID_INPUT");
        assert_eq!(wait("0s").unwrap(), Duration::ZERO);
    }

    #[test]
    fn messages_are_one_line() {
        let e = VerbError::new("TIMEOUT", "a\nb  c");
        assert_eq!(e.message, "a b c");
    }
}
