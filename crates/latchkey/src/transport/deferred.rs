//! Work that a session runs later, from one timer task (layer 2).
//!
//! A fair lock handed over to a waiter must be extended to its TTL a while
//! after the hand-off, unless it is released first — which a short hold
//! always is. A task spawned per hand-off for that costs the hand-off path a
//! spawn (and the release a wake-up of that task to cancel it), right where
//! the hand-off gap is measured. Here a hold only adds a job to a queue:
//! one task per session sleeps until the earliest job is due, and is woken
//! only when a job comes due before the one it sleeps for (rare: a session's
//! jobs mostly come due in the order they are added). A job that is no
//! longer wanted (its guard released) finds that out itself when it runs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use tokio::sync::Notify;

/// Something to do at a time: short, and without blocking (it runs on the
/// timer task; anything long is spawned by the job itself).
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// A session's queue of deferred jobs; see the module docs.
pub(crate) struct Deferred {
    queue: Arc<Mutex<Queue>>,
    wake: Arc<Notify>,
}

#[derive(Default)]
struct Queue {
    jobs: BinaryHeap<Reverse<Entry>>,
    /// Makes entries with the same time distinct (and ordered).
    added: u64,
    timer: Timer,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Timer {
    #[default]
    NotStarted,
    /// Taking due jobs: it looks at the queue again before sleeping.
    Running,
    /// Asleep until then (or, with `None`, until woken).
    Sleeping(Option<Instant>),
}

struct Entry {
    at: Instant,
    added: u64,
    job: Job,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.added) == (other.at, other.added)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.added).cmp(&(other.at, other.added))
    }
}

impl Default for Deferred {
    fn default() -> Self {
        Deferred {
            queue: Arc::default(),
            wake: Arc::new(Notify::new()),
        }
    }
}

impl Deferred {
    /// Runs `job` at `at` (or soon after), on the session's timer task,
    /// which this starts on first use. Needs a tokio runtime.
    pub(crate) fn run_at(&self, at: Instant, job: Job) {
        let mut queue = lock(&self.queue);
        let added = queue.added;
        queue.added += 1;
        queue.jobs.push(Reverse(Entry { at, added, job }));
        let wake = match queue.timer {
            Timer::NotStarted => {
                queue.timer = Timer::Running;
                tokio::spawn(timer(Arc::downgrade(&self.queue), self.wake.clone()));
                false
            }
            Timer::Running => false,
            Timer::Sleeping(until) => until.is_none_or(|until| at < until),
        };
        drop(queue);
        if wake {
            self.wake.notify_one();
        }
    }
}

impl Drop for Deferred {
    /// Ends the timer task; jobs not yet due are dropped unrun.
    fn drop(&mut self) {
        self.wake.notify_one();
    }
}

/// The timer task: runs due jobs, sleeps until the next one. Ends when the
/// session is gone.
async fn timer(queue: Weak<Mutex<Queue>>, wake: Arc<Notify>) {
    loop {
        let Some(strong) = queue.upgrade() else {
            return;
        };
        // tokio's clock, which tests can pause (it agrees with std's otherwise).
        let now = tokio::time::Instant::now().into_std();
        let mut due = Vec::new();
        let next = {
            let mut queue = lock(&strong);
            while queue.jobs.peek().is_some_and(|Reverse(e)| e.at <= now) {
                if let Some(Reverse(entry)) = queue.jobs.pop() {
                    due.push(entry.job);
                }
            }
            let next = queue.jobs.peek().map(|Reverse(e)| e.at);
            queue.timer = if due.is_empty() {
                Timer::Sleeping(next)
            } else {
                Timer::Running
            };
            next
        };
        drop(strong);
        if !due.is_empty() {
            for job in due {
                job();
            }
            continue;
        }
        // A wake-up sent since the queue was read is kept by `Notify`.
        match next {
            Some(at) => {
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep_until(at.into()) => {}
                }
            }
            None => wake.notified().await,
        }
    }
}

fn lock(queue: &Mutex<Queue>) -> std::sync::MutexGuard<'_, Queue> {
    queue
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::sync::mpsc;

    #[tokio::test(start_paused = true)]
    async fn jobs_run_in_time_order_even_when_added_out_of_order() {
        let deferred = Deferred::default();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let start = tokio::time::Instant::now().into_std();
        for (n, ms) in [(2, 200u64), (3, 300), (1, 100), (0, 0)] {
            let tx = tx.clone();
            deferred.run_at(
                start + Duration::from_millis(ms),
                Box::new(move || {
                    let _ = tx.send((n, tokio::time::Instant::now().into_std()));
                }),
            );
        }
        for expected in 0..4 {
            let (n, at) = rx.recv().await.expect("every job runs");
            assert_eq!(n, expected);
            assert!(at >= start + Duration::from_millis(100 * expected as u64));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_earlier_job_wakes_a_sleeping_timer() {
        let deferred = Deferred::default();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let start = tokio::time::Instant::now().into_std();
        let late = tx.clone();
        deferred.run_at(
            start + Duration::from_secs(60),
            Box::new(move || {
                let _ = late.send("late");
            }),
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
        deferred.run_at(
            start + Duration::from_millis(20),
            Box::new(move || {
                let _ = tx.send("early");
            }),
        );
        assert_eq!(rx.recv().await, Some("early"));
        assert!(tokio::time::Instant::now().into_std() < start + Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_queue_ends_the_timer_without_running_jobs() {
        let deferred = Deferred::default();
        let (tx, mut rx) = mpsc::unbounded_channel::<()>();
        deferred.run_at(
            tokio::time::Instant::now().into_std() + Duration::from_secs(5),
            Box::new(move || {
                let _ = tx.send(());
            }),
        );
        tokio::task::yield_now().await;
        drop(deferred);
        // The job (and its sender) is dropped with the queue, unrun.
        assert_eq!(rx.recv().await, None);
    }
}
