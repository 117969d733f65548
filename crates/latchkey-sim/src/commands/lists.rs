//! RPUSH, LPOP, LINDEX, LRANGE, LREM.

use std::collections::VecDeque;

use super::{int_arg, reply_of, typed, typed_or_new};
use crate::db::Db;
use crate::keyspace::Value;
use crate::reply::Reply;

type List = VecDeque<Vec<u8>>;

fn list(value: &mut Value) -> Option<&mut List> {
    match value {
        Value::List(l) => Some(l),
        _ => None,
    }
}

fn len_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A Redis index (negative: from the end) into a list of `len` items.
fn index(i: i64, len: usize) -> i64 {
    if i < 0 {
        len_i64(len) + i
    } else {
        i
    }
}

pub(super) fn rpush(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    reply_of(
        typed_or_new(db, &args[1], list, || Value::List(List::new())).map(|l| {
            l.extend(args[2..].iter().cloned());
            Reply::Int(len_i64(l.len()))
        }),
    )
}

pub(super) fn lpop(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    if args.len() > 3 {
        return Reply::error("ERR wrong number of arguments for 'lpop' command");
    }
    let count = match args.get(2).map(|c| int_arg(c)) {
        None => None,
        Some(Ok(n)) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        Some(_) => return Reply::error("ERR value is out of range, must be positive"),
    };
    let reply = match typed(db, &args[1], list) {
        Err(e) => return e,
        Ok(None) => match count {
            None => Reply::nil(),
            Some(_) => Reply::Array(None),
        },
        Ok(Some(l)) => match count {
            None => Reply::Bulk(l.pop_front()),
            Some(n) => {
                let n = n.min(l.len());
                Reply::array(l.drain(..n).map(Reply::bulk).collect())
            }
        },
    };
    db.keys.prune(&args[1]);
    reply
}

pub(super) fn lindex(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    reply_of((|| {
        let i = int_arg(&args[2])?;
        let item = typed(db, &args[1], list)?.and_then(|l| {
            let at = usize::try_from(index(i, l.len())).ok()?;
            l.get(at).cloned()
        });
        Ok(Reply::Bulk(item))
    })())
}

pub(super) fn lrange(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    reply_of((|| {
        let (start, stop) = (int_arg(&args[2])?, int_arg(&args[3])?);
        let Some(l) = typed(db, &args[1], list)? else {
            return Ok(Reply::array(Vec::new()));
        };
        let len = len_i64(l.len());
        let start = index(start, l.len()).max(0);
        let stop = index(stop, l.len()).min(len - 1);
        let items = if start > stop {
            Vec::new()
        } else {
            (start..=stop)
                .filter_map(|i| usize::try_from(i).ok().and_then(|i| l.get(i)))
                .cloned()
                .map(Reply::bulk)
                .collect()
        };
        Ok(Reply::array(items))
    })())
}

pub(super) fn lrem(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    let result = (|| {
        let count = int_arg(&args[2])?;
        let Some(l) = typed(db, &args[1], list)? else {
            return Ok(Reply::Int(0));
        };
        let limit = if count == 0 {
            usize::MAX
        } else {
            usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX)
        };
        let mut removed = 0;
        let matches: Vec<usize> = l
            .iter()
            .enumerate()
            .filter(|(_, item)| **item == args[3])
            .map(|(i, _)| i)
            .collect();
        let chosen: Vec<usize> = if count < 0 {
            matches.into_iter().rev().take(limit).collect()
        } else {
            matches.into_iter().take(limit).collect()
        };
        let mut chosen = chosen;
        chosen.sort_unstable_by(|a, b| b.cmp(a));
        for i in chosen {
            l.remove(i);
            removed += 1;
        }
        Ok(Reply::Int(removed))
    })();
    db.keys.prune(&args[1]);
    reply_of(result)
}
