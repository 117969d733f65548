//! Redis's conversions between Lua values and replies (`script_lua.c`):
//! a number becomes an integer, truncated; `true` 1 and `false` nil; a
//! table with `err` an error, with `ok` a status, else an array cut at its
//! first nil. The other way, nil replies become `false` and errors and
//! statuses the `{err=…}` and `{ok=…}` tables.

use mlua::{Lua, Table, Value};

use crate::reply::{format_g17, Reply};

/// A script's return value (or a value it passes back) as a reply.
pub(super) fn to_reply(value: &Value) -> Reply {
    match value {
        Value::Boolean(true) => Reply::Int(1),
        Value::Integer(n) => Reply::Int(*n),
        // C's (long long) cast: towards zero.
        Value::Number(n) => Reply::Int(*n as i64),
        Value::String(s) => Reply::bulk(s.as_bytes().to_vec()),
        Value::Table(t) => table_reply(t),
        _ => Reply::nil(),
    }
}

fn table_reply(table: &Table) -> Reply {
    if let Ok(Value::String(err)) = table.raw_get::<Value>("err") {
        return Reply::error(String::from_utf8_lossy(&err.as_bytes()).into_owned());
    }
    if let Ok(Value::String(ok)) = table.raw_get::<Value>("ok") {
        return Reply::Status(String::from_utf8_lossy(&ok.as_bytes()).into_owned());
    }
    let mut items = Vec::new();
    for i in 1.. {
        match table.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(item) => items.push(to_reply(&item)),
        }
    }
    Reply::array(items)
}

/// A command's reply as the Lua value `redis.call` returns.
pub(super) fn to_lua(lua: &Lua, reply: &Reply) -> mlua::Result<Value> {
    Ok(match reply {
        Reply::Int(n) => Value::Number(*n as f64),
        Reply::Bulk(Some(bytes)) => Value::String(lua.create_string(bytes)?),
        Reply::Bulk(None) | Reply::Array(None) => Value::Boolean(false),
        Reply::Array(Some(items)) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                table.raw_set(i + 1, to_lua(lua, item)?)?;
            }
            Value::Table(table)
        }
        Reply::Status(s) => Value::Table(lua.create_table_from([("ok", s.as_str())])?),
        Reply::Error(e) => Value::Table(lua.create_table_from([("err", e.as_str())])?),
    })
}

/// A `redis.call` argument as the command word Redis makes of it: a
/// string as is, a number as `%.17g` writes it; `None` for anything else.
pub(super) fn to_arg(value: &Value) -> Option<Vec<u8>> {
    match value {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(n) => Some(n.to_string().into_bytes()),
        Value::Number(n) => Some(format_g17(*n).into_bytes()),
        _ => None,
    }
}
