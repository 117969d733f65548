//! [`LeaseOptions`]: what every primitive whose holds are leases is told
//! about them by its builder (TTL, watchdog, cap, stop margin, fencing,
//! asking), one struct inside each spec instead of six fields in five specs.

use std::time::Duration;

use crate::vocab::error::{Error, Result};

/// The options of a primitive's holds, set by its builder methods
/// (`with_watchdog`, `with_max_hold`, `with_stop_margin`, `with_fencing`,
/// `with_asking`, `with_hold_at_least`) and read by its
/// [`LeaseSpec`](super::LeaseSpec).
#[derive(Clone, Debug)]
pub(crate) struct LeaseOptions {
    /// How long an acquisition or a renewal holds for.
    pub(crate) ttl: Duration,
    /// How often the watchdog renews; `None`: no watchdog.
    pub(crate) renew_every: Option<Duration>,
    /// The cap on a hold, from its acquisition.
    pub(crate) max_hold: Option<Duration>,
    /// How long before the deadline `lost` fires; `None`: the default,
    /// [`default_stop_margin`].
    pub(crate) stop_margin: Option<Duration>,
    /// Whether every acquisition also issues the fencing token.
    pub(crate) fenced: bool,
    /// Whether a waiter asks the holders to let go.
    pub(crate) asking: bool,
    /// The least a hold lasts from its acquisition: a release before then
    /// keeps it until then.
    pub(crate) hold_at_least: Option<Duration>,
}

impl LeaseOptions {
    /// Holds of `ttl`, no watchdog, no cap, the default margin, no token
    /// with the acquisition, waiters that do not ask.
    pub(crate) fn new(ttl: Duration) -> LeaseOptions {
        LeaseOptions {
            ttl,
            renew_every: None,
            max_hold: None,
            stop_margin: None,
            fenced: false,
            asking: false,
            hold_at_least: None,
        }
    }

    /// The stop margin a hold of these options gets: the one asked for, or
    /// the default, never more than half the TTL nor half the cap (so that
    /// `lost` cannot fire before a renewal could have answered, nor as the
    /// hold begins).
    pub(crate) fn margin(&self) -> Duration {
        let asked = self
            .stop_margin
            .unwrap_or_else(|| default_stop_margin(self.ttl));
        let mut most = self.ttl / 2;
        if let Some(cap) = self.max_hold {
            most = most.min(cap / 2);
        }
        asked.min(most)
    }

    /// How long a hold acquired at `acquired` must still be kept when it is
    /// released now (`hold_at_least`): `None` when nothing (or less than a
    /// millisecond, the TTL's unit) is left.
    pub(crate) fn left_to_keep(&self, acquired: std::time::Instant) -> Option<Duration> {
        let left =
            (acquired + self.hold_at_least?).saturating_duration_since(std::time::Instant::now());
        (left >= Duration::from_millis(1)).then_some(left)
    }

    /// How often the watchdog renews, if it does: never so rarely that the
    /// stop margin is reached before two renewals were tried.
    pub(crate) fn renewal_interval(&self) -> Option<Duration> {
        let window = self.ttl.saturating_sub(self.margin());
        self.renew_every.map(|every| every.min(window / 2))
    }
}

/// The stop margin of a hold that was not given one: a fifth of its TTL.
/// With the watchdog's renewals every third of the TTL, that leaves several
/// tries between the first failed renewal and `lost`, and a holder that
/// checks `lost` between steps a fifth of its TTL to stop.
pub(crate) fn default_stop_margin(ttl: Duration) -> Duration {
    ttl / 5
}

/// Checks a stop margin (`with_stop_margin`): at most half the TTL.
pub(crate) fn check_stop_margin(margin: Duration, ttl: Duration) -> Result<Duration> {
    if margin > ttl / 2 {
        return Err(Error::InvalidInput(format!(
            "stop margin {margin:?}: it must be at most half the TTL ({ttl:?})"
        )));
    }
    Ok(margin)
}

/// The `Debug` of a primitive whose holds are leases: its type, name and
/// lease options; the caller adds what only it has, then `finish`es.
pub(crate) fn debug<'a, 'b>(
    f: &'a mut std::fmt::Formatter<'b>,
    kind: &str,
    name: &[u8],
    lease: &LeaseOptions,
) -> std::fmt::DebugStruct<'a, 'b> {
    let mut out = f.debug_struct(kind);
    out.field("name", &String::from_utf8_lossy(name))
        .field("ttl", &lease.ttl)
        .field("renew_every", &lease.renew_every)
        .field("max_hold", &lease.max_hold)
        .field("stop_margin", &lease.stop_margin)
        .field("fenced", &lease.fenced)
        .field("asking", &lease.asking)
        .field("hold_at_least", &lease.hold_at_least);
    out
}
