//! `latchkey doctor` on a server that refuses what managed services refuse:
//! `CONFIG` (renamed away, as ElastiCache and MemoryDB do) becomes WARNs
//! that say what could not be checked and why, with fixes that name the
//! parameter group; a user who cannot run `ACL SETUSER` (managed RBAC) is
//! given the whole access string.

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::acl::{rule, Use};

const QUICK: Duration = Duration::from_secs(30);

/// Doctor's output and exit code for `url`.
fn doctor(url: &str) -> (String, i32) {
    let out = output(latchkey_at(url).args(["doctor", "--pings", "5"]), QUICK);
    (stdout(&out), code(out.status))
}

fn line_of<'a>(text: &'a str, check: &str) -> &'a str {
    text.lines()
        .find(|line| line.get(6..).is_some_and(|rest| rest.starts_with(check)))
        .unwrap_or_else(|| panic!("no {check} line in {text}"))
}

#[test]
fn a_refused_config_get_is_a_warn_and_fixes_name_the_parameter_group() {
    let redis = RedisServer::builder()
        .arg("maxmemory-policy", "volatile-lru")
        .arg_words("rename-command", &["CONFIG", ""])
        .start();
    assert!(
        redis.command(&["CONFIG", "GET", "save"]).is_err(),
        "CONFIG renamed away"
    );
    let (text, exit) = doctor(&redis.url());
    let persistence = line_of(&text, "persistence");
    assert!(persistence.starts_with("WARN"), "{persistence}");
    assert!(
        persistence.contains("could not be checked")
            && persistence.contains("CONFIG GET save was refused")
            && persistence.contains("unknown command"),
        "says what and why: {persistence}"
    );
    assert!(persistence.contains("parameter group"), "{persistence}");
    let eviction = line_of(&text, "eviction");
    assert!(eviction.starts_with("FAIL"), "{eviction}");
    assert!(
        eviction.contains("maxmemory-policy to noeviction in the service's parameter group")
            && !eviction.contains("CONFIG SET"),
        "CONFIG SET cannot apply it here: {eviction}"
    );
    assert_eq!(exit, 1, "the eviction policy is still a FAIL");
}

#[test]
fn a_refused_appendfsync_is_a_warn_saying_why() {
    let redis = RedisServer::builder()
        .aof(true)
        .arg_words("rename-command", &["CONFIG", ""])
        .start();
    let (text, _) = doctor(&redis.url());
    let persistence = line_of(&text, "persistence");
    assert!(
        persistence.starts_with("WARN")
            && persistence
                .contains("fsync policy could not be checked: CONFIG GET appendfsync was refused"),
        "{persistence}"
    );
    // Where CONFIG is allowed the fix stays CONFIG SET.
    let plain = RedisServer::builder()
        .arg("maxmemory-policy", "allkeys-lru")
        .start();
    let (text, _) = doctor(&plain.url());
    let eviction = line_of(&text, "eviction");
    assert!(
        eviction.contains("CONFIG SET maxmemory-policy noeviction"),
        "{eviction}"
    );
    assert!(!eviction.contains("parameter group"), "{eviction}");
}

#[test]
fn a_user_who_cannot_run_acl_setuser_is_given_the_access_string() {
    let redis = RedisServer::start();
    // Rule (a) without EVALSHA, plus what doctor needs to check the rule.
    let locks = rule(&[Use::Locks], PREFIX).replace(" +evalsha", "");
    let mut args = vec!["ACL", "SETUSER", "app", "reset", "on", ">pw"];
    args.extend(locks.split_whitespace());
    args.extend(["+acl|dryrun", "+acl|whoami"]);
    redis.command(&args).expect("ACL SETUSER");
    let (text, exit) = doctor(&format!("redis://app:pw@127.0.0.1:{}/", redis.port()));
    let acl = line_of(&text, "acl");
    assert!(acl.starts_with("FAIL") && acl.contains("+evalsha"), "{acl}");
    let whole = rule(&[Use::Locks, Use::Signals], PREFIX);
    assert!(
        acl.contains(&format!(
            "give user app an access string with at least \"on {whole}\""
        )),
        "{acl}"
    );
    assert_eq!(exit, 1);
    // The default user may run ACL SETUSER: its fixes need no access string.
    let (text, _) = doctor(&redis.url());
    assert!(!text.contains("access string"), "{text}");
}
