//! The spans and metrics every primitive's acquire-like call shares (layer
//! 4): one span scheme (`acquire`, `wait`, `release`, `renew`, each with
//! `kind`, `lock` (the name) and a token prefix) and one count per call, so
//! that a semaphore, a read-write lock, a latch, a barrier and an election
//! are seen as a lock is. Without a subscriber for a span, the call is not
//! wrapped in it (the wrapper would move the call's whole future once more:
//! a measurable share of an uncontended acquire).

use std::future::Future;
use std::time::Instant;

use tracing::Instrument;

use crate::primitives::guard::Guard;
use crate::vocab::error::Result;
use crate::vocab::metrics::{acquire_outcome, LockLabel, Outcome};
use crate::vocab::token::short;

/// The span of one acquire-like call: a lock's or semaphore's acquire, a
/// read or write, a latch's wait, a barrier's arrive-and-wait, a campaign.
/// Its `token` is recorded once held.
pub(crate) fn acquire_span(label: &LockLabel, name: &[u8]) -> tracing::Span {
    tracing::debug_span!("acquire", kind = label.kind(), lock = %String::from_utf8_lossy(name), token = tracing::field::Empty)
}

/// The span of the waiting part of a call (it could not succeed at once).
pub(crate) fn wait_span(label: &LockLabel, name: &[u8]) -> tracing::Span {
    tracing::debug_span!("wait", kind = label.kind(), lock = %String::from_utf8_lossy(name), token = tracing::field::Empty)
}

/// What an acquire-like call's success holds: the owner token its spans
/// record (none for a latch's or a barrier's wait).
pub(crate) trait Held {
    fn held_token(&self) -> Option<&str> {
        None
    }
}

impl<G: Guard> Held for G {
    fn held_token(&self) -> Option<&str> {
        Some(self.token())
    }
}

impl<G: Guard> Held for Option<G> {
    fn held_token(&self) -> Option<&str> {
        self.as_ref().map(G::token)
    }
}

/// A barrier's generation.
impl Held for u64 {}

/// A latch opened.
impl Held for () {}

/// Runs `call` in `span` (when a subscriber wants it), recording the
/// token a success holds.
async fn in_span<T: Held>(span: tracing::Span, call: impl Future<Output = Result<T>>) -> Result<T> {
    // Without a subscriber for the span, the call is not wrapped in it.
    let result = match span.is_disabled() {
        true => call.await,
        false => call.instrument(span.clone()).await,
    };
    if let Some(held) = result.as_ref().ok().and_then(Held::held_token) {
        span.record("token", short(held));
    }
    result
}

/// Runs `call` (an acquire-like call) in its `acquire` span and counts how
/// it ended (`outcome`) in `latchkey_acquisitions_total`, with the time to
/// success in `latchkey_acquire_wait_seconds`. A call cancelled (dropped)
/// is neither counted nor timed.
pub(crate) async fn acquire<T: Held>(
    label: &LockLabel,
    name: &[u8],
    call: impl Future<Output = Result<T>>,
    outcome: fn(&Result<T>) -> Outcome,
) -> Result<T> {
    let called = Instant::now();
    let result = in_span(acquire_span(label, name), call).await;
    acquire_outcome(label, outcome(&result), called.elapsed());
    result
}

/// A first try (`try_acquire` and its kin): [`acquire`], counted as a try
/// ([`Outcome::of_try`]: `busy` when it found no room).
pub(crate) async fn first_try<G: Guard>(
    label: &LockLabel,
    name: &[u8],
    call: impl Future<Output = Result<Option<G>>>,
) -> Result<Option<G>> {
    acquire(label, name, call, Outcome::of_try).await
}

/// The shape of a waiting acquire of every kind that waits through the
/// wait core: one `first` try (the uncontended case: one round trip, no
/// subscription), and only when it finds no room (or Redis failed
/// transiently) the `wait`, in its `wait` span; both in the `acquire` span,
/// counted by how the call ended ([`Outcome::of_wait`]).
pub(crate) async fn first_try_then_wait<T: Held, B, W>(
    label: &LockLabel,
    name: &[u8],
    first: impl Future<Output = Result<std::result::Result<T, B>>>,
    wait: impl FnOnce() -> W,
) -> Result<T>
where
    W: Future<Output = Result<T>>,
{
    let acquiring = async {
        match first.await {
            Ok(Ok(held)) => return Ok(held),
            Ok(Err(_)) => {}
            Err(e) if e.is_transient() => {}
            Err(e) => return Err(e),
        }
        self::wait(label, name, wait()).await
    };
    acquire(label, name, acquiring, Outcome::of_wait).await
}

/// Runs the waiting part of a call in its `wait` span.
pub(crate) async fn wait<T: Held>(
    label: &LockLabel,
    name: &[u8],
    call: impl Future<Output = Result<T>>,
) -> Result<T> {
    in_span(wait_span(label, name), call).await
}

/// A blocking call whose whole body is the wait (a read or a write, a
/// campaign, a latch's wait, a barrier's arrive-and-wait): its `wait` span
/// inside its `acquire` span, counted by how it ended ([`Outcome::of_wait`]:
/// `timeout` for [`WaitTimedOut`](crate::Error::WaitTimedOut)).
pub(crate) async fn waiting<T: Held>(
    label: &LockLabel,
    name: &[u8],
    call: impl Future<Output = Result<T>>,
) -> Result<T> {
    acquire(label, name, wait(label, name, call), Outcome::of_wait).await
}
