//! Scenario `signals`: 10,000 waiters in one process on one signal.
//!
//! Every repeat spawns 10,000 tasks that each call `client.listen(["go"])`
//! and then `recv()` — one shared subscriber connection, 10,001 channels on
//! the server (the broadcast channel and one waiter channel per task). Once
//! all listen, one `client.signal("go")` wakes them. Measured:
//!
//! * **wake-up**: from just before `signal` is called to the moment the last
//!   waiter has its signal (each task stamps the time it woke), so it
//!   includes the `PUBLISH` round trip and the fan-out to the tasks on 2
//!   worker threads. p50 and p99 over the repeats (with 20 repeats, p99 is the
//!   slowest one). Also the process's CPU time over the same span: on a busy
//!   shared machine it says more about our cost than the wall time does.
//! * **subscribe**: from spawning the tasks until all 10,000 listen (the
//!   subscriber batches their `SUBSCRIBE`s).
//! * **signal_one**: the round trip of one `signal_one` while the 10,000
//!   listen (its script lists their channels to pick one), before the
//!   broadcast; the waiter it picks is then done, 9,999 are left for the
//!   broadcast.
//! * **memory per waiter**: live heap bytes while the 10,000 listen, minus
//!   before, divided by 10,000 — counted by this binary's global allocator
//!   ([`Counting`]: the system allocator plus one relaxed atomic counter;
//!   it costs every scenario a few nanoseconds per allocation, nothing next
//!   to a network round trip). Tokio tasks live on the heap, so this is the
//!   whole client-side cost of a waiter: its task, its listener, the
//!   subscriber's registry entry and event buffer for its channel, and
//!   redis-rs's record of the subscription. The process RSS growth is shown
//!   for context (page-granular, and blind to memory reused from earlier
//!   scenarios).
//!
//! Targets: wake-up p99 ≤ 20 ms; under 2 KiB per waiter.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use latchkey_testkit::RedisServer;
use tokio::sync::Notify;

use crate::stats::{median, quantile, table};
use crate::Report;

const WAITERS: usize = 10_000;
const TARGET_P99: Duration = Duration::from_millis(20);
const TARGET_BYTES_PER_WAITER: f64 = 2048.0;

/// The system allocator, counting the bytes currently allocated.
pub struct Counting;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments and
// only adds bookkeeping on the side.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
            LIVE_BYTES.fetch_add(new_size, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

pub fn run(quick: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Report>>> {
    Box::pin(scenario(quick))
}

/// What one repeat measured.
struct Repeat {
    wake: Duration,
    cpu: Duration,
    signal_one: Duration,
    subscribe: Duration,
    heap_per_waiter: f64,
    rss_per_waiter: f64,
}

async fn scenario(quick: bool) -> Report {
    let server = RedisServer::start();
    let client = latchkey::Client::connect(&server.url())
        .await
        .expect("latchkey connect");
    let repeats = if quick { 5 } else { 20 };
    // Warm-up: start the subscriber connection, load the script, and let the
    // runtime and allocator grow to their working size.
    let _ = one_repeat(&client, WAITERS / 10).await;

    let mut results = Vec::new();
    let mut missed = Vec::new();
    for _ in 0..repeats {
        match one_repeat(&client, WAITERS).await {
            Ok(r) => results.push(r),
            Err(e) => {
                missed.push(format!("a repeat failed: {e}"));
                break;
            }
        }
    }
    let mut wakes: Vec<Duration> = results.iter().map(|r| r.wake).collect();
    let mut subscribes: Vec<Duration> = results.iter().map(|r| r.subscribe).collect();
    let mut ones: Vec<Duration> = results.iter().map(|r| r.signal_one).collect();
    let mut cpus: Vec<Duration> = results.iter().map(|r| r.cpu).collect();
    let mut heap: Vec<f64> = results.iter().map(|r| r.heap_per_waiter).collect();
    let mut rss: Vec<f64> = results.iter().map(|r| r.rss_per_waiter).collect();
    let (p50, p99) = (quantile(&mut wakes, 0.5), quantile(&mut wakes, 0.99));
    let heap_median = median(&mut heap);
    let ms = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1e3);
    let body = table(
        &[
            "waiters",
            "repeats",
            "wake-up p50 (ms)",
            "wake-up p99 (ms)",
            "process CPU during wake-up, median (ms)",
            "subscribe all, median (ms)",
            "signal_one round trip, median (ms)",
            "heap per waiter (B)",
            "RSS growth per waiter (B)",
        ],
        &[vec![
            WAITERS.to_string(),
            results.len().to_string(),
            ms(p50),
            ms(p99),
            ms(quantile(&mut cpus, 0.5)),
            ms(quantile(&mut subscribes, 0.5)),
            ms(quantile(&mut ones, 0.5)),
            format!("{heap_median:.0}"),
            format!("{:.0}", median(&mut rss)),
        ]],
    ) + "\nOne process, one shared subscriber connection, 2 tokio worker threads. \
         Wake-up: from calling `signal` to the last of the waiters woken; the CPU \
         column is the whole process's CPU time over that span (on a busy shared \
         machine it tells more than the wall time). Heap: live bytes counted by \
         the bench's global allocator, median over repeats.\n";
    if !results.is_empty() && p99 > TARGET_P99 {
        missed.push(format!(
            "signals: wake-up p99 {} ms > {} ms",
            ms(p99),
            ms(TARGET_P99)
        ));
    }
    if !results.is_empty() && heap_median >= TARGET_BYTES_PER_WAITER {
        missed.push(format!(
            "signals: {heap_median:.0} B per waiter ≥ {TARGET_BYTES_PER_WAITER} B"
        ));
    }
    Report {
        title: format!("signals: {WAITERS} waiters on one signal"),
        body,
        missed,
    }
}

async fn one_repeat(client: &latchkey::Client, waiters: usize) -> Result<Repeat, String> {
    let (heap_before, rss_before) = (LIVE_BYTES.load(Ordering::Relaxed), rss_bytes());
    let progress = Arc::new(Progress::default());
    let base = Instant::now();
    let tasks: Vec<_> = (0..waiters)
        .map(|_| {
            let (client, progress) = (client.clone(), progress.clone());
            tokio::spawn(async move {
                let mut listener = client.listen(["go"]).await.map_err(|e| e.to_string())?;
                if progress.listening.fetch_add(1, Ordering::AcqRel) + 1 == waiters {
                    progress.all_listening.notify_one();
                }
                let signal = listener.recv().await;
                progress
                    .last_woken_ns
                    .fetch_max(base.elapsed().as_nanos() as u64, Ordering::Relaxed);
                if progress.woken.fetch_add(1, Ordering::AcqRel) + 1 == waiters {
                    progress
                        .cpu_at_last_ns
                        .store(cpu_time().as_nanos() as u64, Ordering::Relaxed);
                    progress.all_woken.notify_one();
                }
                Ok::<usize, String>(signal.payload.len())
            })
        })
        .collect();
    fn within_a_minute<'a>(
        what: &'static str,
        n: &'a AtomicUsize,
        waiters: usize,
    ) -> impl FnOnce(tokio::time::error::Elapsed) -> String + 'a {
        move |_| {
            format!(
                "only {} of {waiters} waiters {what} after 60 s",
                n.load(Ordering::Relaxed)
            )
        }
    }
    tokio::time::timeout(Duration::from_secs(60), progress.all_listening.notified())
        .await
        .map_err(within_a_minute("listen", &progress.listening, waiters))?;
    let subscribe = base.elapsed();
    let heap_per_waiter = LIVE_BYTES
        .load(Ordering::Relaxed)
        .saturating_sub(heap_before) as f64
        / waiters as f64;
    let rss_per_waiter = rss_bytes().saturating_sub(rss_before) as f64 / waiters as f64;

    let one_sent = Instant::now();
    let picked = client
        .signal_one("go", b"you")
        .await
        .map_err(|e| e.to_string())?;
    let signal_one = one_sent.elapsed();
    if !picked {
        return Err("signal_one found no waiter".into());
    }

    let cpu_before = cpu_time();
    let sent = base.elapsed();
    let heard = client
        .signal("go", b"now")
        .await
        .map_err(|e| e.to_string())?;
    if heard != 1 {
        return Err(format!("signal reached {heard} connections, not 1"));
    }
    // Joining the tasks only after the last woke keeps this task out of the
    // way of the waiters.
    tokio::time::timeout(Duration::from_secs(60), progress.all_woken.notified())
        .await
        .map_err(within_a_minute("woke", &progress.woken, waiters))?;
    let wake =
        Duration::from_nanos(progress.last_woken_ns.load(Ordering::Relaxed)).saturating_sub(sent);
    let cpu = Duration::from_nanos(progress.cpu_at_last_ns.load(Ordering::Relaxed))
        .saturating_sub(cpu_before);
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    Ok(Repeat {
        wake,
        cpu,
        signal_one,
        subscribe,
        heap_per_waiter,
        rss_per_waiter,
    })
}

/// Where the waiters of one repeat are.
#[derive(Default)]
struct Progress {
    listening: AtomicUsize,
    all_listening: Notify,
    woken: AtomicUsize,
    all_woken: Notify,
    /// Since the repeat's base instant.
    last_woken_ns: AtomicU64,
    /// Process CPU time when the last waiter woke.
    cpu_at_last_ns: AtomicU64,
}

/// CPU time (user + system) of this whole process so far.
fn cpu_time() -> Duration {
    // SAFETY: an all-zero rusage is a valid value for getrusage to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage; RUSAGE_SELF always exists.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let time = |tv: libc::timeval| {
        Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// Resident set size of this process, from `/proc/self/statm`; 0 if unknown.
fn rss_bytes() -> usize {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * usize::try_from(page).unwrap_or(4096)
}
