//! [`Leadership`]: proof (while it lasts) that we lead an election, with the
//! watchdog that renews its lease and the signal that says when it is lost
//! (layer 4; the lease is the lock's, see `watchdog`).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use tracing::Instrument;

use crate::backend::Backend;
use crate::primitives::election::spec::ElectionSpec;
use crate::primitives::traced::release_span;
use crate::primitives::watchdog::{watchdog, LostSignal, Signals, State};
use crate::vocab::error::{Error, Result};
use crate::vocab::outcome::Ownership;
use crate::vocab::protocol::scripts;
use crate::vocab::token::short;

/// This process leads an election. Made by
/// [`Election::campaign`](crate::Election::campaign).
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let election = client.election("scheduler", Duration::from_secs(10))?;
/// let leader = election.campaign("v1").await?;
/// leader.proclaim("v2").await?;
/// println!("leading in term {}", leader.term());
/// leader.resign().await?;
/// # Ok(()) }
/// ```
///
/// # What it promises
/// Its lease is renewed by a watchdog every third of the election's TTL;
/// [`lost`](Leadership::lost) fires as soon as a renewal finds the lease
/// gone or taken, and at the latest when the lease could have run out
/// (`sent + ttl - drift`). A leader that paused or lost its link finds out
/// there before acting again; a resource it writes to closes the rest of
/// the window by checking [`term`](Leadership::term).
///
/// # Dropping
/// Resign with [`resign`](Leadership::resign). A leadership dropped without
/// that stops its watchdog, logs a warning and resigns in the background
/// (compare-and-delete with its token), so candidates take over at once.
#[must_use = "the leadership is resigned (in the background) when dropped"]
pub struct Leadership {
    election: Arc<ElectionSpec>,
    token: String,
    term: u64,
    since: SystemTime,
    value: Mutex<Vec<u8>>,
    state: Arc<State>,
    /// Whether `Drop` must still resign (not asked, cancelled, or failed).
    resigned: bool,
    /// When we were elected (monotonic); taken out when the hold is timed.
    elected_at: Option<Instant>,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("election", &self.election.display_name())
            .field("token", &short(&self.token))
            .field("term", &self.term)
            .field("leading", &self.is_leader())
            .finish()
    }
}

impl Leadership {
    pub(crate) fn new(
        election: Arc<ElectionSpec>,
        token: String,
        value: Vec<u8>,
        term: u64,
        since: SystemTime,
        valid_until: Instant,
    ) -> Leadership {
        let state = Arc::new(State {
            valid_until: Mutex::new(valid_until),
            lost: AtomicBool::new(false),
            signals: Mutex::new(Signals::default()),
            timer_running: AtomicBool::new(true),
            metrics_label: election.metrics_label.clone(),
        });
        tokio::spawn(watchdog(
            Backend::Single(election.session.clone()),
            election.keys.clone(),
            token.clone(),
            election.ttl,
            election.ttl / 3,
            state.clone(),
        ));
        tracing::debug!(election = %election.display_name(), token = short(&token), term, "elected");
        Leadership {
            election,
            token,
            term,
            since,
            value: Mutex::new(value),
            state,
            resigned: false,
            elected_at: Some(Instant::now()),
        }
    }

    /// Records the leadership's time, once (at `resign`, or at the drop).
    fn hold_ended(&mut self) {
        if let Some(at) = self.elected_at.take() {
            crate::vocab::metrics::hold_time(&self.election.metrics_label, at.elapsed());
        }
    }

    /// The election's name.
    pub fn name(&self) -> &[u8] {
        &self.election.name
    }

    /// Our owner token: what the lease key holds while we lead.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The term: greater than every earlier leader's, smaller than every
    /// later one's. A fencing token: pass it to the
    /// [`FencedResource`](crate::FencedResource) (or your own check).
    pub fn term(&self) -> u64 {
        self.term
    }

    /// When we were elected (the server's clock).
    pub fn since(&self) -> SystemTime {
        self.since
    }

    /// Our value: the campaign's, or the last one proclaimed.
    pub fn value(&self) -> Vec<u8> {
        self.value.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Until when we may assume we lead (monotonic clock).
    pub fn deadline(&self) -> Instant {
        self.state.deadline()
    }

    /// True while leadership is not known to be lost and the deadline has
    /// not passed. Asks nobody.
    pub fn is_leader(&self) -> bool {
        !self.state.is_lost() && Instant::now() < self.state.deadline()
    }

    /// Completes when leadership can no longer be proven: at once when a
    /// renewal finds the lease gone or taken, otherwise at the deadline
    /// (which the watchdog keeps pushing out while renewals succeed).
    ///
    /// # Cancel safety
    /// Cancel safe; it can be polled again, or from several places.
    pub async fn lost(&self) {
        self.state.until_lost().await
    }

    /// A handle on the [`lost`](Leadership::lost) signal that outlives the
    /// borrow of the leadership.
    pub fn lost_signal(&self) -> LostSignal {
        LostSignal {
            token: self.state.lost_token(),
        }
    }

    /// Changes our value (what observers see), if we still lead; otherwise
    /// marks the leadership lost. One round trip; observers get the change.
    ///
    /// # Cancel safety
    /// Dropped after the request was sent, the value may or may not have
    /// changed in Redis ([`value`](Leadership::value) keeps the old one);
    /// proclaiming again is harmless.
    pub async fn proclaim(&self, value: impl AsRef<[u8]>) -> Result<Ownership> {
        let value = value.as_ref();
        let session = &self.election.session;
        let reply: Vec<i64> = session
            .eval(
                "proclaim",
                &scripts::ELECT_PROCLAIM,
                &[&self.election.keys.key, self.election.state_key()],
                &[
                    self.token.as_bytes(),
                    value,
                    &self.election.keys.channel,
                    session.publish_command(),
                ],
            )
            .await?;
        let outcome = match reply.first() {
            Some(1) => Ownership::Owned,
            Some(0) => Ownership::Expired,
            Some(-1) => Ownership::HeldByOther,
            _ => {
                return Err(Error::Protocol(format!(
                    "proclaim script returned {reply:?}"
                )))
            }
        };
        if outcome == Ownership::Owned {
            *self.value.lock().unwrap_or_else(|p| p.into_inner()) = value.to_vec();
        } else {
            tracing::warn!(election = %self.election.display_name(), token = short(&self.token), ?outcome, "proclaim found us no longer the leader");
            self.state.mark_lost();
        }
        Ok(outcome)
    }

    /// Steps down if we still lead (compare-and-delete): candidates and
    /// observers are told at once. One round trip.
    ///
    /// `Ok(Ownership::Owned)`: we led and now nobody does; `Expired` or
    /// `HeldByOther`: we no longer led. On an error the resign is retried
    /// once in the background; the lease runs out at its TTL otherwise.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before the reply was read, the resign is finished
    /// in the background ([`Client::flush`](crate::Client::flush) waits for it).
    pub async fn resign(mut self) -> Result<Ownership> {
        self.state.finish();
        self.hold_ended();
        let span = release_span(
            &self.election.metrics_label,
            &self.election.name,
            &self.token,
        );
        // An error: `Drop` resigns in the background, and counts that.
        let outcome = resign_once(&self.election, &self.token)
            .instrument(span)
            .await?;
        self.resigned = true;
        crate::vocab::metrics::release_outcome(&self.election.metrics_label, Some(outcome));
        Ok(outcome)
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.state.finish();
        if self.resigned {
            return;
        }
        self.hold_ended();
        resign_in_background(
            self.election.clone(),
            std::mem::take(&mut self.token),
            "leadership dropped without a completed resign()",
            true,
            self.state.deadline(),
        );
    }
}

async fn resign_once(election: &ElectionSpec, token: &str) -> Result<Ownership> {
    let session = &election.session;
    let outcome: i64 = session
        .eval(
            "resign",
            &scripts::ELECT_RESIGN,
            &[&election.keys.key, election.state_key()],
            &[
                token.as_bytes(),
                &election.keys.channel,
                session.publish_command(),
            ],
        )
        .await?;
    match outcome {
        1 => Ok(Ownership::Owned),
        0 => Ok(Ownership::Expired),
        -1 => Ok(Ownership::HeldByOther),
        other => Err(Error::Protocol(format!("resign script returned {other}"))),
    }
}

/// Best-effort resign on the tokio runtime, tracked by the session;
/// `counted`: a leadership's (its release is counted), not a campaign's.
/// Transient errors are retried until `until` (the lease's deadline: after
/// it the lease runs out by itself), so a drop during an outage or a
/// failover still hands leadership on when Redis is back.
pub(crate) fn resign_in_background(
    election: Arc<ElectionSpec>,
    token: String,
    why: &'static str,
    counted: bool,
    until: std::time::Instant,
) {
    if tokio::runtime::Handle::try_current().is_err() {
        tracing::warn!(
            why,
            "no tokio runtime to resign on; the lease runs out at its TTL"
        );
        return;
    }
    let tracker = election.session.inner.background.clone();
    let span = release_span(&election.metrics_label, &election.name, &token);
    let resigning = async move {
        let what = "resign";
        let result =
            crate::vocab::retry::until_deadline(until, &what, || resign_once(&election, &token))
                .await;
        if counted {
            let found = result.as_ref().ok().copied();
            crate::vocab::metrics::release_outcome(&election.metrics_label, found);
        }
        match result {
            Ok(outcome) => {
                tracing::debug!(why, ?outcome, token = short(&token), "background resign")
            }
            Err(e) => {
                tracing::warn!(why, error = %e, "background resign failed; the lease runs out at its TTL")
            }
        }
    };
    tracker.spawn(resigning.instrument(span));
}

/// Resigns in the background a campaign whose attempt was dropped (or
/// failed) after its request was sent: it may have won.
pub(crate) struct PendingCampaign<'a> {
    election: Arc<ElectionSpec>,
    token: Option<&'a str>,
}

impl<'a> PendingCampaign<'a> {
    pub(crate) fn new(election: Arc<ElectionSpec>, token: &'a str) -> Self {
        PendingCampaign {
            election,
            token: Some(token),
        }
    }

    pub(crate) fn disarm(mut self) {
        self.token = None;
    }
}

impl Drop for PendingCampaign<'_> {
    fn drop(&mut self) {
        if let Some(token) = self.token {
            resign_in_background(
                self.election.clone(),
                token.to_owned(),
                "a campaign attempt was cancelled or failed after its request was sent",
                false,
                // A lease it may have taken ends by itself within one TTL.
                std::time::Instant::now() + self.election.ttl,
            );
        }
    }
}
