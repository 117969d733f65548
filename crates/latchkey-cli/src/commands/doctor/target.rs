//! Who `latchkey doctor` speaks as, and where its own probes go: the same
//! user and the same server as the library's connections.
//!
//! ```text
//! redis://app:pw@h:6379/0            user app (when ACL WHOAMI is refused, as
//!                                    the documented application rules do)
//! --sentinel s:26379 --master m      the primary the Sentinels name, not
//!   --redis redis://app:pw@x/2       x (nor 127.0.0.1:6379); app's password, db 2
//! ```
//!
//! The doctor's `subscribe` probe is a plain redis-rs connection (the
//! library has no "subscribe to this channel and tell me the error" call):
//! made from the URL as given, it would reach the `--redis` host, or the
//! default 127.0.0.1:6379, instead of the primary a Sentinel names, and a
//! refused connection there would read as a permission problem.

use latchkey::Client;

use crate::commands::doctor::check::Check;
use crate::support::exit::Failure;
use crate::support::target::{connect_failure, redact, Target};

/// The client for `url`, or the FAIL check of a user the server refuses at
/// connect (`NOPERM`: a cluster user without `cluster|slots`) or of a
/// server latchkey does not support (Redis 6.2), which is what
/// doctor is for, not a reason to stop; any other failure ends doctor as it
/// ends every subcommand (exit 69 for an unreachable server).
pub async fn connect(target: &Target, url: &str) -> Result<Result<Client, Check>, Failure> {
    match target.builder(url).connect().await {
        Ok(client) => Ok(Ok(client)),
        Err(latchkey::Error::NoPermission(e)) => Ok(Err(refused_at_connect(url, &e))),
        // What doctor is for too: say so as the `version` check.
        Err(e @ latchkey::Error::UnsupportedServer { .. }) => Ok(Err(Check::fail(
            "version",
            e.to_string(),
            "upgrade the server (docs/protocol.md, \"Supported servers\")",
        ))),
        Err(e) => {
            let whom = match &target.sentinel {
                Some((sentinels, master)) => {
                    format!("Sentinel master {master:?} (via {})", sentinels.join(","))
                }
                None => redact(url),
            };
            Err(connect_failure(e, &whom))
        }
    }
}

/// The check for a server that refused the connection itself (`NOPERM` while
/// connecting: a cluster user without `cluster|slots`, a user without
/// `info` or `ping`): the command it refused, granted to the URL's user.
pub fn refused_at_connect(url: &str, refusal: &redis::RedisError) -> Check {
    let user = url_user(url).unwrap_or_else(|| "default".to_owned());
    let message = refusal.to_string();
    // Redis: "… has no permissions to run the 'cluster|slots' command".
    let command = message.split('\'').nth(1).filter(|c| {
        !c.is_empty()
            && c.chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '|' || ch == '-')
    });
    let fix = match command {
        Some(command) => {
            format!("ACL SETUSER {user} +{command} (docs/security.md has the whole rule)")
        }
        None => format!("grant user {user} the rule in docs/security.md"),
    };
    Check::fail(
        "connect",
        format!("user {user} may not connect as latchkey does: {message}"),
        fix,
    )
}

/// The user named in `url`'s `user:password@` part; `None` for none (or an
/// empty one), which logs in as `default`.
pub fn url_user(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split('/').next().unwrap_or(rest);
    let (userinfo, _) = authority.rsplit_once('@')?;
    let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
    (!user.is_empty()).then(|| user.to_owned())
}

/// The user the checks and fixes name: `ACL WHOAMI` when allowed, else the
/// URL's user (the connection logged in as it), else `default`.
pub async fn whoami(conn: &mut latchkey::Connection, url: &str) -> String {
    let asked: redis::RedisResult<String> = redis::cmd("ACL").arg("WHOAMI").query_async(conn).await;
    match asked {
        Ok(user) => user,
        Err(_) => url_user(url).unwrap_or_else(|| "default".to_owned()),
    }
}

/// Whether `target` reaches its server through Sentinels (`--sentinel`, or
/// a `redis+sentinel://` URL).
fn through_sentinel(target: &Target, url: &str) -> bool {
    target.sentinel.is_some() || url.starts_with("redis+sentinel://")
}

/// The URL of the server `client` talks to, with `url`'s user, password and
/// database: `url` itself, or for a Sentinel set the primary it names now
/// (`client.server()`, known once a command has gone through it).
pub fn probe_url(target: &Target, url: &str, client: &Client) -> Result<String, String> {
    if !through_sentinel(target, url) {
        return Ok(url.to_owned());
    }
    let primary = client.server();
    if primary
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse::<u16>().ok())
        .is_none()
    {
        return Err(format!("the Sentinels name no primary yet ({primary})"));
    }
    Ok(rebase(url, &primary))
}

/// `url` pointed at `host_port`: its scheme (`rediss` stays TLS; a
/// `redis+sentinel://` URL's primary is plain), user, password and database.
fn rebase(url: &str, host_port: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("redis", url));
    let sentinel_form = scheme == "redis+sentinel";
    let scheme = if scheme == "rediss" {
        "rediss"
    } else {
        "redis"
    };
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let userinfo = authority
        .rsplit_once('@')
        .map(|(userinfo, _)| format!("{userinfo}@"))
        .unwrap_or_default();
    // `redis+sentinel://…/master[/db]`; `redis://…/[db]`.
    let db = if sentinel_form {
        path.split('/').nth(1).unwrap_or("")
    } else {
        path.split('/').next().unwrap_or("")
    };
    format!("{scheme}://{userinfo}{host_port}/{db}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_users_of_urls() {
        assert_eq!(
            url_user("redis://app:s3cret@h:6379/0").as_deref(),
            Some("app")
        );
        assert_eq!(url_user("rediss://app@h/").as_deref(), Some("app"));
        assert_eq!(url_user("redis://:s3cret@h:6379"), None);
        assert_eq!(url_user("redis://h:6379/0"), None);
        assert_eq!(
            url_user("redis+sentinel://u:p@s1:26379,s2:26379/m/2").as_deref(),
            Some("u")
        );
        // A password may hold '@' and ':' (the last '@' ends it).
        assert_eq!(url_user("redis://app:p@ss:w@h/").as_deref(), Some("app"));
    }

    #[test]
    fn probe_urls_keep_credentials_and_database() {
        assert_eq!(
            rebase("redis://app:pw@x:6379/2", "10.0.0.9:6390"),
            "redis://app:pw@10.0.0.9:6390/2"
        );
        assert_eq!(rebase("rediss://:pw@x/", "h:1"), "rediss://:pw@h:1/");
        assert_eq!(rebase("redis://127.0.0.1:6379", "h:1"), "redis://h:1/");
        assert_eq!(
            rebase("redis+sentinel://:pw@s1:26379,s2:26379/mymaster/3", "h:1"),
            "redis://:pw@h:1/3"
        );
        assert_eq!(
            rebase("redis+sentinel://s1:26379/mymaster", "h:1"),
            "redis://h:1/"
        );
    }
}
