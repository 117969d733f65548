//! `latchkey doctor`'s `acl` check: the current user against the rule of
//! `docs/security.md` (`latchkey::acl`), asked of the server with `ACL
//! DRYRUN` (Redis 7.0+), which runs nothing. Prints the `ACL SETUSER` that
//! adds exactly what is missing.
//!
//! ```text
//! PASS  acl           user app may run everything locks and signals need (ACL DRYRUN)
//! FAIL  acl           user app lacks what locks need: +evalsha ~{latchkey:*. Fix: ACL SETUSER app +evalsha ~{latchkey:*
//! WARN  acl           cannot check user app's permissions: ACL DRYRUN refused (…). Fix: …
//! WARN  primitives    user app may take plain locks, but fair locks, … are refused: it lacks …: +pexpireat +hset …. Fix: ACL SETUSER app +pexpireat +hset …
//! ```
//!
//! The `primitives` line judges the commands that fair locks, semaphores,
//! read-write locks, latches, barriers and elections add (`Use::Primitives`):
//! WARN when some are missing (a user of plain locks needs none of them),
//! so it never changes the exit code.
//!
//! Each command is dry-run with arguments under the prefix (a lock key, a
//! fencing counter, a release or signal channel), so a refusal says whether
//! the command or its key or channel is missing; patterns are probed with a
//! command the user has.

use latchkey::acl::{channel_patterns, key_patterns, Use};
use latchkey::{Client, Connection};

use crate::commands::doctor::check::Check;
use crate::commands::doctor::managed;

const NAME: &str = "acl";

/// What `ACL DRYRUN` said about one command line.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Allowed,
    NoCommand,
    NoKey,
    NoChannel,
}

/// Names under the prefix to probe with.
struct Probe {
    key: String,
    counter: String,
    release: String,
    signal: String,
}

impl Probe {
    fn new(prefix: &str) -> Probe {
        Probe {
            key: format!("{prefix}doctor-probe"),
            counter: format!("{{{prefix}doctor-probe}}:fence"),
            release: format!("{{{prefix}doctor-probe}}:released"),
            signal: format!("{prefix}signal:doctor-probe"),
        }
    }

    /// A command line that uses `command` the way latchkey does (with
    /// arguments of the right number: `ACL DRYRUN` checks arity first).
    fn line(&self, command: &str) -> Vec<String> {
        let (key, counter, release) = (&self.key, &self.counter, &self.release);
        let words: Vec<&str> = match command {
            "evalsha" => vec!["EVALSHA", ZERO_SHA, "2", key, counter],
            "eval" => vec!["EVAL", "return 1", "1", key],
            "script|load" => vec!["SCRIPT", "LOAD", "return 1"],
            "wait" => vec![command, "0", "0"],
            "get" | "del" | "pttl" | "type" | "exists" | "scard" | "zcard" | "lpop" | "zpopmin" => {
                vec![command, key]
            }
            "set" | "append" | "hget" | "hmget" | "hdel" | "sadd" | "srem" | "sismember"
            | "zrem" | "zscore" | "rpush" => vec![command, key, "v"],
            "pexpire" | "pexpireat" | "lindex" => vec![command, key, "1"],
            "hset" => vec![command, key, "f", "v"],
            "hincrby" => vec![command, key, "f", "1"],
            "zadd" | "lrem" => vec![command, key, "1", "v"],
            "zrange" | "zrangebyscore" | "zremrangebyscore" | "lrange" => {
                vec![command, key, "0", "1"]
            }
            "publish" | "spublish" => vec![command, release, "x"],
            "subscribe" | "unsubscribe" | "ssubscribe" | "sunsubscribe" => vec![command, release],
            // Redis compares PSUBSCRIBE patterns literally with `&`
            // patterns; only the command is judged (see `verdict`).
            "psubscribe" | "punsubscribe" => vec![command, &self.signal],
            "pubsub|channels" => vec!["PUBSUB", "CHANNELS", "x"],
            other => other.split('|').collect(),
        };
        words.into_iter().map(str::to_owned).collect()
    }
}

/// What locks can do without (a FAIL is for what they cannot): without
/// these, waiters are not woken by a release and poll (`append`, `publish`,
/// pub/sub), or every waiting process is woken instead of one (the waiting
/// processes' sorted-set commands), `INFO` falls back to `PING` on a single server, the sharded
/// commands matter on a cluster only, and `WAIT` only to `with_replicas`. Signals need all of theirs, but a
/// signal refused is an error of its own, not a lost lock.
const SOFT: &[&str] = &[
    "info",
    "append",
    "publish",
    "subscribe",
    "unsubscribe",
    "ssubscribe",
    "sunsubscribe",
    "spublish",
    "wait",
    // A plain lock's waiting processes: refused, a release wakes every
    // waiting process instead of one.
    "exists",
    "zadd",
    "zrem",
    "zcard",
    "zpopmin",
];

const ZERO_SHA: &str = "0000000000000000000000000000000000000000";

/// `ACL DRYRUN user line…`: `Err` when the dry run itself is refused.
async fn dry_run(
    conn: &mut Connection,
    user: &str,
    line: &[String],
) -> redis::RedisResult<Verdict> {
    let reply: redis::Value = redis::cmd("ACL")
        .arg("DRYRUN")
        .arg(user)
        .arg(line)
        .query_async(conn)
        .await?;
    let text = match reply {
        redis::Value::Okay => return Ok(Verdict::Allowed),
        redis::Value::SimpleString(s) if s == "OK" => return Ok(Verdict::Allowed),
        redis::Value::SimpleString(s) => s,
        redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        other => format!("{other:?}"),
    };
    // Redis: "This user has no permissions to run the 'x' command" /
    // "… to access the 'k' key" / "… the 'c' channel".
    Ok(if text.ends_with("command") {
        Verdict::NoCommand
    } else if text.ends_with("channel") {
        Verdict::NoChannel
    } else if text.ends_with("key") {
        Verdict::NoKey
    } else {
        Verdict::Allowed
    })
}

/// The `acl` check of `user`, for `client`'s prefix.
pub async fn check(client: &Client, conn: &mut Connection, user: &str) -> Check {
    let prefix = String::from_utf8_lossy(client.prefix()).into_owned();
    let probe = Probe::new(&prefix);
    // What is missing: [what locks cannot do without, the rest].
    let mut missing: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    let mut allowed: Vec<&str> = Vec::new();
    for usage in [Use::Locks, Use::Signals] {
        for &command in usage.commands() {
            let at = usize::from(usage != Use::Locks || SOFT.contains(&command));
            let verdict = match dry_run(conn, user, &probe.line(command)).await {
                Ok(verdict) => verdict,
                Err(e) => {
                    return Check::warn(
                        NAME,
                        format!("cannot check user {user}'s permissions: ACL DRYRUN refused ({e}); the checks below test by trying"),
                        format!("ACL SETUSER {user} +acl|dryrun (Redis 7.0+) lets doctor check the rule; or compare with docs/security.md; {}", managed::access_string(user, &[Use::Locks, Use::Signals], &prefix)),
                    )
                }
            };
            let plus = format!("+{command}");
            if verdict == Verdict::NoCommand {
                if !missing.iter().any(|m| m.contains(&plus)) {
                    missing[at].push(plus);
                }
            } else if !allowed.contains(&command) {
                allowed.push(command);
            }
        }
    }
    // The patterns, each probed with a command the user has.
    let [keys, counters] = key_patterns(&prefix);
    let [signals, releases] = channel_patterns(&prefix);
    let key_command = ["get", "set", "del", "type", "pttl"]
        .into_iter()
        .find(|c| allowed.contains(c));
    let channel_command = ["publish", "subscribe"]
        .into_iter()
        .find(|c| allowed.contains(c));
    // (command line, the pattern it tests, whether locks need it)
    let mut probes: Vec<(Vec<String>, String, bool)> = Vec::new();
    if let Some(command) = key_command {
        probes.push((vec![command.into(), probe.key.clone()], keys, true));
        probes.push((vec![command.into(), probe.counter.clone()], counters, true));
    }
    if let Some(command) = channel_command {
        probes.push((
            vec![command.into(), probe.release.clone(), "x".into()],
            releases,
            false,
        ));
        probes.push((
            vec![command.into(), probe.signal.clone(), "x".into()],
            signals,
            false,
        ));
    }
    for (mut line, pattern, hard) in probes {
        if line[0] == "subscribe" {
            line.truncate(2);
        }
        if let Ok(Verdict::NoKey | Verdict::NoChannel) = dry_run(conn, user, &line).await {
            missing[usize::from(!hard)].push(pattern);
        }
    }
    let [locks, signals] = missing;
    let managed =
        (!locks.is_empty() || !signals.is_empty()) && !managed::may_setuser(conn, user).await;
    let access =
        managed.then(|| managed::access_string(user, &[Use::Locks, Use::Signals], &prefix));
    verdict(user, locks, signals, access)
}

/// `access`: the access string sentence for a user who cannot run `ACL
/// SETUSER` (`managed.rs`), added to the fix.
fn verdict(user: &str, locks: Vec<String>, signals: Vec<String>, access: Option<String>) -> Check {
    let all: Vec<String> = locks.iter().chain(&signals).cloned().collect();
    let mut fix = format!("ACL SETUSER {user} {}", all.join(" "));
    if let Some(access) = access {
        fix = format!("{fix} (by an admin); {access}");
    }
    if !locks.is_empty() {
        Check::fail(
            NAME,
            format!(
                "user {user} lacks what locks need (docs/security.md): {}",
                all.join(" ")
            ),
            fix,
        )
    } else if !signals.is_empty() {
        Check::warn(
            NAME,
            format!("user {user} may take locks, but lacks what waking waiters (they poll instead), with_replicas (WAIT) or signals need (docs/security.md): {}", all.join(" ")),
            fix,
        )
    } else {
        Check::pass(
            NAME,
            format!("user {user} may run everything locks and signals need (ACL DRYRUN; docs/security.md)"),
        )
    }
}

/// The `primitives` check of `user`: may it run every command that fair
/// locks, semaphores, read-write locks, latches, barriers and elections add
/// to the locks' (`Use::Primitives`)? A WARN, never a FAIL, when not: a
/// user that only takes plain locks needs none of them. The patterns are
/// the locks' (the `acl` check judges them).
pub async fn primitives(client: &Client, conn: &mut Connection, user: &str) -> Check {
    const NAME: &str = "primitives";
    let probe = Probe::new(&String::from_utf8_lossy(client.prefix()));
    let mut missing: Vec<String> = Vec::new();
    for &command in Use::Primitives.commands() {
        match dry_run(conn, user, &probe.line(command)).await {
            Ok(Verdict::NoCommand) => missing.push(format!("+{command}")),
            Ok(_) => {}
            Err(e) => {
                return Check::warn(
                    NAME,
                    format!("cannot check whether user {user} may use fair locks, semaphores, read-write locks, latches, barriers and elections: ACL DRYRUN refused ({e})"),
                    format!("ACL SETUSER {user} +acl|dryrun (Redis 7.0+) lets doctor check the rule; or compare with docs/security.md, rule (c)"),
                )
            }
        }
    }
    if missing.is_empty() {
        Check::pass(
            NAME,
            format!("user {user} may use fair locks, semaphores, read-write locks, latches, barriers and elections (ACL DRYRUN; docs/security.md)"),
        )
    } else {
        let mut fix = format!("ACL SETUSER {user} {}", missing.join(" "));
        if !managed::may_setuser(conn, user).await {
            let prefix = String::from_utf8_lossy(client.prefix()).into_owned();
            let uses = [Use::Locks, Use::Signals, Use::Primitives];
            fix = format!(
                "{fix} (by an admin); {}",
                managed::access_string(user, &uses, &prefix)
            );
        }
        Check::warn(
            NAME,
            format!("user {user} may take plain locks, but fair locks, semaphores, read-write locks, latches, barriers and elections are refused: it lacks (docs/security.md, rule (c)): {}", missing.join(" ")),
            fix,
        )
    }
}
