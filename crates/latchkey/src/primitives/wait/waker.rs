//! [`Waker`]: what a waiter sleeps on (layer 4, part of the wait core):
//! wake-ups on one channel, or polling with backoff when the subscriber
//! cannot be reached (pub/sub is a hint: a missed message costs time, never
//! a wrong answer, because every wake-up is followed by an attempt).

use std::time::{Duration, Instant};

use crate::primitives::wait::Woken;
use crate::transport::session::Session;
use crate::transport::subscriber::{Event, Subscription, Topic};
use crate::vocab::retry::Backoff;

/// With a subscription, the state is read again at least this often anyway.
pub(crate) const RECHECK: Duration = Duration::from_secs(5);

/// How soon after a failed subscription it is tried again.
pub(crate) const RESUBSCRIBE_AFTER: Duration = Duration::from_secs(1);

/// Wake-ups on one channel, or polling when there is no subscription.
pub(crate) struct Waker {
    session: Session,
    channel: Vec<u8>,
    subscription: Option<Subscription>,
    poll: Backoff,
    last_subscribe: Instant,
}

impl Waker {
    /// Subscribes to `channel`, giving up at `deadline` (then it polls).
    /// Call it *before* the first attempt, so that no message is missed.
    pub(crate) async fn subscribe(
        session: &Session,
        channel: Vec<u8>,
        deadline: Option<Instant>,
    ) -> Waker {
        let mut waker = Waker {
            session: session.clone(),
            channel,
            subscription: None,
            poll: Backoff::default(),
            last_subscribe: Instant::now(),
        };
        waker.try_subscribe(deadline).await;
        waker
    }

    async fn try_subscribe(&mut self, deadline: Option<Instant>) {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            // No time to wait: the caller attempts once and returns.
            return;
        }
        let subscribing = self
            .session
            .subscriber()
            .subscribe(Topic::Channel(self.channel.clone()));
        let result = subscribe_by(&self.session, deadline, subscribing).await;
        self.last_subscribe = Instant::now();
        match result {
            Ok(subscription) => self.subscription = Some(subscription),
            Err(e) => {
                tracing::warn!(channel = %String::from_utf8_lossy(&self.channel), error = %e, "pub/sub unavailable; polling with backoff");
            }
        }
    }

    /// Forgets messages queued before now: the attempt about to be made
    /// reads the state they announced.
    pub(crate) fn skip_pending(&mut self) {
        if let Some(subscription) = self.subscription.as_mut() {
            subscription.skip_pending();
        }
    }

    /// Sleeps until a message, a reason to read the state again, `wake_at`
    /// (e.g. the earliest expiry of a holder) or `deadline`, whichever is first.
    pub(crate) async fn sleep(
        &mut self,
        wake_at: Option<Instant>,
        deadline: Option<Instant>,
    ) -> Woken {
        if self.subscription.is_none() && self.last_subscribe.elapsed() >= RESUBSCRIBE_AFTER {
            self.try_subscribe(deadline).await;
            if self.subscription.is_some() {
                // Messages may have been missed while unsubscribed.
                return Woken::Recheck;
            }
        }
        let mut until = match &self.subscription {
            Some(_) => Instant::now() + RECHECK,
            None => Instant::now() + self.poll.next_delay(),
        };
        for bound in [wake_at, deadline].into_iter().flatten() {
            until = until.min(bound);
        }
        let Some(subscription) = self.subscription.as_mut() else {
            tokio::time::sleep_until(until.into()).await;
            return Woken::Recheck;
        };
        tokio::select! {
            event = subscription.recv() => match event {
                Event::Message(published) => Woken::Message(published.payload.clone()),
                Event::Resubscribed => Woken::Recheck,
            },
            _ = tokio::time::sleep_until(until.into()) => Woken::Recheck,
        }
    }
}

/// `subscribing`, given up at `deadline` (then a [`Error::Timeout`] of
/// `SUBSCRIBE`, as if the command had timed out).
///
/// [`Error::Timeout`]: crate::Error::Timeout
pub(crate) async fn subscribe_by<T>(
    session: &Session,
    deadline: Option<Instant>,
    subscribing: impl std::future::Future<Output = crate::Result<T>>,
) -> crate::Result<T> {
    let Some(deadline) = deadline else {
        return subscribing.await;
    };
    tokio::time::timeout_at(deadline.into(), subscribing)
        .await
        .unwrap_or_else(|_| {
            Err(crate::Error::Timeout {
                op: "SUBSCRIBE",
                after: session.command_timeout(),
            })
        })
}
