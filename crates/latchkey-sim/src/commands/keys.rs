//! The commands on keys of any type: DEL, EXISTS, TYPE, PTTL, PEXPIRE,
//! PEXPIREAT, PERSIST; and TIME.

use super::{int_arg, reply_of};
use crate::db::Db;
use crate::reply::Reply;

pub(super) fn del(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    let now = db.now();
    let removed = args[1..].iter().filter(|k| db.keys.remove(k, now)).count();
    Reply::Int(i64::try_from(removed).unwrap_or(i64::MAX))
}

pub(super) fn exists(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    let now = db.now();
    let live = args[1..]
        .iter()
        .filter(|k| db.keys.get(k, now).is_some())
        .count();
    Reply::Int(i64::try_from(live).unwrap_or(i64::MAX))
}

pub(super) fn type_of(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    let now = db.now();
    let name = db
        .keys
        .get(&args[1], now)
        .map_or("none", |e| e.value.type_name());
    Reply::Status(name.to_owned())
}

pub(super) fn pttl(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    let now = db.now();
    Reply::Int(match db.keys.get(&args[1], now) {
        None => -2,
        Some(entry) => entry.expires_at.map_or(-1, |when| (when - now).max(0)),
    })
}

pub(super) fn pexpire(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    expire_generic(db, args, false)
}

pub(super) fn pexpireat(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    expire_generic(db, args, true)
}

/// PEXPIRE and PEXPIREAT, with Redis 7's NX, XX, GT and LT.
fn expire_generic(db: &mut Db, args: &[Vec<u8>], absolute: bool) -> Reply {
    reply_of((|| {
        let now = db.now();
        let n = int_arg(&args[2])?;
        let command = if absolute { "pexpireat" } else { "pexpire" };
        let when = if absolute {
            Some(n)
        } else {
            n.checked_add(now)
        }
        .ok_or_else(|| Reply::error(format!("ERR invalid expire time in '{command}' command")))?;
        let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
        for word in &args[3..] {
            match word.to_ascii_uppercase().as_slice() {
                b"NX" => nx = true,
                b"XX" => xx = true,
                b"GT" => gt = true,
                b"LT" => lt = true,
                _ => {
                    return Err(Reply::error(format!(
                        "ERR Unsupported option {}",
                        String::from_utf8_lossy(word)
                    )))
                }
            }
        }
        if (nx && (xx || gt || lt)) || (gt && lt) {
            return Err(Reply::error(
                "ERR NX and XX, GT or LT options at the same time are not compatible",
            ));
        }
        let Some(entry) = db.keys.get_mut(&args[1], now) else {
            return Ok(Reply::Int(0));
        };
        let current = entry.expires_at;
        let refused = (nx && current.is_some())
            || (xx && current.is_none())
            || (gt && current.is_none_or(|c| when <= c))
            || (lt && current.is_some_and(|c| when >= c));
        if refused {
            return Ok(Reply::Int(0));
        }
        if when <= now {
            db.keys.remove(&args[1], now);
        } else {
            entry.expires_at = Some(when);
        }
        Ok(Reply::Int(1))
    })())
}

pub(super) fn persist(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    let now = db.now();
    match db.keys.get_mut(&args[1], now) {
        Some(entry) if entry.expires_at.is_some() => {
            entry.expires_at = None;
            Reply::Int(1)
        }
        _ => Reply::Int(0),
    }
}

pub(super) fn time(db: &mut Db, _args: &[Vec<u8>]) -> Reply {
    let (seconds, micros) = db.clock.time();
    Reply::array(vec![
        Reply::bulk(seconds.to_string()),
        Reply::bulk(micros.to_string()),
    ])
}
