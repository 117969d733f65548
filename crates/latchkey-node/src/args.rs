//! Arguments from JavaScript: milliseconds as `Duration`s and deadlines,
//! refused as INVALID_ARGUMENT when they are not finite non-negative numbers.

use std::time::{Duration, Instant};

use crate::errors::invalid;

/// `ms` milliseconds, refusing NaN, infinities and negatives.
pub(crate) fn ms(what: &str, ms: f64) -> latchkey::Result<Duration> {
    if !ms.is_finite() || ms < 0.0 {
        return Err(invalid(format!(
            "{what} must be a finite number of milliseconds >= 0, not {ms}"
        )));
    }
    Ok(Duration::from_secs_f64(ms / 1000.0))
}

/// `ms` if given.
pub(crate) fn opt_ms(what: &str, value: Option<f64>) -> latchkey::Result<Option<Duration>> {
    value.map(|v| ms(what, v)).transpose()
}

/// The deadline of a wait of at most `timeout` ms (None: unbounded).
pub(crate) fn deadline(timeout: Option<f64>) -> latchkey::Result<Option<Instant>> {
    Ok(opt_ms("timeout", timeout)?.map(|wait| Instant::now() + wait))
}

/// A count (permits, parties, a latch's count) as the library takes it.
pub(crate) fn count(what: &str, value: f64) -> latchkey::Result<u64> {
    if !value.is_finite() || value < 1.0 || value.fract() != 0.0 || value > 1e15 {
        return Err(invalid(format!(
            "{what} must be a positive integer, not {value}"
        )));
    }
    Ok(value as u64)
}

/// An instant as milliseconds since the epoch (`Date.now()`'s clock).
pub(crate) fn epoch_ms(at: Instant) -> f64 {
    let now = Instant::now();
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
        * 1000.0;
    match at.checked_duration_since(now) {
        Some(ahead) => wall + ahead.as_secs_f64() * 1000.0,
        None => wall - now.duration_since(at).as_secs_f64() * 1000.0,
    }
}
