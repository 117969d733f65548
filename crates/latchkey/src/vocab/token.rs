//! Owner tokens: the unique value a lock key holds while a holder owns it.
//!
//! Format (see `docs/protocol.md`): `lk2:<32 hex digits>:<unix ms>:<pid>:<host>`.
//! The 32 hex digits are 128 bits from the operating system's CSPRNG, which
//! alone make a token unique; the rest tells an operator *who* holds a lock
//! and since when (`latchkey status`). Everything else treats a token as one
//! opaque string: ownership is compared on the whole string, which a waiter
//! may have marked by appending [`WAITING_MARK`](crate::vocab::protocol::WAITING_MARK) (then the release wakes
//! the waiters; a release nobody waits for publishes nothing).
//!
//! Version 1 tokens (`lk1:`, latchkey 0.1) are no longer read: such a value
//! is a foreign one, like any other program's.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::vocab::error::{Error, Result};

use crate::vocab::protocol::{CACHING_MARK, TOKEN_MARKER, WAITING_MARK};

/// Whether a lock key's value is a latchkey owner token (marked or not).
pub(crate) fn is_token(value: &[u8]) -> bool {
    value.starts_with(TOKEN_MARKER.as_bytes())
}

/// A lock key's value without the waiting mark: the holder's token.
pub(crate) fn unmarked(value: &[u8]) -> &[u8] {
    match value.strip_suffix(WAITING_MARK.as_bytes()) {
        Some(token) if token.starts_with(TOKEN_MARKER.as_bytes()) => token,
        _ => value,
    }
}

/// Whether a lock key's value is the token of a hold kept while idle (it
/// ends with [`CACHING_MARK`], marked waiting or not).
pub(crate) fn is_kept_idle(value: &[u8]) -> bool {
    is_token(value) && unmarked(value).ends_with(CACHING_MARK.as_bytes())
}

/// Who this process is, computed once per client.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    /// `:<pid>:<host>`, the end of every token of this process.
    suffix: String,
    /// Set by `Client::close`: no token is made after it, so that every
    /// attempt to take a hold (each makes its token first) is refused.
    closed: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Identity {
    pub(crate) fn of_this_process() -> Identity {
        // ':' separates the fields and '+' starts the waiting mark: keep a
        // host name to the characters host names are made of.
        let host: String = gethostname::gethostname()
            .to_string_lossy()
            .chars()
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '-' | '_' => c,
                _ => '_',
            })
            .collect();
        Identity {
            suffix: format!(":{}:{host}", std::process::id()),
            closed: Default::default(),
        }
    }

    /// Refuses every token from now on ([`Error::ClientClosed`]).
    pub(crate) fn close(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// A new owner token for a hold kept while idle: marked as such (see
    /// [`CACHING_MARK`]).
    pub(crate) fn new_caching_token(&self) -> Result<String> {
        let mut token = self.new_token()?;
        token.push_str(CACHING_MARK);
        Ok(token)
    }

    /// A new owner token. Fails only if the OS has no randomness to give,
    /// which we report instead of falling back to anything guessable.
    pub(crate) fn new_token(&self) -> Result<String> {
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Error::ClientClosed);
        }
        let random = random_16()?;
        // u64 milliseconds last 584 million years; formatting a u128 costs more.
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_millis() as u64;
        // A token is made for every attempt: its digits are written from
        // tables into one buffer (a `write!`, or a digit at a time, cost
        // more than the rest of making a guard).
        let mut hex = [0u8; 32];
        for (pair, byte) in hex.chunks_exact_mut(2).zip(random) {
            pair.copy_from_slice(&HEX_PAIRS[usize::from(byte)]);
        }
        let hex = std::str::from_utf8(&hex)
            .map_err(|e| Error::Protocol(format!("token not UTF-8: {e}")))?;
        let mut digits = itoa::Buffer::new();
        let millis = digits.format(millis);
        let mut token = String::with_capacity(
            TOKEN_MARKER.len() + hex.len() + 1 + millis.len() + self.suffix.len(),
        );
        token.push_str(TOKEN_MARKER);
        token.push_str(hex);
        token.push(':');
        token.push_str(millis);
        token.push_str(&self.suffix);
        Ok(token)
    }
}

/// The two hex digits of every byte.
const HEX_PAIRS: [[u8; 2]; 256] = {
    let mut pairs = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        pairs[i] = [HEX[i >> 4], HEX[i & 0xf]];
        i += 1;
    }
    pairs
};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// How many tokens' worth of random bytes a thread fetches from the OS at
/// once.
const POOL_TOKENS: usize = 64;

thread_local! {
    /// Random bytes from the OS not handed out yet: `(bytes, next unused)`.
    static POOL: std::cell::RefCell<([u8; 16 * POOL_TOKENS], usize)> =
        const { std::cell::RefCell::new(([0; 16 * POOL_TOKENS], 16 * POOL_TOKENS)) };
}

/// 16 bytes from the OS's CSPRNG, each handed out once. Fetched 1 KiB at a
/// time: a `getrandom` syscall per token cost more than the rest of
/// latchkey's client-side bookkeeping (figures in `docs/protocol.md`,
/// "Owner tokens"). Used bytes are zeroed.
/// (A process that forks inherits its pool, but a forked child cannot use
/// a client made before the fork anyway: tokio's runtime does not survive
/// `fork`.)
fn random_16() -> Result<[u8; 16]> {
    POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        let (bytes, next) = &mut *pool;
        if *next == bytes.len() {
            getrandom::fill(bytes)
                .map_err(|e| Error::Random(std::io::Error::other(e.to_string())))?;
            *next = 0;
        }
        let mut out = [0u8; 16];
        out.copy_from_slice(&bytes[*next..*next + 16]);
        bytes[*next..*next + 16].fill(0);
        *next += 16;
        Ok(out)
    })
}

/// What a token says about its holder, for inspection only.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// Host name of the holder's machine.
    pub host: String,
    /// Process id of the holder on that host.
    pub pid: u32,
    /// When the hold began: by the holder's wall clock (its token's time),
    /// or, for a holder that waited in a fair lock's queue, a read-write
    /// lock's writer that waited and a leader (their tokens were made when
    /// they started waiting), from the server's record of when it got the
    /// hold, on our clock (inspection, `docs/protocol.md`).
    pub acquired_at: SystemTime,
    /// Whether the holder keeps the lock while idle
    /// ([`Lock::with_caching`](crate::Lock::with_caching)): the hold may be
    /// unused now, and is let go as soon as a waiter wants it.
    pub caching: bool,
}

impl Holder {
    /// Parses a latchkey token (with or without the waiting mark, or a semaphore member `token#i` of a hold of several permits);
    /// `None` for anything else (a foreign client's value, a token of a
    /// later format).
    pub fn from_token(token: &[u8]) -> Option<Holder> {
        let token = std::str::from_utf8(unmarked(token)).ok()?;
        let token = without_permit_number(token);
        let rest = token.strip_prefix(TOKEN_MARKER)?;
        let mut fields = rest.splitn(4, ':');
        let random = fields.next()?;
        let millis: u64 = fields.next()?.parse().ok()?;
        let pid: u32 = fields.next()?.parse().ok()?;
        let host = fields.next()?;
        // A host name has no ':' (see `Identity`): a second field is a mark.
        let (host, caching) = match host.strip_suffix(CACHING_MARK) {
            Some(host) => (host.to_owned(), true),
            None => (host.to_owned(), false),
        };
        if random.len() != 32 || !random.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some(Holder {
            host,
            pid,
            acquired_at: UNIX_EPOCH + Duration::from_millis(millis),
            caching,
        })
    }
}

/// A semaphore member's token without its `#i` (the i-th permit of a hold
/// of several, `docs/protocol.md`, "Several permits at once"): a token
/// never contains `#` (its host part is letters, digits, `.`, `-`, `_`).
fn without_permit_number(member: &str) -> &str {
    match member.rsplit_once('#') {
        Some((token, i)) if !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()) => token,
        _ => member,
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
        let before = SystemTime::now() - Duration::from_millis(1);
        let a = id.new_token().unwrap();
        let b = id.new_token().unwrap();
        assert_ne!(a, b);
        let holder = Holder::from_token(a.as_bytes()).expect("parses");
        assert_eq!(holder.pid, std::process::id());
        assert!(holder.host.len() == a.len() - a.rfind(':').unwrap() - 1);
        // The hand-written digits are the wall clock's milliseconds.
        assert!(before <= holder.acquired_at, "{a}");
        assert!(holder.acquired_at <= SystemTime::now(), "{a}");
    }

    /// Across refills of the pool: 200 tokens span four fetches from the OS.
    #[test]
    fn random_parts_do_not_repeat() {
        let id = Identity::of_this_process();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..4 * POOL_TOKENS {
            let token = id.new_token().unwrap();
            let random = token[TOKEN_MARKER.len()..TOKEN_MARKER.len() + 32].to_owned();
            assert!(random.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
            assert_ne!(
                random,
                "0".repeat(32),
                "a zeroed (used) slot was handed out"
            );
            assert!(seen.insert(random), "repeated: {token}");
        }
    }

    #[test]
    fn a_hold_kept_idle_is_told_by_its_token_marked_or_not() {
        let id = Identity::of_this_process();
        let kept = id.new_caching_token().unwrap();
        let plain = id.new_token().unwrap();
        assert!(is_kept_idle(kept.as_bytes()));
        assert!(is_kept_idle(format!("{kept}{WAITING_MARK}").as_bytes()));
        assert!(!is_kept_idle(plain.as_bytes()));
        assert!(!is_kept_idle(format!("{plain}{WAITING_MARK}").as_bytes()));
        // A foreign value that happens to end like one is not a token.
        assert!(!is_kept_idle(b"redis-py:c"));
    }

    #[test]
    fn a_marked_token_names_the_same_holder() {
        let id = Identity::of_this_process();
        let token = id.new_token().unwrap();
        assert!(!token.contains('+'), "{token}");
        let marked = format!("{token}{WAITING_MARK}");
        assert_eq!(unmarked(marked.as_bytes()), token.as_bytes());
        assert_eq!(unmarked(token.as_bytes()), token.as_bytes());
        assert_eq!(
            Holder::from_token(marked.as_bytes()),
            Holder::from_token(token.as_bytes())
        );
        assert!(is_token(marked.as_bytes()));
        // Only tokens carry marks; other values are left alone.
        assert_eq!(unmarked(b"foreign+w"), b"foreign+w");
    }

    #[test]
    fn a_permit_members_number_names_the_same_holder() {
        let token = Identity::of_this_process().new_token().unwrap();
        let second = format!("{token}#2");
        assert_eq!(
            Holder::from_token(second.as_bytes()),
            Holder::from_token(token.as_bytes())
        );
        assert!(Holder::from_token(token.as_bytes()).is_some());
        assert_eq!(without_permit_number("a#"), "a#");
        assert_eq!(without_permit_number("a#x1"), "a#x1");
    }

    #[test]
    fn foreign_values_are_not_holders() {
        assert_eq!(Holder::from_token(b"some-uuid-from-redis-py"), None);
        assert_eq!(Holder::from_token(b"lk1:zz:1:2:h"), None);
        // A 0.1 token is no longer read: another program's value.
        let v1 = format!("lk1:{}:1700000000000:42:old-host", "0".repeat(32));
        assert!(!is_token(v1.as_bytes()));
        assert_eq!(Holder::from_token(v1.as_bytes()), None);
        assert_eq!(Holder::from_token(&[0xff, 0xfe]), None);
    }
}
