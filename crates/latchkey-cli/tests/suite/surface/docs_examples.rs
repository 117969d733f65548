//! The ```sh examples of README.md and docs/cli.md, pasted as they are into
//! `sh -e` against a private Redis (`LATCHKEY_REDIS_URL`): each block must
//! exit 0 within a bound. The user's own scripts they name (`./report.sh`,
//! `./deploy.sh`, …) are stand-ins that exit 0.
//!
//! Lines that cannot run here are skipped, each for a stated reason (see
//! [`SKIPPED`]); everything else runs, so an example that blocks (a wait
//! nobody ends) or fails is a failing test.

use crate::common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// How long one block may take: the slowest is `demo`.
const BLOCK_LIMIT: Duration = Duration::from_secs(60);

/// What a line contains → why it does not run here (and where it is tested).
const SKIPPED: [(&str, &str); 12] = [
    (
        "./dev ",
        "the developer's script: builds the workspace and runs the whole suite, this test included",
    ),
    (
        "--redis ",
        "names servers of its own (Redlock, a cluster, TLS, a database host): placeholders; \
         deploy/redlock.rs, cluster.rs, tls.rs run these forms",
    ),
    (
        "--sentinel ",
        "names Sentinels of its own: placeholders; deploy/sentinel.rs runs this form",
    ),
    (
        "latchkey top",
        "needs a terminal (exits 2 without one); inspect/top.rs",
    ),
    (
        "latchkey exporter",
        "serves until interrupted; inspect/exporter.rs",
    ),
    (
        "latchkey mcp",
        "serves MCP on stdin/stdout until the host closes it; doors/mcp_*.rs drive it",
    ),
    (
        "latchkey serve",
        "serves HTTP until interrupted; doors/http.rs",
    ),
    (
        "--watch",
        "follows the election until interrupted; prim/elect.rs",
    ),
    (
        "latchkey torture",
        "starts servers of its own and runs for up to minutes; tests/torture*.rs",
    ),
    (
        "pip install latchkey-redis",
        "installs from PyPI: ./dev release-check (release/python.sh) installs the wheel it builds \
         from the sdist into a clean venv without Rust and runs its smoke test",
    ),
    (
        "npm install latchkey-redis",
        "installs from npm: ./dev release-check (release/node.sh) installs the packed tarballs \
         into a scratch project without Rust and runs its smoke test",
    ),
    (
        "-x86_64-unknown-linux-gnu",
        "the released CLI tarball: ./dev dist (release/dist.sh) makes it, checks its .sha256, \
         extracts it and runs latchkey --version and latchkey demo",
    ),
];

/// The user's scripts the examples name.
const STAND_INS: [&str; 8] = [
    "report.sh",
    "job.sh",
    "deploy.sh",
    "export.sh",
    "reindex.sh",
    "scheduler.sh",
    "scheduler",
    "smoke-test.sh",
];

/// The ```sh blocks of `file` (relative to the workspace root).
fn sh_blocks(file: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join(file)).expect("read the docs");
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.trim_start()) {
            (None, "```sh") => current = Some(String::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            _ => {}
        }
    }
    assert!(current.is_none(), "{file}: an unclosed ```sh block");
    blocks
}

/// `block` with the lines that cannot run here replaced by a comment, and
/// the reasons, one per skipped line.
fn runnable(block: &str) -> (String, Vec<String>) {
    let mut script = String::from("set -e\n");
    let mut skipped = Vec::new();
    // A line continued with `\` is one command.
    for command in block.replace("\\\n", " ").lines() {
        match SKIPPED.iter().find(|(needle, _)| command.contains(needle)) {
            Some((_, why)) => {
                skipped.push(format!("{}: {why}", command.trim()));
                script.push_str(": skipped\n");
            }
            None => {
                script.push_str(command);
                script.push('\n');
            }
        }
    }
    (script, skipped)
}

/// Runs `script` with `sh` in `dir` against `server`: (exit code, output).
fn run_script(script: &str, dir: &Path, server: &RedisServer) -> (Option<i32>, String) {
    let bin = Path::new(env!("CARGO_BIN_EXE_latchkey"))
        .parent()
        .expect("the binary's directory");
    let path = format!(
        "{}:{}:{}",
        bin.display(),
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env("PATH", path)
        .env("LATCHKEY_REDIS_URL", server.url())
        .env("LATCHKEY_PREFIX", PREFIX)
        .env_remove("LATCHKEY_TLS_CA")
        .env_remove("LATCHKEY_TLS_CERT")
        .env_remove("LATCHKEY_TLS_KEY")
        .env_remove("LATCHKEY_TLS_SERVER_NAME")
        .env_remove("LATCHKEY_SENTINEL")
        .env_remove("LATCHKEY_SENTINEL_MASTER")
        .stdin(Stdio::null())
        .stdout(Stdio::from(
            std::fs::File::create(dir.join("out")).expect("output file"),
        ))
        .stderr(Stdio::from(
            std::fs::File::create(dir.join("err")).expect("error file"),
        ))
        // Its own group: a block that hangs is killed whole, background
        // waiters included.
        .process_group(0)
        .spawn()
        .expect("spawn sh");
    let deadline = Instant::now() + BLOCK_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    let text = format!("stdout:\n{}\nstderr:\n{}", read("out"), read("err"));
    match status {
        Some(status) => (status.code(), text),
        None => (
            None,
            format!("did not finish within {BLOCK_LIMIT:?}\n{text}"),
        ),
    }
}

#[test]
fn every_sh_example_of_the_readme_and_the_cli_reference_runs_as_pasted() {
    let scratch = Scratch::new("docs-examples");
    let dir = scratch.path("");
    for name in STAND_INS {
        let path = dir.join(name);
        std::fs::write(&path, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    let mut ran = 0;
    for file in ["README.md", "docs/cli.md"] {
        let blocks = sh_blocks(file);
        assert!(!blocks.is_empty(), "{file} has no ```sh block");
        for block in blocks {
            // A fresh server per block: examples reuse names (`deploy`).
            let server = RedisServer::start();
            let (script, skipped) = runnable(&block);
            for why in &skipped {
                eprintln!("{file}: skipped {why}");
            }
            ran += script.lines().filter(|l| l.contains("latchkey ")).count();
            let (code, output) = run_script(&script, &dir, &server);
            assert_eq!(
                code,
                Some(0),
                "{file}: this example fails when pasted:\n{block}\n{output}"
            );
        }
    }
    // The examples this test was written for are among those run.
    assert!(ran >= 20, "only {ran} example lines ran");
}
