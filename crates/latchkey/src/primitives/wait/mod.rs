//! The one wait core (layer 4): how every blocking call of every primitive
//! waits. A lock's and a fair lock's acquire, a semaphore's, a read or a
//! write, a latch's wait, a barrier's arrive-and-wait and a campaign all
//! run [`wait_for`]; what differs is the attempt and what it sleeps on (a
//! [`Wake`]): [`Waker`] (one channel) for most, a lock's own for a lock
//! (its release channels and this process's local releases, `lock/wait.rs`)
//! and for a fair lock (its hand-off channel, `lock/fair/wait.rs`). The
//! election observer sleeps on a [`Waker`] too. Signal waits
//! (`Client::wait*`, `Listener::recv_timeout`) have nothing to retry and
//! no state to read; they share the timeout ([`timed_out`]).
//!
//! # The loop
//! 1. **Subscribe first** ([`Waiting::subscribe`]), then attempt: a change
//!    published between the two is not missed.
//! 2. **Attempt**: the primitive's one request, which says
//!    [`Tried::Done`] or [`Tried::Busy`] with the instant worth looking
//!    again (the earliest expiry of a holder, if it knows one). The attempt
//!    is given what woke it ([`Woken`]): a latch opens on its message
//!    without a read, a barrier compares the generation released, a fair
//!    waiter owns the lock on its hand-off message without a round trip.
//!    An uncontended first try stays outside the loop (a lock's is one
//!    `SET NX`, with no subscription and no allocation of the loop's).
//! 3. **Sleep** until a message on the channel, the attempt's recheck time,
//!    a periodic re-read (5 s, a safety net for lost messages) or the
//!    caller's deadline, whichever is first; without pub/sub, poll with
//!    jittered backoff ([`Waker`]). Then attempt again.
//!
//! A primitive made `with_asking` also asks the holders to let go while it
//! waits ([`Ask`](ask::Ask), `ask.rs`): once per holder, from its attempts.
//!
//! # Failures and timeouts
//! One policy, [`Retry`] (`vocab/retry.rs`): a transient error is retried
//! with backoff and jitter until the caller's deadline, and an outage at
//! the deadline returns that error, not a timeout (an outage is not a
//! conflict); without a deadline, an error that persists for
//! [`GIVE_UP_AFTER`](crate::vocab::retry::GIVE_UP_AFTER) is returned. Any
//! other error is returned at once. **Every bounded wait that runs out
//! fails with [`Error::WaitTimedOut`]** (made by [`timed_out`]), whatever
//! the primitive; and every bounded wait ends by its deadline: one whose
//! request is still unanswered [`ANSWER_GRACE`] after it (a stalled Redis,
//! a request lost in a failover) ends with [`Error::Timeout`] there
//! ([`bounded`]), not after the command timeout.
//!
//! # Cancel safety
//! Every wait built on this core is cancel safe in the same way: dropping
//! its future at any await point leaves nothing behind. The subscription
//! unsubscribes when dropped; a request whose reply was never read may have
//! taken something (a permit, a hold, an arrival, an intent), so the
//! attempt arms an [`Armed`] drop guard before it sends and disarms it once
//! the reply is understood: dropped armed, the guard hands the undo to
//! [`in_background`](crate::primitives::shared::in_background), a task the
//! session tracks ([`Client::flush`](crate::Client::flush) waits for it;
//! without a runtime, what is left ends at its TTL). A primitive's
//! `# Cancel safety` section says what its undo is.

pub(crate) mod armed;
pub(crate) mod ask;
pub(crate) mod waker;

use std::future::Future;
use std::time::{Duration, Instant};

#[cfg(doc)]
use crate::primitives::wait::armed::Armed;
use crate::primitives::wait::waker::Waker;
use crate::transport::session::Session;
use crate::vocab::error::{Error, Result};
use crate::vocab::retry::Retry;

/// What woke an attempt.
pub(crate) enum Woken {
    /// Nothing yet: the first attempt of the wait.
    Start,
    /// A message on the channel, with its payload.
    Message(Box<[u8]>),
    /// A release by this process (a lock's local queue): no message needed.
    Released,
    /// Anything else: a timer, a reconnection (messages may have been
    /// missed): read the state again.
    Recheck,
}

/// What one attempt found.
pub(crate) enum Tried<T> {
    /// The wait is over.
    Done(T),
    /// Not yet; `recheck_at`: when it is worth attempting again even
    /// without a message (the earliest expiry of a holder).
    Busy { recheck_at: Option<Instant> },
}

impl<T> Tried<T> {
    /// Busy until `left` from now has passed (plus a millisecond, so that
    /// the expiry has happened when we look).
    pub(crate) fn busy_for(left: Option<Duration>) -> Tried<T> {
        Tried::Busy {
            recheck_at: left.map(|l| Instant::now() + l + Duration::from_millis(1)),
        }
    }
}

/// The deadline of a wait of at most `wait` from now; `None` (no deadline)
/// when it lies beyond what an [`Instant`] can say (`Duration::MAX`).
pub(crate) fn deadline_after(wait: Duration) -> Option<Instant> {
    Instant::now().checked_add(wait)
}

/// The error of a bounded wait on `name` that ran out, started at `started`.
pub(crate) fn timed_out(name: &[u8], started: Instant) -> Error {
    Error::WaitTimedOut {
        name: String::from_utf8_lossy(name).into_owned(),
        waited: started.elapsed(),
    }
}

/// How long past its deadline a bounded wait still waits for a request
/// already sent: the last attempt's answer (busy: `WaitTimedOut`) comes
/// well within it; past it, Redis is stalled.
pub(crate) const ANSWER_GRACE: Duration = Duration::from_millis(250);

/// A whole bounded wait (`call`), ended when its `deadline` has passed by
/// [`ANSWER_GRACE`] with a request still unanswered: a stalled Redis costs
/// the caller its own deadline, not the command timeout (and its retry).
/// That ending is the outage's last error when the wait was retrying one
/// (as at the deadline), else [`Error::Timeout`]: an outage, not a
/// conflict. Dropping
/// `call` is safe: every wait on the core is cancel safe.
pub(crate) async fn bounded<T>(
    deadline: Option<Instant>,
    call: impl Future<Output = Result<T>>,
) -> Result<T> {
    let Some(deadline) = deadline else {
        return call.await;
    };
    let started = Instant::now();
    // Boxed: a wait's future is large, and this wraps it twice more.
    let call = Box::pin(call);
    let limited = async move {
        tokio::time::timeout_at((deadline + ANSWER_GRACE).into(), call)
            .await
            .ok()
    };
    crate::vocab::retry::noting_retried(limited, |retried| {
        retried.unwrap_or(Error::Timeout {
            op: "acquire",
            after: deadline.saturating_duration_since(started),
        })
    })
    .await
}

/// What a wait sleeps on between attempts: [`Waker`] (one channel, or
/// polling), or a lock's own (its release channels and this process's
/// local releases, `lock/wait.rs`).
pub(crate) trait Wake {
    /// Right before an attempt: what woke us before it no longer counts
    /// (the attempt reads the state it announced), what comes after does.
    fn before_attempt(&mut self);

    /// Sleeps until a wake-up, `recheck_at` or `deadline`, whichever is
    /// first.
    fn sleep(
        &mut self,
        recheck_at: Option<Instant>,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Woken> + Send;
}

impl Wake for Waker {
    fn before_attempt(&mut self) {
        self.skip_pending();
    }

    fn sleep(
        &mut self,
        recheck_at: Option<Instant>,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Woken> + Send {
        Waker::sleep(self, recheck_at, deadline)
    }
}

/// A [`Wake`] for a wait that starts after a request of its own, sent once
/// subscribed (a barrier's arrival; the caller forgets what came before it
/// sent the request): what comes after may answer that request, and the
/// first attempt, which reads nothing, must not forget it (a barrier
/// released in that gap would otherwise be seen only at the next re-read,
/// after its key may have expired). Later attempts read the state, as
/// usual.
pub(crate) struct AfterOwnRequest<W> {
    wake: W,
    attempted: bool,
}

impl<W> AfterOwnRequest<W> {
    pub(crate) fn new(wake: W) -> AfterOwnRequest<W> {
        AfterOwnRequest {
            wake,
            attempted: false,
        }
    }
}

impl<W: Wake + Send> Wake for AfterOwnRequest<W> {
    fn before_attempt(&mut self) {
        if std::mem::replace(&mut self.attempted, true) {
            self.wake.before_attempt();
        }
    }

    fn sleep(
        &mut self,
        recheck_at: Option<Instant>,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Woken> + Send {
        self.wake.sleep(recheck_at, deadline)
    }
}

/// One wait in progress: its wake-ups, its deadline and its failure policy.
pub(crate) struct Waiting<'a, W = Waker> {
    name: &'a [u8],
    /// The name, decoded once, for the failure policy's log lines.
    what: String,
    started: Instant,
    deadline: Option<Instant>,
    wake: W,
    retry: Retry,
}

impl<'a> Waiting<'a> {
    /// A wait on `name` until `deadline` (`None`: as long as it takes),
    /// woken by messages on `channel`: subscribes (giving up at the
    /// deadline, then it polls). Call it before the first attempt.
    pub(crate) async fn subscribe(
        session: &Session,
        channel: &[u8],
        name: &'a [u8],
        deadline: Option<Instant>,
    ) -> Waiting<'a> {
        let started = Instant::now();
        let waker = Waker::subscribe(session, channel.to_vec(), deadline).await;
        Waiting::new(name, started, deadline, waker)
    }
}

impl<'a, W: Wake> Waiting<'a, W> {
    /// A wait on `name`, started at `started` (for the time a timeout
    /// reports), until `deadline`, woken by `wake`.
    pub(crate) fn new(
        name: &'a [u8],
        started: Instant,
        deadline: Option<Instant>,
        wake: W,
    ) -> Waiting<'a, W> {
        Waiting {
            name,
            what: String::from_utf8_lossy(name).into_owned(),
            started,
            deadline,
            wake,
            retry: Retry::until(deadline),
        }
    }

    /// [`Error::WaitTimedOut`] for this wait.
    pub(crate) fn timed_out(&self) -> Error {
        timed_out(self.name, self.started)
    }
}

/// The loop (see the module docs): `attempt` until it is
/// [`Tried::Done`], an error is not worth retrying (or outlasted the
/// policy), or the deadline passes ([`Error::WaitTimedOut`]).
///
/// # Cancel safety
/// Cancel safe if `attempt`'s futures are (see the module docs).
pub(crate) async fn wait_for<T, W, F, Fut>(
    waiting: &mut Waiting<'_, W>,
    mut attempt: F,
) -> Result<T>
where
    W: Wake,
    F: FnMut(Woken) -> Fut,
    Fut: Future<Output = Result<Tried<T>>>,
{
    let mut woken = Woken::Start;
    loop {
        waiting.wake.before_attempt();
        let recheck_at = match attempt(woken).await {
            Ok(Tried::Done(value)) => return Ok(value),
            Ok(Tried::Busy { recheck_at }) => {
                waiting.retry.answered(&waiting.what);
                if waiting.deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(waiting.timed_out());
                }
                recheck_at
            }
            // Retried until the deadline, then returned (see the module docs).
            Err(e) => Some(Instant::now() + waiting.retry.failed(e, &waiting.what)?),
        };
        woken = waiting.wake.sleep(recheck_at, waiting.deadline).await;
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::time::Instant;

    use super::{wait_for, AfterOwnRequest, Tried, Waiting, Wake, Woken};

    /// Wake-ups queued by hand: `before_attempt` forgets them, as a
    /// subscription's do.
    struct Queued(Vec<Woken>);

    impl Wake for Queued {
        fn before_attempt(&mut self) {
            self.0.clear();
        }

        fn sleep(
            &mut self,
            _recheck_at: Option<Instant>,
            _deadline: Option<Instant>,
        ) -> impl Future<Output = Woken> + Send {
            let woken = self.0.pop().unwrap_or(Woken::Recheck);
            async move { woken }
        }
    }

    /// What woke the second attempt of a wait whose first attempt reads
    /// nothing, with a message queued before that first attempt.
    async fn second_attempt_woken_by<W: Wake>(wake: W) -> Option<Box<[u8]>> {
        let mut waiting = Waiting::new(b"w", Instant::now(), None, wake);
        wait_for(&mut waiting, |woken| async move {
            match woken {
                Woken::Start => Ok(Tried::Busy { recheck_at: None }),
                Woken::Message(payload) => Ok(Tried::Done(Some(payload))),
                _ => Ok(Tried::Done(None)),
            }
        })
        .await
        .ok()
        .flatten()
    }

    #[tokio::test]
    async fn a_message_before_the_first_attempt_after_an_own_request_is_kept() {
        let message = || Queued(vec![Woken::Message(Box::from(&b"0"[..]))]);
        assert_eq!(
            second_attempt_woken_by(AfterOwnRequest::new(message())).await,
            Some(Box::from(&b"0"[..])),
            "the release that came between the arrival and the first attempt"
        );
        // A plain wake forgets it: its first attempt reads the state.
        assert_eq!(second_attempt_woken_by(message()).await, None);
    }
}
