//! What `--help` shows: no secret from the environment, a subcommand's own
//! options apart from the global ones, and Redlock only where it is taken.
//! No Redis needed: help never connects.

use std::process::Command;

/// Values of the environment that must never be printed: a password in the
/// URL, and the paths of the TLS files and the Sentinels.
const SECRETS: [(&str, &str); 7] = [
    (
        "LATCHKEY_REDIS_URL",
        "redis://app:s3cret-password@redis.internal:6380/0",
    ),
    ("LATCHKEY_TLS_CA", "/secret-dir/ca.pem"),
    ("LATCHKEY_TLS_CERT", "/secret-dir/client.pem"),
    ("LATCHKEY_TLS_KEY", "/secret-dir/client.key"),
    ("LATCHKEY_TLS_SERVER_NAME", "secret-name.internal"),
    ("LATCHKEY_SENTINEL", "secret-sentinel.internal:26379"),
    ("LATCHKEY_SENTINEL_MASTER", "secret-master"),
];

/// `latchkey ARGS` with every secret variable set; its stdout (help).
fn help(args: &[&str]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_latchkey"));
    cmd.args(args).env("LATCHKEY_PREFIX", "secret-prefix:");
    for (name, value) in SECRETS {
        cmd.env(name, value);
    }
    let out = cmd.output().expect("run latchkey");
    assert!(
        out.status.success(),
        "latchkey {args:?}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

/// The subcommands `latchkey --help` lists (so that a new one is covered).
fn subcommands() -> Vec<String> {
    let top = help(&["--help"]);
    let names: Vec<String> = top
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect();
    assert!(names.len() >= 17, "too few subcommands found: {names:?}");
    names
}

/// Every help text: the top level, each subcommand, and the nested ones.
fn every_help() -> Vec<(String, String)> {
    let mut helps = vec![("latchkey".to_owned(), help(&["--help"]))];
    for sub in subcommands() {
        helps.push((sub.clone(), help(&[&sub, "--help"])));
        helps.push((format!("{sub} (-h)"), help(&[&sub, "-h"])));
    }
    for nested in [["latch", "count-down"], ["latch", "wait"]] {
        helps.push((nested.join(" "), help(&[nested[0], nested[1], "--help"])));
    }
    helps
}

#[test]
fn help_shows_no_secret_from_the_environment() {
    for (what, text) in every_help() {
        for needle in [
            "s3cret",
            "secret-dir",
            "secret-name",
            "secret-sentinel",
            "secret-master",
            "secret-prefix",
        ] {
            assert!(
                !text.contains(needle),
                "`{what} --help` shows {needle:?}:\n{text}"
            );
        }
        // The variables are still named, so the user knows they exist.
        if text.contains("--redis <URL>") {
            assert!(
                text.contains("[env: LATCHKEY_REDIS_URL]"),
                "{what}:\n{text}"
            );
        }
    }
}

#[test]
fn global_options_are_listed_apart_from_a_subcommands_own() {
    const GLOBAL: [&str; 8] = [
        "--redis <URL>",
        "--sentinel <HOST:PORT>",
        "--master <NAME>",
        "--prefix <PREFIX>",
        "--tls-ca <FILE>",
        "--tls-cert <FILE>",
        "--tls-key <FILE>",
        "--verbose",
    ];
    for sub in subcommands() {
        let text = help(&[&sub, "--help"]);
        let (own, global) = text
            .split_once("\nGlobal options:\n")
            .unwrap_or_else(|| panic!("`{sub} --help` has no Global options heading:\n{text}"));
        for option in GLOBAL {
            assert!(
                global.contains(option),
                "`{sub} --help`: {option} is not under Global options:\n{text}"
            );
            assert!(
                !own.contains(option),
                "`{sub} --help`: {option} is among the subcommand's own options:\n{text}"
            );
        }
    }
}

#[test]
fn redlock_is_advertised_only_by_the_subcommands_that_take_it() {
    for sub in ["run", "acquire", "release", "extend"] {
        let text = help(&[sub, "--help"]);
        assert!(text.contains("Redlock"), "`{sub} --help`:\n{text}");
    }
    // These refuse several URLs (exit 2): their help must not offer them.
    for sub in [
        "latch", "barrier", "elect", "leader", "signal", "wait", "status",
    ] {
        let text = help(&[sub, "--help"]);
        assert!(
            !text.contains("Redlock") && !text.contains("several independent"),
            "`{sub} --help` advertises Redlock:\n{text}"
        );
    }
    // And they do refuse them: several URLs are seeds of one cluster for
    // them, and a standalone server among them is no cluster (exit 2).
    let standalone = latchkey_testkit::RedisServer::start();
    let urls = format!(
        "{},redis://127.0.0.1:2,redis://127.0.0.1:3",
        standalone.url()
    );
    for args in [
        &["latch", "x", "--count", "1"][..],
        &["barrier", "x", "--parties", "2"],
        &["elect", "x", "--", "true"],
        &["leader", "x"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_latchkey"))
            .args(["--redis", &urls])
            .args(args)
            .env_remove("LATCHKEY_REDIS_URL")
            .output()
            .expect("run latchkey");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
}
