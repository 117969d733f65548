//! The library's timing rules, as every model's clients apply them, and
//! the bound on a bounded configuration's clock.

/// The drift allowance of a span of `d` ms (a TTL, a lease): `d/100 + 2`.
/// A hold is valid until `sent + ttl − drift(ttl)`.
pub fn drift(d: i64) -> i64 {
    d / 100 + 2
}

/// The stop margin of a hold of `ttl` ms, `ttl/5`: a client stops
/// believing it holds that long before its deadline.
pub fn margin(ttl: i64) -> i64 {
    ttl / 5
}

/// Whether the clock may move a tick of `tick` ms on from `now` without
/// passing `max_time` (`None`: it never stops, as in random walks).
pub fn time_left(max_time: Option<i64>, now: i64, tick: i64) -> bool {
    max_time.is_none_or(|max| now + tick <= max)
}
