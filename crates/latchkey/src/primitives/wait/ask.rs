//! [`Ask`]: a waiter that asks the holders to let go (layer 4, part of the
//! wait core), for the primitives made `with_asking`: a lock, a semaphore,
//! a read-write lock. The request is the message of
//! [`Client::request_release`](crate::Client::request_release),
//! `release-requested` on the primitive's own channel (`docs/protocol.md`,
//! "Release requests"); what a holder does with it is its own affair.
//!
//! # When it asks
//! Once per holder, never on every wake-up: at the first attempt of the
//! wait that finds the primitive busy, then again only when the holders
//! may have changed:
//! * when the attempt names its holder (a lock's acquire script reports a
//!   fingerprint of the holder's token), when that holder is another one;
//! * otherwise (a semaphore's or a read-write lock's many holders, a
//!   Redlock), when the attempt was woken by a release (a `released`
//!   message, a release by this process) and still found it busy: someone
//!   else took what was freed. A wake-up by a request (its own or anyone's),
//!   a timer or a reconnection asks nobody.
//!
//! An ask that fails (Redis unreachable) is logged and tried again at the
//! next busy attempt; the wait itself goes on either way, since the
//! request is a hint. Nothing is sent when the primitive is free: the first
//! try of an acquisition stays as it is.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::primitives::wait::Woken;
use crate::vocab::error::Result;
use crate::vocab::protocol::RELEASE_REQUESTED;

/// Whether, and when, one wait asks (see the module docs). Atomics, so that
/// the attempts of the wait core (futures that borrow it) stay `Send`.
pub(crate) struct Ask {
    on: bool,
    asked: AtomicBool,
    /// The fingerprint of the holder last asked; 0 when none is known.
    holder: AtomicU64,
}

impl Ask {
    /// A wait that asks when `on` (the primitive was made `with_asking`).
    pub(crate) fn new(on: bool) -> Ask {
        Ask {
            on,
            asked: AtomicBool::new(false),
            holder: AtomicU64::new(0),
        }
    }

    /// Whether an attempt woken by `woken` that found the primitive busy,
    /// held by `holder` (a fingerprint, `None` when not known), should ask
    /// now. Records that it did.
    pub(crate) fn due(&self, woken: &Woken, holder: Option<u64>) -> bool {
        if !self.on {
            return false;
        }
        let first = !self.asked.swap(true, Ordering::Relaxed);
        match holder {
            Some(holder) => self.holder.swap(holder, Ordering::Relaxed) != holder || first,
            None => first || woken_by_release(woken),
        }
    }

    /// Sends the request (`ask`: the publish) if it is due (see
    /// [`Ask::due`]); a failure is logged, and the next busy attempt asks
    /// again.
    ///
    /// # Cancel safety
    /// Cancel safe: a request dropped unsent asks nobody; the next busy
    /// attempt does not know it and asks only if it is due by then.
    pub(crate) async fn ask_if_due<F, Fut>(
        &self,
        name: &[u8],
        woken: &Woken,
        holder: Option<u64>,
        ask: F,
    ) where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<u64>>,
    {
        if !self.due(woken, holder) {
            return;
        }
        match ask().await {
            Ok(heard) => {
                tracing::debug!(name = %String::from_utf8_lossy(name), heard, "asked the holders to let go")
            }
            Err(e) => {
                tracing::warn!(name = %String::from_utf8_lossy(name), error = %e, "could not ask the holders to let go; asking again at the next attempt");
                self.asked.store(false, Ordering::Relaxed);
                self.holder.store(0, Ordering::Relaxed);
            }
        }
    }
}

/// Whether `woken` was a release: a message other than a release request,
/// or a release by this process.
fn woken_by_release(woken: &Woken) -> bool {
    match woken {
        Woken::Released => true,
        Woken::Message(payload) => **payload != *RELEASE_REQUESTED,
        Woken::Start | Woken::Recheck => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(payload: &[u8]) -> Woken {
        Woken::Message(payload.into())
    }

    #[test]
    fn asks_once_per_known_holder() {
        let ask = Ask::new(true);
        assert!(ask.due(&Woken::Start, Some(7)), "the first busy attempt");
        assert!(!ask.due(&Woken::Recheck, Some(7)));
        assert!(!ask.due(&message(b"released"), Some(7)), "the same holder");
        assert!(ask.due(&Woken::Recheck, Some(8)), "another holder");
        assert!(!ask.due(&message(RELEASE_REQUESTED), Some(8)));
    }

    #[test]
    fn without_a_holder_asks_again_after_a_lost_race_only() {
        let ask = Ask::new(true);
        assert!(ask.due(&Woken::Start, None));
        assert!(
            !ask.due(&message(RELEASE_REQUESTED), None),
            "its own request"
        );
        assert!(!ask.due(&Woken::Recheck, None), "a timer");
        assert!(ask.due(&message(b"released"), None), "a release, then busy");
        assert!(ask.due(&Woken::Released, None));
    }

    #[test]
    fn off_never_asks() {
        let ask = Ask::new(false);
        assert!(!ask.due(&Woken::Start, Some(1)));
        assert!(!ask.due(&Woken::Released, None));
    }
}
