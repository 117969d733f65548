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
/// have a fractional part. Used as a clap `value_parser`, so the message
/// becomes a usage error (exit 2).
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{text:?} has no unit; write e.g. 500ms, 10s, 2m or 1h"))?;
    let (number, unit) = text.split_at(split);
    let seconds_per_unit = match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(format!(
                "{text:?}: unknown unit {unit:?}; use ms, s, m or h"
            ))
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?}: {number:?} is not a number"))?;
    Duration::try_from_secs_f64(value * seconds_per_unit)
        .map_err(|_| format!("{text:?} is out of range"))
}

/// A lock TTL: [`parse`], then within the library's bounds
/// ([`latchkey::MIN_TTL`] to [`latchkey::MAX_TTL`]), checked here so that
/// the message quotes what the user typed (`0ms`, `25h`), not the library's
/// rendering of it (`0ns`, `90000s`).
pub fn parse_ttl(text: &str) -> Result<Duration, String> {
    let ttl = parse(text)?;
    if ttl < latchkey::MIN_TTL {
        return Err(format!(
            "invalid ttl {:?}: a lock TTL must be at least {}",
            text.trim(),
            human(latchkey::MIN_TTL)
        ));
    }
    if ttl > latchkey::MAX_TTL {
        return Err(format!(
            "invalid ttl {:?}: a lock TTL must be at most 24h; keep longer holds alive with `run` (its watchdog renews the lock)",
            text.trim()
        ));
    }
    Ok(ttl)
}

/// A fair waiter's lease (`--waiter-lease`): [`parse`], then within the
/// library's bounds ([`latchkey::MIN_WAITER_LEASE`] to 24h), checked here so
/// that the message quotes what the user typed (`0s`, not `0ns`).
pub fn parse_waiter_lease(text: &str) -> Result<Duration, String> {
    let lease = parse(text)?;
    if !(latchkey::MIN_WAITER_LEASE..=latchkey::MAX_TTL).contains(&lease) {
        return Err(format!(
            "invalid waiter lease {:?}: it must be between {}ms and 24h",
            text.trim(),
            latchkey::MIN_WAITER_LEASE.as_millis()
        ));
    }
    Ok(lease)
}

/// Formats a duration for people: `850µs`, `12.3ms`, `4.20s`, `3m05s`.
pub fn human(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 0.001 {
        format!("{}µs", d.as_micros())
    } else if secs < 1.0 {
        format!("{:.1}ms", secs * 1000.0)
    } else if secs < 60.0 {
        format!("{secs:.2}s")
    } else if secs < 3600.0 {
        format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60)
    } else {
        format!("{}h{:02}m", d.as_secs() / 3600, (d.as_secs() % 3600) / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn refusals() {
        for bad in ["10", "", "s", "10x", "1.2.3s", "-1s", "ten s", "1e400h"] {
            assert!(parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

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

    #[test]
    fn human_output() {
        assert_eq!(human(Duration::from_micros(850)), "850µs");
        assert_eq!(human(Duration::from_micros(12_340)), "12.3ms");
        assert_eq!(human(Duration::from_millis(4200)), "4.20s");
        assert_eq!(human(Duration::from_secs(185)), "3m05s");
    }
}
