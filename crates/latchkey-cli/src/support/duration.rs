//! Durations on the command line: a number and a unit.
//!
//! ```text
//! 500ms   10s   1.5s   2m   1h
//! ```
//!
//! The unit is mandatory: a bare `10` could mean seconds to one reader and
//! milliseconds to another, and a lock TTL off by 1000× is a real outage.

use std::time::Duration;

/// Parses `<number><unit>` with unit `ms`, `s`, `m` or `h`; the number may
/// have a fractional part; a usage error (exit 2) as a clap `value_parser`.
/// [`human`] formats a duration for people (`850µs`, `4.20s`, `3m05s`).
/// Both are the torture suite's, the only copies: see
/// `latchkey_torture::cli_text` for why they live there.
pub use latchkey_torture::cli_text::human;

/// [`latchkey_torture::cli_text::parse_duration`], with a negative
/// duration called negative (`--grace -1s`), not an unknown unit.
pub fn parse(text: &str) -> Result<Duration, String> {
    if text.trim().starts_with('-') {
        return Err(format!(
            "invalid duration {:?}: it cannot be negative",
            text.trim()
        ));
    }
    latchkey_torture::cli_text::parse_duration(text)
}

/// The shortest `--max-hold`: time to start the command under its
/// guardian and to stop it (the command gets SIGTERM up to half of it
/// before the cap).
pub const MIN_MAX_HOLD: Duration = Duration::from_millis(100);

/// A `--max-hold`: [`parse`], at least [`MIN_MAX_HOLD`], quoting the input.
pub fn parse_max_hold(text: &str) -> Result<Duration, String> {
    let cap = parse(text)?;
    if cap < MIN_MAX_HOLD {
        return Err(format!(
            "invalid max hold {:?}: it must be at least {} (time to start the command, and to stop it before the cap)",
            text.trim(),
            human(MIN_MAX_HOLD)
        ));
    }
    Ok(cap)
}

/// A lock TTL: [`parse`], then within the library's bounds
/// ([`latchkey::limits::MIN_TTL`] to [`latchkey::limits::MAX_TTL`]), checked here so that
/// the message quotes what the user typed (`0ms`, `25h`), not the library's
/// rendering of it (`0ns`, `90000s`).
pub fn parse_ttl(text: &str) -> Result<Duration, String> {
    let ttl = parse(text)?;
    if ttl < latchkey::limits::MIN_TTL {
        return Err(format!(
            "invalid ttl {:?}: a lock TTL must be at least {}",
            text.trim(),
            human(latchkey::limits::MIN_TTL)
        ));
    }
    if ttl > latchkey::limits::MAX_TTL {
        return Err(format!(
            "invalid ttl {:?}: a lock TTL must be at most 24h; keep longer holds alive with `run` (its watchdog renews the lock)",
            text.trim()
        ));
    }
    Ok(ttl)
}

/// A fair waiter's lease (`--waiter-lease`): [`parse`], then within the
/// library's bounds ([`latchkey::limits::MIN_WAITER_LEASE`] to 24h), checked here so
/// that the message quotes what the user typed (`0s`, not `0ns`).
pub fn parse_waiter_lease(text: &str) -> Result<Duration, String> {
    let lease = parse(text)?;
    if !(latchkey::limits::MIN_WAITER_LEASE..=latchkey::limits::MAX_TTL).contains(&lease) {
        return Err(format!(
            "invalid waiter lease {:?}: it must be between {}ms and 24h",
            text.trim(),
            latchkey::limits::MIN_WAITER_LEASE.as_millis()
        ));
    }
    Ok(lease)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_out_of_bounds_quote_the_input() {
        assert_eq!(parse_ttl("10ms"), Ok(Duration::from_millis(10)));
        assert_eq!(parse_ttl("24h"), Ok(Duration::from_secs(86_400)));
        let low = parse_ttl("0ms").unwrap_err();
        assert!(low.starts_with("invalid ttl \"0ms\""), "{low}");
        let high = parse_ttl("25h").unwrap_err();
        assert!(high.starts_with("invalid ttl \"25h\""), "{high}");
    }

    #[test]
    fn waiter_leases_out_of_bounds_quote_the_input() {
        assert_eq!(parse_waiter_lease("2s"), Ok(Duration::from_secs(2)));
        let zero = parse_waiter_lease("0s").unwrap_err();
        assert_eq!(
            zero,
            "invalid waiter lease \"0s\": it must be between 60ms and 24h"
        );
        assert!(parse_waiter_lease("25h").unwrap_err().contains("\"25h\""));
    }
}
