//! The waiting loop of a [fair](crate::Lock::fair) lock (layer 4): queue,
//! renew the lease, and own the lock when the hand-off message arrives. The
//! design and its bounds are in `mod.rs`. It follows the wait core
//! (`primitives/wait/`: subscribe first, attempt, sleep; the one failure
//! policy, [`Retry`]; the one timeout, `wait::timed_out`); the attempt is
//! also the lease renewal, and the hand-off message is the answer itself.

use std::time::{Duration, Instant};

use crate::backend::fair::{entry, FairAttempt, FairMode};
use crate::primitives::lock::fair::{handed_valid_until, still_valid, Leaving};
use crate::primitives::lock::guard::LockGuard;
use crate::primitives::lock::Lock;
use crate::transport::subscriber::{Event, Subscription, Topic, EVENT_BUFFER};
use crate::vocab::error::{Error, Result};
use crate::vocab::retry::Retry;

/// What an event means to one waiter.
enum Wake {
    /// The lock was handed to us, with this fencing token (if any).
    Mine(Option<u64>),
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
        let handoff_ttl = spec.ttl.min(lease);
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
        let mut id = subscriber.new_waiter_id();
        // The same for every id of this subscriber.
        let handoff_channel = handoff_channel(&fair.handoff_prefix, &id);
        let mut me = entry(&id, handoff_ttl, spec.fenced, &token);

        // Subscribed before queueing, so that no hand-off can come unheard;
        // a subscriber that is slow to answer must not carry us past the
        // deadline: then the lease renewals find the hand-off instead.
        let mut topics = vec![(Topic::Channel(handoff_channel.clone()), EVENT_BUFFER)];
        for channel in spec.keys.channels() {
            topics.push((Topic::Channel(channel.to_vec()), EVENT_BUFFER));
        }
        let subscribing = subscriber.subscribe_many(topics);
        let subscribed = match deadline {
            Some(d) => tokio::time::timeout_at(d.into(), subscribing)
                .await
                .unwrap_or_else(|_| Err(timed_out())),
            None => subscribing.await,
        };
        let mut subscriptions = match subscribed {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(lock = %spec.display_name(), error = %e, "pub/sub unavailable; a fair waiter finds its turn by its lease renewals");
                Vec::new()
            }
        };

        let mut leaving = Leaving::new(spec, token.clone(), me.clone());
        let renew_every = lease / 3;
        // When a reply last proved that the lock was not ours yet: a hand-off
        // came after it (see `handed_valid_until`).
        let mut not_ours_since = Instant::now();
        let mut retry = Retry::until(deadline);
        let what = spec.display_name();
        // `Renew` once a reply showed the entry queued: from then on, an
        // entry that is gone means a hand-off (or a drop) this waiter missed.
        let mut mode = FairMode::Queue;
        loop {
            for subscription in &mut subscriptions {
                subscription.skip_pending();
            }
            let sent = Instant::now();
            let attempt = session
                .fair_attempt(&spec.keys, &me, &token, spec.ttl, spec.fenced, mode, lease)
                .await;
            let retry_in = match attempt {
                // Ours, but this process was held up (SIGSTOP, a starved
                // thread) past what the reply proves: ask again (see
                // `still_valid`). Still armed: a cancel now releases it.
                Ok(
                    FairAttempt::Taken { valid_until, .. }
                    | FairAttempt::Handed { valid_until, .. },
                ) if !still_valid(valid_until) => continue,
                Ok(FairAttempt::Taken {
                    fencing_token,
                    valid_until,
                }) => {
                    leaving.disarm();
                    return Ok(LockGuard::new(
                        spec.clone(),
                        token,
                        fencing_token,
                        valid_until,
                    ));
                }
                Ok(FairAttempt::Handed {
                    fencing_token,
                    valid_until,
                }) => {
                    leaving.disarm();
                    let guard = LockGuard::new(spec.clone(), token, fencing_token, valid_until);
                    guard.extend_after_handoff(extend_at(valid_until, lease));
                    return Ok(guard);
                }
                // Our entry is gone: handed the lock while this process was
                // held up (the hand-off ran out since), or dropped as dead.
                // Queue again under a new id, so that the old hand-off's
                // message, if it is still on its way, is not ours.
                Ok(FairAttempt::Busy { queued: false, .. }) if mode == FairMode::Renew => {
                    tracing::warn!(lock = %spec.display_name(), "a fair waiter lost its place (held up past its lease or a hand-off); queueing again");
                    id = subscriber.new_waiter_id();
                    me = entry(&id, handoff_ttl, spec.fenced, &token);
                    leaving.set_entry(me.clone());
                    mode = FairMode::Queue;
                    continue;
                }
                Ok(FairAttempt::Busy { retry_in, queued }) => {
                    if queued {
                        mode = FairMode::Renew;
                    }
                    not_ours_since = sent;
                    retry.answered(&what);
                    retry_in
                }
                // The one failure policy (`vocab/retry.rs`): transient errors are
                // retried until the deadline, and then returned.
                Err(e) => match retry.failed(e, &what) {
                    Ok(delay) => Some(delay),
                    Err(e) => {
                        leaving.leave().await;
                        return Err(e);
                    }
                },
            };
            if deadline.is_some_and(|d| Instant::now() >= d) {
                leaving.leave().await;
                return Err(timed_out());
            }
            let mut wake_at = sent + renew_every;
            if let Some(left) = retry_in {
                wake_at = wake_at.min(Instant::now() + left + Duration::from_millis(1));
            }
            if let Some(d) = deadline {
                wake_at = wake_at.min(d);
            }
            // Sleep until the next look; events that are not ours do not end it.
            loop {
                let wake = tokio::select! {
                    event = next_event(&mut subscriptions) => {
                        classify(event, &handoff_channel, &id, spec.fenced)
                    }
                    _ = tokio::time::sleep_until(wake_at.into()) => Wake::Look,
                };
                match wake {
                    Wake::Nothing => continue,
                    Wake::Look => break,
                    Wake::Mine(fencing_token) => {
                        let valid_until = handed_valid_until(not_ours_since, handoff_ttl);
                        // Heard too late (this process was stopped while the
                        // hand-off's TTL ran out): the lock may be the next
                        // waiter's by now. Ask Redis: still ours (`Handed`,
                        // with a deadline from that request), or queue again.
                        if !still_valid(valid_until) {
                            break;
                        }
                        leaving.disarm();
                        let guard = LockGuard::new(spec.clone(), token, fencing_token, valid_until);
                        guard.extend_after_handoff(extend_at(valid_until, lease));
                        return Ok(guard);
                    }
                }
            }
        }
    }
}

/// The hand-off channel of the subscriber that made waiter id `id`.
fn handoff_channel(prefix: &[u8], id: &str) -> Vec<u8> {
    [prefix, &id.as_bytes()[..16]].concat()
}

/// When a handed-over hold is extended to its TTL: a third of a lease
/// before its hand-off deadline (time for retries), so that a short hold
/// is released before and costs no extension.
fn extend_at(valid_until: Instant, lease: Duration) -> Instant {
    valid_until
        .checked_sub(lease / 3)
        .map_or_else(Instant::now, |at| at.max(Instant::now()))
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

fn classify(event: Event, handoff_channel: &[u8], id: &str, fenced: bool) -> Wake {
    match event {
        Event::Message(published) if *published.channel == *handoff_channel => {
            // '<32 hex id>:<fence>'; another waiter's: not ours.
            let payload = &published.payload[..];
            match payload.split_at_checked(id.len()) {
                Some((to, rest)) if to == id.as_bytes() => {
                    let fence = rest
                        .strip_prefix(b":")
                        .and_then(|f| std::str::from_utf8(f).ok())
                        .and_then(|f| f.parse::<i64>().ok());
                    match fence {
                        Some(f) if fenced => Wake::Mine(u64::try_from(f).ok().filter(|&f| f > 0)),
                        Some(_) => Wake::Mine(None),
                        // Not a hand-off message we understand: look in Redis.
                        None => Wake::Look,
                    }
                }
                _ => Wake::Nothing,
            }
        }
        // The lock was freed by a plain release (nobody live was queued, or
        // a barging holder): the head takes it now.
        Event::Message(_) => Wake::Look,
        Event::Resubscribed => Wake::Look,
    }
}
