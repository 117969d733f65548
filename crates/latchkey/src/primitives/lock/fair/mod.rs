//! Fair locks (layer 4): [`Lock::fair`], waiters served in arrival order
//! across processes, the lock handed directly to the next waiter.
//!
//! # How it works
//! A fair lock keeps a queue in Redis beside the lock key, under the same
//! hash tag (`docs/protocol.md`, "Fair locks"): a list of waiter entries in
//! arrival order, a sorted set of their own leases and one of the waiting
//! processes' records (an entry is live while its own lease runs and its
//! process's record has not run out: `scripts/shared/live.lua`). A waiter subscribes to
//! its process's hand-off channel for the lock, then runs
//! `fair_acquire.lua`: the lock is taken at once when it is free and nobody
//! live waits (the same result as a barging acquire), otherwise the waiter
//! is queued with a lease (default [`DEFAULT_WAITER_LEASE`]).
//!
//! The holder's release (`fair_release.lua`) drops dead entries (lease run
//! out) from the head of the queue and hands the lock to the first live one
//! **in the same script**: the lock key then holds that waiter's token (and
//! its fencing token is issued there, for a lock made
//! [`with_fencing`](Lock::with_fencing)), and the waiter is told on its
//! channel. The waiter owns the lock when the message arrives: no second
//! round trip. Its guard works as any other (watchdog, `lost()`, fencing).
//!
//! # Bounds
//! * The process's record is renewed every third of the waiter lease, for
//!   all the waiters of this process on the lock at once (`renewer.rs`: one
//!   `fair_renew.lua` per process per lock, not one script per waiter);
//!   each entry's own lease (15 waiter leases) only when a third of it has
//!   run, or to prove the entry still queued (the first few, and all of
//!   them when a hand-off to this process began). That task also
//!   looks at the lock: an entry gone (a hand-off whose message was lost,
//!   or an entry dropped as dead) wakes its waiter, which looks itself;
//!   a lock free with one of ours at the head (its holder died without
//!   releasing) wakes that waiter, which takes it; and it looks again at
//!   the holder's TTL. A waiter also looks on a `released` message and
//!   when the subscriber reconnects.
//! * A hand-off sets the key's TTL to the smaller of the lock's TTL and the
//!   lease; the new holder extends it to the lock's TTL in the background a
//!   third of a lease before that runs out (the guard is usable at once,
//!   its [`deadline`](crate::LockGuard::deadline) is the hand-off's until
//!   then, and a hold released sooner costs no extension). So
//!   a waiter whose process died while it was queued delays the queue by at
//!   most the lease (its entry is skipped once the process's record ran
//!   out; one that stopped without leaving while its process lives on, by
//!   the hand-off TTL when it reaches the head), and one that died just
//!   as the lock was handed to it by at most the lease too (the key expires);
//!   the next waiter notices within a third of a lease more.
//! * A hold is returned only with a deadline still ahead that a request
//!   proved (see [`still_valid`]). A waiter held up (stopped, starved)
//!   while the lock was handed to it and whose hand-off ran out meanwhile
//!   does not return the stale hand-off: its next renewal (mode `renew`)
//!   finds its entry gone and it queues again, at the tail, under a new id,
//!   so that the old hand-off's message, if still on its way, is not ours.
//! * A hand-off keeps the holder's `+w` mark: a plain (barging) waiter of
//!   the same name, which is not in the queue, is woken by the release that
//!   finally frees the lock, not at the TTL it read.
//!
//! # Trade-off
//! See [`Lock::fair`], "Barging or fair", for the figures and why the
//! default stays barging.

pub(crate) mod renewer;
pub(crate) mod wait;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::fair::{FairAttempt, FairMode};
use crate::backend::Backend;
use crate::primitives::lock::guard::LockGuard;
use crate::primitives::lock::spec::LockSpec;
use crate::primitives::lock::Lock;
use crate::transport::session::Session;
use crate::vocab::error::{Error, Result};

/// How long a fair lock's waiters keep their places in the queue without
/// their process renewing them, unless [`Lock::fair_with_lease`] says
/// otherwise: 2 s. The client renews its process's record on the lock
/// every third of that while any of its waiters waits (one short script
/// per process per lock, whatever the number of waiters; each entry's own
/// lease, 15 times this, is renewed every 5 of these). A process that dies
/// delays the queue by at most about this long; a shorter lease costs a
/// renewal script more often per waiting process.
pub const DEFAULT_WAITER_LEASE: Duration = Duration::from_secs(2);

/// The shortest waiter lease accepted: a renewal must have time to answer.
pub const MIN_WAITER_LEASE: Duration = Duration::from_millis(60);

impl Lock {
    /// Makes the lock fair, with the [default waiter lease](DEFAULT_WAITER_LEASE):
    /// waiters are served in arrival order, across processes, and a release
    /// hands the lock directly to the next live waiter (see
    /// [`Lock::fair_with_lease`]).
    ///
    /// Fails with [`Error::Unsupported`] on a [`Redlock`](crate::Redlock):
    /// a queue is one server's state, and N independent queues can order
    /// waiters differently, so a fair Redlock would need its own consensus
    /// (see `docs/redlock.md`).
    ///
    /// # Barging or fair
    /// A lock is barging by default: a release frees it and wakes one
    /// waiting process (the first registered that still listens), whose
    /// waiter races any newcomer and the releaser's own next waiter for
    /// it. A fair lock queues its waiters in Redis and its release hands
    /// the lock to the head of the queue in the same script, telling it
    /// with one message.
    ///
    /// Both cost a hand-off a few Redis commands whatever the number of
    /// waiting processes (fair about two, barging about three). Fair wins
    /// where no waiter may starve (the longest wait stays a small multiple
    /// of the average; a barging releaser's process often takes the lock
    /// back). Barging wins
    /// uncontended (a bare `SET NX` instead of a script), has a lower
    /// average wait (a releaser's process often takes the lock back without
    /// a hand-off), works on a Redlock and beside other libraries' locks on
    /// the same key, and adds no keys. Contention inside one process is
    /// served in arrival order either way (the local queue). So the default
    /// stays barging; make a lock fair when several processes contend for
    /// it continually or when no waiter may starve. The measured figures
    /// (commands and hand-offs per second by number of processes, hand-off
    /// gaps, uncontended cost) are in the repository's `bench/RESULTS.md`,
    /// "Fair lock: direct hand-off across processes" (`latchkey-bench fair`).
    pub fn fair(self) -> Result<Self> {
        self.fair_with_lease(DEFAULT_WAITER_LEASE)
    }

    /// Makes the lock fair; a waiter holds its place in the queue for
    /// `lease` without its process renewing it (its client renews every
    /// `lease / 3`). A process that dies (`kill -9`, a lost host) delays the
    /// queue by at most about `lease`; see the `fair` module docs in the repository
    /// (`crates/latchkey/src/primitives/lock/fair/mod.rs`) for the exact bounds.
    ///
    /// Arrival order holds while every waiter renews in time: a stall of
    /// about two thirds of `lease` or more (Redis stopped or paused, the
    /// waiter's process stopped) can drop a waiter's entry as dead, and it
    /// queues again at the tail. Choose `lease` at least 1.5 × the longest
    /// stall the order must survive. A Redis restart without persistence
    /// forgets the queue: the order is lost, mutual exclusion is not.
    ///
    /// [`try_acquire`](Lock::try_acquire) of a fair lock takes it only when
    /// it is free and nobody waits; [`acquire`](Lock::acquire) queues. A
    /// release by the holder hands the lock on in the same script. Barging
    /// acquisitions of the same name (a lock made without `fair`) still
    /// exclude fair ones, but they do not queue: mixing is safe and live
    /// (each kind's waiters are woken by the other's releases), not fair.
    ///
    /// Errors: [`Error::Unsupported`] on a Redlock; [`Error::InvalidInput`]
    /// for a lease below [`MIN_WAITER_LEASE`] or above
    /// [`MAX_TTL`](crate::limits::MAX_TTL).
    pub fn fair_with_lease(mut self, lease: Duration) -> Result<Self> {
        if matches!(self.inner.backend, Backend::Redlock(_)) {
            return Err(Error::Unsupported(
                "a fair lock on a Redlock: N independent queues can order waiters differently",
            ));
        }
        if !(MIN_WAITER_LEASE..=crate::vocab::names::MAX_TTL).contains(&lease) {
            return Err(Error::InvalidInput(format!(
                "waiter lease {lease:?}: it must be between {MIN_WAITER_LEASE:?} and 24h"
            )));
        }
        let inner = Arc::make_mut(&mut self.inner);
        inner.keys = Arc::new(inner.keys.with_fair());
        inner.fair_lease = Some(lease);
        inner.metrics_label = crate::vocab::metrics::LockLabel::new(
            inner.backend.metrics_labels(),
            crate::vocab::kind::Kind::FairLock,
            &inner.name,
        );
        Ok(self)
    }

    /// Whether the lock is [fair](Lock::fair).
    pub fn is_fair(&self) -> bool {
        self.inner.fair_lease.is_some()
    }

    /// The single server of a fair lock (only those can be fair).
    pub(crate) fn fair_session(&self) -> Result<(&Session, Duration)> {
        match (&self.inner.backend, self.inner.fair_lease) {
            (Backend::Single(session), Some(lease)) => Ok((session, lease)),
            _ => Err(Error::Unsupported("a fair lock on a Redlock")),
        }
    }

    /// `try_acquire` of a fair lock: take it only if it is free and nobody
    /// live waits. Cancel safe as `try_acquire` (a lock taken by a request
    /// whose reply was never read is released, handed on, in the background).
    pub(crate) async fn fair_try_once(&self) -> Result<Option<LockGuard>> {
        let (session, lease) = self.fair_session()?;
        let token = self.inner.backend.new_token()?;
        let spec = &self.inner;
        let mut pending = Leaving::new(spec, token.clone(), String::new());
        loop {
            // A failed request may still have taken the lock: the drop
            // releases it.
            match crate::backend::single::Single(session)
                .fair_attempt(
                    &spec.keys,
                    "",
                    &token,
                    spec.lease.ttl,
                    spec.lease.fenced,
                    FairMode::Try,
                    lease,
                )
                .await?
            {
                // Taken, but the reply came (or was read) too late to prove
                // anything now: ask again, which finds it ours (handed,
                // with a fresh deadline) or gone (see `still_valid`).
                FairAttempt::Ours { valid_until, .. } if !still_valid(valid_until) => {}
                FairAttempt::Ours {
                    fencing_token,
                    valid_until,
                    ..
                } => {
                    pending.disarm();
                    return Ok(Some(LockGuard::new(
                        spec.clone(),
                        token,
                        fencing_token,
                        valid_until,
                    )));
                }
                FairAttempt::Busy { .. } => {
                    pending.disarm();
                    return Ok(None);
                }
            }
        }
    }
}

/// Armed while a fair attempt or wait may have queued us or been handed the
/// lock without our knowing: dropped armed (the future was cancelled), it
/// leaves the queue in the background, releasing (handing on) a lock handed
/// to us in that instant. [`Client::flush`](crate::Client::flush) waits for it.
pub(crate) struct Leaving {
    spec: Arc<LockSpec>,
    token: String,
    /// Our queue entry; empty for a try, which never queues.
    entry: String,
    armed: bool,
}

impl Leaving {
    pub(crate) fn new(spec: &Arc<LockSpec>, token: String, entry: String) -> Leaving {
        Leaving {
            spec: spec.clone(),
            token,
            entry,
            armed: true,
        }
    }

    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }

    /// The waiter queued again under a new entry (the old one is gone).
    pub(crate) fn set_entry(&mut self, entry: String) {
        self.entry = entry;
    }

    /// Leaves now (a wait that timed out or failed); cancel safe: dropped
    /// before the reply, it leaves in the background.
    pub(crate) async fn leave(&mut self) {
        if let Backend::Single(session) = &self.spec.backend {
            let entry = Some(self.entry.as_str()).filter(|e| !e.is_empty());
            match crate::backend::single::Single(session)
                .fair_release(&self.spec.keys, &self.token, entry)
                .await
            {
                Ok(outcome) => {
                    self.armed = false;
                    if outcome == crate::Ownership::Owned {
                        tracing::info!(lock = %self.spec.display_name(), "the lock was handed to a waiter that gave up; handed on");
                    }
                }
                Err(e) => {
                    // Our lease and a hand-off's TTL run out by themselves.
                    self.armed = false;
                    tracing::warn!(lock = %self.spec.display_name(), error = %e, "leaving the queue failed; the waiter lease runs out instead");
                }
            }
        }
    }
}

impl Drop for Leaving {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Backend::Single(session) = &self.spec.backend else {
            return;
        };
        let (queue, keys) = (session.clone(), self.spec.keys.clone());
        let (token, entry) = (
            std::mem::take(&mut self.token),
            std::mem::take(&mut self.entry),
        );
        // The one background clean-up of every primitive (tracked, so that
        // `Client::flush` waits for it; without a runtime, the waiter
        // lease and a hand-off's TTL run out by themselves).
        crate::primitives::shared::in_background(
            session,
            "a cancelled fair waiter leaves the queue (handing on a lock handed to it)",
            async move {
                let entry = Some(entry.as_str()).filter(|e| !e.is_empty());
                crate::backend::single::Single(&queue)
                    .fair_release(&keys, &token, entry)
                    .await
                    .map(|_| ())
            },
        );
    }
}

/// When a hold handed over at some instant after `not_ours_since` (a moment
/// a reply proved the lock was not ours yet) with the key's TTL set to
/// `handoff_ttl` is valid until, at the earliest.
pub(crate) fn handed_valid_until(not_ours_since: Instant, handoff_ttl: Duration) -> Instant {
    crate::vocab::names::valid_until(not_ours_since, handoff_ttl)
}

/// Whether a hold whose proven deadline is `valid_until` may be returned
/// now. A hold is returned only with a deadline computed from a request
/// whose send time this process knows; one already past when the wait would
/// return it (the process was stopped or starved between the proof and
/// now) is re-checked with a new request instead, which finds it still ours
/// (with a fresh deadline) or queues the waiter again.
pub(crate) fn still_valid(valid_until: Instant) -> bool {
    Instant::now() < valid_until
}
