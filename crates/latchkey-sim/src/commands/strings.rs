//! GET, SET (NX, XX, GET, EX, PX, EXAT, PXAT, KEEPTTL) and APPEND.

use super::{int_arg, reply_of, SYNTAX, WRONGTYPE};
use crate::db::Db;
use crate::keyspace::Value;
use crate::reply::Reply;

/// The string at `key`: `Ok(None)` when there is none, `Err` WRONGTYPE.
fn read(db: &mut Db, key: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
    let now = db.now();
    match db.keys.get(key, now).map(|e| &e.value) {
        None => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Reply::error(WRONGTYPE)),
    }
}

pub(super) fn get(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    reply_of(read(db, &args[1]).map(Reply::Bulk))
}

#[derive(Clone, Copy, PartialEq)]
enum Expiry {
    Clear,
    Keep,
    At(i64),
}

pub(super) fn set(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    reply_of(set_inner(db, args))
}

fn set_inner(db: &mut Db, args: &[Vec<u8>]) -> Result<Reply, Reply> {
    let (key, value) = (&args[1], &args[2]);
    let now = db.now();
    let (mut nx, mut xx, mut get) = (false, false, false);
    let mut expiry = Expiry::Clear;
    let mut timed = false;
    let mut i = 3;
    while i < args.len() {
        let word = args[i].to_ascii_uppercase();
        match word.as_slice() {
            b"NX" if !xx => nx = true,
            b"XX" if !nx => xx = true,
            b"GET" => get = true,
            b"KEEPTTL" if !timed => expiry = Expiry::Keep,
            b"EX" | b"PX" | b"EXAT" | b"PXAT" if !timed && expiry != Expiry::Keep => {
                let Some(arg) = args.get(i + 1) else {
                    return Err(Reply::error(SYNTAX));
                };
                let n = int_arg(arg)?;
                let invalid = || Reply::error("ERR invalid expire time in 'set' command");
                if n <= 0 {
                    return Err(invalid());
                }
                let when = match word.as_slice() {
                    b"EX" => n.checked_mul(1000).and_then(|ms| ms.checked_add(now)),
                    b"PX" => n.checked_add(now),
                    b"EXAT" => n.checked_mul(1000),
                    _ => Some(n),
                };
                expiry = Expiry::At(when.ok_or_else(invalid)?);
                timed = true;
                i += 1;
            }
            _ => return Err(Reply::error(SYNTAX)),
        }
        i += 1;
    }
    let old = if get {
        read(db, key)?
    } else {
        let now = db.now();
        db.keys.get(key, now).map(|_| Vec::new())
    };
    let exists = db.keys.get(key, now).is_some();
    if (nx && exists) || (xx && !exists) {
        return Ok(if get { Reply::Bulk(old) } else { Reply::nil() });
    }
    let expires_at = match expiry {
        Expiry::Clear => None,
        Expiry::Keep => db.keys.get(key, now).and_then(|e| e.expires_at),
        Expiry::At(when) => Some(when),
    };
    db.keys.put(key, Value::Str(value.clone()), expires_at);
    // An expiry already past deletes the key at once, as Redis does.
    if expires_at.is_some_and(|when| when <= now) {
        db.keys.remove(key, now);
    }
    Ok(if get { Reply::Bulk(old) } else { Reply::ok() })
}

pub(super) fn append(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    let now = db.now();
    match db.keys.get_mut(&args[1], now) {
        None => {
            db.keys.put(&args[1], Value::Str(args[2].clone()), None);
            Reply::Int(i64::try_from(args[2].len()).unwrap_or(i64::MAX))
        }
        Some(entry) => match &mut entry.value {
            Value::Str(s) => {
                s.extend_from_slice(&args[2]);
                Reply::Int(i64::try_from(s.len()).unwrap_or(i64::MAX))
            }
            _ => Reply::error(WRONGTYPE),
        },
    }
}
