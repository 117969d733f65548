//! `latchkey doctor`'s permission checks: `scripts` (a probe lock),
//! `append` (the waiting mark), `subscribe`, and the fix each suggests.
//!
//! ```text
//! FAIL  scripts       user app cannot use latchkey's scripts: … NOPERM … 'evalsha' …. Fix: ACL SETUSER app +evalsha +eval …
//! FAIL  scripts       the server is out of memory (maxmemory reached, noeviction) …. Fix: free memory or raise maxmemory …
//! WARN  append        user app may not APPEND: …. Fix: ACL SETUSER app +append
//! ```
//!
//! A refused write is not always a permission problem: a server at
//! `maxmemory` with `noeviction` answers OOM, a replica READONLY, and an
//! ACL fix would send the operator the wrong way. And a fix must be one
//! Redis accepts for *this* user: adding `~latchkey:*` or `&latchkey:*` to a
//! user that has `~*`/`&*` (allkeys/allchannels) is an error ("adding a
//! pattern after the * pattern is not valid"), so a pattern is suggested only
//! when the user is known to lack access of that kind.

use std::time::Duration;

use latchkey::Connection;
use latchkey::{Client, Ownership};

use crate::commands::doctor::check::Check;
use crate::support::duration::human;

/// Every command latchkey's locks send (scripts included; `latchkey::acl`,
/// docs/security.md): granting them cannot be refused, whatever the user's
/// other rules.
fn commands() -> String {
    let plus: Vec<String> = latchkey::acl::Use::Locks
        .commands()
        .iter()
        .map(|c| format!("+{c}"))
        .collect();
    plus.join(" ")
}

/// Why a write was refused.
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    /// `maxmemory` reached under `noeviction`.
    OutOfMemory,
    /// The server is a read-only replica.
    ReadOnly,
    /// The ACL: `keys`/`channels` when a key or channel pattern was missing.
    Permission {
        keys: bool,
        channels: bool,
    },
    /// The server does not offer a command (disabled with `rename-command`,
    /// or a proxy or managed service without it): the command, lowercase.
    Unknown(String),
    Other,
}

/// Classifies by the server's error code, which the library's message carries.
fn classify(message: &str) -> Refusal {
    // redis-rs quotes the code (`"OOM": command not allowed …`); Redis
    // itself writes `OOM command not allowed …` (e.g. inside a script error).
    if message.contains("\"OOM\"") || message.contains("OOM command not allowed") {
        Refusal::OutOfMemory
    } else if message.contains("READONLY")
        || message.contains("ReadOnly")
        || message.contains("read only replica")
    {
        Refusal::ReadOnly
    } else if message.contains("NOPERM")
        || message.contains("NoPermission")
        || message.to_ascii_lowercase().contains("no permissions")
    {
        // "access a key/channel" (scripts), "access one of the keys/channels
        // used as arguments" (a command sent directly).
        Refusal::Permission {
            keys: message.contains("access a key") || message.contains("of the keys"),
            channels: message.contains("access a channel") || message.contains("of the channels"),
        }
    } else if let Some(command) = unknown_command(message) {
        Refusal::Unknown(command)
    } else {
        Refusal::Other
    }
}

/// The command an `unknown command 'evalsha'` refusal names (Redis and
/// Valkey: "ERR unknown command 'evalsha', with args beginning with: …").
fn unknown_command(message: &str) -> Option<String> {
    let (_, rest) = message.split_once("unknown command '")?;
    let (command, _) = rest.split_once('\'')?;
    (!command.is_empty()).then(|| command.to_ascii_lowercase())
}

/// The check for a write refused as `refusal`, other than a permission
/// one; `failed` when it was not refused at all but failed (unreachable,
/// timed out, …), where ACL advice would send the operator the wrong way.
fn not_acl(name: &'static str, refusal: &Refusal, message: &str, failed: Check) -> Option<Check> {
    match refusal {
        Refusal::Other => Some(failed),
        Refusal::OutOfMemory => Some(Check::fail(
            name,
            format!("the server is out of memory (maxmemory reached under noeviction), so it refuses every write and no lock can be taken: {message}"),
            "free memory on the server (delete unneeded keys) or raise maxmemory (CONFIG SET maxmemory …, and in redis.conf); keep noeviction",
        )),
        Refusal::ReadOnly => Some(Check::fail(
            name,
            format!("this server is a read-only replica: {message}"),
            "connect to the primary (its address is in INFO replication as master_host:master_port)",
        )),
        Refusal::Unknown(command) => Some(Check::fail(
            name,
            format!("the server does not offer the {command} command, which latchkey needs (disabled with rename-command, or a proxy or managed service without it): {message}"),
            format!("enable {command} on the server (remove its rename-command, or ask the service); latchkey sends: {} (docs/security.md)", latchkey::acl::Use::Locks.commands().join(" ")),
        )),
        _ => None,
    }
}

/// `ACL SETUSER` that grants what latchkey needs to `user`, valid for it.
async fn acl_fix(conn: &mut Connection, user: &str, prefix: &str, refusal: &Refusal) -> String {
    let (keys_refused, channels_refused) = match refusal {
        Refusal::Permission { keys, channels } => (*keys, *channels),
        _ => (false, false),
    };
    // From the user's rules when we may read them; otherwise only what the
    // refusal proves is missing (a user refused a key has no `~*`).
    let (need_keys, need_channels) = match patterns(conn, user).await {
        Some((all_keys, all_channels)) => (!all_keys, !all_channels),
        None => (keys_refused, channels_refused),
    };
    let mut rule = format!("ACL SETUSER {user} {}", commands());
    if need_keys {
        rule.push(' ');
        rule.push_str(&latchkey::acl::key_patterns(prefix).join(" "));
    }
    if need_channels {
        rule.push(' ');
        rule.push_str(&latchkey::acl::channel_patterns(prefix).join(" "));
    }
    rule
}

/// Whether `user` may use all keys and all channels, from `ACL GETUSER`
/// (Redis 6 lists `allkeys`/`allchannels` flags, 7 the `~*`/`&*` patterns);
/// `None` when this user may not run it.
async fn patterns(conn: &mut Connection, user: &str) -> Option<(bool, bool)> {
    let reply: redis::Value = redis::cmd("ACL")
        .arg("GETUSER")
        .arg(user)
        .query_async(conn)
        .await
        .ok()?;
    let mut words = Vec::new();
    flatten(&reply, &mut words);
    let has = |flag: &str, all: &dyn Fn(&str) -> bool| {
        words
            .iter()
            .any(|w| w == flag || w.split_whitespace().any(all))
    };
    // `~*`, or `%RW~*` (Redis 7 key permissions with read/write flags).
    let all_keys = has("allkeys", &|token: &str| token.ends_with("~*"));
    let all_channels = has("allchannels", &|token: &str| token == "&*");
    Some((all_keys, all_channels))
}

/// Every string in a reply, depth first.
fn flatten(value: &redis::Value, out: &mut Vec<String>) {
    match value {
        redis::Value::BulkString(bytes) => out.push(String::from_utf8_lossy(bytes).into_owned()),
        redis::Value::SimpleString(text) => out.push(text.clone()),
        redis::Value::Array(items) | redis::Value::Set(items) => {
            items.iter().for_each(|item| flatten(item, out))
        }
        redis::Value::Map(pairs) => pairs.iter().for_each(|(k, v)| {
            flatten(k, out);
            flatten(v, out);
        }),
        _ => {}
    }
}

pub async fn scripts(client: &Client, conn: &mut Connection, user: &str) -> Check {
    const NAME: &str = "scripts";
    let prefix = String::from_utf8_lossy(client.prefix()).into_owned();
    let name = format!("doctor-probe-{}", std::process::id());
    // Both ways of taking a lock and both ways of issuing a fencing token:
    // a plain lock asked for its token, and a lock `with_fencing`.
    let probe = async {
        let lock = client.lock(&name, Duration::from_secs(5))?;
        for lock in [lock.clone(), lock.with_fencing()] {
            let Some(guard) = lock.try_acquire().await? else {
                return Ok(None);
            };
            guard.fencing_token().await?;
            let released = guard.release().await?;
            if released != Ownership::Owned {
                return Ok(Some(released));
            }
        }
        Ok::<_, latchkey::Error>(Some(Ownership::Owned))
    };
    let check = match probe.await {
        Ok(Some(Ownership::Owned)) => Check::pass(
            NAME,
            format!("acquired and released a probe lock as user {user}, with fencing tokens (EVALSHA, SET, GET, DEL, PUBLISH allowed)"),
        ),
        Ok(other) => Check::warn(NAME, format!("probe lock {name:?} behaved oddly ({other:?})"), "run doctor again"),
        Err(e) => {
            let message = e.to_string();
            // The library names these by their error code.
            let refusal = match e {
                latchkey::Error::OutOfMemory(_) => Refusal::OutOfMemory,
                latchkey::Error::ReadOnlyReplica(_) => Refusal::ReadOnly,
                _ => classify(&message),
            };
            let failed = Check::fail(
                NAME,
                format!("the probe lock failed, not for lack of permission: {message}"),
                "check that the server answers from here (network, address, load), then run doctor again",
            );
            if let Some(check) = not_acl(NAME, &refusal, &message, failed) {
                return check;
            }
            let fix = acl_fix(conn, user, &prefix, &refusal).await;
            return Check::fail(NAME, format!("user {user} cannot use latchkey's scripts: {message}"), fix);
        }
    };
    // The probe's fencing counter has no TTL; do not leave one per run behind.
    let fence_key = latchkey::protocol::fence_key(&[client.prefix(), name.as_bytes()].concat());
    let _: redis::RedisResult<i64> = redis::cmd("DEL").arg(fence_key).query_async(conn).await;
    check
}

/// `APPEND` marks a busy lock as waited for; a release then publishes a
/// wake-up. The scripts `pcall` it, so a user without it still acquires,
/// and the `scripts` probe passes, but its waiters are never woken by a
/// release: they find the lock free only when they poll, at worst at the
/// holder's TTL.
pub async fn append(client: &Client, conn: &mut Connection, user: &str) -> Check {
    const NAME: &str = "append";
    let key = [
        client.prefix(),
        format!("doctor-probe-{}-append", std::process::id()).as_bytes(),
    ]
    .concat();
    // With a TTL, so an interrupted doctor leaves nothing behind.
    let set: redis::RedisResult<()> = redis::cmd("SET")
        .arg(&key)
        .arg("probe")
        .arg("PX")
        .arg(5000)
        .query_async(conn)
        .await;
    if let Err(e) = set {
        return Check::warn(
            NAME,
            format!("could not test APPEND: SET was refused ({e})"),
            "see the scripts check",
        );
    }
    let appended: redis::RedisResult<i64> = redis::cmd("APPEND")
        .arg(&key)
        .arg("+w")
        .query_async(conn)
        .await;
    let _: redis::RedisResult<i64> = redis::cmd("DEL").arg(&key).query_async(conn).await;
    match appended {
        Ok(_) => Check::pass(
            NAME,
            "APPEND allowed: a waiter marks the lock, and its release wakes the waiter at once",
        ),
        Err(e) => {
            let message = e.to_string();
            let refusal = classify(&message);
            let failed = Check::warn(
                NAME,
                format!("could not test APPEND: {message}"),
                "check that the server answers from here, then run doctor again",
            );
            not_acl(NAME, &refusal, &message, failed).unwrap_or_else(|| {
                Check::warn(
                    NAME,
                    format!("user {user} may not APPEND ({message}): waiters cannot mark a lock as waited for, so no release wakes them; they find it free only by polling, at worst when the holder's TTL runs out"),
                    format!("ACL SETUSER {user} +append"),
                )
            })
        }
    }
}

/// The `subscribe` check at `probe` (the URL of the server the client
/// talks to: `target::probe_url`), with the TLS options.
pub async fn subscribe(
    client: &Client,
    tls: &crate::support::tls_args::TlsArgs,
    probe: Result<String, String>,
    user: &str,
) -> Check {
    match probe {
        Ok(url) => subscribe_with(client, tls.redis_client(&url), user).await,
        Err(why) => Check::warn(
            "subscribe",
            format!("could not test SUBSCRIBE: {why}"),
            "run doctor again",
        ),
    }
}

/// Waiters subscribe to release channels; without SUBSCRIBE they poll.
/// Only a refusal by the ACL gets ACL advice: a connection that fails is
/// about the network or the address, and says so.
pub async fn subscribe_with(
    client: &Client,
    raw: redis::RedisResult<redis::Client>,
    user: &str,
) -> Check {
    const NAME: &str = "subscribe";
    let channel = latchkey::protocol::release_channel(&[client.prefix(), b"doctor-probe"].concat());
    let server = raw
        .as_ref()
        .ok()
        .map(|raw| raw.get_connection_info().addr().to_string());
    let attempt = async {
        let mut pubsub = raw?.get_async_pubsub().await?;
        pubsub.subscribe(&channel).await?;
        pubsub.unsubscribe(&channel).await
    };
    let e = match tokio::time::timeout(client.command_timeout(), attempt).await {
        Ok(Ok(())) => {
            return Check::pass(
                NAME,
                "SUBSCRIBE allowed: waiters wake as soon as a lock is released",
            )
        }
        Ok(Err(e)) => e,
        Err(_) => {
            return Check::warn(
                NAME,
                format!(
                    "SUBSCRIBE did not answer within {}",
                    human(client.command_timeout())
                ),
                "check the server",
            )
        }
    };
    let at = server.map(|s| format!(" at {s}")).unwrap_or_default();
    if e.is_connection_refusal() || e.is_io_error() || e.is_connection_dropped() || e.is_timeout() {
        return Check::warn(
            NAME,
            format!("could not connect{at} to test SUBSCRIBE ({e}); the lock checks above went through the client's own connection"),
            "check that this address is reachable from here, then run doctor again",
        );
    }
    let message = e.to_string();
    let prefix = String::from_utf8_lossy(client.prefix()).into_owned();
    let fix = match classify(&message) {
        Refusal::Permission { channels: true, .. } => {
            format!(
                "ACL SETUSER {user} {}",
                latchkey::acl::channel_patterns(&prefix).join(" ")
            )
        }
        Refusal::Permission { .. } => format!("ACL SETUSER {user} +subscribe +unsubscribe"),
        _ => {
            return Check::warn(
                NAME,
                format!("SUBSCRIBE failed{at}: {message}"),
                "check the server",
            );
        }
    };
    Check::warn(
        NAME,
        format!("user {user} may not SUBSCRIBE to release channels ({message}): waiters poll instead, so hand-overs are slower"),
        fix,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_told_apart() {
        assert_eq!(
            classify("Redis error: \"OOM\": command not allowed when used memory > 'maxmemory'."),
            Refusal::OutOfMemory
        );
        assert_eq!(
            classify("READONLY You can't write against a read only replica."),
            Refusal::ReadOnly
        );
        assert_eq!(
            classify("NOPERM No permissions to access a channel"),
            Refusal::Permission {
                keys: false,
                channels: true
            }
        );
        assert_eq!(
            classify("NoPerm: this user has no permissions to access one of the channels used as arguments"),
            Refusal::Permission {
                keys: false,
                channels: true
            }
        );
        assert_eq!(
            classify("NOPERM User u has no permissions to run the 'evalsha' command"),
            Refusal::Permission {
                keys: false,
                channels: false
            }
        );
        assert_eq!(
            classify("Redis error: unknown command 'evalsha', with args beginning with: '10e8'"),
            Refusal::Unknown("evalsha".into())
        );
    }
}
