//! The backends: where a lock lives (layer 3). Every variant offers the same
//! operations (one attempt, issue a fencing token, release, extend, wake-ups),
//! so the waiting, guard and watchdog logic above them is written once. A
//! single Redis is [`Session`]; Redlock's N instances are
//! [`Redlock`](crate::redlock::Redlock)'s group.

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::error::Result;
use crate::metrics::{LockLabel, MetricsLabels};
use crate::names::LockKeys;
use crate::outcome::{Attempt, AttemptMode, Ownership};
use crate::session::Session;
use crate::subscriber::{Event, Subscription, Topic};
use crate::token::short;

/// Where a lock lives.
#[derive(Clone)]
pub(crate) enum Backend {
    Single(Session),
    Redlock(crate::redlock::Redlock),
}

impl Backend {
    pub(crate) fn prefix(&self) -> &[u8] {
        match self {
            Backend::Single(client) => client.prefix(),
            Backend::Redlock(redlock) => redlock.prefix(),
        }
    }

    pub(crate) fn metrics_labels(&self) -> &MetricsLabels {
        match self {
            Backend::Single(client) => &client.inner.metrics_labels,
            Backend::Redlock(redlock) => redlock.metrics_labels(),
        }
    }

    pub(crate) async fn try_once(
        &self,
        keys: &LockKeys,
        token: &str,
        ttl: Duration,
        mode: AttemptMode,
    ) -> Result<Attempt> {
        match self {
            Backend::Single(client) => client.try_once(keys, token, ttl, mode).await,
            Backend::Redlock(redlock) => redlock.try_once(keys, token, ttl, mode).await,
        }
    }

    /// Issues the fencing token of the hold of `token` if it is still held
    /// (and, for a Redlock, still valid at `valid_until`); otherwise says
    /// why not.
    pub(crate) async fn issue_fence(
        &self,
        keys: &LockKeys,
        token: &str,
        valid_until: Instant,
    ) -> Result<std::result::Result<u64, Ownership>> {
        match self {
            Backend::Single(client) => client.issue_fence_once(keys, token).await,
            Backend::Redlock(redlock) => redlock.issue_fence(keys, token, valid_until).await,
        }
    }

    /// Owner-only release. `cleanup`: it finishes what a failure or a
    /// cancellation left (sent as the whole script, see
    /// `Client::release_whole`), and no local waiter is woken ahead of it.
    pub(crate) async fn release(
        &self,
        keys: &LockKeys,
        token: &str,
        cleanup: bool,
    ) -> Result<Ownership> {
        let outcome = match self {
            Backend::Single(client) if cleanup => {
                let outcome = client.release_whole(keys, token).await?;
                if outcome == Ownership::Owned {
                    self.wake_local(keys);
                }
                outcome
            }
            Backend::Single(client) => {
                // Send the release, then wake this client's next waiter before
                // the reply is back: its attempt travels on the same
                // connection right behind the release, and Redis runs them in
                // order, so a local handoff costs one round trip, not two. A
                // wake-up for a release that then fails is harmless: the
                // waiter finds the lock busy and waits again.
                let mut release = std::pin::pin!(client.release_once(keys, token));
                let first_poll =
                    std::future::poll_fn(|cx| Poll::Ready(release.as_mut().poll(cx))).await;
                match first_poll {
                    Poll::Ready(outcome) => {
                        let outcome = outcome?;
                        if outcome == Ownership::Owned {
                            self.wake_local(keys);
                        }
                        outcome
                    }
                    Poll::Pending => {
                        self.wake_local(keys);
                        release.await?
                    }
                }
            }
            Backend::Redlock(redlock) => {
                let outcome = redlock.release_all(keys, token, cleanup).await?;
                if outcome == Ownership::Owned {
                    self.wake_local(keys);
                }
                outcome
            }
        };
        Ok(outcome)
    }

    pub(crate) async fn extend(
        &self,
        keys: &LockKeys,
        token: &str,
        ttl: Duration,
    ) -> Result<(Ownership, Instant)> {
        match self {
            Backend::Single(client) => client.extend_once(keys, token, ttl).await,
            Backend::Redlock(redlock) => redlock.extend_all(keys, token, ttl).await,
        }
    }

    /// Subscribes to the release channel(s) of a lock.
    pub(crate) async fn wakeups(&self, keys: &LockKeys) -> Result<Wakeups> {
        match self {
            Backend::Single(client) => {
                let topic = Topic::Channel(keys.channel.clone());
                Ok(Wakeups(vec![client.subscriber().subscribe(topic).await?]))
            }
            Backend::Redlock(redlock) => Ok(Wakeups(redlock.subscriptions(keys).await?)),
        }
    }

    /// Wakes this process's waiters for `keys` at once after a local release.
    pub(crate) fn wake_local(&self, keys: &LockKeys) {
        match self {
            Backend::Single(client) => {
                if let Some(subscriber) = client.subscriber_if_started() {
                    subscriber
                        .notify_local(&Topic::Channel(keys.channel.clone()), Event::LocalRelease);
                }
            }
            Backend::Redlock(redlock) => redlock.wake_local(keys),
        }
    }

    pub(crate) fn local_queues(&self) -> &crate::queue::LocalQueues {
        match self {
            Backend::Single(client) => &client.inner.local_queues,
            Backend::Redlock(redlock) => redlock.local_queues(),
        }
    }

    /// Where background work for this backend's locks (releases of dropped
    /// guards, cancelled attempts and releases) is tracked, so that
    /// `flush` can wait for it.
    pub(crate) fn background(&self) -> &tokio_util::task::TaskTracker {
        match self {
            Backend::Single(client) => &client.inner.background,
            Backend::Redlock(redlock) => redlock.background(),
        }
    }

    pub(crate) fn new_token(&self) -> Result<String> {
        match self {
            Backend::Single(client) => client.inner.identity.new_token(),
            Backend::Redlock(redlock) => redlock.new_token(),
        }
    }
}

/// Release notifications from one or more servers.
pub(crate) struct Wakeups(Vec<Subscription>);

impl Wakeups {
    /// Forgets events received so far: called right before an attempt, so
    /// that only what happens after it counts as a wake-up.
    pub(crate) fn reset(&mut self) {
        for subscription in &mut self.0 {
            subscription.skip_pending();
        }
    }

    /// Completes on the next event from any server.
    pub(crate) async fn next(&mut self) -> Event {
        let events = self.0.iter_mut().map(|s| Box::pin(s.recv()));
        let (event, _, _) = futures_util::future::select_all(events).await;
        event
    }
}

/// The span of a release, with the lock's name and a token prefix.
pub(crate) fn release_span(name: &[u8], token: &str) -> tracing::Span {
    tracing::debug_span!("release", lock = %String::from_utf8_lossy(name), token = short(token))
}

/// Best-effort compare-and-delete on a tokio runtime, if there is one.
/// `counted`: the label under which to count the release in the metrics
/// (a held guard's), or `None` for a lock we never knew we held.
pub(crate) fn release_in_background(
    backend: Backend,
    keys: Arc<LockKeys>,
    token: String,
    why: &'static str,
    counted: Option<LockLabel>,
) {
    if tokio::runtime::Handle::try_current().is_err() {
        tracing::warn!(
            why,
            "no tokio runtime to release the lock on; it frees itself at its TTL"
        );
        return;
    }
    let span = release_span(&keys.key[backend.prefix().len()..], &token);
    let tracker = backend.background().clone();
    tracker.spawn(
        async move {
            let result = backend.release(&keys, &token, true).await;
            if let Some(label) = &counted {
                crate::metrics::release_outcome(label, result.as_ref().ok().copied());
            }
            match result {
                Ok(outcome) => tracing::debug!(why, ?outcome, token = short(&token), "background release"),
                Err(e) => tracing::warn!(why, error = %e, "background release failed; the lock frees itself at its TTL"),
            }
        }
        .instrument(span),
    );
}
