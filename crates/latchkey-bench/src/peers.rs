//! The libraries compared, and how to start a [`Driver`] for each.
//!
//! ```text
//! for lib in peers::HANDOFF {
//!     match peers::driver(lib, port).await { Ok(d) => .., Err(why) => note(why) }
//! }
//! ```
//!
//! Rust libraries run in this binary re-executed as a worker
//! (`latchkey-bench --worker LIB PORT`, see [`crate::worker`]); the Python
//! and Node peers run the drivers under `crates/latchkey-bench/peers/`,
//! installed by `bench/peers/install.sh` into the git-ignored `bench/peers/`.
//! The benchmark runs that script once when the peers are missing; a peer
//! that still cannot be started is skipped with a note, never a failure.
//! `--no-peers` skips the Python and Node peers altogether.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use tokio::process::Command;

use crate::driver::Driver;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// This binary with `--worker`.
    Rust,
    Python,
    Node,
}

/// One library as the tables name it.
#[derive(Debug)]
pub struct Lib {
    /// The name the driver knows it by.
    pub id: &'static str,
    /// The name in tables and the plot.
    pub label: &'static str,
    pub runtime: Runtime,
    /// The Redis commands this library's clients send themselves, as
    /// `INFO commandstats` names them. Commandstats also counts what a
    /// script runs inside the server; those are not round trips, so only
    /// these names are counted (checked once with `MONITOR`: no script of
    /// these libraries calls a command of this list; python-redis-lock's
    /// `GET` is handled by [`Lib::gets_outside_scripts`]).
    pub commands: &'static [&'static str],
    /// python-redis-lock also sends `GET` itself (before every acquire),
    /// and its release script runs one `GET` inside: its own `GET`s are the
    /// `GET` calls minus one per script call.
    pub gets_outside_scripts: bool,
    /// latchkey sends `SET` itself (a bare `SET … NX PX … GET` for a first
    /// try) and its acquire script runs one `SET` inside: its own `SET`s are
    /// the `SET` calls minus one per acquire-script call, which is every
    /// script call but the releases (one per acquisition).
    pub sets_outside_scripts: bool,
}

impl Lib {
    /// Commands this library's clients sent between two `INFO commandstats`
    /// readings (see [`Lib::commands`]).
    /// `acquisitions`: how many acquisitions (each released once) happened
    /// between them.
    pub fn sent(
        &self,
        before: &HashMap<String, u64>,
        after: &HashMap<String, u64>,
        acquisitions: u64,
    ) -> u64 {
        let delta = |name: &str| {
            let a = after.get(name).copied().unwrap_or(0);
            a.saturating_sub(before.get(name).copied().unwrap_or(0))
        };
        let listed: u64 = self.commands.iter().map(|name| delta(name)).sum();
        let own_gets = if self.gets_outside_scripts {
            delta("get").saturating_sub(delta("evalsha") + delta("eval"))
        } else {
            0
        };
        let own_sets = if self.sets_outside_scripts {
            let acquire_scripts = (delta("evalsha") + delta("eval")).saturating_sub(acquisitions);
            delta("set").saturating_sub(acquire_scripts)
        } else {
            0
        };
        listed + own_gets + own_sets
    }
}

pub const LATCHKEY: Lib = Lib {
    id: "latchkey",
    label: "latchkey",
    runtime: Runtime::Rust,
    commands: &[
        "evalsha",
        "eval",
        "script|load",
        "subscribe",
        "unsubscribe",
        // What a cluster client sends instead (sharded pub/sub); none on a
        // single server.
        "ssubscribe",
        "sunsubscribe",
        "ping",
    ],
    gets_outside_scripts: false,
    sets_outside_scripts: true,
};

/// latchkey's fair lock (`Lock::fair`): the same commands as the barging
/// one, but no bare `SET` (every attempt is a script).
pub const LATCHKEY_FAIR: Lib = Lib {
    id: "latchkey-fair",
    label: "latchkey fair",
    runtime: Runtime::Rust,
    commands: &[
        "evalsha",
        "eval",
        "script|load",
        "subscribe",
        "unsubscribe",
        "ssubscribe",
        "sunsubscribe",
        "ping",
    ],
    gets_outside_scripts: false,
    sets_outside_scripts: false,
};

pub const POLLING: Lib = Lib {
    id: "polling",
    label: "polling (SET NX, 10 ms ± 50 %)",
    runtime: Runtime::Rust,
    commands: &["set", "evalsha", "eval", "script|load"],
    gets_outside_scripts: false,
    sets_outside_scripts: false,
};

pub const RSLOCK: Lib = Lib {
    id: "rslock",
    label: "rslock",
    runtime: Runtime::Rust,
    commands: &["set", "evalsha", "eval", "script|load"],
    gets_outside_scripts: false,
    sets_outside_scripts: false,
};

pub const REDIS_PY: Lib = Lib {
    id: "redis-py",
    label: "redis-py Lock",
    runtime: Runtime::Python,
    commands: &["set", "evalsha", "eval", "script|load"],
    gets_outside_scripts: false,
    sets_outside_scripts: false,
};

pub const PYTHON_REDIS_LOCK: Lib = Lib {
    id: "python-redis-lock",
    label: "python-redis-lock",
    runtime: Runtime::Python,
    commands: &["set", "blpop", "evalsha", "eval", "script|load"],
    gets_outside_scripts: true,
    sets_outside_scripts: false,
};

/// pottery's `Redlock`, on one master (its single-server use).
pub const POTTERY: Lib = Lib {
    id: "pottery",
    label: "pottery Redlock",
    runtime: Runtime::Python,
    commands: &["set", "evalsha", "eval", "script|load"],
    gets_outside_scripts: false,
    sets_outside_scripts: false,
};

/// latchkey's own Python package (`crates/latchkey-py`): the Rust library
/// under PyO3, so the same commands as [`LATCHKEY`].
pub const LATCHKEY_PY: Lib = Lib {
    id: "latchkey-py",
    label: "latchkey-py (Python)",
    runtime: Runtime::Python,
    commands: LATCHKEY.commands,
    gets_outside_scripts: false,
    sets_outside_scripts: true,
};

pub const NODE_REDLOCK: Lib = Lib {
    id: "node-redlock",
    label: "node-redlock (ioredis)",
    runtime: Runtime::Node,
    commands: &["evalsha", "eval", "script|load"],
    gets_outside_scripts: false,
    sets_outside_scripts: false,
};

/// `redlock` 5.0.0-beta.2, the npm package most users install (the fork
/// above is of it), over one ioredis client: the same commands (checked
/// with `INFO commandstats`: two `EVALSHA` a cycle, and an `EVAL` after each
/// script's first `NOSCRIPT`; its `SET`, `EXISTS`, `GET` and `DEL` are the
/// scripts').
pub const NODE_REDLOCK5: Lib = Lib {
    id: "node-redlock5",
    label: "redlock 5 (npm `redlock`, ioredis)",
    runtime: Runtime::Node,
    commands: &["evalsha", "eval", "script|load"],
    gets_outside_scripts: false,
    sets_outside_scripts: false,
};

/// latchkey's own Node package (`crates/latchkey-node`): the Rust library
/// under napi-rs, so the same commands as [`LATCHKEY`].
pub const LATCHKEY_NODE: Lib = Lib {
    id: "latchkey-node",
    label: "latchkey-node (Node)",
    runtime: Runtime::Node,
    commands: LATCHKEY.commands,
    gets_outside_scripts: false,
    sets_outside_scripts: true,
};

/// The peers in other languages, for scenarios 1 and 2.
pub const FOREIGN: &[&Lib] = &[
    &LATCHKEY_PY,
    &LATCHKEY_NODE,
    &REDIS_PY,
    &PYTHON_REDIS_LOCK,
    &POTTERY,
    &NODE_REDLOCK,
    &NODE_REDLOCK5,
];

/// Every library of the handoff scenario, latchkey first.
pub const HANDOFF: &[&Lib] = &[
    &LATCHKEY,
    &POLLING,
    &RSLOCK,
    &LATCHKEY_PY,
    &REDIS_PY,
    &PYTHON_REDIS_LOCK,
    &POTTERY,
    &LATCHKEY_NODE,
    &NODE_REDLOCK,
    &NODE_REDLOCK5,
];

/// The repository root (the bench is run with `cargo run` from a checkout).
pub fn repo_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.join("../..").canonicalize().unwrap_or(here)
}

fn peers_enabled() -> bool {
    !std::env::args().any(|a| a == "--no-peers")
}

/// Starts a driver for `lib` on the server at `port`; `Err` says why not.
pub async fn driver(lib: &Lib, port: u16) -> Result<Driver, String> {
    let root = repo_root();
    let drivers = root.join("crates/latchkey-bench/peers");
    let installed = root.join("bench/peers");
    let mut command = match lib.runtime {
        Runtime::Rust => {
            let exe =
                std::env::current_exe().map_err(|e| format!("cannot find own binary: {e}"))?;
            let mut c = Command::new(exe);
            c.arg("--worker");
            c
        }
        Runtime::Python | Runtime::Node if !peers_enabled() => {
            return Err("skipped (--no-peers)".into())
        }
        Runtime::Python => {
            install_once()?;
            let python = installed.join("venv/bin/python");
            if !installed.join("venv/.installed").exists() {
                return Err(
                    "not installed (bench/peers/install.sh could not install the Python peers)"
                        .into(),
                );
            }
            let mut c = Command::new(python);
            c.arg(drivers.join("python/driver.py"));
            c
        }
        Runtime::Node => {
            install_once()?;
            if !installed.join("node/.installed").exists() {
                return Err(
                    "not installed (bench/peers/install.sh could not install the Node peer)".into(),
                );
            }
            let mut c = Command::new("node");
            c.env("NODE_PATH", installed.join("node/node_modules"));
            c.arg(drivers.join("node/driver.cjs"));
            c
        }
    };
    command.arg(lib.id).arg(port.to_string());
    Driver::spawn(command).await
}

/// Runs `bench/peers/install.sh` once per benchmark run.
fn install_once() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let root = repo_root();
        let peers = root.join("bench/peers");
        // Every run: the script is idempotent and cheap once installed, and
        // it rebuilds latchkey-py when this checkout's sources changed.
        eprintln!("latchkey-bench: checking the peer libraries (bench/peers/install.sh) …");
        match std::process::Command::new("bash")
            .arg(peers.join("install.sh"))
            .stdout(std::process::Stdio::null())
            .status()
        {
            Ok(_) => Ok(()), // each half leaves its own marker; checked per peer
            Err(e) => Err(format!(
                "not installed (cannot run bench/peers/install.sh: {e})"
            )),
        }
    })
    .clone()
}
