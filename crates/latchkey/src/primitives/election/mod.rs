//! [`Election`]: leader election with terms that fence (layer 4).
//!
//! User docs (example, promises) are on the type; below, how it works.
//!
//! # How it works
//! The leader holds a lease, `{P+name}:leader`, a string holding its owner
//! token with a TTL, exactly like a lock key: the [watchdog](crate::LockGuard::lost)
//! renews it every `ttl / 3`, and the leadership's
//! [`lost`](Leadership::lost) fires before the lease could have run out.
//! Beside it, the hash `{P+name}:election` records the leader (token,
//! value, term, since) and two counters: `last_term` and `change`. A
//! campaign, a proclaim and a resign are one script each; each counts a
//! change and publishes it on `{P+name}:election:changes`. The layout is in
//! `docs/protocol.md` ("Elections").
//!
//! **Terms** are issued like fencing tokens: `max(last_term + 1, server
//! time in µs)`, so a successor's term is above its predecessor's, even
//! after a Redis restart that lost the hash. Pass [`Leadership::term`] to a
//! [`FencedResource`](crate::FencedResource).
//!
//! **Candidates** subscribe to the change channel, then try; a busy attempt
//! says how long the leader's lease has left, and the candidate sleeps until
//! a change message or that TTL, whichever is first. Candidates are not
//! served in order: whoever's attempt reaches Redis first after a resign or
//! an expiry wins.

pub(crate) mod leadership;
pub(crate) mod observer;
pub(crate) mod spec;

use std::time::{Duration, Instant, SystemTime};

use std::sync::Arc;

use crate::primitives::election::leadership::Leadership;
use crate::primitives::election::observer::Observer;
use crate::primitives::election::spec::{wrong_type, ElectionSpec, Leader};
use crate::primitives::lease::background::pending;
use crate::primitives::traced;
use crate::primitives::wait::{deadline_after, wait_for, Tried, Waiting};
use crate::transport::session::Session;
use crate::vocab::error::{Error, Result};
use crate::vocab::names::ttl_ms;
use crate::vocab::protocol::scripts;

/// Leader election with terms that fence: candidates campaign until one
/// leads, and its term rejects a deposed leader's writes. A recipe called
/// by name, cheap to clone; made by [`Client::election`](crate::Client::election).
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let election = client.election("scheduler", Duration::from_secs(10))?;
/// let output = client.fenced("scheduler-output")?;
///
/// // Waits until this process is the leader.
/// let leader = election.campaign("host-a:8080").await?;
/// tokio::select! {
///     _ = leader.lost() => eprintln!("no longer the leader: stop at once"),
///     _ = async {
///         // Every write carries the term: a deposed leader's is refused.
///         let _ = output.write(leader.term(), b"tick").await;
///     } => {}
/// }
/// leader.resign().await?;
/// # Ok(()) }
/// ```
///
/// # What it promises
/// * **At most one leader whose lease is valid**: the leader holds a lease
///   like a lock's, renewed by a watchdog every `ttl / 3`; its
///   [`Leadership::lost`] fires before the lease could have run out.
/// * **Terms fence**: each leadership's [`term`](Leadership::term) is
///   greater than every earlier leader's, even after a Redis restart that
///   lost the election's state; pass it to a
///   [`FencedResource`](crate::FencedResource) so a deposed leader's writes
///   are refused.
/// * **Candidates are woken, not polled**, by the election's change
///   messages or the end of the leader's lease; a resigning leader hands
///   over at once.
/// * **Everyone can follow**: [`leader`](Election::leader) reads the
///   current leader, and an [`Observer`](crate::Observer) reports every
///   change in order.
///
/// # Limits
/// Candidates are not served in order: whoever's attempt reaches Redis
/// first after a resign or an expiry wins. As with a lock, a leader that
/// pauses past its lease can still believe it leads for a moment; only the
/// term check at the resource closes that window.
#[derive(Clone)]
pub struct Election {
    pub(crate) inner: Arc<ElectionSpec>,
}

/// One campaign attempt's outcome.
pub(crate) enum Attempt {
    Elected {
        term: u64,
        since: SystemTime,
        valid_until: Instant,
    },
    /// Someone leads; its lease has this long left, if it has a TTL.
    Busy(Option<Duration>),
}

impl Election {
    /// See [`Client::election`](crate::Client::election).
    pub(crate) fn on_session(session: &Session, name: &[u8], ttl: Duration) -> Result<Election> {
        Ok(Election {
            inner: Arc::new(ElectionSpec::new(session, name, ttl)?),
        })
    }

    crate::primitives::builder::lease_limits! {
        "election", "leadership",
        /// Renews a leadership's lease in the background every `every` while
        /// it leads, instead of every `ttl / 3` (a leadership is always
        /// renewed: there is no `with_watchdog` to ask for it). As
        /// [`Lock::with_renewal_every`](crate::Lock::with_renewal_every).
        ///
        /// Fails with [`Error::InvalidInput`] unless `every` is positive and
        /// shorter than the TTL minus the drift allowance.
    }

    /// The election's name.
    pub fn name(&self) -> &[u8] {
        &self.inner.name
    }

    /// The leader's lease TTL (renewed every third of it while leading).
    pub fn ttl(&self) -> Duration {
        self.inner.lease.ttl
    }

    /// Tries once to become the leader, with `value` (what observers see:
    /// an address, a host name). `Ok(None)` if someone else leads. One round
    /// trip.
    ///
    /// # Cancel safety
    /// If the future is dropped after the request was sent, we may have been
    /// elected without knowing it: a resign (compare-and-delete with our
    /// token) is then started in the background, tracked by the client
    /// ([`Client::flush`](crate::Client::flush) waits for it).
    pub async fn try_campaign(&self, value: impl AsRef<[u8]>) -> Result<Option<Leadership>> {
        let trying = async { Ok(self.attempt(value.as_ref()).await?.ok()) };
        let spec = &self.inner;
        traced::first_try(&spec.metrics_label, &spec.name, trying).await
    }

    /// Waits as long as it takes to become the leader. See
    /// [`Election::campaign_until`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Election::campaign_until`].
    pub async fn campaign(&self, value: impl AsRef<[u8]>) -> Result<Leadership> {
        self.campaign_by(value.as_ref(), None).await
    }

    /// Waits at most `wait` to become the leader, then fails with
    /// [`Error::WaitTimedOut`]. See [`Election::campaign_until`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Election::campaign_until`].
    #[deprecated(
        since = "0.4.0",
        note = "use `campaign_until`, which takes a Duration (from now) as well as an Instant"
    )]
    pub async fn campaign_timeout(
        &self,
        value: impl AsRef<[u8]>,
        wait: Duration,
    ) -> Result<Leadership> {
        self.campaign_by(value.as_ref(), deadline_after(wait)).await
    }

    /// Waits until this candidate is the leader or `deadline` passes
    /// ([`Error::WaitTimedOut`]). The candidate is
    /// woken by the change message of a resign, and at the end of the
    /// leader's lease when it ran out without one; with pub/sub down it
    /// polls (10 ms doubling to 500 ms). Transient errors are retried until
    /// the deadline (then returned instead of [`Error::WaitTimedOut`]);
    /// without a deadline, one that persists 30 s is returned.
    /// Candidates are not served in order.
    ///
    /// # Cancel safety
    /// Cancel safe: a campaign dropped while its attempt was in flight, that
    /// may have won in that instant, resigns in the background (see
    /// [`Election::try_campaign`]); the subscription is given up.
    pub async fn campaign_until(
        &self,
        value: impl AsRef<[u8]>,
        deadline: impl Into<crate::vocab::deadline::Deadline>,
    ) -> Result<Leadership> {
        self.campaign_by(value.as_ref(), deadline.into().instant())
            .await
    }

    /// [`Election::campaign_until`] with an optional deadline (`None`: as
    /// long as it takes).
    pub(crate) async fn campaign_by(
        &self,
        value: &[u8],
        deadline: Option<Instant>,
    ) -> Result<Leadership> {
        let spec = &self.inner;
        // The loop subscribes before its first attempt: all of it is the wait.
        let campaign =
            crate::primitives::wait::bounded(deadline, self.campaign_loop(value, deadline));
        traced::waiting(&spec.metrics_label, &spec.name, campaign).await
    }

    /// The loop of [`Election::campaign_until`]: the wait core, woken by
    /// the election's changes and at the end of the leader's lease.
    async fn campaign_loop(&self, value: &[u8], deadline: Option<Instant>) -> Result<Leadership> {
        let spec = &self.inner;
        let mut waiting =
            Waiting::subscribe(&spec.session, &spec.keys.channel, &spec.name, deadline).await;
        wait_for(&mut waiting, |_| async {
            Ok(match self.attempt(value).await? {
                Ok(leadership) => Tried::Done(leadership),
                Err(lease_left) => Tried::busy_for(lease_left),
            })
        })
        .await
    }

    /// Reads the leader once: `None` when nobody leads. One round trip.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn leader(&self) -> Result<Option<Leader>> {
        Ok(self.inner.read().await?.leader)
    }

    /// Follows the leader: a [`Observer`](crate::Observer) whose first
    /// [`next`](crate::Observer::next) is the current leader, then every
    /// change, in order, woken by messages. Subscribes and reads: two round
    /// trips.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future gives up the subscription.
    pub async fn observe(&self) -> Result<Observer> {
        Observer::start(self.inner.clone()).await
    }

    /// One attempt: elected, or how long the leader's lease has left.
    async fn attempt(
        &self,
        value: &[u8],
    ) -> Result<std::result::Result<Leadership, Option<Duration>>> {
        let session = &self.inner.session;
        let token = session.inner.identity.new_token()?;
        let pending = pending(&self.inner, &token);
        let sent = Instant::now();
        let ttl = self.inner.lease.ttl;
        let ttl_arg = ttl_ms(ttl).to_string();
        let reply: Vec<i64> = session
            .eval(
                "campaign",
                &scripts::ELECT_CAMPAIGN,
                &[&self.inner.keys.key, self.inner.state_key()],
                &[
                    token.as_bytes(),
                    ttl_arg.as_bytes(),
                    value,
                    &self.inner.keys.channel,
                    session.publish_command(),
                ],
            )
            .await
            .map_err(wrong_type(&self.inner))?;
        pending.disarm();
        drop(pending);
        let attempt = match reply[..] {
            [1, term, since, _change] => Attempt::Elected {
                term: crate::primitives::election::spec::non_negative(term, "term")?,
                since: SystemTime::UNIX_EPOCH
                    + Duration::from_millis(crate::primitives::election::spec::non_negative(
                        since, "since",
                    )?),
                valid_until: crate::vocab::names::valid_until(sent, ttl),
            },
            [0, pttl] => Attempt::Busy(u64::try_from(pttl).ok().map(Duration::from_millis)),
            _ => {
                return Err(Error::Protocol(format!(
                    "campaign script returned {reply:?}"
                )))
            }
        };
        Ok(match attempt {
            Attempt::Elected {
                term,
                since,
                valid_until,
            } => Ok(Leadership::new(
                self.inner.clone(),
                token,
                value.to_vec(),
                term,
                since,
                valid_until,
            )),
            Attempt::Busy(left) => Err(left),
        })
    }
}
