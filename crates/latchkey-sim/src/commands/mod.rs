//! The commands the scripts (and the clients around them) send, with
//! Redis 7's replies and error messages. Each group's file holds its
//! commands; this one holds the table, the arity checks and the parsers.

mod hashes;
mod keys;
mod lists;
mod pubsub;
mod sets;
mod strings;
mod zsets;

use crate::db::Db;
use crate::keyspace::{Entry, Value};
use crate::reply::Reply;

/// A command's handler: the whole command line, name first.
type Handler = fn(&mut Db, &[Vec<u8>]) -> Reply;

/// Name, Redis's arity (negative: at least that many words), handler.
const TABLE: &[(&str, i32, Handler)] = &[
    ("GET", 2, strings::get),
    ("SET", -3, strings::set),
    ("APPEND", 3, strings::append),
    ("DEL", -2, keys::del),
    ("EXISTS", -2, keys::exists),
    ("TYPE", 2, keys::type_of),
    ("PTTL", 2, keys::pttl),
    ("PEXPIRE", -3, keys::pexpire),
    ("PEXPIREAT", -3, keys::pexpireat),
    ("PERSIST", 2, keys::persist),
    ("TIME", 1, keys::time),
    ("HGET", 3, hashes::hget),
    ("HMGET", -3, hashes::hmget),
    ("HSET", -4, hashes::hset),
    ("HDEL", -3, hashes::hdel),
    ("HINCRBY", 4, hashes::hincrby),
    ("RPUSH", -3, lists::rpush),
    ("LPOP", -2, lists::lpop),
    ("LINDEX", 3, lists::lindex),
    ("LRANGE", 4, lists::lrange),
    ("LREM", 4, lists::lrem),
    ("SADD", -3, sets::sadd),
    ("SREM", -3, sets::srem),
    ("SCARD", 2, sets::scard),
    ("SISMEMBER", 3, sets::sismember),
    ("ZADD", -4, zsets::zadd),
    ("ZREM", -3, zsets::zrem),
    ("ZSCORE", 3, zsets::zscore),
    ("ZCARD", 2, zsets::zcard),
    ("ZCOUNT", 4, zsets::zcount),
    ("ZRANGE", -4, zsets::zrange),
    ("ZRANGEBYSCORE", -4, zsets::zrangebyscore),
    ("ZREMRANGEBYSCORE", 4, zsets::zremrangebyscore),
    ("ZPOPMIN", -2, zsets::zpopmin),
    ("PUBLISH", 3, pubsub::publish),
    ("SPUBLISH", 3, pubsub::spublish),
    ("PUBSUB", -2, pubsub::pubsub),
];

/// Why a command line is refused before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No command of that name (here: the simulator does not have it).
    Unknown,
    /// The wrong number of words for it.
    Arity,
}

fn lookup(args: &[Vec<u8>]) -> Result<Handler, Refusal> {
    let name = args.first().ok_or(Refusal::Unknown)?;
    let (_, arity, handler) = TABLE
        .iter()
        .find(|(n, _, _)| n.as_bytes().eq_ignore_ascii_case(name))
        .ok_or(Refusal::Unknown)?;
    let words = i32::try_from(args.len()).unwrap_or(i32::MAX);
    let fits = if *arity >= 0 {
        words == *arity
    } else {
        words >= -arity
    };
    if fits {
        Ok(*handler)
    } else {
        Err(Refusal::Arity)
    }
}

/// Checks `args` against the table: the scripts' bridge words the
/// refusals its own way.
pub fn check(args: &[Vec<u8>]) -> Result<(), Refusal> {
    lookup(args).map(|_| ())
}

/// Runs one command, as a client sending it would see it.
pub fn run(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    match lookup(args) {
        Ok(handler) => handler(db, args),
        Err(refusal) => {
            let name = String::from_utf8_lossy(args.first().map_or(&[][..], |n| n));
            match refusal {
                Refusal::Unknown => Reply::error(format!("ERR unknown command '{name}'")),
                Refusal::Arity => Reply::error(format!(
                    "ERR wrong number of arguments for '{}' command",
                    name.to_lowercase()
                )),
            }
        }
    }
}

pub(crate) const WRONGTYPE: &str =
    "WRONGTYPE Operation against a key holding the wrong kind of value";
pub(crate) const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub(crate) const NOT_FLOAT: &str = "ERR value is not a valid float";
pub(crate) const SYNTAX: &str = "ERR syntax error";

/// An integer as Redis's `string2ll` reads one: an optional `-`, digits,
/// no leading zero, no space, within i64.
pub(crate) fn parse_int(bytes: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(bytes).ok()?;
    let digits = text.strip_prefix('-').unwrap_or(text);
    let well_formed = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && text != "-0";
    if !well_formed {
        return None;
    }
    text.parse().ok()
}

/// A float as Redis reads a score: `strtod` of the whole word, with
/// `inf`/`+inf`/`-inf`; no NaN, no spaces.
pub(crate) fn parse_float(bytes: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(bytes).ok()?;
    if text.is_empty() || text.starts_with(char::is_whitespace) {
        return None;
    }
    let value = match text.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => text.parse::<f64>().ok()?,
    };
    (!value.is_nan()).then_some(value)
}

/// An integer argument, or the error reply for one that is not.
pub(crate) fn int_arg(bytes: &[u8]) -> Result<i64, Reply> {
    parse_int(bytes).ok_or_else(|| Reply::error(NOT_INTEGER))
}

/// The live entry at `key` if it holds the type `want` picks out; `Err`
/// the WRONGTYPE reply if it holds another type.
pub(crate) fn typed<'a, T>(
    db: &'a mut Db,
    key: &[u8],
    want: fn(&mut Value) -> Option<&mut T>,
) -> Result<Option<&'a mut T>, Reply> {
    let now = db.now();
    match db.keys.get_mut(key, now) {
        None => Ok(None),
        Some(Entry { value, .. }) => want(value).map(Some).ok_or_else(|| Reply::error(WRONGTYPE)),
    }
}

/// `typed`, making the key with `empty` when it does not exist.
pub(crate) fn typed_or_new<'a, T>(
    db: &'a mut Db,
    key: &[u8],
    want: fn(&mut Value) -> Option<&mut T>,
    empty: fn() -> Value,
) -> Result<&'a mut T, Reply> {
    let now = db.now();
    if db.keys.get(key, now).is_none() {
        db.keys.put(key, empty(), None);
    }
    match typed(db, key, want)? {
        Some(value) => Ok(value),
        None => Err(Reply::error(
            "ERR latchkey-sim: a key made just now is gone",
        )),
    }
}

/// Folds a handler's `Result` into its reply.
pub(crate) fn reply_of(result: Result<Reply, Reply>) -> Reply {
    result.unwrap_or_else(|error| error)
}

#[cfg(test)]
mod tests {
    use super::{parse_float, parse_int};

    #[test]
    fn integers_parse_as_redis_reads_them() {
        assert_eq!(parse_int(b"42"), Some(42));
        assert_eq!(parse_int(b"-7"), Some(-7));
        assert_eq!(parse_int(b"0"), Some(0));
        for bad in [&b"007"[..], b"-0", b"+1", b" 1", b"1.0", b"", b"-"] {
            assert_eq!(parse_int(bad), None, "{bad:?}");
        }
        assert_eq!(parse_float(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_float(b"1.5"), Some(1.5));
        assert_eq!(parse_float(b"nan"), None);
    }
}
