//! [`Leadership`]: proof (while it lasts) that we lead an election: a lease
//! (`primitives/lease/`) over the election's lease key, always renewed by
//! its watchdog, with the term, the value and `proclaim`.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::backend::Backend;
use crate::primitives::election::spec::ElectionSpec;
use crate::primitives::lease::hold::{Hold, HoldKind};
use crate::primitives::lease::{Lease, LeaseSpec};
use crate::vocab::error::{Error, Result};
use crate::vocab::outcome::{Issued, Ownership, Renewal};
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
/// [`lost`](Hold::lost) fires as soon as a renewal finds the lease
/// gone or taken, and at the latest when the lease could have run out
/// (`sent + ttl - drift`). A leader that paused or lost its link finds out
/// there before acting again; a resource it writes to closes the rest of
/// the window by checking [`term`](Hold::term) (the leadership's
/// [fencing token](Hold::fencing_token): the same number).
///
/// It has the surface of every hold ([`deadline`](Hold::deadline),
/// [`is_held`](Hold::is_held), [`extend`](Hold::extend),
/// [`release`](Hold::release), the same as [`resign`](Hold::resign), ...).
///
/// # Dropping
/// Resign with [`resign`](Hold::resign). A leadership dropped without
/// that stops its watchdog, logs a warning and resigns in the background
/// (compare-and-delete with its token), so candidates take over at once.
pub type Leadership = Hold<LeaderKind>;

/// The kind of a [`Leadership`]: an election's hold. Never a value.
#[derive(Debug)]
pub enum LeaderKind {}

impl crate::primitives::guard::sealed::Sealed for LeaderKind {}

#[allow(private_interfaces)]
impl HoldKind for LeaderKind {
    type Spec = Arc<ElectionSpec>;
    type Own = Elected;
    const NAME: &'static str = "Leadership";
}

/// What a leadership keeps beside its lease.
pub struct Elected {
    since: SystemTime,
    value: Mutex<Vec<u8>>,
}

impl Hold<LeaderKind> {
    pub(crate) fn new(
        election: Arc<ElectionSpec>,
        token: String,
        value: Vec<u8>,
        term: u64,
        since: SystemTime,
        valid_until: Instant,
    ) -> Self {
        Hold::with_lease(
            Lease::new(election, token, Some(term), valid_until),
            Elected {
                since,
                value: Mutex::new(value),
            },
        )
    }

    fn election(&self) -> &ElectionSpec {
        self.lease.hold()
    }

    /// The term: greater than every earlier leader's, smaller than every
    /// later one's. A fencing token: pass it to the
    /// [`FencedResource`](crate::FencedResource) (or your own check).
    pub fn term(&self) -> u64 {
        // Issued with the leadership: always there.
        self.issued_fencing_token().unwrap_or_default()
    }

    /// When we were elected (the server's clock).
    pub fn since(&self) -> SystemTime {
        self.own.since
    }

    /// Our value: the campaign's, or the last one proclaimed.
    pub fn value(&self) -> Vec<u8> {
        self.own
            .value
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// True while leadership is not known to be lost and the deadline has
    /// not passed: the same as [`is_held`](Hold::is_held).
    pub fn is_leader(&self) -> bool {
        self.is_held()
    }

    /// Changes our value (what observers see), if we still lead; otherwise
    /// marks the leadership lost. One round trip; observers get the change.
    ///
    /// # Cancel safety
    /// Dropped after the request was sent, the value may or may not have
    /// changed in Redis ([`value`](Hold::value) keeps the old one);
    /// proclaiming again is harmless.
    pub async fn proclaim(&self, value: impl AsRef<[u8]>) -> Result<Ownership> {
        let value = value.as_ref();
        let session = &self.election().session;
        let reply: Vec<i64> = session
            .eval(
                "proclaim",
                &scripts::ELECT_PROCLAIM,
                &[&self.election().keys.key, self.election().state_key()],
                &[
                    self.token().as_bytes(),
                    value,
                    &self.election().keys.channel,
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
            *self.own.value.lock().unwrap_or_else(|p| p.into_inner()) = value.to_vec();
        } else {
            tracing::warn!(election = %self.election().display_name(), token = short(self.token()), ?outcome, "proclaim found us no longer the leader");
            self.lease
                .state()
                .mark_lost(crate::vocab::outcome::LostReason::from_check(
                    outcome, false,
                ));
        }
        Ok(outcome)
    }

    /// Steps down: the same as [`release`](Hold::release) (candidates
    /// and observers are told at once).
    ///
    /// # Cancel safety
    /// As [`release`](Hold::release).
    pub async fn resign(self) -> Result<Ownership> {
        self.release().await
    }
}

/// A leadership by its owner token, without the [`Leadership`]: for a
/// leader that kept only the token between calls (a stateless door,
/// `latchkey serve` or `latchkey mcp`, whose caller is the leader and
/// renews by calling again). The same scripts as the leadership's own
/// renewal and resignation: a wrong or stale token changes nothing and is
/// reported by the outcome.
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let election = client.election("scheduler", Duration::from_secs(60))?;
/// if let Some(leader) = election.try_campaign("host-a").await? {
///     let token = leader.forget();
///     election.extend_token(&token, Duration::from_secs(60)).await?;
///     election.resign_token(&token).await?;
/// }
/// # Ok(()) }
/// ```
impl crate::Election {
    /// Steps down from the leadership of `token` if it still leads:
    /// candidates and observers are told at once. One round trip.
    ///
    /// # Cancel safety
    /// Not finished for you: dropped after the request was sent, the
    /// leadership may or may not have ended (no [`Leadership`] owns this
    /// token, so nothing resigns in the background). Call it again: a
    /// second resignation is harmless (`Expired`).
    pub async fn resign_token(&self, token: &str) -> Result<Ownership> {
        resign_once(&self.inner, token, Resigned::Itself).await
    }

    /// Resets the lease of the leadership of `token` to `ttl` from now if
    /// it still leads: a leader's heartbeat. One round trip. Fails with
    /// [`Error::InvalidTtl`] for a TTL outside
    /// [`MIN_TTL`](crate::limits::MIN_TTL)..=[`MAX_TTL`](crate::limits::MAX_TTL).
    ///
    /// # Cancel safety
    /// Dropped after the request was sent, the lease may or may not have
    /// been reset; calling it again is harmless.
    pub async fn extend_token(&self, token: &str, ttl: Duration) -> Result<Ownership> {
        crate::vocab::names::check_ttl(ttl)?;
        let (outcome, _valid_until) = self.inner.renew(token, ttl, None).await?;
        Ok(outcome)
    }

    /// Resigns the leadership of `token`, whoever holds it (an operator's
    /// revocation: `primitives/revoke.rs`).
    pub(crate) async fn revoke_token(&self, token: &str) -> Result<Ownership> {
        resign_once(&self.inner, token, Resigned::Revoked).await
    }
}

/// A leadership's lease: the election's lease key, renewed as a lock's is,
/// and the resign script.
impl LeaseSpec for Arc<ElectionSpec> {
    hold_basics!();

    fn tracker(&self) -> &tokio_util::task::TaskTracker {
        &self.session.inner.background
    }

    fn live(&self) -> &crate::transport::live::LiveHolds {
        &self.session.inner.live
    }

    async fn renew(&self, token: &str, ttl: Duration, batch_by: Option<Instant>) -> Renewal {
        Backend::Single(self.session.clone())
            .extend(&self.keys, token, ttl, batch_by)
            .await
    }

    fn release(
        &self,
        token: &str,
        _background: bool,
    ) -> impl Future<Output = Result<Ownership>> + Send {
        resign_once(self, token, Resigned::Itself)
    }

    async fn listen(&self) -> Result<crate::backend::Wakeups> {
        crate::primitives::lease::listen_on(&self.session, &self.keys.channel).await
    }

    /// Never asked: the term is issued with the leadership.
    async fn issue_fence(&self, _token: &str, _deadline: Instant) -> Issued {
        Err(Error::Unsupported(
            "a leadership's fencing token is its term",
        ))
    }
}

/// Who ends a leadership: the leader, or an operator's revocation (the
/// script then publishes `revoked` first, so the leader learns why at once).
#[derive(Clone, Copy)]
enum Resigned {
    Itself,
    Revoked,
}

async fn resign_once(election: &ElectionSpec, token: &str, by: Resigned) -> Result<Ownership> {
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
                match by {
                    Resigned::Itself => b"".as_slice(),
                    Resigned::Revoked => b"revoked".as_slice(),
                },
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
