//! `latchkey doctor` on managed services (ElastiCache, MemoryDB, hosted
//! Redis and Valkey): `CONFIG` and `ACL SETUSER` are often refused there,
//! and the settings live in the service's parameter group instead. So a
//! refused `CONFIG GET` is a WARN saying what could not be checked and
//! why, a fix that `CONFIG SET` cannot apply names the parameter to set,
//! and an ACL fix for a user who cannot run `ACL SETUSER` carries the whole
//! access string to give that user (managed RBAC takes one string per
//! user, not increments).

use latchkey::acl::Use;
use latchkey::Connection;
use redis::aio::ConnectionLike;

/// `CONFIG GET name`: the value (`None`: no such parameter), or why the
/// server refused (`NOPERM`; `unknown command` where a managed service
/// disables or renames `CONFIG`).
pub(crate) async fn config(
    conn: &mut impl ConnectionLike,
    name: &str,
) -> Result<Option<String>, String> {
    let reply: redis::RedisResult<Vec<String>> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query_async(conn)
        .await;
    match reply {
        Ok(pair) => Ok(pair.into_iter().nth(1)),
        Err(e) => Err(format!("CONFIG GET {name} was refused ({e})")),
    }
}

/// Why `CONFIG GET` is refused on this server, if it is: then `CONFIG SET`
/// cannot apply a fix either, and the fix is the service's parameter.
pub(crate) async fn config_refused(conn: &mut impl ConnectionLike) -> Option<String> {
    config(conn, "maxmemory-policy").await.err()
}

/// Where a setting goes when `CONFIG SET` is refused.
pub(crate) fn parameter_group(settings: &str) -> String {
    format!(
        "CONFIG is refused here, as on managed services: set {settings} in the service's \
         parameter group (ElastiCache, MemoryDB: a custom parameter group; elsewhere the \
         service's Redis or Valkey settings) and apply it to this cluster"
    )
}

/// Whether `user` may run `ACL SETUSER` (asked with `ACL DRYRUN`, which
/// runs nothing); `false` also when the dry run itself is refused.
pub(crate) async fn may_setuser(conn: &mut Connection, user: &str) -> bool {
    let reply: redis::RedisResult<redis::Value> = redis::cmd("ACL")
        .arg("DRYRUN")
        .arg(user)
        .arg(&["ACL", "SETUSER", "latchkey-doctor-probe"][..])
        .query_async(conn)
        .await;
    match reply {
        Ok(redis::Value::Okay) => true,
        Ok(redis::Value::SimpleString(s)) => s == "OK",
        _ => false,
    }
}

/// The sentence that gives a user who cannot run `ACL SETUSER` the whole
/// access string for `uses` under `prefix` (a managed service replaces a
/// user's string whole: so at least these, and what else the user needs).
pub(crate) fn access_string(user: &str, uses: &[Use], prefix: &str) -> String {
    format!(
        "where ACL SETUSER cannot be run (managed RBAC: ElastiCache or MemoryDB users), \
         give user {user} an access string with at least \"on {}\"",
        latchkey::acl::rule(uses, prefix)
    )
}
