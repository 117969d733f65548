//! The backends: where a lock lives (layer 3). Every variant offers the same
//! operations (one attempt, issue a fencing token, release, extend, wake-ups),
//! so the waiting, guard and watchdog logic above them is written once. A
//! single Redis is [`Session`]; Redlock's N instances are
//! [`Group`](redlock::Group) of instances.

pub(crate) mod fair;
pub(crate) mod redlock;
pub(crate) mod replicas;
pub(crate) mod single;

use std::time::{Duration, Instant};

use crate::backend::single::Single;
use crate::transport::connection::Connection;
use crate::transport::session::Session;
use crate::transport::subscriber::{Event, Subscription, Topic, EVENT_BUFFER};
use crate::vocab::error::{Error, Result};
use crate::vocab::metrics::MetricsLabels;
use crate::vocab::names::LockKeys;
use crate::vocab::outcome::{Attempt, AttemptMode, Issued, Ownership, Renewal};
use crate::vocab::token::short;

/// Where a lock lives.
#[derive(Clone)]
pub(crate) enum Backend {
    Single(Session),
    Redlock(redlock::Group),
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backend::Single(session) => session.fmt(f),
            Backend::Redlock(redlock) => redlock.fmt(f),
        }
    }
}

impl Backend {
    pub(crate) fn prefix(&self) -> &[u8] {
        match self {
            Backend::Single(client) => client.prefix(),
            Backend::Redlock(redlock) => redlock.prefix(),
        }
    }

    /// The per-command timeout: a Redlock's first connected instance's
    /// (`Redlock::connect_with` makes every instance alike).
    pub(crate) fn command_timeout(&self) -> Duration {
        match self {
            Backend::Single(session) => session.command_timeout(),
            Backend::Redlock(redlock) => redlock.first().command_timeout(),
        }
    }

    /// The server's host and port, or every instance's, for messages.
    pub(crate) fn server(&self) -> String {
        match self {
            Backend::Single(session) => session.server(),
            Backend::Redlock(redlock) => redlock.servers(),
        }
    }

    /// The command connection: a Redlock's first connected instance's.
    pub(crate) fn connection(&self) -> Connection {
        match self {
            Backend::Single(session) => session.connection(),
            Backend::Redlock(redlock) => redlock.first().connection(),
        }
    }

    /// Waits, at most `within`, for the work left to the background.
    pub(crate) async fn flush(&self, within: Duration) -> bool {
        match self {
            Backend::Single(session) => session.flush(within).await,
            Backend::Redlock(redlock) => redlock.flush(within).await,
        }
    }

    /// Ends every hold out and refuses new ones (see `Session::close`).
    pub(crate) async fn close(&self, within: Duration) -> bool {
        match self {
            Backend::Single(session) => session.close(within).await,
            Backend::Redlock(redlock) => redlock.close(within).await,
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
            Backend::Single(client) => Single(client).try_once(keys, token, ttl, mode).await,
            Backend::Redlock(redlock) => Box::pin(redlock.try_once(keys, token, ttl, mode)).await,
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
    ) -> Issued {
        match self {
            Backend::Single(client) => Single(client).issue_fence_once(keys, token).await,
            Backend::Redlock(redlock) => {
                Box::pin(redlock.issue_fence(keys, token, valid_until)).await
            }
        }
    }

    /// Owner-only release (compare-and-delete), waking nobody: the lock
    /// layer decides when this process's waiters are woken (see
    /// `crate::primitives::lock::release`). `cleanup`: it finishes what a failure or a
    /// cancellation left, so it is sent as the whole script (see
    /// `Session::release_whole`).
    pub(crate) async fn release(
        &self,
        keys: &LockKeys,
        token: &str,
        cleanup: bool,
    ) -> Result<Ownership> {
        match self {
            // Boxed: a cleanup is rare, and every release's future would carry it.
            Backend::Single(client) if cleanup => {
                Box::pin(Single(client).release_whole(keys, token)).await
            }
            Backend::Single(client) => Single(client).release_once(keys, token).await,
            Backend::Redlock(redlock) => Box::pin(redlock.release_all(keys, token, cleanup)).await,
        }
    }

    /// Whether the lock lives on a Redis Cluster (then its name must be
    /// one whose keys share a slot: `check_cluster_name`).
    pub(crate) fn is_cluster(&self) -> bool {
        match self {
            Backend::Single(session) => session.is_cluster(),
            Backend::Redlock(redlock) => redlock.has_cluster(),
        }
    }

    /// Whether requests sent one after the other on this backend reach
    /// Redis in that order (one connection to one server): then a waiter's
    /// attempt sent after a release is run after it.
    pub(crate) fn is_ordered(&self) -> bool {
        matches!(self, Backend::Single(_))
    }

    /// Owner-only extend. `batch_by`: a watchdog's renewal, which may wait
    /// in each server's renewal batch until then (see `LeaseSpec::renew`).
    pub(crate) async fn extend(
        &self,
        keys: &LockKeys,
        token: &str,
        ttl: Duration,
        batch_by: Option<Instant>,
    ) -> Renewal {
        match self {
            Backend::Single(client) => Single(client).extend_once(keys, token, ttl, batch_by).await,
            Backend::Redlock(redlock) => {
                Box::pin(redlock.extend_all(keys, token, ttl, batch_by)).await
            }
        }
    }

    /// Confirms the hold of `token` with `n` replicas (see
    /// `Session::confirm_replicas`): what a write of ours found, and how
    /// many replicas acknowledged it within `timeout`. A Redlock never gets
    /// here (`Lock::with_replicas` refuses it).
    pub(crate) async fn confirm_replicas(
        &self,
        keys: &LockKeys,
        token: &str,
        keep: Duration,
        n: usize,
        timeout: Duration,
    ) -> Result<(Ownership, usize)> {
        match self {
            Backend::Single(session) => {
                Single(session)
                    .confirm_replicas(keys, token, keep, n, timeout)
                    .await
            }
            Backend::Redlock(_) => Err(Error::Internal(
                "replicated acquisition on a Redlock".into(),
            )),
        }
    }

    /// Subscribes to the release channel of a lock (on a Redlock, on every
    /// instance).
    pub(crate) async fn wakeups(&self, keys: &LockKeys) -> Result<Wakeups> {
        match self {
            Backend::Single(client) => {
                let topic = Topic::Channel(keys.channel.clone());
                Ok(Wakeups(vec![client.subscriber().subscribe(topic).await?]))
            }
            Backend::Redlock(redlock) => Ok(Wakeups(redlock.subscriptions(keys).await?)),
        }
    }

    /// A plain lock waiter's wake-ups: its release channel and, on one
    /// server, this process's wake channel there (`S:wake:` + its 16 hex
    /// digits), where a release wakes this process alone once its attempts
    /// registered it among the waiting processes (`docs/protocol.md`,
    /// "Waking one process"); on a Redlock, every instance's release
    /// channel (its waiters do not register).
    pub(crate) async fn waiter_wakeups(&self, keys: &LockKeys) -> Result<Wakeups> {
        match self {
            Backend::Single(client) => {
                let subscriber = client.subscriber();
                let own = [keys.wake_stem(), subscriber.process_id().as_bytes()].concat();
                let topics = vec![
                    (Topic::Channel(keys.channel.clone()), EVENT_BUFFER),
                    // One message a release, read at once: a small buffer.
                    (Topic::Channel(own), WAKE_BUFFER),
                ];
                Ok(Wakeups(subscriber.subscribe_many(topics).await?))
            }
            Backend::Redlock(_) => self.wakeups(keys).await,
        }
    }

    /// Publishes `message` on the lock's release channel: on its server, or on every Redlock
    /// instance. The connections that received it.
    pub(crate) async fn publish(&self, keys: &LockKeys, message: &[u8]) -> Result<u64> {
        match self {
            Backend::Single(session) => session.publish(&keys.channel, message).await,
            Backend::Redlock(redlock) => Box::pin(redlock.publish(&keys.channel, message)).await,
        }
    }

    pub(crate) fn local_queues(&self) -> &crate::transport::local_queues::LocalQueues {
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

    pub(crate) fn live(&self) -> &crate::transport::live::LiveHolds {
        match self {
            Backend::Single(client) => &client.inner.live,
            Backend::Redlock(redlock) => redlock.live(),
        }
    }

    pub(crate) fn new_token(&self) -> Result<String> {
        match self {
            Backend::Single(client) => client.inner.identity.new_token(),
            Backend::Redlock(redlock) => redlock.new_token(),
        }
    }

    /// A token for a hold kept while idle (one server only).
    pub(crate) fn new_caching_token(&self) -> Result<String> {
        match self {
            Backend::Single(client) => client.inner.identity.new_caching_token(),
            Backend::Redlock(_) => Err(Error::Unsupported(
                "a Redlock's holds are not kept while idle",
            )),
        }
    }
}

/// The event buffer of a process's wake channel: one message a release
/// that picked it, which its waiter reads at once.
const WAKE_BUFFER: usize = 4;

/// Release notifications from one or more servers.
pub(crate) struct Wakeups(Vec<Subscription>);

impl Wakeups {
    /// Wake-ups from these subscriptions.
    pub(crate) fn new(subscriptions: Vec<Subscription>) -> Wakeups {
        Wakeups(subscriptions)
    }

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

/// The span of a release, with the primitive's kind (`lock`, `fair-lock`,
/// ...: the metrics' `kind` label), its name and a token prefix.
pub(crate) fn release_span(kind: &'static str, name: &[u8], token: &str) -> tracing::Span {
    tracing::debug_span!("release", kind, lock = %String::from_utf8_lossy(name), token = short(token))
}
