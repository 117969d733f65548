//! A Redis URL as error messages and logs may show it: without the
//! password (a URL that failed to parse is shown, and may carry one).

/// `url` with whatever stands between `://` and the last `@` (user and
/// password) replaced by `…`; unchanged when it has none.
pub(crate) fn shown(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme + 3 => {
            format!("{}://…@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn passwords_are_never_shown() {
        assert_eq!(shown("redis://u:s3cret@h:1/0"), "redis://…@h:1/0");
        assert_eq!(shown("rediss://:p@ss@h:x/"), "rediss://…@h:x/");
        assert_eq!(shown("redis://h:6380/"), "redis://h:6380/");
        assert_eq!(shown("not a url"), "not a url");
    }
}
