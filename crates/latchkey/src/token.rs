//! Owner tokens: the unique value a lock key holds while a holder owns it.
//!
//! Format (see `docs/protocol.md`): `lk1:<32 hex digits>:<unix ms>:<pid>:<host>`.
//! The 32 hex digits are 128 bits from the operating system's CSPRNG, which
//! alone make a token unique; the rest tells an operator *who* holds a lock
//! and since when (`latchkey status`). Everything else treats a token as one
//! opaque string: ownership is always compared on the whole string.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// The marker every latchkey token starts with; `latchkey list` uses it to
/// tell our locks from other keys under the same prefix.
pub const TOKEN_MARKER: &str = "lk1:";

/// Who this process is, computed once per client.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pid: u32,
    host: String,
}

impl Identity {
    pub(crate) fn of_this_process() -> Identity {
        let host = gethostname::gethostname().to_string_lossy().into_owned();
        // ':' separates the fields; a hostname never contains one, but be safe.
        let host = host.replace(':', "_");
        Identity {
            pid: std::process::id(),
            host,
        }
    }

    /// A new owner token. Fails only if the OS has no randomness to give,
    /// which we report instead of falling back to anything guessable.
    pub(crate) fn new_token(&self) -> Result<String> {
        let mut random = [0u8; 16];
        getrandom::fill(&mut random)
            .map_err(|e| Error::InvalidInput(format!("no randomness from the OS: {e}")))?;
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_millis();
        Ok(format!(
            "{TOKEN_MARKER}{:032x}:{millis}:{}:{}",
            u128::from_be_bytes(random),
            self.pid,
            self.host
        ))
    }
}

/// What a token says about its holder, for inspection only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Host name of the holder's machine.
    pub host: String,
    /// Process id of the holder on that host.
    pub pid: u32,
    /// When the lock was acquired, by the holder's wall clock.
    pub acquired_at: SystemTime,
}

impl Holder {
    /// Parses a latchkey token; `None` for anything else (a foreign client's
    /// value, a token of a later format).
    pub fn from_token(token: &[u8]) -> Option<Holder> {
        let token = std::str::from_utf8(token).ok()?;
        let rest = token.strip_prefix(TOKEN_MARKER)?;
        let mut fields = rest.splitn(4, ':');
        let random = fields.next()?;
        let millis: u64 = fields.next()?.parse().ok()?;
        let pid: u32 = fields.next()?.parse().ok()?;
        let host = fields.next()?.to_owned();
        if random.len() != 32 || !random.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some(Holder {
            host,
            pid,
            acquired_at: UNIX_EPOCH + Duration::from_millis(millis),
        })
    }
}

/// A short prefix of a token, for logs (enough to correlate, not to forge).
pub(crate) fn short(token: &str) -> &str {
    let end = TOKEN_MARKER.len() + 8;
    token.get(..end).unwrap_or(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_unique_and_parse_back() {
        let id = Identity::of_this_process();
        let a = id.new_token().unwrap();
        let b = id.new_token().unwrap();
        assert_ne!(a, b);
        let holder = Holder::from_token(a.as_bytes()).expect("parses");
        assert_eq!(holder.pid, std::process::id());
        assert!(holder.acquired_at <= SystemTime::now());
    }

    #[test]
    fn foreign_values_are_not_holders() {
        assert_eq!(Holder::from_token(b"some-uuid-from-redis-py"), None);
        assert_eq!(Holder::from_token(b"lk1:zz:1:2:h"), None);
        assert_eq!(Holder::from_token(&[0xff, 0xfe]), None);
    }
}
