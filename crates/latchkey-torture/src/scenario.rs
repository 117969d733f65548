//! Running one scenario: lock server(s), a proxy per worker, W worker
//! processes, the fault loop, and the record the checker reads.
//!
//! ```text
//! start lock server(s) ─► a proxy per worker ─► W workers ─► first acquisition
//!   └► repeat until the end is near: pick a fault ─► wait for a holder to read
//!        ─► inject ─► hold ─► undo ─► settle (TTL)
//! ─► tell everyone to stop ─► wait for the workers ─► fetch the resource log
//! ```

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use latchkey_testkit::{Proxy, ProxyMode};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use super::checker::Record;
use super::events::{mono_ns, ns_instant, Event};
use super::faults::{self, Fault, Needs, Window};
use super::links;
use super::resource::{self, Keys};
use super::rng::Rng;
use super::worker::{Spec, WORKER_ENV};

mod inject;
mod servers;

pub use servers::Place;
use servers::{start_servers, LockServer};

/// One row of the table: the faults it mixes, and whether writes are fenced.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    /// Each injection picks one of these at random; empty: no faults.
    pub faults: Vec<Fault>,
    pub fenced: bool,
    /// The control run: unfenced, and must show violations.
    pub control: bool,
}

impl Scenario {
    /// What the scenario's faults need, together.
    pub fn needs(&self) -> Needs {
        self.faults.iter().fold(Needs::default(), |a, f| {
            let b = f.needs();
            Needs {
                private_server: a.private_server || b.private_server,
                proxy: a.proxy || b.proxy,
                faketime: a.faketime || b.faketime,
                redlock: a.redlock || b.redlock,
                aof: a.aof || b.aof,
                cluster: a.cluster || b.cluster,
                single: a.single || b.single,
                replicated: a.replicated || b.replicated,
            }
        })
    }
}

/// The knobs shared by every scenario of a run.
#[derive(Debug, Clone)]
pub struct Settings {
    pub workers: u32,
    pub ttl: Duration,
    pub duration: Duration,
    pub command_timeout: Duration,
    pub hold: (Duration, Duration),
    pub think: (Duration, Duration),
    pub prefix: String,
    pub run_id: String,
    /// libfaketime's library, when installed.
    pub faketime: Option<PathBuf>,
    /// Workers use fair locks (`--fair`).
    pub fair: bool,
    /// What the workers contend for (`--workload`): `lock`, `election`,
    /// `semaphore`, `rwlock` or `multi`.
    pub workload: String,
}

struct Slot {
    spec: Spec,
    child: Option<Child>,
    pid: Option<u32>,
    proxies: Vec<Proxy>,
    clock_file: Option<PathBuf>,
}

/// Runs `scenario` and returns what happened. `resource_url` is where the
/// recording resource lives (never behind a proxy, never faulted).
pub async fn run(
    scenario: &Scenario,
    settings: &Settings,
    place: &Place,
    resource_url: &str,
    rng: &mut Rng,
) -> Result<Record, String> {
    let needs = scenario.needs();
    let servers = start_servers(place, needs).await?;
    let lock_name = format!("torture:{}:{}", settings.run_id, scenario.name);
    let lock_key = format!("{}{lock_name}", settings.prefix);
    // The key a fault deletes or overwrites: the election's leader lease,
    // the semaphore's permits, the read-write lock's writer
    // (docs/protocol.md).
    let lock_key = match settings.workload.as_str() {
        "election" => format!("{{{lock_key}}}:leader"),
        "semaphore" => format!("{{{lock_key}}}:permits"),
        "rwlock" => format!("{{{lock_key}}}:rw:writer"),
        _ => lock_key,
    };
    let keys = Keys::new(&settings.prefix, &settings.run_id, &scenario.name);
    let (tx, rx) = mpsc::unbounded_channel();
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find the latchkey binary to start workers: {e}"))?;

    let mut runner = Runner {
        settings,
        servers,
        slots: Vec::new(),
        tx,
        rx,
        record: Record::default(),
        exe,
        lock_key: lock_key.clone(),
    };
    let start_ns = mono_ns();
    let end_ns = start_ns + settings.duration.as_nanos() as u64;
    runner.record.start_ns = start_ns;
    runner.record.end_ns = end_ns;
    runner.record.wall_ms_at_start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);

    for id in 0..settings.workers {
        let mut proxies = Vec::new();
        let mut lock_urls = Vec::new();
        for server in &runner.servers {
            if server.is_cluster() || server.is_sentinel() {
                // Cluster clients connect to the nodes they discover, and a
                // Sentinel set's to the primary the Sentinels name.
                lock_urls.push(server.url().to_owned());
                continue;
            }
            match links::upstream(server.url()).await {
                Ok(upstream) => {
                    let proxy = Proxy::start(upstream).await;
                    lock_urls.push(
                        links::via_proxy(server.url(), proxy.port()).unwrap_or_else(|| proxy.url()),
                    );
                    proxies.push(proxy);
                }
                // Not proxyable (rediss://): the scenario was only chosen if
                // it needs no proxy, so connect directly.
                Err(_) => lock_urls.push(server.url().to_owned()),
            }
        }
        let clock_file = match (&settings.faketime, needs.faketime) {
            (Some(_), true) => {
                let file = std::env::temp_dir().join(format!(
                    "latchkey-torture-{}-{}-{id}.faketime",
                    std::process::id(),
                    scenario.name
                ));
                std::fs::write(&file, "+0\n")
                    .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
                Some(file)
            }
            _ => None,
        };
        let spec = Spec {
            id,
            lock_urls,
            resource_url: resource_url.to_owned(),
            prefix: settings.prefix.clone(),
            lock_name: lock_name.clone(),
            keys: keys.clone(),
            ttl: settings.ttl,
            fenced: scenario.fenced,
            fair: settings.fair,
            end_ns,
            seed: rng.fork(),
            hold_min: settings.hold.0,
            hold_max: settings.hold.1,
            think_min: settings.think.0,
            think_max: settings.think.1,
            command_timeout: settings.command_timeout,
            replicas: matches!(place, Place::Sentinel { replicas: true }),
            workload: settings.workload.clone(),
        };
        runner.slots.push(Slot {
            spec,
            child: None,
            pid: None,
            proxies,
            clock_file,
        });
        runner.spawn(id)?;
    }

    let result = runner.fault_loop(scenario, end_ns, rng).await;
    runner.finish(end_ns).await;
    result?;

    let mut record = std::mem::take(&mut runner.record);
    // The resources: the lock's, and a multi workload's other locks'
    // (`contender::multi_names`), each checked on its own.
    let others = if settings.workload == "multi" { 2 } else { 0 };
    let resources: Vec<Keys> = std::iter::once(keys.clone())
        .chain((1..=others).map(|i| keys.other(i)))
        .collect();
    let timeout = settings.command_timeout.max(Duration::from_secs(2));
    let mut logs = Vec::with_capacity(resources.len());
    for keys in &resources {
        logs.push(resource::fetch_log(resource_url, keys, timeout).await?);
    }
    record.ops = logs.remove(0);
    record.more_ops = logs;
    if let Place::User(_) = place {
        let mut lock_keys = vec![lock_key.clone()];
        let names = super::contender::multi_names(&lock_name);
        let prefixed = names[1..=others]
            .iter()
            .map(|n| format!("{}{n}", settings.prefix));
        lock_keys.extend(prefixed);
        let workload = &settings.workload;
        servers::clean_up(
            &runner.servers,
            resource_url,
            &resources,
            &lock_keys,
            workload,
        )
        .await;
    }
    for slot in &runner.slots {
        if let Some(file) = &slot.clock_file {
            let _ = std::fs::remove_file(file);
        }
    }
    Ok(record)
}

struct Runner<'a> {
    settings: &'a Settings,
    servers: Vec<LockServer>,
    slots: Vec<Slot>,
    tx: mpsc::UnboundedSender<(u32, Event)>,
    rx: mpsc::UnboundedReceiver<(u32, Event)>,
    record: Record,
    exe: PathBuf,
    lock_key: String,
}

impl Runner<'_> {
    /// Starts (or restarts) worker `id` as a child process.
    fn spawn(&mut self, id: u32) -> Result<(), String> {
        let slot = &mut self.slots[id as usize];
        let mut cmd = Command::new(&self.exe);
        cmd.arg("torture")
            .env(WORKER_ENV, slot.spec.to_json())
            .env_remove("LATCHKEY_REDIS_URL")
            .env_remove("LATCHKEY_PREFIX")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        if let (Some(lib), Some(file)) = (&self.settings.faketime, &slot.clock_file) {
            // Only the wall clock: the worker's deadlines run on the
            // monotonic clock, which must stay real for the figures.
            cmd.env("LD_PRELOAD", lib)
                .env("FAKETIME_TIMESTAMP_FILE", file)
                .env("FAKETIME_NO_CACHE", "1")
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        // SAFETY: prctl is async-signal-safe and touches no memory of ours.
        // A worker must not outlive the run (a killed parent would leave
        // workers contending forever).
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start a worker: {e}"))?;
        slot.pid = child.id();
        let stdout = child.stdout.take().ok_or("worker has no stdout")?;
        slot.child = Some(child);
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(event) = Event::parse(&line) {
                    let _ = tx.send((id, event));
                }
            }
        });
        Ok(())
    }

    /// Records events until `deadline`.
    async fn pump_until(&mut self, deadline: Instant) {
        loop {
            tokio::select! {
                received = self.rx.recv() => match received {
                    Some(event) => self.record.events.push(event),
                    None => return,
                },
                _ = tokio::time::sleep_until(deadline.into()) => return,
            }
        }
    }

    /// Records events until one matches `wanted`; returns its worker, or
    /// `None` at the deadline.
    async fn pump_until_event(
        &mut self,
        deadline: Instant,
        wanted: impl Fn(&Event) -> bool,
    ) -> Option<u32> {
        loop {
            tokio::select! {
                received = self.rx.recv() => {
                    let (id, event) = received?;
                    let hit = wanted(&event);
                    self.record.events.push((id, event));
                    if hit {
                        return Some(id);
                    }
                }
                _ = tokio::time::sleep_until(deadline.into()) => return None,
            }
        }
    }

    async fn fault_loop(
        &mut self,
        scenario: &Scenario,
        end_ns: u64,
        rng: &mut Rng,
    ) -> Result<(), String> {
        let end = ns_instant(end_ns);
        let ttl = self.settings.ttl;
        // Faults start once the workload runs.
        let warm_up = Instant::now() + Duration::from_secs(10);
        self.pump_until_event(warm_up.min(end), |e| matches!(e, Event::Acquired { .. }))
            .await;
        let settle = ttl + Duration::from_millis(250);
        // The longest a fault lasts (a pause: 2 x TTL), plus time to see
        // the lock taken again.
        let room = ttl * 2 + settle;
        while let Some(&fault) = rng.pick(&scenario.faults) {
            if Instant::now() + room >= end {
                break;
            }
            let victim = if fault.targets_holder() {
                // Right after a read: inside a critical section, before its write.
                let by = end - room;
                match self
                    .pump_until_event(by, |e| matches!(e, Event::Read { accepted: true, .. }))
                    .await
                {
                    Some(id) => id,
                    None => break,
                }
            } else {
                let at = Instant::now() + rng.between(Duration::ZERO, ttl / 2);
                self.pump_until(at).await;
                rng.below(u64::from(self.settings.workers)) as u32
            };
            let steps = faults::steps(fault, victim, ttl, &self.lock_key, self.servers.len(), rng);
            let start_ns = mono_ns();
            for action in &steps.start {
                if let Err(e) = self.act(action, rng).await {
                    self.record.notes.push(format!("{}: {e}", fault.name()));
                }
            }
            self.pump_until(Instant::now() + steps.hold).await;
            for action in &steps.clear {
                if let Err(e) = self.act(action, rng).await {
                    self.record.notes.push(format!("{}: {e}", fault.name()));
                }
            }
            self.record.windows.push(Window {
                fault,
                victim: fault.targets_holder().then_some(victim),
                start_ns,
                end_ns: mono_ns(),
            });
            self.pump_until(Instant::now() + settle).await;
        }
        self.pump_until(end).await;
        Ok(())
    }

    /// Undoes whatever is still in force, waits for every worker to finish
    /// (they stop on their own at `end_ns`), and collects the last events.
    async fn finish(&mut self, end_ns: u64) {
        for id in 0..self.slots.len() as u32 {
            let _ = self.signal(id, libc::SIGCONT);
            let slot = &self.slots[id as usize];
            for proxy in &slot.proxies {
                proxy.set_mode(ProxyMode::Pass);
            }
            if let Some(file) = &slot.clock_file {
                let _ = std::fs::write(file, "+0\n");
            }
        }
        // A worker finishes its hold (at most the longest sleep plus a few
        // commands) and exits; give it that, generously.
        let grace =
            self.settings.hold.1 + self.settings.command_timeout * 4 + Duration::from_secs(5);
        // A fault that outlasted the scenario (a failover waits for the
        // set to heal) leaves the workers done already: still reap them.
        let deadline = (ns_instant(end_ns) + grace).max(Instant::now() + Duration::from_secs(2));
        for id in 0..self.slots.len() {
            let Some(mut child) = self.slots[id].child.take() else {
                continue;
            };
            let waited = tokio::select! {
                status = child.wait() => status.ok(),
                _ = async {
                    loop {
                        match self.rx.recv().await {
                            Some(event) => self.record.events.push(event),
                            None => std::future::pending::<()>().await,
                        }
                    }
                } => None,
                _ = tokio::time::sleep_until(deadline.into()) => None,
            };
            if waited.is_none() {
                self.record
                    .notes
                    .push(format!("worker {id} did not stop in time; killed"));
                let _ = child.start_kill();
                let _ = child.wait().await;
            }
            self.slots[id].pid = None;
        }
        // The readers end at their workers' EOF; then the channel closes.
        let (closed_tx, _) = mpsc::unbounded_channel();
        drop(std::mem::replace(&mut self.tx, closed_tx));
        let drain_until = Instant::now() + Duration::from_secs(2);
        self.pump_until(drain_until).await;
    }
}
