//! How a lock is told to people: one line about it (`status`) and the
//! holder of a busy lock in the errors of `run` and `acquire`.

use latchkey::LockInfo;

use crate::support::duration::human;
use crate::support::target::Target;
use crate::support::text::escape;

/// ` (held by web-1 pid 4242 for 3.20s, 26.8s left)` for error messages
/// about a busy lock; empty when the holder cannot be told (several servers,
/// or any error: the message is a courtesy).
///
/// # Cancel safety
///
/// Cancel-safe: it only reads.
pub async fn holder_summary(target: &Target, name: &str) -> String {
    let Ok(client) = target.client("inspect").await else {
        return String::new();
    };
    match client.inspect(name).await {
        Ok(info) if info.held => format!(" ({})", describe(&info)),
        _ => String::new(),
    }
}

/// One line about a lock, for people.
pub fn describe(info: &LockInfo) -> String {
    let fence = match (info.fencing_token, &info.bad_fencing_counter) {
        (Some(token), _) => format!("fencing token {token}"),
        (None, Some(_)) => "fencing counter invalid".to_owned(),
        (None, None) => "never acquired by latchkey".to_owned(),
    };
    if !info.held {
        return match (info.fencing_token, &info.bad_fencing_counter) {
            (Some(token), _) => format!("free, last fencing token {token}"),
            (None, Some(_)) => "free, fencing counter invalid".to_owned(),
            (None, None) => "free, never acquired".to_owned(),
        };
    }
    let holder = holder_text(info).unwrap_or_default();
    let age = info
        .age
        .map(|a| format!(" for {}", human(a)))
        .unwrap_or_default();
    let expiry = match info.ttl {
        Some(ttl) => format!("expires in {}", human(ttl)),
        None => "no TTL: it never expires by itself".to_owned(),
    };
    format!("held by {holder}{age}, {expiry}, {fence}")
}

/// Who holds a lock, for people; `None` when free.
pub fn holder_text(info: &LockInfo) -> Option<String> {
    match (&info.holder, &info.value) {
        (Some(h), _) => Some(format!("{} pid {}", escape(h.host.as_bytes()), h.pid)),
        (None, Some(value)) => Some(format!(
            "another client (value {:?})",
            String::from_utf8_lossy(value)
        )),
        (None, None) => None,
    }
}
