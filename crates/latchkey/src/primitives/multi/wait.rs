//! The waiting loop of [`MultiLock::acquire_until`] (layer 4): the wait
//! core (`primitives/wait/`, `wait_for`) over [`MultiWake`], which sleeps on
//! the release channels of *every* lock of the set (whichever is released,
//! the set may be free now), with the polling of a holder that will not
//! announce its release, and polling without pub/sub.
//!
//! Each busy attempt marks the holder of the lock it found busy (as a
//! lock's waiter does), so that holder's release publishes. One lock after
//! the other (on a cluster, locks in different slots), an attempt that gave
//! back what it took also backs off (`vocab/retry.rs` [`Backoff`], jittered,
//! doubling) before it contends again: with every caller taking the locks
//! in the same global order nobody waits while holding, so nothing
//! deadlocks; the backoff keeps two callers that keep meeting from
//! trading the same locks back and forth.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::backend::Wakeups;
use crate::primitives::lock::wait::{not_a_release, MAX_FOREIGN_POLL, MIN_FOREIGN_POLL};
use crate::primitives::multi::guard::MultiGuard;
use crate::primitives::multi::spec::MultiSpec;
use crate::primitives::multi::MultiLock;
use crate::primitives::wait::ask::Ask;
use crate::primitives::wait::waker::{RECHECK, RESUBSCRIBE_AFTER};
use crate::primitives::wait::{wait_for, Tried, Waiting, Wake, Woken};
use crate::transport::subscriber::Event;
use crate::vocab::error::Result;
use crate::vocab::protocol::RELEASE_REQUESTED;
use crate::vocab::retry::{jitter, Backoff};

impl MultiLock {
    /// The slow path of [`MultiLock::acquire_until`]: the first try found
    /// a lock busy. Subscribes to every lock's channel, then runs the wait
    /// core's loop.
    pub(crate) async fn wait_and_acquire(
        &self,
        deadline: Option<Instant>,
        started: Instant,
    ) -> Result<MultiGuard> {
        let spec = &self.inner;
        let seen = Seen {
            announced: AtomicBool::new(true),
            gave_back: AtomicBool::new(false),
        };
        let wake = MultiWake {
            spec,
            seen: &seen,
            wakeups: subscribe_until(spec, deadline).await,
            last_subscribe: Instant::now(),
            poll: Backoff::default(),
            foreign_poll: MIN_FOREIGN_POLL,
            backoff: Backoff::default(),
        };
        let ask = Ask::new(spec.lease.asking);
        let mut waiting = Waiting::new(&spec.name, started, deadline, wake);
        wait_for(&mut waiting, |woken| {
            let (seen, ask) = (&seen, &ask);
            async move {
                // A release message woke us: the start of a hand-off.
                let woken_at = matches!(woken, Woken::Message(_)).then(Instant::now);
                Ok(match self.attempt(true).await? {
                    Ok(guard) => {
                        if let Some(at) = woken_at {
                            crate::vocab::metrics::handoff(&spec.metrics_label, at.elapsed());
                        }
                        Tried::Done(guard)
                    }
                    Err(busy) => {
                        seen.announced.store(busy.announced, Ordering::Relaxed);
                        seen.gave_back.store(busy.gave_back, Ordering::Relaxed);
                        // The busy lock's holder: no fingerprint here, so
                        // asked at the first busy attempt and after each
                        // release lost (as a semaphore's waiter asks).
                        let channel = &spec.members[busy.index].keys.channel;
                        ask.ask_if_due(&spec.name, &woken, None, || {
                            spec.session.publish(channel, RELEASE_REQUESTED)
                        })
                        .await;
                        Tried::busy_for(busy.retry_in)
                    }
                })
            }
        })
        .await
    }
}

/// Subscribes to every lock's release channels, given up at `deadline`
/// (then, as without pub/sub, the wait polls).
async fn subscribe_until(spec: &MultiSpec, deadline: Option<Instant>) -> Option<Wakeups> {
    if deadline.is_some_and(|d| Instant::now() >= d) {
        // No time to wait: the loop attempts once and returns.
        return None;
    }
    let subscribing = spec.subscribe_all();
    let subscribed =
        crate::primitives::wait::waker::subscribe_by(&spec.session, deadline, subscribing).await;
    match subscribed {
        Ok(wakeups) => Some(wakeups),
        Err(e) => {
            tracing::warn!(lock = %String::from_utf8_lossy(&spec.name), error = %e, "pub/sub unavailable; polling with backoff");
            None
        }
    }
}

/// What a multi waiter's attempts tell its [`MultiWake`].
struct Seen {
    /// Whether the busy lock's holder will publish its release (else: poll it).
    announced: AtomicBool,
    /// Whether the last attempt gave back locks it had taken (back off).
    gave_back: AtomicBool,
}

/// A multi waiter's wake-ups: every lock's release channels (one
/// subscription each, one request), polling without pub/sub, the polling of
/// a holder whose release publishes nothing, and the backoff after locks
/// were taken and given back.
struct MultiWake<'a> {
    spec: &'a MultiSpec,
    seen: &'a Seen,
    wakeups: Option<Wakeups>,
    last_subscribe: Instant,
    poll: Backoff,
    foreign_poll: std::time::Duration,
    backoff: Backoff,
}

impl Wake for MultiWake<'_> {
    fn before_attempt(&mut self) {
        if let Some(w) = self.wakeups.as_mut() {
            w.reset();
        }
    }

    async fn sleep(&mut self, recheck_at: Option<Instant>, deadline: Option<Instant>) -> Woken {
        if self.wakeups.is_none() && self.last_subscribe.elapsed() >= RESUBSCRIBE_AFTER {
            self.wakeups = subscribe_until(self.spec, deadline).await;
            self.last_subscribe = Instant::now();
            if self.wakeups.is_some() {
                // Messages may have been missed while unsubscribed.
                return Woken::Recheck;
            }
        }
        let now = Instant::now();
        let mut wake_at = match (&self.wakeups, self.seen.announced.load(Ordering::Relaxed)) {
            // Woken by a release message, or at the holder's TTL.
            (Some(_), true) => now + RECHECK,
            // A holder whose release publishes nothing: poll it, capped.
            (Some(_), false) => {
                let every = jitter(self.foreign_poll);
                self.foreign_poll = (self.foreign_poll * 2).min(MAX_FOREIGN_POLL);
                now + every
            }
            (None, _) => now + self.poll.next_delay(),
        };
        for bound in [recheck_at, deadline].into_iter().flatten() {
            wake_at = wake_at.min(bound);
        }
        if self.seen.gave_back.load(Ordering::Relaxed) {
            // Messages that come meanwhile wait in the subscriptions.
            let pause = Instant::now() + self.backoff.next_delay();
            tokio::time::sleep_until(pause.min(wake_at).into()).await;
        } else {
            self.backoff.reset();
        }
        let timer = tokio::time::sleep_until(wake_at.into());
        let Some(wakeups) = self.wakeups.as_mut() else {
            timer.await;
            return Woken::Recheck;
        };
        let mut timer = std::pin::pin!(timer);
        loop {
            tokio::select! {
                event = wakeups.next() => match event {
                    // To a holder (wanted, asked to let go): frees nothing.
                    Event::Message(m) if not_a_release(&m.payload) => continue,
                    Event::Message(_) => break Woken::Message(Box::default()),
                    Event::Resubscribed => break Woken::Recheck,
                },
                _ = timer.as_mut() => break Woken::Recheck,
            }
        }
    }
}
