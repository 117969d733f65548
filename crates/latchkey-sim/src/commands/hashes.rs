//! HGET, HMGET, HSET, HDEL, HINCRBY.

use std::collections::BTreeMap;

use super::{int_arg, parse_int, reply_of, typed, typed_or_new};
use crate::db::Db;
use crate::keyspace::Value;
use crate::reply::Reply;

type Hash = BTreeMap<Vec<u8>, Vec<u8>>;

fn hash(value: &mut Value) -> Option<&mut Hash> {
    match value {
        Value::Hash(h) => Some(h),
        _ => None,
    }
}

fn empty() -> Value {
    Value::Hash(Hash::new())
}

pub(super) fn hget(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    reply_of(
        typed(db, &args[1], hash).map(|h| Reply::Bulk(h.and_then(|h| h.get(&args[2]).cloned()))),
    )
}

pub(super) fn hmget(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    reply_of(typed(db, &args[1], hash).map(|h| {
        Reply::array(
            args[2..]
                .iter()
                .map(|f| Reply::Bulk(h.as_ref().and_then(|h| h.get(f).cloned())))
                .collect(),
        )
    }))
}

pub(super) fn hset(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    if !args.len().is_multiple_of(2) {
        return Reply::error("ERR wrong number of arguments for 'hset' command");
    }
    reply_of(typed_or_new(db, &args[1], hash, empty).map(|h| {
        let added = args[2..]
            .chunks(2)
            .filter(|pair| h.insert(pair[0].clone(), pair[1].clone()).is_none())
            .count();
        Reply::Int(i64::try_from(added).unwrap_or(i64::MAX))
    }))
}

pub(super) fn hdel(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    let removed = match typed(db, &args[1], hash) {
        Err(e) => return e,
        Ok(None) => 0,
        Ok(Some(h)) => args[2..].iter().filter(|f| h.remove(*f).is_some()).count(),
    };
    db.keys.prune(&args[1]);
    Reply::Int(i64::try_from(removed).unwrap_or(i64::MAX))
}

pub(super) fn hincrby(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    reply_of((|| {
        let by = int_arg(&args[3])?;
        // Redis checks the type before it makes the key.
        typed(db, &args[1], hash)?;
        let h = typed_or_new(db, &args[1], hash, empty)?;
        let current = match h.get(&args[2]) {
            None => 0,
            Some(v) => {
                parse_int(v).ok_or_else(|| Reply::error("ERR hash value is not an integer"))?
            }
        };
        let next = current
            .checked_add(by)
            .ok_or_else(|| Reply::error("ERR increment or decrement would overflow"))?;
        h.insert(args[2].clone(), next.to_string().into_bytes());
        Ok(Reply::Int(next))
    })())
}
