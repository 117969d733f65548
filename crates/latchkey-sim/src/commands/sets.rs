//! SADD, SREM, SCARD, SISMEMBER.

use std::collections::BTreeSet;

use super::{reply_of, typed, typed_or_new};
use crate::db::Db;
use crate::keyspace::Value;
use crate::reply::Reply;

fn set(value: &mut Value) -> Option<&mut BTreeSet<Vec<u8>>> {
    match value {
        Value::Set(s) => Some(s),
        _ => None,
    }
}

fn count(n: usize) -> Reply {
    Reply::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

pub(super) fn sadd(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    reply_of(
        typed_or_new(db, &args[1], set, || Value::Set(BTreeSet::new()))
            .map(|s| count(args[2..].iter().filter(|m| s.insert(m.to_vec())).count())),
    )
}

pub(super) fn srem(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    let removed = match typed(db, &args[1], set) {
        Err(e) => return e,
        Ok(None) => 0,
        Ok(Some(s)) => args[2..].iter().filter(|m| s.remove(*m)).count(),
    };
    db.keys.prune(&args[1]);
    count(removed)
}

pub(super) fn scard(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    reply_of(typed(db, &args[1], set).map(|s| count(s.map_or(0, |s| s.len()))))
}

pub(super) fn sismember(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    reply_of(
        typed(db, &args[1], set)
            .map(|s| Reply::Int(i64::from(s.is_some_and(|s| s.contains(&args[2]))))),
    )
}
