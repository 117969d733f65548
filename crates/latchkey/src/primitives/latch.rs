//! [`Latch`]: a count-down latch in Redis. One side creates it with a
//! count, workers count it down, and everyone waiting is released when the
//! count reaches zero.
//!
//! User docs (example, promises) are on the type.
//!
//! The layout (one key and one channel with the same hash tag) and the
//! scripts are in `docs/protocol.md`, "Latches and barriers".

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::primitives::shared::{key, publish_command, reply_int};
use crate::primitives::traced;
use crate::primitives::wait::{deadline_after, wait_for, Tried, Waiting, Woken};
use crate::transport::session::Session;
use crate::vocab::error::{Error, Result};
use crate::vocab::kind::Kind;
use crate::vocab::metrics::LockLabel;
use crate::vocab::names::{check_count, check_primitive, ttl_ms};
use crate::vocab::protocol::scripts;
use crate::vocab::protocol::{LATCH_OPENED_SUFFIX, LATCH_SUFFIX};

/// A count-down latch in Redis: one side creates it with a count, workers
/// count it down, and everyone waiting is released when the count reaches
/// zero. A recipe called by name, cheap to clone; made by
/// [`Client::latch`](crate::Client::latch).
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let shards_loaded = client.latch("shards-loaded", Duration::from_secs(3600))?;
///
/// // The coordinator (creating an existing latch changes nothing):
/// shards_loaded.create(3).await?;
///
/// // Each of the 3 loaders, when done:
/// let left = shards_loaded.count_down().await?;
/// println!("{left} shard(s) to go");
///
/// // Anyone, any time (also after the latch opened: then at once):
/// match shards_loaded.wait_until(Duration::from_secs(60)).await {
///     Ok(()) => println!("all shards are loaded"),
///     Err(latchkey::Error::WaitTimedOut { .. }) => println!("still loading"),
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
///
/// # What it promises
/// * The state lives in Redis (unlike a [signal](crate::Client::signal)): a
///   waiter that comes after the latch opened returns at once, and one that
///   comes before it was even created waits for it.
/// * Waiting is woken by a message on the latch's channel, not by polling:
///   a waiter subscribes *first* and then reads the count, so the opening
///   cannot slip between the two. A missed message (a reconnection) makes
///   the waiter read the count again; so does a 5 s timer, as a safety net.
///   Without pub/sub it polls with backoff (10 ms to 500 ms).
/// * A latch lives `ttl` after its **creation**, then disappears: an
///   abandoned latch does not stay in Redis, and an open one is remembered
///   until then (late waiters return at once). Count-downs keep the TTL its
///   creator gave it, whatever TTL the counting [`Latch`] was made with, so
///   choose the creator's TTL to cover the count-downs and the late waiters.
/// * A latch opens once, as in Java: [`create`](Latch::create) on an open
///   latch fails with [`Error::LatchOpen`] (it does not re-arm it, and it
///   does not pretend to have created it: the next `wait` would pass at
///   once). To count again, use a new name (one per run, e.g. with a run id
///   in it), or let the open latch expire.
#[derive(Clone)]
pub struct Latch {
    session: Session,
    name: Arc<[u8]>,
    key: Arc<[u8]>,
    channel: Arc<[u8]>,
    ttl: Duration,
    metrics_label: LockLabel,
}

impl std::fmt::Debug for Latch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Latch")
            .field("name", &String::from_utf8_lossy(&self.name))
            .field("ttl", &self.ttl)
            .finish()
    }
}

impl Latch {
    /// See [`Client::latch`](crate::Client::latch).
    pub(crate) fn on_session(session: &Session, name: &[u8], ttl: Duration) -> Result<Latch> {
        check_primitive(session.prefix(), session.is_cluster(), name, ttl)?;
        Ok(Latch {
            session: session.clone(),
            name: Arc::from(name),
            key: key(session, name, LATCH_SUFFIX).into(),
            channel: key(session, name, LATCH_OPENED_SUFFIX).into(),
            ttl,
            metrics_label: LockLabel::new(&session.inner.metrics_labels, Kind::Latch, name),
        })
    }

    /// The latch's name.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// The Redis key holding the count.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    fn display_name(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }

    /// Creates the latch with `count` (1 to [`MAX_COUNT`](crate::limits::MAX_COUNT)),
    /// living `ttl`, unless it exists: `Ok(true)` if this call created it,
    /// `Ok(false)` if it existed already and is still closed (its count is
    /// left as it was; see [`count`](Latch::count)). One round trip.
    ///
    /// Fails with [`Error::LatchOpen`] when the latch exists and is open
    /// already (a latch opens once; see [`Latch`]), with
    /// [`Error::InvalidCount`] for a count of 0 or above
    /// [`MAX_COUNT`](crate::limits::MAX_COUNT), and with [`Error::WrongType`] when
    /// the key holds something other than a latch.
    ///
    /// # Cancel safety
    /// If the future is dropped after the request was sent, the latch may or
    /// may not have been created; calling again is safe (it is idempotent,
    /// unless the latch opened in between: then it says so).
    pub async fn create(&self, count: u64) -> Result<bool> {
        let count = check_count("latch count", count)?.to_string();
        let ttl = ttl_ms(self.ttl).to_string();
        let reply: Vec<i64> = self
            .session
            .eval(
                "latch create",
                &scripts::LATCH_CREATE,
                &[&self.key],
                &[count.as_bytes(), ttl.as_bytes()],
            )
            .await?;
        match reply[..] {
            [1, ..] => Ok(true),
            [0, 0, pttl, ..] => Err(Error::LatchOpen {
                name: self.display_name(),
                expires_in: u64::try_from(pttl).ok().map(Duration::from_millis),
            }),
            [0, ..] => Ok(false),
            _ => Err(Error::Protocol(format!(
                "latch create script returned {reply:?}"
            ))),
        }
    }

    /// Counts the latch down by one and returns the count left; the call
    /// that reaches 0 opens the latch and wakes every waiter. Keeps the TTL
    /// the latch was created with (this `Latch`'s TTL plays no part). One
    /// round trip.
    ///
    /// Fails with [`Error::CountedBelowZero`] when the latch is open
    /// already, [`Error::NotFound`] when it does not exist (never created,
    /// or gone at its TTL), and [`Error::WrongType`] when the key holds
    /// something other than a latch.
    ///
    /// # Cancel safety
    /// Not idempotent: if the future is dropped after the request was sent,
    /// the latch may or may not have been counted down, and counting again
    /// may count twice. Read [`count`](Latch::count) to find out.
    pub async fn count_down(&self) -> Result<u64> {
        let span = tracing::debug_span!("count_down", kind = self.metrics_label.kind(), lock = %self.display_name());
        let result = self.count_down_once().instrument(span).await;
        crate::vocab::metrics::count_down(&self.metrics_label, &result);
        result
    }

    async fn count_down_once(&self) -> Result<u64> {
        let left: i64 = self
            .session
            .eval(
                "latch count down",
                &scripts::LATCH_COUNT_DOWN,
                &[&self.key],
                &[publish_command(&self.session), &self.channel],
            )
            .await?;
        match left {
            -1 => Err(Error::NotFound {
                what: "latch",
                name: self.display_name(),
            }),
            -2 => Err(Error::CountedBelowZero {
                name: self.display_name(),
            }),
            n => reply_int("latch count down", n),
        }
    }

    /// The count left now: `Some(0)` when the latch is open, `None` when it
    /// does not exist (not created yet, or gone at its TTL). One `GET`.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn count(&self) -> Result<Option<u64>> {
        let mut get = redis::cmd("GET");
        get.arg(&self.key[..]);
        let value: Option<Vec<u8>> = self.session.query("latch count", get, &self.key).await?;
        let Some(value) = value else {
            return Ok(None);
        };
        std::str::from_utf8(&value)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .map(Some)
            .ok_or_else(|| Error::WrongType {
                key: String::from_utf8_lossy(&self.key).into_owned(),
            })
    }

    /// Waits as long as it takes for the latch to open (at once if it is
    /// already). See [`Latch::wait_until`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Latch::wait_until`].
    pub async fn wait(&self) -> Result<()> {
        self.wait_by(None).await
    }

    /// Waits at most `timeout` for the latch to open, then fails with
    /// [`Error::WaitTimedOut`]. See [`Latch::wait_until`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Latch::wait_until`].
    #[deprecated(
        since = "0.4.0",
        note = "use `wait_until`, which takes a Duration (from now) as well as an Instant"
    )]
    pub async fn wait_timeout(&self, timeout: Duration) -> Result<()> {
        self.wait_by(deadline_after(timeout)).await
    }

    /// Waits until the latch is open (`Ok(())`, at once if it is already)
    /// or `deadline` passes ([`Error::WaitTimedOut`]). A latch that does
    /// not exist yet is waited for. Transient Redis errors are retried with
    /// backoff; when the last read before the deadline failed, that error
    /// is returned instead of [`Error::WaitTimedOut`] (an outage is not
    /// "still closed").
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads, and dropping it gives up its
    /// subscription.
    pub async fn wait_until(
        &self,
        deadline: impl Into<crate::vocab::deadline::Deadline>,
    ) -> Result<()> {
        self.wait_by(deadline.into().instant()).await
    }

    /// [`Latch::wait_until`] with an optional deadline (`None`: as long as
    /// it takes).
    pub(crate) async fn wait_by(&self, deadline: Option<Instant>) -> Result<()> {
        let (label, name) = (&self.metrics_label, &self.name[..]);
        traced::waiting(
            label,
            name,
            crate::primitives::wait::bounded(deadline, self.wait_loop(deadline)),
        )
        .await
    }

    /// The loop of [`Latch::wait_until`]: the wait core, where the message
    /// (only the count-down that opens the latch publishes) is the answer.
    async fn wait_loop(&self, deadline: Option<Instant>) -> Result<()> {
        let mut waiting =
            Waiting::subscribe(&self.session, &self.channel, &self.name, deadline).await;
        wait_for(&mut waiting, |woken| async move {
            if let Woken::Message(_) = woken {
                return Ok(Tried::Done(()));
            }
            Ok(match self.count().await? {
                Some(0) => Tried::Done(()),
                _ => Tried::Busy { recheck_at: None },
            })
        })
        .await
    }
}
