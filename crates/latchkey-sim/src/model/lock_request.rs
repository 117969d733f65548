//! What the plain lock model sends for each operation: built in one place
//! ([`request`]), which the model's steps send (`lock_step.rs`) and the
//! conformance check compares with what the library sends
//! (`model::conform`).

use latchkey::protocol::{fence_key, release_channel, tag_stem, QUEUE_SUFFIX, WAKE_SUFFIX};

use crate::model::common::process_id;
use crate::model::lock::{LockModel, Op};
use crate::reply::Reply;
use crate::server::Server;

/// What an operation sends: a plain command (`text` `None`: the command
/// `name` with the keys, then the arguments) or a script (`name` its file,
/// `text` what is evaluated).
#[derive(Clone, Debug)]
pub struct Request<'a> {
    /// The script's file name, or the command's name.
    pub name: &'static str,
    /// The script's text as the model sends it; `None` for a command.
    pub text: Option<&'a str>,
    /// KEYS (a command's keys come first among its words).
    pub keys: Vec<Vec<u8>>,
    /// ARGV (a command's words after its keys).
    pub args: Vec<String>,
}

/// A plain lock's waiting processes, `S:wake`: a sorted set, each waiting
/// process's 16 hex digits → when it first registered (`shared/mark.lua`).
pub fn wake_set(key: &[u8]) -> Vec<u8> {
    [&tag_stem(key)[..], WAKE_SUFFIX].concat()
}

/// The stem of a plain lock's wake channels, `S:wake:`: a process's
/// channel is the stem and its 16 hex digits ([`wake_channel`]).
pub fn wake_stem(key: &[u8]) -> Vec<u8> {
    [&wake_set(key)[..], b":"].concat()
}

/// Where a release wakes the waiting process `process` of the lock `key`
/// alone.
pub fn wake_channel(key: &[u8], process: &str) -> Vec<u8> {
    [&wake_stem(key)[..], process.as_bytes()].concat()
}

/// The fair queue's key, `S:queue`, which a plain release looks at (while
/// it exists, fair waiters wait too, and every waiter is woken).
pub fn fair_queue(key: &[u8]) -> Vec<u8> {
    [&tag_stem(key)[..], QUEUE_SUFFIX].concat()
}

/// What client `c`'s `op` sends with owner token `token`: the one place
/// the model builds its requests, which its steps send and the
/// conformance check (`model::conform`) compares with what the library
/// sends. `None` for the steps that send nothing to Redis (a fenced write).
pub(crate) fn request(m: &LockModel, op: Op, c: usize, token: String) -> Option<Request<'_>> {
    request_ttl(m, op, c, token, m.config.ttl)
}

/// [`request`] with the TTL sent: a renewal of a hold made `with_max_hold`
/// sends less than the lock's TTL near the cap.
pub(crate) fn request_ttl(
    m: &LockModel,
    op: Op,
    c: usize,
    token: String,
    ttl: i64,
) -> Option<Request<'_>> {
    let cfg = &m.config;
    let key = m.key().to_vec();
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
    let ttl = ttl.to_string();
    let script = |name, text, keys, args| Request {
        name,
        text: Some(text),
        keys,
        args,
    };
    Some(match op {
        Op::Try if !cfg.fenced => Request {
            name: "SET",
            text: None,
            keys: vec![key.clone()],
            args: vec![token, "NX".into(), "PX".into(), ttl, "GET".into()],
        },
        Op::Try => {
            let fenced = if cfg.fenced { "1" } else { "0" };
            let args = vec![token, ttl, fenced.to_string(), "0".into()];
            let keys = vec![key.clone(), fence_key(&key)];
            script("acquire.lua", &m.scripts.acquire, keys, args)
        }
        Op::Retry => {
            // A waiter's try marks the holder and registers the client's
            // process among the waiting processes, whose wake channel it
            // listens on while it waits (`lock_step.rs`).
            let fenced = if cfg.fenced { "1" } else { "0" };
            let args = vec![
                token,
                ttl,
                fenced.to_string(),
                "1".into(),
                "0".into(),
                text(release_channel(&key)),
                "PUBLISH".into(),
                process_id(c),
            ];
            let keys = vec![key.clone(), fence_key(&key), wake_set(&key)];
            script("acquire.lua", &m.scripts.acquire, keys, args)
        }
        Op::Renew => script("extend.lua", &m.scripts.extend, vec![key], vec![token, ttl]),
        Op::Issue => {
            let keys = vec![key.clone(), fence_key(&key)];
            script("issue_fence.lua", &m.scripts.issue_fence, keys, vec![token])
        }
        Op::Release | Op::Cleanup => {
            let args = vec![token, text(release_channel(&key)), "PUBLISH".into()];
            let keys = vec![key.clone(), wake_set(&key), fair_queue(&key)];
            script("release.lua", &m.scripts.release, keys, args)
        }
        Op::Write | Op::Land => return None,
    })
}

/// Sends `request` to `server`.
pub(crate) fn send(server: &mut Server, request: &Request) -> Reply {
    match request.text {
        Some(text) => server.eval(text, &request.keys, &request.args),
        None => {
            let mut words = vec![request.name.to_string()];
            words.extend(
                request
                    .keys
                    .iter()
                    .map(|k| String::from_utf8_lossy(k).into_owned()),
            );
            words.extend(request.args.iter().cloned());
            server.command(&words)
        }
    }
}

/// Builds and sends what `op` sends: the script or command's name, the
/// arguments and the reply (an error reply for an op that sends nothing,
/// which the step reports as the model going wrong).
pub(crate) fn call<'m>(
    m: &'m LockModel,
    server: &mut Server,
    op: Op,
    c: usize,
    token: String,
) -> (Reply, Request<'m>) {
    call_ttl(m, server, op, c, token, m.config.ttl)
}

/// [`call`] with the TTL sent ([`request_ttl`]).
pub(crate) fn call_ttl<'m>(
    m: &'m LockModel,
    server: &mut Server,
    op: Op,
    c: usize,
    token: String,
    ttl: i64,
) -> (Reply, Request<'m>) {
    match request_ttl(m, op, c, token, ttl) {
        Some(r) => (send(server, &r), r),
        None => {
            let none = Request {
                name: "-",
                text: None,
                keys: Vec::new(),
                args: Vec::new(),
            };
            (Reply::error("ERR this step sends nothing"), none)
        }
    }
}
