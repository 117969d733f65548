//! A Redis URL as error messages and logs may show it: without the
//! password (a URL that failed to parse is shown, and may carry one).

/// `url` as messages and logs may show it: its password, if any, replaced
/// by `***`, its user kept (which ACL user a refusal concerns is worth
/// seeing); unchanged when it has neither. The one rule every latchkey
/// message (library, CLI, torture suite, bindings) shows URLs by.
///
/// ```
/// assert_eq!(latchkey::redact_url("redis://app:s3cret@h:6380/0"), "redis://app:***@h:6380/0");
/// assert_eq!(latchkey::redact_url("redis://h:6380/"), "redis://h:6380/");
/// ```
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((userinfo, host)) = rest.rsplit_once('@') else {
        return url.to_owned();
    };
    let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
    format!("{scheme}://{user}:***@{host}")
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_are_never_shown() {
        assert_eq!(redact_url("redis://u:s3cret@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact_url("rediss://:p@ss@h:x/"), "rediss://:***@h:x/");
        assert_eq!(redact_url("redis://u:p@ss@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact_url("redis://h:6380/"), "redis://h:6380/");
        assert_eq!(redact_url("not a url"), "not a url");
    }
}
