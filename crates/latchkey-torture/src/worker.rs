//! A torture worker: one process that contends for the lock (or, with
//! `--workload election`, campaigns: see `contender`) and, while holding
//! it, increments the recording resource the slow way.
//!
//! ```text
//! loop until the scenario ends:
//!     guard = lock.acquire()                       (watchdog on)
//!     t = guard.fencing_token()                    (even worker ids: issued with the
//!                                                   acquisition, `with_fencing`; odd:
//!                                                   issued now, on request)
//!     n = resource.read(t)                         (a multi hold: each of its locks'
//!     sleep(random fraction of the TTL)             resources, with that lock's token)
//!     resource.write(t, n + 1)                     ← faults land in the sleep
//!     guard.release()
//!     sleep(a little)                              ← so that waiters get the lock
//! ```
//!
//! The parent starts it as `latchkey torture` with [`WORKER_ENV`] holding its
//! [`Spec`] as JSON (a re-exec of the same binary, so a user's `latchkey`
//! is all the suite needs), and reads its [`Event`]s from stdout.
//!
//! The worker deliberately does not skip the write when its guard says the
//! lock is lost. Checking `is_held()` first would narrow the window but not
//! close it (a pause can fall between the check and the write), and the
//! suite exists to measure what the *resource* sees when the window is hit:
//! with fencing the stale write is refused, without it the control run
//! shows the damage. Whether the guard still claimed the lock is reported
//! with every write.

use std::time::Duration;

use latchkey::{Client, Lock, Ownership, Redlock};

use super::contender::Contender;
use serde_json::{json, Value};

use super::events::{instant_ns, mono_ns, Emitter, Event};
use super::resource::{Access, Keys, Resource};
use super::rng::Rng;

/// The environment variable that turns `latchkey torture` into a worker.
pub const WORKER_ENV: &str = "LATCHKEY_TORTURE_WORKER";

/// Everything a worker needs to know, passed as JSON in [`WORKER_ENV`].
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub id: u32,
    /// One URL: a single-instance lock; several: Redlock. Usually proxies.
    pub lock_urls: Vec<String>,
    pub resource_url: String,
    pub prefix: String,
    pub lock_name: String,
    pub keys: Keys,
    pub ttl: Duration,
    pub fenced: bool,
    /// A fair lock (`--fair`), with a waiter lease of the TTL.
    pub fair: bool,
    /// When to stop contending, in `mono_ns` time.
    pub end_ns: u64,
    pub seed: u64,
    /// Bounds of the sleep between read and write.
    pub hold_min: Duration,
    pub hold_max: Duration,
    /// Bounds of the pause between a release and the next wait, so that
    /// the lock usually goes to a waiter woken by the release (which is how
    /// a lost wake-up shows) rather than straight back to the releaser.
    pub think_min: Duration,
    pub think_max: Duration,
    pub command_timeout: Duration,
    /// Every acquisition waits for one replica (`--sentinel --replicas`).
    pub replicas: bool,
    /// What the workers contend for: `lock`, `election`, `semaphore` (one
    /// permit), `rwlock` (the write side), named `lock_name`, or `multi`
    /// (a set of `lock_name` and two more locks, see `contender`).
    pub workload: String,
}

impl Spec {
    pub fn to_json(&self) -> String {
        json!({
            "id": self.id,
            "lock_urls": self.lock_urls,
            "resource_url": self.resource_url,
            "prefix": self.prefix,
            "lock_name": self.lock_name,
            "state_key": self.keys.state,
            "log_key": self.keys.log,
            "ttl_ms": self.ttl.as_millis() as u64,
            "fenced": self.fenced,
            "fair": self.fair,
            "end_ns": self.end_ns,
            "seed": self.seed,
            "hold_min_ms": self.hold_min.as_millis() as u64,
            "hold_max_ms": self.hold_max.as_millis() as u64,
            "think_min_ms": self.think_min.as_millis() as u64,
            "think_max_ms": self.think_max.as_millis() as u64,
            "command_timeout_ms": self.command_timeout.as_millis() as u64,
            "replicas": self.replicas,
            "workload": self.workload,
        })
        .to_string()
    }

    pub fn from_json(text: &str) -> Result<Spec, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("bad worker spec: {e}"))?;
        let num = |k: &str| {
            v[k].as_u64()
                .ok_or_else(|| format!("worker spec: {k} missing"))
        };
        let text = |k: &str| {
            v[k].as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("worker spec: {k} missing"))
        };
        let ms = |k: &str| num(k).map(Duration::from_millis);
        Ok(Spec {
            id: u32::try_from(num("id")?).map_err(|_| "worker spec: bad id".to_owned())?,
            lock_urls: v["lock_urls"]
                .as_array()
                .ok_or("worker spec: lock_urls missing")?
                .iter()
                .map(|u| {
                    u.as_str()
                        .map(str::to_owned)
                        .ok_or("worker spec: bad lock URL")
                })
                .collect::<Result<_, _>>()?,
            resource_url: text("resource_url")?,
            prefix: text("prefix")?,
            lock_name: text("lock_name")?,
            keys: Keys {
                state: text("state_key")?,
                log: text("log_key")?,
            },
            ttl: ms("ttl_ms")?,
            fenced: v["fenced"].as_bool().ok_or("worker spec: fenced missing")?,
            fair: v["fair"].as_bool().unwrap_or(false),
            end_ns: num("end_ns")?,
            seed: num("seed")?,
            hold_min: ms("hold_min_ms")?,
            hold_max: ms("hold_max_ms")?,
            think_min: ms("think_min_ms")?,
            think_max: ms("think_max_ms")?,
            command_timeout: ms("command_timeout_ms")?,
            replicas: v["replicas"].as_bool().unwrap_or(false),
            workload: v["workload"].as_str().unwrap_or("lock").to_owned(),
        })
    }
}

/// Runs a worker until its spec's end; returns the exit code.
pub async fn run(spec_json: &str) -> u8 {
    let out = Emitter;
    let spec = match Spec::from_json(spec_json) {
        Ok(spec) => spec,
        Err(e) => {
            out.error(e);
            return 2;
        }
    };
    let Some(lock) = connect(&spec, &out).await else {
        out.emit(Event::Done);
        return 0;
    };
    // The scenario's lock's resource, and (a multi workload) its other
    // locks' (`contender::multi_names`).
    let mut resources = Vec::new();
    let wanted = if spec.workload == "multi" { 3 } else { 1 };
    while resources.len() < wanted {
        let keys = match resources.len() {
            0 => spec.keys.clone(),
            i => spec.keys.other(i),
        };
        match Resource::connect(&spec.resource_url, &keys, spec.fenced, spec.command_timeout).await
        {
            Ok(resource) => resources.push(resource),
            Err(e) if mono_ns() < spec.end_ns => {
                out.error(e);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => {
                out.error(e);
                out.emit(Event::Done);
                return 0;
            }
        }
    }
    out.emit(Event::Ready {
        pid: std::process::id(),
    });
    let mut rng = Rng::new(spec.seed);
    loop {
        let now = mono_ns();
        if now >= spec.end_ns {
            break;
        }
        out.emit(Event::Waiting { t: now });
        let guard = match lock
            .acquire_timeout(Duration::from_nanos(spec.end_ns - now))
            .await
        {
            Ok(guard) => guard,
            Err(_) if mono_ns() >= spec.end_ns => break,
            Err(e) => {
                out.error(format!("acquire: {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Issued with the acquisition (even ids: `with_fencing`) or now
        // (odd ids). The hold's reply time is taken after it either way, so
        // the checker's rule (a hold answered before another was asked for
        // has the smaller token) covers the token's issue too. A lazy
        // token can be refused when the lock was lost in between (a fault):
        // that hold is released and not counted.
        let tokens = match guard.fencing_tokens().await {
            Ok(tokens) => tokens,
            Err(e) => {
                if !matches!(e, latchkey::Error::NotHeld { .. }) {
                    out.error(format!("fencing token: {e}"));
                }
                let _ = guard.release().await;
                continue;
            }
        };
        // Resource 0's: the scenario's lock's, in every hold.
        let fence = tokens.first().map_or(0, |(_, t)| *t);
        let t_reply = mono_ns();
        // The guard's first deadline is `sent + ttl - drift`: recover `sent`.
        let validity = spec.ttl - latchkey::protocol::drift(spec.ttl);
        let t_send = guard
            .deadline()
            .checked_sub(validity)
            .map_or(t_reply, instant_ns)
            .min(t_reply);
        let wall_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        out.emit(Event::Acquired {
            t_send,
            t_reply,
            fence,
            wall_ms,
        });

        let sleep = rng.between(spec.hold_min, spec.hold_max);
        let body = async {
            // Each resource this hold may write, with its lock's token.
            let mut read = Vec::with_capacity(tokens.len());
            for &(i, token) in &tokens {
                match resources[i].read(token, spec.id).await {
                    Ok(Access::Accepted(n)) => {
                        out.emit(Event::Read {
                            t: mono_ns(),
                            accepted: true,
                            value: n,
                        });
                        read.push((i, token, n));
                    }
                    Ok(Access::Refused) => out.emit(Event::Read {
                        t: mono_ns(),
                        accepted: false,
                        value: 0,
                    }),
                    Err(e) => out.error(e),
                }
            }
            if read.is_empty() {
                return;
            }
            tokio::time::sleep(sleep).await;
            let held = guard.is_held();
            for (i, token, n) in read {
                let value = n + 1;
                match resources[i].write(token, spec.id, value).await {
                    Ok(access) => out.emit(Event::Wrote {
                        t: mono_ns(),
                        accepted: access != Access::Refused,
                        value,
                        held,
                    }),
                    Err(e) => out.error(e),
                }
            }
        };
        let watcher = async {
            guard.lost().await;
            out.emit(Event::Lost {
                t: mono_ns(),
                deadline: instant_ns(guard.deadline()),
                fence,
            });
            std::future::pending::<()>().await;
        };
        tokio::select! {
            _ = body => {}
            _ = watcher => {}
        }

        let t_send = mono_ns();
        let outcome = match guard.release().await {
            Ok(Ownership::Owned) => "released",
            Ok(Ownership::Expired) => "expired",
            Ok(Ownership::HeldByOther) => "held-by-other",
            Err(e) => {
                out.error(format!("release: {e}"));
                "error"
            }
        };
        out.emit(Event::Released {
            t_send,
            t_reply: mono_ns(),
            outcome: outcome.into(),
        });
        tokio::time::sleep(rng.between(spec.think_min, spec.think_max)).await;
    }
    out.emit(Event::Done);
    0
}

/// A fair lock when the run is `--fair`: a waiter lease of the TTL, so that
/// a dead waiter costs the queue what a dead holder does.
fn fair(spec: &Spec, lock: Lock) -> latchkey::Result<Lock> {
    match spec.fair {
        true => lock.fair_with_lease(spec.ttl.max(latchkey::limits::MIN_WAITER_LEASE)),
        false => Ok(lock),
    }
}

/// Half the workers take their tokens with the acquisition, half on
/// request, so that both ways are tortured together on one lock.
fn tokens(spec: &Spec, lock: Lock) -> Lock {
    if spec.id.is_multiple_of(2) {
        lock.with_fencing()
    } else {
        lock
    }
}

/// The lock, retrying until the scenario's end while the server is down
/// (a worker restarted after a kill may meet a Redis being restarted).
async fn connect(spec: &Spec, out: &Emitter) -> Option<Contender> {
    loop {
        let attempt = if let [url] = &spec.lock_urls[..] {
            match Client::builder(url)
                .prefix(&spec.prefix)
                .command_timeout(spec.command_timeout)
                .connect()
                .await
            {
                Ok(client) if spec.workload == "election" => {
                    match client.election(&spec.lock_name, spec.ttl) {
                        Ok(election) => {
                            let value = format!("worker {}", spec.id);
                            return Some(Contender::of(election.candidacy(value)));
                        }
                        Err(e) => Err(e),
                    }
                }
                Ok(client) if spec.workload == "semaphore" => {
                    match client.semaphore(&spec.lock_name, 1, spec.ttl) {
                        Ok(s) => return Some(Contender::of(s.with_fencing().with_watchdog())),
                        Err(e) => Err(e),
                    }
                }
                Ok(client) if spec.workload == "multi" => {
                    match Contender::multi(&client, &spec.lock_name, spec.ttl, spec.id) {
                        Ok(contender) => return Some(contender),
                        Err(e) => Err(e),
                    }
                }
                Ok(client) if spec.workload == "rwlock" => {
                    match client.rwlock(&spec.lock_name, spec.ttl) {
                        Ok(rw) => {
                            let writer = rw.with_fencing().with_watchdog();
                            return Some(Contender::of(writer.side(latchkey::RwAccess::Write)));
                        }
                        Err(e) => Err(e),
                    }
                }
                // Odd workers keep the lock while idle, even ones do not:
                // exclusion between both kinds and among the keepers.
                Ok(client) if spec.workload == "cached" && spec.id % 2 == 1 => {
                    match client
                        .lock(&spec.lock_name, spec.ttl)
                        .and_then(|l| l.with_caching(spec.ttl * 4))
                    {
                        Ok(lock) => return Some(Contender::of(lock)),
                        Err(e) => Err(e),
                    }
                }
                Ok(client) => client
                    .lock(&spec.lock_name, spec.ttl)
                    .and_then(|l| fair(spec, l))
                    .map(|l| tokens(spec, l)),
                Err(e) => Err(e),
            }
        } else {
            let urls: Vec<&str> = spec.lock_urls.iter().map(String::as_str).collect();
            let (prefix, timeout) = (spec.prefix.clone(), spec.command_timeout);
            match Redlock::connect_with(&urls, |b| b.prefix(&prefix).command_timeout(timeout)).await
            {
                Ok(redlock) => redlock
                    .lock(&spec.lock_name, spec.ttl)
                    .map(|l| tokens(spec, l)),
                Err(e) => Err(e),
            }
        };
        let attempt = attempt.and_then(|lock| match spec.replicas {
            true => lock.with_replicas_within(1, spec.command_timeout / 2),
            false => Ok(lock),
        });
        match attempt {
            Ok(lock) => return Some(Contender::of(lock.with_watchdog())),
            Err(e) if e.is_transient() && mono_ns() < spec.end_ns => {
                out.error(format!("connect: {e}"));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => {
                out.error(format!("connect: {e}"));
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_round_trip() {
        let spec = Spec {
            id: 3,
            lock_urls: vec!["redis://127.0.0.1:1/".into(), "redis://127.0.0.1:2/".into()],
            resource_url: "redis://127.0.0.1:3/".into(),
            prefix: "p:".into(),
            lock_name: "torture:x".into(),
            keys: Keys::new("p:", "run", "kill"),
            ttl: Duration::from_millis(1000),
            fenced: true,
            fair: true,
            end_ns: u64::MAX / 3,
            seed: 99,
            hold_min: Duration::from_millis(50),
            hold_max: Duration::from_millis(500),
            think_min: Duration::from_millis(250),
            think_max: Duration::from_millis(500),
            command_timeout: Duration::from_millis(800),
            replicas: true,
            workload: "election".into(),
        };
        assert_eq!(Spec::from_json(&spec.to_json()), Ok(spec));
        assert!(Spec::from_json("{}").is_err());
        assert!(Spec::from_json("not json").is_err());
    }
}
