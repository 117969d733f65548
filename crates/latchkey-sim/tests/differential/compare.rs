//! Replies, keyspaces and messages compared with room for the real
//! server's clock (see the test's doc comment): instants (integers from
//! 10^12, server ms; from 10^15, server µs), also as digit runs inside
//! strings, within `TOLERANCE_MS` (µs: a thousand times that); in a
//! reply or a message, where scripts report time spans (a PTTL, a wait, a
//! lease's time left), integers from `SMALL` up within `TOLERANCE_MS` too;
//! everything else exactly: counts, flags, outcomes, and every number
//! stored (a stored span is an expiry, an instant). An error's location loses the script's SHA-1
//! (`script: <sha>, on @user_script:7.` as Redis and Valkey 8 word it,
//! `script: on @user_script:7.` as Valkey 9 does).

use latchkey_sim::Reply;

/// Below this an integer is a count or an outcome: compared exactly. Time
/// spans the scripts report are never this small here: the test runs no
/// step within `GUARD_MS` of an expiry or a deadline.
pub const SMALL: i64 = 12;
/// How far a time the real server reports may be from the simulator's.
pub const TOLERANCE_MS: i64 = 3;

/// Where a number is: in a reply or a message (which may report a time
/// span), or stored.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Reply,
    Stored,
}

const INSTANT: i64 = 1_000_000_000_000;

pub fn ints_close(sim: i64, real: i64, place: Place) -> bool {
    if sim == real {
        return true;
    }
    let least = if place == Place::Reply {
        SMALL
    } else {
        INSTANT
    };
    if sim.abs() < least || real.abs() < least || (sim < 0) != (real < 0) {
        return false;
    }
    let tolerance = if sim.abs() >= 1_000_000_000_000_000 {
        TOLERANCE_MS * 1000
    } else {
        TOLERANCE_MS
    };
    (sim - real).abs() <= tolerance
}

/// Splits `text` into runs of digits and runs of anything else.
fn runs(text: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=text.len() {
        if i == text.len() || text[i].is_ascii_digit() != text[start].is_ascii_digit() {
            out.push(&text[start..i]);
            start = i;
        }
    }
    out
}

pub fn text_close(sim: &[u8], real: &[u8], place: Place) -> bool {
    if sim == real {
        return true;
    }
    let (a, b) = (runs(sim), runs(real));
    a.len() == b.len()
        && a.iter().zip(&b).all(|(x, y)| {
            if x == y {
                return true;
            }
            let digits = |r: &[u8]| r.first().is_some_and(u8::is_ascii_digit) && r.len() <= 18;
            if !(digits(x) && digits(y)) || x.len() != y.len() {
                return false;
            }
            let parse = |r: &[u8]| {
                std::str::from_utf8(r)
                    .ok()
                    .and_then(|t| t.parse::<i64>().ok())
            };
            matches!((parse(x), parse(y)), (Some(p), Some(q)) if ints_close(p, q, place))
        })
}

/// `message` without the script's SHA-1 in its location.
fn without_sha(message: &str) -> String {
    let Some(at) = message.find(" script: ") else {
        return message.to_owned();
    };
    let rest = &message[at + " script: ".len()..];
    let sha = rest
        .get(..40)
        .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
    match (sha, rest.get(40..42)) {
        (Some(_), Some(", ")) => format!("{} script: {}", &message[..at], &rest[42..]),
        _ => message.to_owned(),
    }
}

pub fn replies_close(sim: &Reply, real: &Reply, place: Place) -> bool {
    match (sim, real) {
        (Reply::Error(a), Reply::Error(b)) => without_sha(a) == without_sha(b),
        (Reply::Int(a), Reply::Int(b)) => ints_close(*a, *b, place),
        (Reply::Bulk(Some(a)), Reply::Bulk(Some(b))) => text_close(a, b, place),
        (Reply::Array(Some(a)), Reply::Array(Some(b))) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| replies_close(x, y, place))
        }
        _ => sim == real,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_close_and_counts_exact() {
        assert!(ints_close(
            1_798_000_000_123,
            1_798_000_000_125,
            Place::Stored
        ));
        assert!(!ints_close(1, 2, Place::Reply));
        assert!(ints_close(697, 699, Place::Reply));
        assert!(!ints_close(697, 699, Place::Stored));
        assert!(ints_close(
            1_798_000_000_123_456,
            1_798_000_000_125_000,
            Place::Stored
        ));
        assert!(text_close(
            b"1798000000123:lk2:a",
            b"1798000000124:lk2:a",
            Place::Stored
        ));
        assert!(!text_close(b"lk2:0001", b"lk2:0002", Place::Reply));
        let sha = "a50e1c26ea9d0a33cc8952e4406d9458c393966d";
        assert!(replies_close(
            &Reply::Error(format!("WRONGTYPE x script: {sha}, on @user_script:48.")),
            &Reply::Error("WRONGTYPE x script: on @user_script:48.".to_owned()),
            Place::Reply,
        ));
    }
}
