//! Driver processes: one library, in its own process, told what to run over
//! a line protocol, so the Rust libraries and the Python and Node peers are
//! measured by the same code.
//!
//! ```text
//! let mut d = Driver::spawn(&peers::Lib::NODE_REDLOCK, port).await?;
//! let (cycles, seconds) = d.uncontended("k", 2000).await?;
//! d.arm_handoff("h", 9, HOLD, Duration::from_secs(2), 1000).await?;
//! d.go().await?;
//! let events = d.handoff_result().await?;
//! ```
//!
//! The protocol: one command per line on the driver's stdin, one JSON object
//! per line on its stdout.
//!
//! | bench sends | driver answers |
//! |---|---|
//! | (start) | `{"ready":true,"lib":..,"version":..}` or `{"error":..}` |
//! | `uncontended KEY CYCLES` | `{"cycles":N,"seconds":S}` |
//! | `handoff KEY TASKS HOLD_US SECONDS MAX_HANDOFFS` | `{"armed":true}` once its tasks wait for the start |
//! | `go` | `{"acquisitions":N,"acquired":[ns..],"released":[ns..]}` |
//! | `quit` (or EOF) | exits |
//!
//! `acquired`/`released` are [`crate::stats::mono_ns`] timestamps of the
//! handoffs inside the window (at most `MAX_HANDOFFS`, at most `SECONDS`);
//! `acquisitions` counts every acquisition, including the tail after the
//! window, so that commands per handoff can be computed over the whole run.
//! The Rust side lives in [`crate::worker`], the peers' in `peers/`.

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How long any driver reply may take: generous, a stuck driver must not
/// hang the whole benchmark.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// A running driver process; killed when dropped.
pub struct Driver {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    /// The library's version, as the driver reported it.
    pub version: String,
}

/// What a driver recorded in one handoff round.
#[derive(Debug, Default, Clone)]
pub struct Events {
    pub acquisitions: u64,
    pub acquired: Vec<u64>,
    pub released: Vec<u64>,
}

impl Driver {
    /// Starts `command` (stdin/stdout piped, stderr inherited) and waits for
    /// its ready line. Errors are messages for the table's notes.
    pub async fn spawn(mut command: Command) -> Result<Driver, String> {
        command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|e| format!("cannot start: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
        let mut driver = Driver {
            child,
            stdin,
            stdout,
            version: String::new(),
        };
        let ready = driver.reply().await?;
        driver.version = ready["version"].as_str().unwrap_or("?").to_owned();
        Ok(driver)
    }

    /// Runs `cycles` acquire+release cycles on `key`, one at a time.
    /// Returns the cycles and the seconds they took.
    pub async fn uncontended(&mut self, key: &str, cycles: u64) -> Result<(u64, f64), String> {
        self.send(&format!("uncontended {key} {cycles}")).await?;
        let r = self.reply().await?;
        let n = r["cycles"].as_u64().ok_or("no cycles")?;
        let s = r["seconds"].as_f64().ok_or("no seconds")?;
        Ok((n, s))
    }

    /// Prepares `tasks` contenders for `key`; they start on [`Driver::go`].
    pub async fn arm_handoff(
        &mut self,
        key: &str,
        tasks: usize,
        hold: Duration,
        window: Duration,
        max_handoffs: usize,
    ) -> Result<(), String> {
        self.send(&format!(
            "handoff {key} {tasks} {} {} {max_handoffs}",
            hold.as_micros(),
            window.as_secs_f64()
        ))
        .await?;
        self.reply().await.map(drop)
    }

    /// The driver's process id, for CPU accounting.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    pub async fn go(&mut self) -> Result<(), String> {
        self.send("go").await
    }

    /// Waits for the end of the round started by [`Driver::go`].
    pub async fn handoff_result(&mut self) -> Result<Events, String> {
        let r = self.reply().await?;
        let list = |name: &str| -> Vec<u64> {
            r[name]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_u64).collect())
                .unwrap_or_default()
        };
        Ok(Events {
            acquisitions: r["acquisitions"].as_u64().ok_or("no acquisitions")?,
            acquired: list("acquired"),
            released: list("released"),
        })
    }

    /// Sends one command line and waits for its JSON reply: for drivers
    /// with commands of their own (see `crate::cached_holder`).
    pub async fn request(&mut self, line: &str) -> Result<Value, String> {
        self.send(line).await?;
        self.reply().await
    }

    async fn send(&mut self, line: &str) -> Result<(), String> {
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .map_err(|e| format!("driver stdin: {e}"))?;
        self.stdin
            .flush()
            .await
            .map_err(|e| format!("driver stdin: {e}"))
    }

    /// The next JSON line; `{"error": ..}` becomes an `Err`.
    async fn reply(&mut self) -> Result<Value, String> {
        let line = match tokio::time::timeout(REPLY_TIMEOUT, self.stdout.next_line()).await {
            Err(_) => return Err(format!("no reply within {REPLY_TIMEOUT:?}")),
            Ok(Err(e)) => return Err(format!("driver stdout: {e}")),
            Ok(Ok(None)) => return Err("driver exited".into()),
            Ok(Ok(Some(line))) => line,
        };
        let value: Value =
            serde_json::from_str(&line).map_err(|e| format!("bad driver line {line:?}: {e}"))?;
        match value.get("error").and_then(Value::as_str) {
            Some(e) => Err(e.to_owned()),
            None => Ok(value),
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
