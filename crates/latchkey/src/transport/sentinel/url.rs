//! The Sentinel URL form.

use super::SentinelSpec;

/// Parses `redis+sentinel://[user:password@]host:port[,host:port...]/master[/db]`
/// into the Sentinels to ask and the URL of the primary's settings (user,
/// password, db; the address is a placeholder). `None`: not such a URL.
pub(crate) fn parse_url(url: &str) -> Option<Result<(SentinelSpec, String), String>> {
    let rest = url.strip_prefix("redis+sentinel://")?;
    let (userinfo, rest) = match rest.rsplit_once('@') {
        Some((userinfo, rest)) => (format!("{userinfo}@"), rest),
        None => (String::new(), rest),
    };
    let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut path = path.split('/').filter(|p| !p.is_empty());
    let Some(master) = path.next() else {
        return Some(Err("no master name after the Sentinels' addresses".into()));
    };
    let db = path.next().unwrap_or("0");
    if path.next().is_some() || db.parse::<i64>().is_err() {
        return Some(Err(
            "expected /MASTER or /MASTER/DB after the addresses".into()
        ));
    }
    let sentinels: Vec<String> = hosts
        .split(',')
        .filter(|h| !h.is_empty())
        .map(str::to_owned)
        .collect();
    if sentinels.is_empty() {
        return Some(Err("no Sentinel address".into()));
    }
    let spec = SentinelSpec {
        sentinels,
        master: master.to_owned(),
    };
    Some(Ok((spec, format!("redis://{userinfo}127.0.0.1/{db}"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sentinel_urls() {
        let (spec, template) = parse_url("redis+sentinel://:pw@a:1,b:2/jobs/3")
            .unwrap()
            .unwrap();
        assert_eq!(spec.sentinels, ["a:1", "b:2"]);
        assert_eq!(spec.master, "jobs");
        assert_eq!(template, "redis://:pw@127.0.0.1/3");
        assert!(parse_url("redis://a:1/").is_none());
        let default_port = super::super::sentinel_client("s1").unwrap();
        assert_eq!(
            default_port.get_connection_info().addr().to_string(),
            "s1:26379"
        );
        assert!(super::super::sentinel_client("s1:notaport").is_err());
        assert!(parse_url("redis+sentinel://a:1").unwrap().is_err());
        assert!(parse_url("redis+sentinel:///m").unwrap().is_err());
        assert!(parse_url("redis+sentinel://a:1/m/x").unwrap().is_err());
    }
}
