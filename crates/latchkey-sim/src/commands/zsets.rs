//! ZADD (NX, XX, GT, LT, CH, INCR), ZREM, ZSCORE, ZCARD, ZCOUNT, ZRANGE
//! (by index, WITHSCORES), ZRANGEBYSCORE (WITHSCORES, LIMIT),
//! ZREMRANGEBYSCORE, ZPOPMIN.

use super::{int_arg, parse_float, parse_int, reply_of, typed, NOT_FLOAT, SYNTAX};
use crate::db::Db;
use crate::keyspace::{Value, ZSet};
use crate::reply::{format_g17, Reply};

fn zset(value: &mut Value) -> Option<&mut ZSet> {
    match value {
        Value::ZSet(z) => Some(z),
        _ => None,
    }
}

fn count(n: usize) -> Reply {
    Reply::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

pub(super) fn zadd(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    reply_of(zadd_inner(db, args))
}

fn zadd_inner(db: &mut Db, args: &[Vec<u8>]) -> Result<Reply, Reply> {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
        (false, false, false, false, false, false);
    let mut i = 2;
    while let Some(word) = args.get(i) {
        match word.to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            b"CH" => ch = true,
            b"INCR" => incr = true,
            _ => break,
        }
        i += 1;
    }
    let pairs = &args[i..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(Reply::error(SYNTAX));
    }
    if nx && xx {
        return Err(Reply::error(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if ((gt || lt) && nx) || (gt && lt) {
        return Err(Reply::error(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if incr && pairs.len() > 2 {
        return Err(Reply::error(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    let mut parsed = Vec::new();
    for pair in pairs.chunks(2) {
        let score = parse_float(&pair[0]).ok_or_else(|| Reply::error(NOT_FLOAT))?;
        parsed.push((score, pair[1].clone()));
    }
    let exists = typed(db, &args[1], zset)?.is_some();
    if !exists {
        if xx {
            return Ok(if incr { Reply::nil() } else { Reply::Int(0) });
        }
        db.keys.put(&args[1], Value::ZSet(ZSet::default()), None);
    }
    let Some(z) = typed(db, &args[1], zset)? else {
        return Err(Reply::error(
            "ERR latchkey-sim: a key made just now is gone",
        ));
    };
    let (mut added, mut changed) = (0, 0);
    let mut incr_result = None;
    for (score, member) in parsed {
        match z.score(&member) {
            Some(current) => {
                if nx {
                    continue;
                }
                let next = if incr { current + score } else { score };
                if next.is_nan() {
                    return Err(Reply::error("ERR resulting score is not a number (NaN)"));
                }
                if (gt && next <= current) || (lt && next >= current) {
                    continue;
                }
                incr_result = Some(next);
                if next != current {
                    z.insert(member, next);
                    changed += 1;
                }
            }
            None => {
                if xx {
                    continue;
                }
                z.insert(member, score);
                incr_result = Some(score);
                added += 1;
            }
        }
    }
    db.keys.prune(&args[1]);
    if incr {
        return Ok(Reply::Bulk(incr_result.map(|s| format_g17(s).into_bytes())));
    }
    Ok(count(if ch { added + changed } else { added }))
}

pub(super) fn zrem(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    let removed = match typed(db, &args[1], zset) {
        Err(e) => return e,
        Ok(None) => 0,
        Ok(Some(z)) => args[2..].iter().filter(|m| z.remove(m)).count(),
    };
    db.keys.prune(&args[1]);
    count(removed)
}

pub(super) fn zscore(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    reply_of(typed(db, &args[1], zset).map(|z| {
        Reply::Bulk(
            z.and_then(|z| z.score(&args[2]))
                .map(|s| format_g17(s).into_bytes()),
        )
    }))
}

pub(super) fn zcard(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    reply_of(typed(db, &args[1], zset).map(|z| count(z.map_or(0, |z| z.len()))))
}

/// A score range's bound: a float, `(` for exclusive, `±inf`.
#[derive(Clone, Copy)]
struct Bound {
    value: f64,
    open: bool,
}

fn bound(word: &[u8]) -> Option<Bound> {
    match word.strip_prefix(b"(") {
        Some(rest) => parse_float(rest).map(|value| Bound { value, open: true }),
        None => parse_float(word).map(|value| Bound { value, open: false }),
    }
}

fn range(min: &[u8], max: &[u8]) -> Result<impl Fn(f64) -> bool, Reply> {
    let not_float = || Reply::error("ERR min or max is not a float");
    let (min, max) = (
        bound(min).ok_or_else(not_float)?,
        bound(max).ok_or_else(not_float)?,
    );
    Ok(move |s: f64| {
        let above = if min.open {
            s > min.value
        } else {
            s >= min.value
        };
        let below = if max.open {
            s < max.value
        } else {
            s <= max.value
        };
        above && below
    })
}

fn listing(items: Vec<(&[u8], f64)>, with_scores: bool) -> Reply {
    Reply::array(
        items
            .into_iter()
            .flat_map(|(m, s)| {
                let score = with_scores.then(|| Reply::bulk(format_g17(s)));
                std::iter::once(Reply::bulk(m)).chain(score)
            })
            .collect(),
    )
}

pub(super) fn zcount(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    reply_of((|| {
        let within = range(&args[2], &args[3])?;
        let z = typed(db, &args[1], zset)?;
        Ok(count(z.map_or(0, |z| {
            z.ordered().into_iter().filter(|(_, s)| within(*s)).count()
        })))
    })())
}

pub(super) fn zrange(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    reply_of((|| {
        let (start, stop) = (int_arg(&args[2])?, int_arg(&args[3])?);
        let with_scores = match &args[4..] {
            [] => false,
            [w] if w.eq_ignore_ascii_case(b"WITHSCORES") => true,
            _ => return Err(Reply::error(SYNTAX)),
        };
        let Some(z) = typed(db, &args[1], zset)? else {
            return Ok(Reply::array(Vec::new()));
        };
        let all = z.ordered();
        let len = i64::try_from(all.len()).unwrap_or(i64::MAX);
        let start = if start < 0 {
            (len + start).max(0)
        } else {
            start
        };
        let stop = if stop < 0 {
            len + stop
        } else {
            stop.min(len - 1)
        };
        if start > stop || start >= len {
            return Ok(Reply::array(Vec::new()));
        }
        let (from, to) = (
            usize::try_from(start).unwrap_or(0),
            usize::try_from(stop).unwrap_or(0),
        );
        Ok(listing(all[from..=to].to_vec(), with_scores))
    })())
}

pub(super) fn zrangebyscore(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    reply_of((|| {
        let within = range(&args[2], &args[3])?;
        let (mut with_scores, mut offset, mut limit) = (false, 0i64, -1i64);
        let mut i = 4;
        while let Some(word) = args.get(i) {
            match word.to_ascii_uppercase().as_slice() {
                b"WITHSCORES" => with_scores = true,
                b"LIMIT" if args.len() > i + 2 => {
                    offset = int_arg(&args[i + 1])?;
                    limit = int_arg(&args[i + 2])?;
                    i += 2;
                }
                _ => return Err(Reply::error(SYNTAX)),
            }
            i += 1;
        }
        let Some(z) = typed(db, &args[1], zset)? else {
            return Ok(Reply::array(Vec::new()));
        };
        if offset < 0 {
            return Ok(Reply::array(Vec::new()));
        }
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        let take = usize::try_from(limit).unwrap_or(usize::MAX);
        let items = z
            .ordered()
            .into_iter()
            .filter(|(_, s)| within(*s))
            .skip(skip)
            .take(take)
            .collect();
        Ok(listing(items, with_scores))
    })())
}

pub(super) fn zremrangebyscore(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    let result = (|| {
        let within = range(&args[2], &args[3])?;
        let Some(z) = typed(db, &args[1], zset)? else {
            return Ok(Reply::Int(0));
        };
        let doomed: Vec<Vec<u8>> = z
            .ordered()
            .into_iter()
            .filter(|(_, s)| within(*s))
            .map(|(m, _)| m.to_vec())
            .collect();
        for member in &doomed {
            z.remove(member);
        }
        Ok(count(doomed.len()))
    })();
    db.keys.prune(&args[1]);
    reply_of(result)
}

/// `ZPOPMIN key [count]`, as Redis 7 answers a RESP2 client (a script's
/// `redis.call` too): the count is read first (an error before the key's
/// type is looked at; Redis words a count that is no integer as one out
/// of range), a missing key or a count of 0 gives the empty array, else
/// the `count` (default 1) lowest members as one flat array `member,
/// score, …`; the key goes once emptied.
pub(super) fn zpopmin(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    if args.len() > 3 {
        return Reply::error(SYNTAX);
    }
    let count = match args.get(2).map(|c| parse_int(c)) {
        None => 1,
        Some(Some(n)) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
        Some(_) => return Reply::error("ERR value is out of range, must be positive"),
    };
    let popped = match typed(db, &args[1], zset) {
        Err(e) => return e,
        Ok(None) => return Reply::array(Vec::new()),
        Ok(Some(z)) => {
            let lowest: Vec<(Vec<u8>, f64)> = z
                .ordered()
                .into_iter()
                .take(count)
                .map(|(m, s)| (m.to_vec(), s))
                .collect();
            for (member, _) in &lowest {
                z.remove(member);
            }
            lowest
        }
    };
    db.keys.prune(&args[1]);
    listing(
        popped.iter().map(|(m, s)| (m.as_slice(), *s)).collect(),
        true,
    )
}

#[cfg(test)]
mod tests {
    use crate::commands::run;
    use crate::db::Db;
    use crate::reply::Reply;

    fn call(db: &mut Db, words: &[&str]) -> Reply {
        let words: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        run(db, &words)
    }

    fn flat(items: &[&str]) -> Reply {
        Reply::array(items.iter().map(|i| Reply::bulk(*i)).collect())
    }

    #[test]
    fn zpopmin_pops_the_lowest_as_redis_7_answers() {
        let mut db = Db::new(1_796_000_000_000_000);
        assert_eq!(call(&mut db, &["ZPOPMIN", "w"]), flat(&[]));
        call(
            &mut db,
            &["ZADD", "w", "NX", "20", "b", "10", "c", "10", "a"],
        );
        // NX keeps a member's place.
        assert_eq!(call(&mut db, &["ZADD", "w", "NX", "1", "b"]), Reply::Int(0));
        call(&mut db, &["PEXPIRE", "w", "500"]);
        assert_eq!(call(&mut db, &["ZPOPMIN", "w"]), flat(&["a", "10"]));
        assert_eq!(call(&mut db, &["PTTL", "w"]), Reply::Int(500));
        assert_eq!(call(&mut db, &["ZPOPMIN", "w", "0"]), flat(&[]));
        assert_eq!(
            call(&mut db, &["ZPOPMIN", "w", "5"]),
            flat(&["c", "10", "b", "20"])
        );
        // Emptied, the key is gone, its TTL with it.
        assert_eq!(call(&mut db, &["EXISTS", "w"]), Reply::Int(0));
        assert_eq!(call(&mut db, &["PTTL", "w"]), Reply::Int(-2));
    }

    #[test]
    fn zpopmin_refuses_as_redis_7_does() {
        let mut db = Db::new(1_796_000_000_000_000);
        call(&mut db, &["SET", "s", "x"]);
        let wrong = Reply::error(super::super::WRONGTYPE);
        assert_eq!(call(&mut db, &["ZPOPMIN", "s"]), wrong);
        assert_eq!(call(&mut db, &["ZPOPMIN", "s", "0"]), wrong);
        // The count is read before the key.
        assert_eq!(
            call(&mut db, &["ZPOPMIN", "s", "-1"]),
            Reply::error("ERR value is out of range, must be positive")
        );
        assert_eq!(
            call(&mut db, &["ZPOPMIN", "s", "x"]),
            Reply::error("ERR value is out of range, must be positive")
        );
        assert_eq!(
            call(&mut db, &["ZPOPMIN", "s", "1", "2"]),
            Reply::error(super::SYNTAX)
        );
        assert_eq!(
            call(&mut db, &["ZPOPMIN"]),
            Reply::error("ERR wrong number of arguments for 'zpopmin' command")
        );
    }
}
