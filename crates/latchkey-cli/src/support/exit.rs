//! Exit codes, and the one-line error every failure becomes.
//!
//! ```text
//!   0   success
//!   1   conflict: the lock is held (--no-wait), the wait timed out, or
//!       release/extend found the lock not ours (-E/--conflict-exit-code N)
//!   2   usage error: bad arguments, duration, name or URL
//!  69   Redis unavailable: unreachable, timed out, TLS, authentication or
//!       permission refused, a server latchkey does not support (Redis
//!       before 7.0, Valkey before 7.2), fewer replicas acknowledged than --replicas
//!       asked, or (Redlock) no majority of the servers answered; also a
//!       bounded wait (`--wait`, `wait --timeout`) that ended without Redis
//!  70   internal error: an unexpected reply (e.g. WRONGTYPE at the lock key)
//!  75   `run`: the lock was lost while the command ran (it expired, was
//!       taken over or gone from Redis, Redis stopped answering, or it
//!       reached --max-hold); the command was stopped
//!       (`elect --once`: leadership was lost)
//!  76   `run`: the hold ran out before the command could start, and the
//!       wait (--wait, --no-wait) left no time to take it again
//!  77   `run`: an operator revoked the lock while the command ran
//!       (`latchkey revoke`); the command was stopped (`elect --once` too)
//! 126   `run`: the command could not be executed
//! 127   `run`: the command was not found
//! else  `run`: the command's exit code, or 128+N when it was killed by signal N
//! ```
//!
//! Codes 69, 70, 75 and 77 are the BSD `sysexits.h` EX_UNAVAILABLE,
//! EX_SOFTWARE, EX_TEMPFAIL and EX_NOPERM; 126 and 127 are what shells use. A `run` command can of
//! course exit with any of these codes itself; scripts that must tell them
//! apart should pick a distinct `-E` and keep their own codes out of 69–75.

/// Success.
pub const OK: u8 = 0;
/// Lock busy, wait timed out, or not the owner (default of `-E`).
pub const CONFLICT: u8 = 1;
/// Bad command line.
pub const USAGE: u8 = 2;
/// Redis cannot be used: EX_UNAVAILABLE.
pub const UNAVAILABLE: u8 = 69;
/// Something that should not happen: EX_SOFTWARE.
pub const INTERNAL: u8 = 70;
/// The lock was lost while `run`'s command ran: EX_TEMPFAIL.
pub const LOCK_LOST: u8 = 75;
/// The hold ran out before `run` could start the command.
pub const TOO_LATE: u8 = 76;
/// The lock was revoked while `run`'s command ran: EX_NOPERM (the
/// operator withdrew it; retrying at once would take it back).
pub const REVOKED: u8 = 77;
/// The command exists but could not be executed (as in shells).
pub const CANNOT_EXECUTE: u8 = 126;
/// The command was not found (as in shells).
pub const NOT_FOUND: u8 = 127;

/// The exit-code table for `--help`.
pub const HELP: &str = "\
Exit codes:
    0  success
    1  conflict: lock busy (--no-wait), wait timed out, or not the owner
       (change with -E/--conflict-exit-code)
    2  usage error
   69  Redis unavailable (unreachable, timeout, TLS, auth or ACL refusal,
       a server too old (Redis < 7.0, Valkey < 7.2), too few --replicas,
       no Redlock majority; also a bounded wait that could not reach Redis)
   70  internal error (unexpected reply from Redis)
   75  run: the lock was lost while the command ran (expired, taken
       over, Redis unreachable, --max-hold reached; elect --once too)
   76  run: the hold ran out before the command could start
   77  run: the lock was revoked by an operator while the command ran
  126  run: the command could not be executed; 127: not found
 else  run: the command's exit code (128+N if killed by signal N)";

/// A failed command: what to print (after `latchkey: `) and how to exit.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    pub fn usage(message: impl Into<String>) -> Failure {
        Failure::new(USAGE, message)
    }

    /// Prints the failure as one line on stderr (nothing for an empty
    /// message). Messages from lower layers (redis-rs, the OS) may contain
    /// newlines; they are folded.
    pub fn print(&self) {
        if self.message.is_empty() {
            return;
        }
        let one_line = self
            .message
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        eprintln!("latchkey: {one_line}");
    }
}

/// Maps a library error to its exit code. `conflict` is the `-E` code, used
/// for a wait that timed out.
pub fn from_error(error: latchkey::Error, conflict: u8) -> Failure {
    use latchkey::Error as E;
    let code = match &error {
        E::WaitTimedOut { .. } => conflict,
        E::InvalidName { .. }
        | E::InvalidTtl { .. }
        | E::InvalidInput(_)
        | E::InvalidCount { .. }
        | E::PartiesMismatch { .. }
        | E::Unsupported(_)
        | E::NotACluster { .. } => USAGE,
        // A latch counted below zero, created again once open, or one that
        // does not exist.
        E::CountedBelowZero { .. } | E::NotFound { .. } | E::LatchOpen { .. } => CONFLICT,
        E::Unreachable(_)
        | E::Timeout { .. }
        | E::Auth(_)
        | E::Tls { .. }
        | E::NoPermission(_)
        | E::UnsupportedServer { .. }
        | E::OutOfMemory(_)
        | E::ReadOnlyReplica(_)
        | E::Unavailable(_)
        | E::TooFewReplicas { .. }
        | E::NoQuorum { .. } => UNAVAILABLE,
        _ => INTERNAL,
    };
    Failure::new(code, error.to_string())
}

impl From<latchkey::Error> for Failure {
    fn from(error: latchkey::Error) -> Failure {
        from_error(error, CONFLICT)
    }
}

/// The result of every subcommand: an exit code, or a failure to print.
pub type Outcome = Result<u8, Failure>;
