//! ACL refusals inside a script. Redis reports them as `ERR`, not `NOPERM`
//! (7.0: "The user executing the script can't run this command or
//! subcommand script: SHA, on @user_script:LINE."; 7.2 and later: "ACL
//! failure in script: User u has no permissions to run the 'time' command
//! script: …"), so they are told apart by their text: the one place where
//! latchkey reads an error's message. Redis 7.0 does not name the refused
//! command; the script's hash and line do, and latchkey has the scripts.

use redis::{ErrorKind, RedisError, ServerErrorKind};

/// `err` as a NOPERM refusal when it is a script's ACL refusal, naming the
/// command the refused line runs when Redis did not.
pub(crate) fn script_refusal(err: &RedisError) -> Option<RedisError> {
    if err.code() != Some("ERR") {
        return None;
    }
    let detail = err.detail()?;
    if !(detail.starts_with("The user executing the script can't")
        || detail.starts_with("ACL failure in script"))
    {
        return None;
    }
    let mut detail = detail.to_owned();
    if !detail.contains("' command") {
        if let Some(named) = refused_line(&detail) {
            detail.push_str(&named);
        }
    }
    Some(RedisError::from((
        ErrorKind::Server(ServerErrorKind::NoPerm),
        "NOPERM",
        detail,
    )))
}

/// ` (line N of NAME.lua runs the 'x' command)`, from the `script: SHA, on
/// @user_script:N.` that ends a script error.
fn refused_line(detail: &str) -> Option<String> {
    let (_, rest) = detail.split_once(" script: ")?;
    let (sha, rest) = rest.split_once(", on @user_script:")?;
    let line: usize = rest.trim_end_matches('.').trim().parse().ok()?;
    let (name, source) = crate::vocab::protocol::scripts::SOURCES
        .iter()
        .find(|(_, source)| redis::Script::new(source).get_hash() == sha)?;
    let text = source.lines().nth(line.checked_sub(1)?)?;
    let commands: Vec<String> = text
        .split("call(")
        .skip(1)
        .filter_map(|call| {
            let quoted = call.strip_prefix(['\'', '"'])?;
            let name = quoted.split(['\'', '"']).next()?;
            Some(format!("'{}'", name.to_ascii_lowercase()))
        })
        .collect();
    if commands.is_empty() {
        return None;
    }
    Some(format!(
        " (line {line} of {name} runs the {} command)",
        commands.join(" or ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(text: &str) -> RedisError {
        let (code, detail) = text.split_once(' ').unwrap_or((text, ""));
        let kind = match code {
            "ERR" => ServerErrorKind::ResponseError,
            _ => ServerErrorKind::NoPerm,
        };
        RedisError::from((ErrorKind::Server(kind), "server", detail.to_owned()))
    }

    #[test]
    fn a_redis_7_0_refusal_is_named_by_its_line() {
        let sha = redis::Script::new(crate::vocab::protocol::scripts::SOURCES[0].1)
            .get_hash()
            .to_owned();
        let (name, source) = crate::vocab::protocol::scripts::SOURCES[0];
        let (n, line) = source
            .lines()
            .enumerate()
            .find(|(_, l)| l.contains("call('GET'"))
            .expect("a GET");
        let err = server_error(&format!("ERR The user executing the script can't run this command or subcommand script: {sha}, on @user_script:{}.", n + 1));
        let refusal = script_refusal(&err).expect("a refusal");
        assert_eq!(refusal.kind(), ErrorKind::Server(ServerErrorKind::NoPerm));
        let detail = refusal.detail().unwrap_or_default();
        assert!(
            detail.ends_with(&format!(
                "(line {} of {name} runs the 'get' command)",
                n + 1
            )),
            "{detail} / {line}"
        );
    }

    #[test]
    fn a_later_refusal_names_the_command_itself_and_other_errors_stay() {
        let text = "ERR ACL failure in script: User app has no permissions to run the 'time' command script: 8a2f, on @user_script:4.";
        let refusal = script_refusal(&server_error(text)).expect("a refusal");
        assert!(refusal
            .detail()
            .unwrap_or_default()
            .ends_with("on @user_script:4."));
        assert!(script_refusal(&server_error("ERR unknown command 'x'")).is_none());
        let unknown = "ERR The user executing the script can't run this command or subcommand script: 0000, on @user_script:1.";
        let refusal =
            script_refusal(&server_error(unknown)).expect("a refusal of a script not ours");
        assert!(refusal
            .detail()
            .unwrap_or_default()
            .ends_with("@user_script:1."));
    }
}
