//! The command-line text that `latchkey torture` shares with the rest of
//! the `latchkey` command: durations as typed (`500ms`, `1.5s`), durations
//! for people (`4.20s`), URLs without their password.
//!
//! One copy, here, because of how the crates depend on each other: the CLI
//! is a binary crate that depends on this one (for its `torture`
//! subcommand), so this crate cannot use the CLI's code, while the CLI can
//! use this. Durations are not the library's business (it parses no text);
//! URLs are shown by the library's own rule, `latchkey::redact_url`.

use std::time::Duration;

/// Parses `<number><unit>` with unit `ms`, `s`, `m` or `h` (mandatory);
/// the number may have a fractional part. Used as a clap `value_parser`, so
/// the message becomes a usage error (exit 2).
///
/// The unit is mandatory: a bare `10` could mean seconds to one reader and
/// milliseconds to another, and a lock TTL off by 1000× is a real outage.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
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

/// Formats a duration for people: `850µs`, `12.3ms`, `4.20s`, `3m05s`, `2h00m`.
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

/// URLs without their password: the library's one rule.
pub use latchkey::redact_url as redact;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn refusals() {
        for bad in ["10", "", "s", "10x", "1.2.3s", "-1s", "ten s", "1e400h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn human_output() {
        assert_eq!(human(Duration::from_micros(850)), "850µs");
        assert_eq!(human(Duration::from_micros(12_340)), "12.3ms");
        assert_eq!(human(Duration::from_millis(500)), "500.0ms");
        assert_eq!(human(Duration::from_millis(4200)), "4.20s");
        assert_eq!(human(Duration::from_secs(185)), "3m05s");
        assert_eq!(human(Duration::from_secs(7200)), "2h00m");
    }

    #[test]
    fn passwords_are_hidden() {
        assert_eq!(redact("redis://127.0.0.1:6379/"), "redis://127.0.0.1:6379/");
        assert_eq!(redact("redis://:pw@h:1/"), "redis://:***@h:1/");
        assert_eq!(redact("redis://u:p@ss@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(
            redact("rediss://user:p@ss@h:1/0"),
            "rediss://user:***@h:1/0"
        );
    }
}
