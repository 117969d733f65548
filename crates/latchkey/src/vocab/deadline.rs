//! [`Deadline`]: when a wait gives up. Every waiting call takes one
//! (`acquire_until`, `read_until`, `campaign_until`, …), as an instant, a
//! duration from now, or never, so that each wait is spelled once.

use std::time::{Duration, Instant};

/// When a wait gives up: at an instant, a duration from now, or never.
/// Every `…_until` call takes `impl Into<Deadline>`, so an [`Instant`], a
/// [`Duration`] (from now) or an `Option<Instant>` (`None`: never) does.
///
/// ```no_run
/// # async fn demo(lock: latchkey::Lock) -> latchkey::Result<()> {
/// use std::time::{Duration, Instant};
/// let guard = lock.acquire_until(Duration::from_secs(5)).await?; // 5 s from now
/// guard.release().await?;
/// let at = Instant::now() + Duration::from_secs(5);
/// let guard = lock.acquire_until(at).await?; // the same, as an instant
/// guard.release().await?;
/// # Ok(()) }
/// ```
///
/// A deadline bounds more than the wait for a holder: the retries of a
/// Redis outage on the way, and a fair waiter's place in the queue, end
/// with it too; that is why it is an argument and not a
/// `tokio::time::timeout` around the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Deadline(Option<Instant>);

impl Deadline {
    /// A wait that never gives up.
    pub const NEVER: Deadline = Deadline(None);

    /// At `instant`.
    pub fn at(instant: Instant) -> Deadline {
        Deadline(Some(instant))
    }

    /// `wait` from now (never, for a duration too long to add to now).
    pub fn after(wait: Duration) -> Deadline {
        Deadline(Instant::now().checked_add(wait))
    }

    /// The instant, `None` for never.
    pub fn instant(self) -> Option<Instant> {
        self.0
    }
}

impl From<Instant> for Deadline {
    fn from(instant: Instant) -> Deadline {
        Deadline::at(instant)
    }
}

impl From<Duration> for Deadline {
    fn from(wait: Duration) -> Deadline {
        Deadline::after(wait)
    }
}

impl From<Option<Instant>> for Deadline {
    fn from(instant: Option<Instant>) -> Deadline {
        Deadline(instant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_is_one_deadline() {
        let at = Instant::now() + Duration::from_secs(5);
        assert_eq!(Deadline::from(at).instant(), Some(at));
        assert_eq!(Deadline::from(Some(at)), Deadline::at(at));
        assert_eq!(Deadline::from(None::<Instant>), Deadline::NEVER);
        let after = Deadline::from(Duration::from_secs(5)).instant().unwrap();
        assert!(after > Instant::now() + Duration::from_secs(4));
        assert_eq!(Deadline::after(Duration::MAX), Deadline::NEVER);
    }
}
