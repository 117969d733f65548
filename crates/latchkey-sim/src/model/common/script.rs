//! The scripts as the models send them, and what every model reads from a
//! reply: the library's texts with a mutant's change, the shape of a
//! client's token and of its process id, a reply's integers.

use latchkey::protocol::script_text;

use crate::reply::Reply;

/// A script's text as the library sends it (preludes included).
pub fn script(file: &str) -> Result<String, String> {
    script_text(file)
        .map(str::to_string)
        .ok_or_else(|| format!("no script {file}"))
}

/// `text` with `from` replaced by `to`; an error when `from` is not there,
/// so that a change of the script cannot turn a mutant into the original.
pub fn mutate(text: &str, from: &str, to: &str) -> Result<String, String> {
    if !text.contains(from) {
        return Err(format!("mutant: {from:?} is no longer in the script"));
    }
    Ok(text.replacen(from, to, 1))
}

/// A reply's integers: an array's items (a non-integer item as `i64::MIN`)
/// or a single integer; nothing for anything else.
pub fn ints(reply: &Reply) -> Vec<i64> {
    match reply {
        Reply::Array(Some(items)) => items
            .iter()
            .map(|r| match r {
                Reply::Int(n) => *n,
                _ => i64::MIN,
            })
            .collect(),
        Reply::Int(n) => vec![*n],
        _ => Vec::new(),
    }
}

/// Client `client`'s token for one attempt, in a library token's shape
/// (`lk2:`, so that waiters mark it; no `#`, so that a hold of k permits
/// adds `#2` … `#k` without collisions).
pub fn token(client: usize, attempt: u32) -> String {
    format!("lk2:c{client}a{attempt}:0:sim")
}

/// Client `client`'s process id: the 16 hex digits naming its subscriber
/// connection, which a fair lock's entries start with and a plain lock's
/// waiting processes and wake channels name (each model client is a
/// process of its own).
pub fn process_id(client: usize) -> String {
    format!("{:016x}", client + 1)
}
