//! [`Armed`]: the drop guard of every request that may take something
//! without our knowing (layer 4, part of the wait core): armed before the
//! request is sent, disarmed once its reply is understood; dropped armed
//! (the future was cancelled, or the request failed after it may have run),
//! it runs its undo, which hands the clean-up to the background.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::primitives::shared::in_background;
use crate::transport::session::Session;

/// Runs `undo` when dropped while armed. The undo is a closure, built from
/// borrows and called only then: an attempt that is not cancelled pays for
/// no clone and no allocation. Arming is an [`AtomicBool`] (a flag only
/// its own task touches, so relaxed: `Sync` keeps a future that borrows
/// the guard `Send`), so that an attempt can
/// re-arm and disarm a guard it only borrows (a waiter's intent, armed
/// while it waits and disarmed when it is let in).
pub(crate) struct Armed<F: FnOnce()> {
    armed: AtomicBool,
    undo: Option<F>,
}

impl<F: FnOnce()> Armed<F> {
    /// Armed at once.
    pub(crate) fn new(undo: F) -> Armed<F> {
        Armed {
            armed: AtomicBool::new(true),
            undo: Some(undo),
        }
    }

    /// Armed from now on (the request that may take something is sent).
    pub(crate) fn arm(&self) {
        self.armed.store(true, Ordering::Relaxed);
    }

    /// Nothing to undo (the reply was understood).
    pub(crate) fn disarm(&self) {
        self.armed.store(false, Ordering::Relaxed);
    }
}

impl<F: FnOnce()> Drop for Armed<F> {
    fn drop(&mut self) {
        if self.armed.load(Ordering::Relaxed) {
            if let Some(undo) = self.undo.take() {
                undo();
            }
        }
    }
}

/// An [`Armed`] guard whose undo is `work` run in the background on
/// `session` ([`in_background`]: tracked, so that
/// [`Client::flush`](crate::Client::flush) waits for it); `why` is its log
/// line. `work` is called (and clones what it needs) only at an armed drop.
pub(crate) fn undo_in_background<'a, W, Fut>(
    session: &'a Session,
    why: &'static str,
    work: W,
) -> Armed<impl FnOnce() + 'a>
where
    W: FnOnce() -> Fut + 'a,
    Fut: Future<Output = crate::Result<()>> + Send + 'static,
{
    Armed::new(move || in_background(session, why, work()))
}
