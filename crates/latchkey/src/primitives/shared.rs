//! What the latch, the barrier and the semaphore share (layer 4): their
//! keys, the publish command their scripts are given, waiting for a
//! message on a channel (subscribe first, then read the state), and work
//! left to the background when a call is cancelled.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::transport::session::Session;
use crate::transport::subscriber::{Event, Subscription, Topic};
use crate::vocab::retry::Backoff;

/// The command a script publishes wake-ups with, given to it as an ARGV:
/// `SPUBLISH` on a cluster (sharded pub/sub, where waiters `SSUBSCRIBE`),
/// `PUBLISH` elsewhere.
pub(crate) fn publish_command(session: &Session) -> &'static [u8] {
    session.publish_command()
}

/// A primitive's key or channel: see [`crate::vocab::protocol::primitive_key`].
pub(crate) fn key(session: &Session, name: &[u8], suffix: &[u8]) -> Vec<u8> {
    crate::vocab::protocol::primitive_key(session.prefix(), name, suffix)
}

/// Wake-ups on one channel, or polling with backoff when the subscriber
/// cannot be reached (pub/sub is a hint: a missed message costs time, never
/// a wrong answer, because every wake-up is followed by a read).
pub(crate) struct Waker {
    session: Session,
    channel: Vec<u8>,
    subscription: Option<Subscription>,
    poll: Backoff,
    last_subscribe: Instant,
}

/// Why [`Waker::sleep`] returned.
pub(crate) enum Woken {
    /// A message on the channel, with its payload.
    Message(Box<[u8]>),
    /// Anything else: a timer, a reconnection (messages may have been
    /// missed): read the state again.
    Recheck,
}

/// With a subscription, the state is read again at least this often anyway.
const RECHECK: Duration = Duration::from_secs(5);

impl Waker {
    /// Subscribes to `channel`, giving up at `deadline` (then it polls).
    /// Call it *before* reading the state, so that no message is missed.
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
            // No time to wait: the caller reads the state once and returns.
            return;
        }
        let subscribing = self
            .session
            .subscriber()
            .subscribe(Topic::Channel(self.channel.clone()));
        let result = match deadline {
            Some(d) => tokio::time::timeout_at(d.into(), subscribing)
                .await
                .unwrap_or_else(|_| {
                    Err(crate::Error::Timeout {
                        op: "SUBSCRIBE",
                        after: self.session.command_timeout(),
                    })
                }),
            None => subscribing.await,
        };
        self.last_subscribe = Instant::now();
        match result {
            Ok(subscription) => self.subscription = Some(subscription),
            Err(e) => {
                tracing::warn!(channel = %String::from_utf8_lossy(&self.channel), error = %e, "pub/sub unavailable; polling with backoff");
            }
        }
    }

    /// Sleeps until a message, a reason to read the state again, `wake_at`
    /// (e.g. the earliest expiry of a holder) or `deadline`, whichever is first.
    pub(crate) async fn sleep(
        &mut self,
        wake_at: Option<Instant>,
        deadline: Option<Instant>,
    ) -> Woken {
        if self.subscription.is_none() && self.last_subscribe.elapsed() >= Duration::from_secs(1) {
            self.try_subscribe(deadline).await;
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

/// Runs `work` in the background, tracked by the session so that
/// [`Client::flush`](crate::Client::flush) waits for it; without a tokio
/// runtime it is dropped (what it would undo then ends at its TTL).
pub(crate) fn in_background(
    session: &Session,
    why: &'static str,
    work: impl Future<Output = crate::Result<()>> + Send + 'static,
) {
    if tokio::runtime::Handle::try_current().is_err() {
        tracing::warn!(
            why,
            "no tokio runtime to clean up on; it ends by itself at its TTL"
        );
        return;
    }
    session.inner.background.spawn(async move {
        match work.await {
            Ok(()) => tracing::debug!(why, "background clean-up done"),
            Err(e) => {
                tracing::warn!(why, error = %e, "background clean-up failed; it ends at its TTL")
            }
        }
    });
}

/// A count from a script reply, or a protocol error naming the script.
pub(crate) fn reply_int<T: TryFrom<i64>>(script: &str, value: i64) -> crate::Result<T> {
    T::try_from(value)
        .map_err(|_| crate::Error::Protocol(format!("{script} script returned {value}")))
}
