//! The embedded Lua 5.1 and the `redis` library scripts see: `redis.call`,
//! `redis.pcall`, `redis.error_reply`, `redis.status_reply`,
//! `redis.sha1hex`, `redis.log`; `KEYS` and `ARGV`; globals read-only and
//! an unknown global an error, as in Redis 7. A script's failure is
//! reported as Redis words it: `<message> script: <sha1>, on
//! @user_script:<line>.`

mod convert;

use std::collections::HashMap;

use mlua::{Function, Lua, MultiValue, Table, Value};

use crate::commands::{self, Refusal};
use crate::db::Db;
use crate::reply::Reply;

/// The Lua half of the bridge: the `redis` table around the Rust
/// `redis.call` and `redis.pcall` (Rust, that is C, functions as in Redis:
/// a script's `return redis.call(…)` then keeps its frame, and an error
/// names the script's line), and the globals' protection.
const BRIDGE: &str = r#"
local call, pcall_, sha1hex = ...
local raise = error
redis = {}
redis.call = call
redis.pcall = pcall_
function redis.error_reply(message) return {err = message} end
function redis.status_reply(message) return {ok = message} end
function redis.sha1hex(text) return sha1hex(text) end
function redis.log() end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
setmetatable(_G, {
  __index = function(_, name)
    raise("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
  __newindex = function(_, name)
    raise("Attempt to modify a readonly table", 2)
  end,
})
"#;

/// The name scripts are compiled under, as Redis names them.
const SCRIPT_SOURCE: &str = "@user_script";

/// A Lua state with the bridge loaded, and the scripts compiled so far.
pub struct Engine {
    lua: Lua,
    xpcall: Function,
    handler: Function,
    compiled: HashMap<String, Function>,
}

impl Engine {
    /// A fresh Lua state with the standard libraries Redis loads.
    pub fn new() -> mlua::Result<Engine> {
        let lua = Lua::new();
        let call = lua.create_function(|lua, args: MultiValue| match bridge_call(lua, args)? {
            (_, Some(message)) => Err(mlua::Error::external(CallFailed(message))),
            (reply, None) => Ok(reply),
        })?;
        let pcall = lua.create_function(|lua, args: MultiValue| Ok(bridge_call(lua, args)?.0))?;
        let sha1hex =
            lua.create_function(|_, text: mlua::String| Ok(sha1_hex(&text.as_bytes())))?;
        let xpcall: Function = lua.globals().get("xpcall")?;
        let handler = lua.create_function(|lua, err: Value| locate_error(lua, err))?;
        lua.load(BRIDGE)
            .set_name("=sim")
            .call::<()>((call, pcall, sha1hex))?;
        Ok(Engine {
            lua,
            xpcall,
            handler,
            compiled: HashMap::new(),
        })
    }

    /// Runs `script` with `keys` and `args` against `db`, atomically (the
    /// clock does not move while it runs) and without rollback: the writes
    /// made before an error stay, as in Redis.
    pub fn eval(&mut self, db: &mut Db, script: &str, keys: &[Vec<u8>], args: &[Vec<u8>]) -> Reply {
        let sha = sha1_hex(script.as_bytes());
        let function = match self.compiled.get(&sha) {
            Some(f) => f.clone(),
            None => match self
                .lua
                .load(script)
                .set_name(SCRIPT_SOURCE)
                .into_function()
            {
                Ok(f) => {
                    self.compiled.insert(sha.clone(), f.clone());
                    f
                }
                Err(e) => {
                    return Reply::error(format!(
                        "ERR Error compiling script (new function): {}",
                        bare_message(&e)
                    ))
                }
            },
        };
        let owned = std::mem::replace(db, Db::new(0));
        self.lua.set_app_data(owned);
        let outcome = self.run(&function, keys, args);
        if let Some(back) = self.lua.remove_app_data::<Db>() {
            *db = back;
        }
        match outcome {
            Ok(values) => finish(&sha, values),
            Err(e) => Reply::error(format!("ERR latchkey-sim: {e}")),
        }
    }

    fn run(
        &self,
        function: &Function,
        keys: &[Vec<u8>],
        args: &[Vec<u8>],
    ) -> mlua::Result<MultiValue> {
        let globals = self.lua.globals();
        globals.raw_set(
            "KEYS",
            self.lua.create_sequence_from(
                keys.iter()
                    .map(|k| self.lua.create_string(k))
                    .collect::<mlua::Result<Vec<_>>>()?,
            )?,
        )?;
        globals.raw_set(
            "ARGV",
            self.lua.create_sequence_from(
                args.iter()
                    .map(|a| self.lua.create_string(a))
                    .collect::<mlua::Result<Vec<_>>>()?,
            )?,
        )?;
        self.xpcall.call((function.clone(), self.handler.clone()))
    }
}

/// `xpcall`'s results as the script's reply.
fn finish(sha: &str, values: MultiValue) -> Reply {
    let mut values = values.into_iter();
    let ok = matches!(values.next(), Some(Value::Boolean(true)));
    let value = values.next().unwrap_or(Value::Nil);
    if ok {
        return convert::to_reply(&value);
    }
    let Value::Table(err) = value else {
        return Reply::error("ERR latchkey-sim: a script failed without an error table");
    };
    let message = match err.raw_get::<Value>("err") {
        Ok(Value::String(s)) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
        _ => "ERR unknown error".to_owned(),
    };
    match (err.raw_get::<String>("source"), err.raw_get::<i64>("line")) {
        (Ok(source), Ok(line)) => {
            Reply::error(format!("{message} script: {sha}, on {source}:{line}."))
        }
        _ => Reply::error(message),
    }
}

/// The script error handler: the error as Redis's handler makes it, a
/// table `{err = …}` (`ERR ` before a Lua error's text) with the source and
/// line of the script's frame that raised it.
fn locate_error(lua: &Lua, err: Value) -> mlua::Result<Table> {
    let table = match err {
        Value::Table(t) => t,
        Value::String(s) => {
            let text = format!("ERR {}", String::from_utf8_lossy(&s.as_bytes()));
            lua.create_table_from([("err", text)])?
        }
        Value::Error(e) => {
            let text = match failed_call(&e) {
                Some(CallFailed(message)) => message.clone(),
                None => format!("ERR latchkey-sim: {e}"),
            };
            lua.create_table_from([("err", text)])?
        }
        other => {
            let text = format!("ERR latchkey-sim: {other:?}");
            lua.create_table_from([("err", text)])?
        }
    };
    for level in 0..64 {
        let frame = lua.inspect_stack(level, |d| {
            let source = d.source().source.map(|s| s.into_owned());
            (source, d.current_line().unwrap_or(0))
        });
        let Some((source, line)) = frame else { break };
        if source.as_deref() == Some(SCRIPT_SOURCE) {
            table.raw_set("source", SCRIPT_SOURCE)?;
            table.raw_set("line", line)?;
            break;
        }
    }
    Ok(table)
}

/// A command's error, raised by `redis.call`.
#[derive(Debug)]
struct CallFailed(String);

impl std::fmt::Display for CallFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CallFailed {}

/// The command error inside an error `redis.call` raised.
fn failed_call(error: &mlua::Error) -> Option<&CallFailed> {
    match error {
        mlua::Error::ExternalError(e) => e.downcast_ref::<CallFailed>(),
        mlua::Error::CallbackError { cause, .. } => failed_call(cause),
        mlua::Error::WithContext { cause, .. } => failed_call(cause),
        _ => None,
    }
}

/// `redis.call` and `redis.pcall`: runs the command on the Db in app
/// data. Returns the reply as Lua sees it and, for an error, its message.
fn bridge_call(lua: &Lua, args: MultiValue) -> mlua::Result<(Value, Option<String>)> {
    let fail = |message: &str| -> mlua::Result<(Value, Option<String>)> {
        Ok((
            convert::to_lua(lua, &Reply::error(message))?,
            Some(message.to_owned()),
        ))
    };
    if args.is_empty() {
        return fail("ERR Please specify at least one argument for this redis lib call");
    }
    let mut words = Vec::with_capacity(args.len());
    for arg in args.iter() {
        match convert::to_arg(arg) {
            Some(word) => words.push(word),
            None => return fail("ERR Lua redis lib command arguments must be strings or integers"),
        }
    }
    match commands::check(&words) {
        Err(Refusal::Unknown) => return fail("ERR Unknown Redis command called from script"),
        Err(Refusal::Arity) => {
            return fail("ERR Wrong number of args calling Redis command from script")
        }
        Ok(()) => {}
    }
    let reply = {
        let Some(mut db) = lua.app_data_mut::<Db>() else {
            return fail("ERR latchkey-sim: no server state during a script");
        };
        commands::run(&mut db, &words)
    };
    let failed = match &reply {
        Reply::Error(message) => Some(message.clone()),
        _ => None,
    };
    Ok((convert::to_lua(lua, &reply)?, failed))
}

/// A Lua error's own text, without mlua's decoration.
fn bare_message(error: &mlua::Error) -> String {
    match error {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::RuntimeError(message) => message.clone(),
        other => other.to_string(),
    }
}

/// The SHA-1 of `bytes` in lowercase hex, as `redis.sha1hex` and the
/// script cache name a script.
pub fn sha1_hex(bytes: &[u8]) -> String {
    sha1_smol::Sha1::from(bytes).digest().to_string()
}
