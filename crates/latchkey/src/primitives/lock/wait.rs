//! The waiting loop of [`Lock::acquire_until`] (layer 4): what a waiter
//! does while the lock is busy. It runs the wait core (`primitives/wait/`,
//! `wait_for`: subscribe first, attempt, sleep until a wake-up or the
//! holder's TTL; one failure policy; one timeout) over the lock's own
//! wake-ups, [`LockWake`]: this process's local queue (a local release
//! wakes a waiter with no message at all) and the polling of a foreign
//! holder.
//!
//! # How waiting works
//! A waiter first tries once. If the lock is busy it queues behind the other
//! tasks of its client that wait for the same name (only the head of that
//! local queue talks to Redis), subscribes to the lock's release channel
//! and its process's wake channel through the client's shared subscriber,
//! tries again (registering its process among the lock's waiting
//! processes, so that a release wakes this process alone when its turn
//! comes: `docs/protocol.md`, "Waking one process"), and then sleeps until
//! a release message arrives *or* the holder's remaining TTL (returned by the
//! failed attempt) runs out, whichever comes first — so a holder that died
//! without releasing costs its waiters at most its TTL. Pub/sub is only a
//! hint: a missed message costs time, never safety. When pub/sub is
//! unavailable, waiters poll with jittered backoff (10 ms doubling to
//! 500 ms) and say so in a log line.
//!
//! A waiter behind a holder of its own client (a live guard of the same
//! client and name) needs no pub/sub at all: that guard's release wakes it
//! from the releasing task (`release.rs`, through the name's local slot),
//! so it neither subscribes nor marks the holder's token, and the release
//! publishes nothing. It does not even ask Redis while that guard lives
//! (the answer would be "busy"): it waits for the release, bounded by the
//! lock's TTL, then tries as a first try does. Contention between the
//! tasks of one process then costs Redis one `SET NX` per hand-off. An
//! attempt that finds the lock busy with no guard of its client left
//! subscribes, and looks again.
//!
//! A lock made [`with_asking`](Lock::with_asking) asks its holder to let go
//! from its attempts (`primitives/wait/ask.rs`): the acquire script names
//! the holder (a fingerprint), so each holder is asked once. Such a waiter
//! never waits as one behind a holder of its own client: it asks through
//! Redis like any other, and its attempts name whoever holds the lock.
//!
//! # A hold kept while idle
//! A holder made [`with_caching`](Lock::with_caching) keeps the lock while
//! idle and lets go when told the lock is wanted (`wanted` on its channel,
//! which the acquire script publishes when a waiter marks such a token). A
//! first try already sees such a holder (`SET … GET`, or the script's busy
//! reply): a waiter whose first try met a hold kept idle sends its marking
//! attempt while it subscribes, so the holder's release overlaps the
//! subscription instead of following it, and looks again once subscribed
//! (a release it was not yet subscribed for is found so). It does not wait
//! as one behind a holder of its own client either: a hold kept idle is
//! not released unless told.

use std::time::{Duration, Instant};

use std::sync::atomic::{AtomicBool, Ordering};

use crate::backend::Wakeups;
use crate::primitives::lock::guard::LockGuard;
use crate::primitives::lock::Lock;
use crate::primitives::wait::ask::Ask;
use crate::primitives::wait::waker::RESUBSCRIBE_AFTER;
use crate::primitives::wait::{wait_for, Tried, Waiting, Wake, Woken};
use crate::transport::subscriber::{jitter, Event};
use crate::vocab::error::Result;
use crate::vocab::protocol::RELEASE_REQUESTED;
use crate::vocab::retry::Backoff;

impl Lock {
    /// The slow path of [`Lock::acquire_until`]: the lock was busy.
    /// `releases`: [`LocalSlot::releases`](crate::transport::local_queues::LocalSlot::releases)
    /// before the first try; `kept_idle`: the first try met a hold kept
    /// while idle.
    pub(crate) async fn wait_and_acquire(
        &self,
        deadline: Option<Instant>,
        started: Instant,
        releases: usize,
        kept_idle: bool,
    ) -> Result<LockGuard> {
        let timed_out = || crate::primitives::wait::timed_out(&self.inner.name, started);
        let local = &self.inner.local;
        // Behind a holder of this client: no subscription (see the module
        // docs). So is a waiter whose first try met a guard of this client
        // that has let go since, or one about to be made (a first try in
        // flight, a waiter ahead of us): it looks again before it subscribes.
        // Not behind a hold kept idle (even by this client's cache): that
        // lets go only when told it is wanted.
        let behind_local = !self.inner.lease.asking
            && !kept_idle
            && (local.is_local_ahead() || local.releases() != releases);
        // Subscribe before queueing: the server-side subscription is shared,
        // so waiters taking turns do not SUBSCRIBE/UNSUBSCRIBE on every handoff.
        let mut wakeups = None;
        if kept_idle {
            // Mark it (which tells the idle holder) while we subscribe: its
            // release overlaps our SUBSCRIBE instead of following it (module
            // docs, "A hold kept while idle").
            let (subscribed, marked) =
                tokio::join!(self.subscribe_until(deadline), self.mark_kept_idle());
            if let Some(guard) = marked {
                return Ok(guard); // let go meanwhile, or by its idle time
            }
            wakeups = subscribed;
        } else if !behind_local {
            wakeups = self.subscribe_until(deadline).await;
        }
        let listening = !behind_local;
        let turn = local.turn();
        let _turn = match deadline {
            Some(d) => tokio::time::timeout_at(d.into(), turn)
                .await
                .map_err(|_| timed_out())?,
            None => turn.await,
        };
        if behind_local {
            if let Some(guard) = self.after_local_holder(deadline).await {
                return Ok(guard);
            }
        }

        // The wait core's loop (`primitives/wait/`), over the lock's own
        // wake-ups: its release channels and this client's releases.
        let shared = Shared {
            behind_local: AtomicBool::new(behind_local),
            announced: AtomicBool::new(true),
        };
        let wake = LockWake {
            lock: self,
            shared: &shared,
            wakeups,
            listening,
            last_subscribe: Instant::now(),
            releases_before: local.releases(),
            poll: Backoff::default(),
            foreign_poll: MIN_FOREIGN_POLL,
        };
        let ask = Ask::new(self.inner.lease.asking);
        let mut waiting = Waiting::new(&self.inner.name, started, deadline, wake);
        wait_for(&mut waiting, |woken| {
            let (shared, ask) = (&shared, &ask);
            async move {
                // A release notification woke us: the start of a handoff.
                // (Not a release request: it frees nothing.)
                let woken_at = match &woken {
                    Woken::Message(m) => **m != *RELEASE_REQUESTED,
                    Woken::Released => true,
                    Woken::Start | Woken::Recheck => false,
                }
                .then(Instant::now);
                let behind_local = shared.behind_local.load(Ordering::Relaxed);
                let releases_before_try = local.releases();
                Ok(match self.try_acquire_with_ttl(!behind_local).await? {
                    Ok(guard) => {
                        if let Some(woken_at) = woken_at {
                            crate::vocab::metrics::handoff(
                                &self.inner.metrics_label,
                                woken_at.elapsed(),
                            );
                        }
                        Tried::Done(guard)
                    }
                    // Refused while this client's guard was being released:
                    // the attempt may have run before that release (whose
                    // first request can fail with NOSCRIPT and be sent
                    // again), so it says nothing about another holder. Look
                    // again.
                    Err(_)
                        if behind_local
                            && !local.is_held()
                            && local.releases() != releases_before_try =>
                    {
                        Tried::Busy {
                            recheck_at: Some(Instant::now()),
                        }
                    }
                    // Held, but no longer by this client: listen to whoever
                    // holds it now (`LockWake` subscribes before the next
                    // look), and look again, marking it this time.
                    Err(_) if behind_local && !local.is_held() => {
                        shared.behind_local.store(false, Ordering::Relaxed);
                        Tried::Busy {
                            recheck_at: Some(Instant::now()),
                        }
                    }
                    Err(busy) => {
                        let announced = busy.announced || behind_local;
                        shared.announced.store(announced, Ordering::Relaxed);
                        let spec = &self.inner;
                        ask.ask_if_due(&spec.name, &woken, busy.holder, || {
                            spec.backend.publish(&spec.keys, RELEASE_REQUESTED)
                        })
                        .await;
                        Tried::busy_for(busy.retry_in)
                    }
                })
            }
        })
        .await
    }

    /// A waiter behind a guard of its own client: waits for that guard to
    /// let go (its release wakes us, `release.rs`) before asking Redis
    /// anything, then tries as a first try does (`SET NX`, the cheapest
    /// command that takes the lock). `None`: not ours yet, and the general
    /// loop takes over: the try found the lock busy with no guard of this
    /// client left, or the lock's TTL passed without a release (a guard
    /// that lost its lock without noticing), or an error, or the deadline.
    async fn after_local_holder(&self, deadline: Option<Instant>) -> Option<LockGuard> {
        let local = &self.inner.local;
        loop {
            let mut released = std::pin::pin!(local.released());
            released.as_mut().enable();
            // When a release woke us: the start of a handoff.
            let mut woken_at = None;
            if local.is_held() {
                let mut bound = Instant::now() + self.inner.lease.ttl;
                if let Some(d) = deadline {
                    bound = bound.min(d);
                }
                tokio::select! {
                    _ = released => woken_at = Some(Instant::now()),
                    _ = tokio::time::sleep_until(bound.into()) => return None,
                }
            }
            match self.try_acquire_once().await {
                Ok(Some(guard)) => {
                    if let Some(woken_at) = woken_at {
                        crate::vocab::metrics::handoff(
                            &self.inner.metrics_label,
                            woken_at.elapsed(),
                        );
                    }
                    return Some(guard);
                }
                // Overtaken by another guard of ours, or our try ran ahead
                // of the release that woke us: wait for the next release.
                Ok(None) if local.is_held() => continue,
                _ => return None,
            }
        }
    }

    /// A marking attempt sent before we listen, for a holder that keeps
    /// the lock while idle: marking its token tells it the lock is wanted
    /// (the acquire script publishes [`WANTED`](crate::vocab::protocol::WANTED)).
    /// The wake-up of a release we are not yet subscribed for may be
    /// missed; the attempt the wait makes once subscribed finds such a
    /// release. The lock, if this attempt took it; an error only costs
    /// time (that attempt marks again).
    ///
    /// # Cancel safety
    /// Dropped (the acquire was cancelled), a lock the attempt may have
    /// taken is released in the background (the attempt's pending guard);
    /// the mark it may have set only makes that holder's release publish.
    async fn mark_kept_idle(&self) -> Option<LockGuard> {
        match self.try_acquire_with_ttl(true).await {
            Ok(Ok(guard)) => Some(guard),
            Ok(Err(_)) => None,
            Err(e) => {
                tracing::debug!(lock = %String::from_utf8_lossy(&self.inner.name), error = %e, "could not tell an idle holder the lock is wanted");
                None
            }
        }
    }

    /// [`Self::subscribe_or_poll`], given up at `deadline` (a subscriber
    /// that is slow to answer must not carry us past it: then we poll).
    async fn subscribe_until(&self, deadline: Option<Instant>) -> Option<Wakeups> {
        let subscribing = self.subscribe_or_poll(None);
        match deadline {
            Some(d) => tokio::time::timeout_at(d.into(), subscribing)
                .await
                .unwrap_or(None),
            None => subscribing.await,
        }
    }

    async fn subscribe_or_poll(&self, previous: Option<&Option<Wakeups>>) -> Option<Wakeups> {
        match self.inner.backend.waiter_wakeups(&self.inner.keys).await {
            Ok(w) => {
                if previous.is_some() {
                    tracing::info!(lock = %String::from_utf8_lossy(&self.inner.name), "pub/sub is back; waiting for wake-ups again");
                }
                Some(w)
            }
            Err(e) => {
                if previous.is_none() {
                    tracing::warn!(lock = %String::from_utf8_lossy(&self.inner.name), error = %e, "pub/sub unavailable; falling back to polling with backoff");
                }
                None
            }
        }
    }
}

/// Polling a holder that will not announce its release: from this, doubling
/// up to [`MAX_FOREIGN_POLL`]; with the jitter (×0.5 to ×1.5) such a release
/// is found at most 1.5 × `MAX_FOREIGN_POLL` plus a round trip late
/// (`docs/protocol.md`, "Waiting", has the cost in commands).
pub(crate) const MIN_FOREIGN_POLL: Duration = Duration::from_millis(25);
pub(crate) const MAX_FOREIGN_POLL: Duration = Duration::from_millis(200);

/// What a lock waiter's attempts tell its [`LockWake`].
struct Shared {
    /// Behind a holder of this client: woken by its release, no
    /// subscription (see the module docs).
    behind_local: AtomicBool,
    /// Whether the holder's release will publish a wake-up (else: poll it).
    announced: AtomicBool,
}

/// A lock waiter's wake-ups: its release channels (one per Redlock
/// instance), this client's releases of the name (`LocalSlot::released`),
/// polling without pub/sub, and the polling of a holder whose release
/// publishes nothing.
struct LockWake<'a> {
    lock: &'a Lock,
    shared: &'a Shared,
    wakeups: Option<Wakeups>,
    /// Whether we subscribed for a holder of another client (once).
    listening: bool,
    last_subscribe: Instant,
    /// This client's releases of the name before the attempt: one during
    /// it wakes us at once.
    releases_before: usize,
    poll: Backoff,
    foreign_poll: Duration,
}

/// A message on a lock's channel for its holder (a waiter wants the lock,
/// or someone asks it to let go), not a release.
pub(crate) fn not_a_release(payload: &[u8]) -> bool {
    payload == crate::vocab::protocol::WANTED
        || payload == crate::vocab::protocol::RELEASE_REQUESTED
}

impl Wake for LockWake<'_> {
    fn before_attempt(&mut self) {
        if let Some(w) = self.wakeups.as_mut() {
            w.reset();
        }
        self.releases_before = self.lock.inner.local.releases();
    }

    async fn sleep(&mut self, recheck_at: Option<Instant>, deadline: Option<Instant>) -> Woken {
        let local = &self.lock.inner.local;
        let behind_local = self.shared.behind_local.load(Ordering::Relaxed);
        if !behind_local && !self.listening {
            // No longer behind a holder of ours: listen, then look again.
            self.listening = true;
            self.wakeups = self.lock.subscribe_until(deadline).await;
            self.last_subscribe = Instant::now();
            return Woken::Recheck;
        }
        let now = Instant::now();
        if !behind_local && self.wakeups.is_none() && now - self.last_subscribe >= RESUBSCRIBE_AFTER
        {
            self.wakeups = self.lock.subscribe_or_poll(Some(&self.wakeups)).await;
            self.last_subscribe = now;
        }
        let woken = behind_local || self.wakeups.is_some();
        let announced = self.shared.announced.load(Ordering::Relaxed);
        // With wake-ups, sleep until the holder's TTL runs out (a release
        // ends the sleep sooner). Without, poll.
        let mut wake_at = match (recheck_at, woken) {
            // A holder that will not announce its release (another
            // library's, or one a waiter could not mark): poll it, with a
            // cap, so its release is found soon after it happens.
            (Some(at), true) if !announced => {
                let every = jitter(self.foreign_poll);
                self.foreign_poll = (self.foreign_poll * 2).min(MAX_FOREIGN_POLL);
                at.min(Instant::now() + every)
            }
            (Some(at), true) => at,
            (Some(at), false) => at.min(Instant::now() + self.poll.next_delay()),
            (None, _) => Instant::now() + self.poll.next_delay(),
        };
        if let Some(d) = deadline {
            wake_at = wake_at.min(d);
        }
        // Listening for a local release from before the attempt: one
        // between the attempt and this sleep is not missed.
        let released = local.released();
        let mut released = std::pin::pin!(released);
        released.as_mut().enable();
        if local.releases() != self.releases_before {
            return Woken::Released;
        }
        let timer = tokio::time::sleep_until(wake_at.into());
        let mut timer = std::pin::pin!(timer);
        match self.wakeups.as_mut() {
            Some(w) if !behind_local => loop {
                tokio::select! {
                    event = w.next() => match event {
                        Event::Resubscribed => break Woken::Recheck,
                        // Told to a holder, not a release: the lock is
                        // still held, an attempt would only find it so.
                        Event::Message(m) if not_a_release(&m.payload) => continue,
                        Event::Message(_) => break Woken::Message(Box::default()),
                    },
                    _ = released.as_mut() => break Woken::Released,
                    _ = timer.as_mut() => break Woken::Recheck,
                }
            },
            _ => {
                tokio::select! {
                    _ = released => Woken::Released,
                    _ = timer => Woken::Recheck,
                }
            }
        }
    }
}
