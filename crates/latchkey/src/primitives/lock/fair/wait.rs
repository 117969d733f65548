//! The waiting loop of a [fair](crate::Lock::fair) lock (layer 4): queue,
//! renew the lease, and own the lock when the hand-off message arrives. The
//! design and its bounds are in `mod.rs`. It runs the wait core
//! (`primitives/wait/`, `wait_for`: subscribe first, attempt, sleep; the one
//! failure policy; the one timeout) over [`FairWake`]; once the waiter is
//! queued, its process's renewal task (`renewer.rs`) renews its lease and
//! wakes it when it must look itself, and the hand-off message is the
//! answer itself.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::backend::fair::{entry, FairAttempt, FairMode};
use crate::primitives::lock::fair::renewer;
use crate::primitives::lock::fair::{handed_valid_until, still_valid, Leaving};
use crate::primitives::lock::guard::LockGuard;
use crate::primitives::lock::Lock;
use crate::primitives::wait::ask::Ask;
use crate::primitives::wait::{wait_for, Tried, Waiting, Wake, Woken};
use crate::transport::subscriber::{Event, Subscription, Topic, EVENT_BUFFER};
use crate::transport::waiter_groups::Membership;
use crate::vocab::error::{Error, Result};
use crate::vocab::protocol::RELEASE_REQUESTED;

/// What an event means to one waiter.
enum Heard {
    /// The lock was handed to us (the message has the fencing token).
    Mine,
    /// Something may have changed (a plain release, a reconnection): look.
    Look,
    /// Not for us (another waiter's hand-off).
    Nothing,
}

impl Lock {
    /// The slow path of [`Lock::acquire_until`] for a fair lock: the whole
    /// wait. Cancel safe: dropped, it leaves the queue in the background
    /// (see `Leaving`); timed out or failed, it leaves before returning.
    pub(crate) async fn fair_acquire_until(
        &self,
        deadline: Option<Instant>,
        started: Instant,
    ) -> Result<LockGuard> {
        let (session, lease) = self.fair_session()?;
        let spec = &self.inner;
        let Some(fair) = &spec.keys.fair else {
            return Err(Error::Internal("a fair lock without its queue keys".into()));
        };
        let timed_out = || crate::primitives::wait::timed_out(&spec.name, started);
        let handoff_ttl = spec.lease.ttl.min(lease);
        // Uncontended, one script and no subscription: try first, unless
        // this process already listens for this lock's hand-offs (another
        // of its waiters does), when queueing at once saves that script.
        let listening = session.subscriber_if_started().is_some_and(|s| {
            let id = s.new_waiter_id();
            s.is_confirmed(&Topic::Channel(handoff_channel(&fair.handoff_prefix, &id)))
        });
        if !listening {
            match self.fair_try_once().await {
                Ok(Some(guard)) => return Ok(guard),
                Ok(None) => {}
                Err(e) if e.is_transient() => {}
                Err(e) => return Err(e),
            }
        }
        let token = spec.backend.new_token()?;
        let subscriber = session.subscriber();
        let id = subscriber.new_waiter_id();
        // The same for every id of this subscriber.
        let handoff_channel = handoff_channel(&fair.handoff_prefix, &id);
        let me = entry(&id, handoff_ttl, spec.lease.fenced, &token);

        // Subscribed before queueing, so that no hand-off can come unheard;
        // a subscriber that is slow to answer must not carry us past the
        // deadline: then the lease renewals find the hand-off instead.
        // The hand-off channel is this process's: keyed by our id, so a
        // hand-off wakes the waiter it names, not every waiter here.
        let topics = vec![
            (
                Topic::Channel(handoff_channel.clone()),
                EVENT_BUFFER,
                Some(id.as_bytes().to_vec()),
            ),
            (
                Topic::Channel(spec.keys.channel.clone()),
                EVENT_BUFFER,
                None,
            ),
        ];
        let subscribing = subscriber.subscribe_keyed(topics);
        let subscribed = match deadline {
            Some(d) => tokio::time::timeout_at(d.into(), subscribing)
                .await
                .unwrap_or_else(|_| Err(timed_out())),
            None => subscribing.await,
        };
        let subscriptions = match subscribed {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(lock = %spec.display_name(), error = %e, "pub/sub unavailable; a fair waiter finds its turn by the renewals of its lease");
                Vec::new()
            }
        };

        let leaving = Leaving::new(spec, token.clone(), me.clone());
        let renew_every = lease / 3;
        // What the attempts change as they go; never locked across an await.
        let keyed_as = id.clone();
        let state = Mutex::new(FairState {
            id,
            me,
            leaving,
            // `Renew` once a reply showed the entry queued: from then on, an
            // entry that is gone means a hand-off (or a drop) this waiter
            // missed.
            mode: FairMode::Queue,
            // When a reply last proved that the lock was not ours yet: a
            // hand-off came after it (see `handed_valid_until`).
            not_ours_since: Instant::now(),
            membership: None,
        });
        let wake = FairWake {
            subscriptions,
            keyed_as,
            handoff_channel: &handoff_channel,
            state: &state,
            fenced: spec.lease.fenced,
        };
        // The wait core's loop (`primitives/wait/`); the attempt is also the
        // lease's renewal, and a hand-off message is the answer itself.
        // Made `with_asking`: asks the holder once, at the first busy
        // attempt (`primitives/wait/ask.rs`; hand-offs to others are not
        // heard, so no later holder is known).
        let ask = Ask::new(spec.lease.asking);
        let mut waiting = Waiting::new(&spec.name, started, deadline, wake);
        let waited = wait_for(&mut waiting, |woken| {
            let (state, token, ask) = (&state, &token, &ask);
            async move {
                if let Woken::Message(handed) = woken {
                    let mut s = lock(state);
                    let fencing_token = handoff_fence(&handed, &s.id, spec.lease.fenced).flatten();
                    // The latest proof that it was not ours yet: our last
                    // attempt, or a renewal that found us still queued.
                    let renewed = s.membership.as_ref().and_then(Membership::queued_at);
                    let since = renewed.map_or(s.not_ours_since, |r| r.max(s.not_ours_since));
                    let valid_until = handed_valid_until(since, handoff_ttl);
                    // Heard too late (this process was stopped while the
                    // hand-off's TTL ran out): the lock may be the next
                    // waiter's by now. Ask Redis: still ours (`Handed`, with
                    // a deadline from that request), or queue again.
                    if still_valid(valid_until) {
                        s.leaving.disarm();
                        let guard =
                            LockGuard::new(spec.clone(), token.clone(), fencing_token, valid_until);
                        guard.extend_after_handoff(lease);
                        return Ok(Tried::Done(guard));
                    }
                }
                let (me, mode) = {
                    let s = lock(state);
                    (s.me.clone(), s.mode)
                };
                let sent = Instant::now();
                let attempt = match crate::backend::single::Single(session)
                    .fair_attempt(&spec.keys, &me, token, spec.lease.ttl, spec.lease.fenced, mode, lease)
                    .await
                {
                    Ok(attempt) => attempt,
                    Err(e) => {
                        // The request may have queued us unseen: renew only
                        // from now on, so that an entry gone meanwhile (handed
                        // the lock while we did not hear, or dropped) is queued
                        // again under a new id, never under this one, which a
                        // late hand-off message may still name.
                        lock(state).mode = FairMode::Renew;
                        return Err(e);
                    }
                };
                let handed = matches!(attempt, FairAttempt::Ours { handed: true, .. });
                if matches!(attempt, FairAttempt::Busy { .. }) {
                    ask.ask_if_due(&spec.name, &Woken::Recheck, None, || {
                        spec.backend.publish(&spec.keys, RELEASE_REQUESTED)
                    })
                    .await;
                }
                let mut s = lock(state);
                Ok(match attempt {
                    // Ours, but this process was held up (SIGSTOP, a starved
                    // thread) past what the reply proves: ask again (see
                    // `still_valid`). Still armed: a cancel now releases it.
                    FairAttempt::Ours { valid_until, .. }
                        if !still_valid(valid_until) =>
                    {
                        Tried::Busy {
                            recheck_at: Some(Instant::now()),
                        }
                    }
                    FairAttempt::Ours {
 fencing_token,
 valid_until,
 ..
 } => {
                        s.leaving.disarm();
                        s.membership = None;
                        let token = token.clone();
                        let guard = LockGuard::new(spec.clone(), token, fencing_token, valid_until);
                        // Handed on by a release: its TTL is the hand-off's
                        // until extended (see `extend_at`).
                        if handed {
                            guard.extend_after_handoff(lease);
                        }
                        Tried::Done(guard)
                    }
                    // Our entry is gone: handed the lock while this process
                    // was held up (the hand-off ran out since), or dropped as
                    // dead. Queue again under a new id, so that the old
                    // hand-off's message, if it is still on its way, is not
                    // ours.
                    FairAttempt::Busy { queued: false, .. } if mode == FairMode::Renew => {
                        tracing::warn!(lock = %spec.display_name(), "a fair waiter lost its place (held up past its lease or a hand-off); queueing again");
                        s.membership = None;
                        s.id = subscriber.new_waiter_id();
                        s.me = entry(&s.id, handoff_ttl, spec.lease.fenced, token);
                        let me = s.me.clone();
                        s.leaving.set_entry(me);
                        s.mode = FairMode::Queue;
                        Tried::Busy {
                            recheck_at: Some(Instant::now()),
                        }
                    }
                    FairAttempt::Busy { retry_in, queued } => {
                        s.not_ours_since = sent;
                        // A look at the holder's TTL (a holder that died
                        // without releasing: the head takes the lock).
                        let look_by = retry_in.map(|left| Instant::now() + left + Duration::from_millis(1));
                        if !queued {
                            // A first attempt that could not queue (never
                            // in mode `wait`): look again as it said.
                            return Ok(Tried::Busy { recheck_at: look_by.or(Some(sent + renew_every)) });
                        }
                        s.mode = FairMode::Renew;
                        // Queued: this process's renewal task for the lock
                        // renews the lease and looks at the lock from now
                        // on, and wakes us when we must look ourselves.
                        match &s.membership {
                            Some(m) if m.entry() == s.me && !m.ended() => m.look_by(look_by),
                            _ => {
                                let me = s.me.clone();
                                s.membership = Some(renewer::join(session, &spec.keys, lease, &me, look_by));
                            }
                        }
                        Tried::Busy { recheck_at: None }
                    }
                })
            }
        })
        .await;
        drop(waiting);
        match waited {
            Ok(guard) => Ok(guard),
            // Timed out or failed: leave the queue before returning (handing
            // on a lock handed to us in that instant).
            Err(e) => {
                let mut leaving = state
                    .into_inner()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .leaving;
                leaving.leave().await;
                Err(e)
            }
        }
    }
}

/// What a fair waiter's attempts change as they go.
struct FairState {
    /// This waiter's id (a new one when it queues again).
    id: String,
    /// Its queue entry.
    me: String,
    leaving: Leaving,
    mode: FairMode,
    not_ours_since: Instant,
    /// Our place in this process's renewal of the lock's waiters, once
    /// queued (`renewer.rs`).
    membership: Option<Membership>,
}

/// The state, locked for a moment (never across an await); a poisoned
/// lock (a panic elsewhere) still holds a usable state.
fn lock(state: &Mutex<FairState>) -> std::sync::MutexGuard<'_, FairState> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A fair waiter's wake-ups: its hand-off channel (only a hand-off to it
/// ends the sleep, others' are skipped) and the lock's release channels.
struct FairWake<'a> {
    /// The hand-off channel's (keyed), then the release channel's.
    subscriptions: Vec<Subscription>,
    /// The id the hand-off subscription is keyed by.
    keyed_as: String,
    handoff_channel: &'a [u8],
    state: &'a Mutex<FairState>,
    fenced: bool,
}

impl Wake for FairWake<'_> {
    fn before_attempt(&mut self) {
        for subscription in &mut self.subscriptions {
            subscription.skip_pending();
        }
        // Queued again under a new id: keyed by it before the attempt that
        // queues it, so that no hand-off to it comes unheard.
        let id = lock(self.state).id.clone();
        if id != self.keyed_as {
            if let Some(handoffs) = self.subscriptions.first_mut() {
                handoffs.set_key(id.as_bytes());
            }
            self.keyed_as = id;
        }
    }

    async fn sleep(&mut self, recheck_at: Option<Instant>, deadline: Option<Instant>) -> Woken {
        let mut wake_at = recheck_at;
        if let Some(d) = deadline {
            wake_at = Some(wake_at.map_or(d, |at| at.min(d)));
        }
        // The renewal task wakes us when we must look ourselves.
        let told = lock(self.state).membership.as_ref().map(|m| m.wake.clone());
        // Sleep until the next look; events that are not ours do not end it.
        loop {
            let timer = async {
                match wake_at {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            let told = async {
                match &told {
                    Some(wake) => wake.notified().await,
                    None => std::future::pending().await,
                }
            };
            let event = tokio::select! {
                event = next_event(&mut self.subscriptions) => event,
                _ = timer => return Woken::Recheck,
                _ = told => return Woken::Recheck,
            };
            let id = lock(self.state).id.clone();
            match classify(&event, self.handoff_channel, &id, self.fenced) {
                Heard::Nothing => continue,
                Heard::Look => return Woken::Recheck,
                Heard::Mine => match event {
                    Event::Message(published) => return Woken::Message(published.payload.clone()),
                    Event::Resubscribed => return Woken::Recheck,
                },
            }
        }
    }
}

/// The hand-off channel of the subscriber that made waiter id `id`.
fn handoff_channel(prefix: &[u8], id: &str) -> Vec<u8> {
    [prefix, &id.as_bytes()[..16]].concat()
}

/// The next event of any subscription; never, without subscriptions.
async fn next_event(subscriptions: &mut [Subscription]) -> Event {
    if subscriptions.is_empty() {
        return std::future::pending().await;
    }
    let events = subscriptions.iter_mut().map(|s| Box::pin(s.recv()));
    let (event, _, _) = futures_util::future::select_all(events).await;
    event
}

fn classify(event: &Event, handoff_channel: &[u8], id: &str, fenced: bool) -> Heard {
    match event {
        Event::Message(published) if *published.channel == *handoff_channel => {
            match handoff_fence(&published.payload, id, fenced) {
                Some(_) => Heard::Mine,
                // Not a hand-off message we understand: look in Redis.
                None if is_for(&published.payload, id) => Heard::Look,
                // Another waiter's: not ours.
                None => Heard::Nothing,
            }
        }
        // The lock was freed by a plain release (nobody live was queued, or
        // a barging holder): the head takes it now.
        Event::Message(_) => Heard::Look,
        Event::Resubscribed => Heard::Look,
    }
}

/// Whether a hand-off message `'<32 hex id>:<fence>'` names waiter `id`.
fn is_for(payload: &[u8], id: &str) -> bool {
    payload
        .split_at_checked(id.len())
        .is_some_and(|(to, _)| to == id.as_bytes())
}

/// The fencing token of a hand-off message to waiter `id`
/// (`Some(None)` without fencing); `None` when the message is not a
/// hand-off to `id` we understand.
fn handoff_fence(payload: &[u8], id: &str, fenced: bool) -> Option<Option<u64>> {
    let (to, rest) = payload.split_at_checked(id.len())?;
    if to != id.as_bytes() {
        return None;
    }
    let fence = rest
        .strip_prefix(b":")
        .and_then(|f| std::str::from_utf8(f).ok())
        .and_then(|f| f.parse::<i64>().ok())?;
    Some(match fenced {
        true => u64::try_from(fence).ok().filter(|&f| f > 0),
        false => None,
    })
}
