//! [`Barrier`]: N parties wait for each other; when the N-th arrives, all N
//! are released together, and the barrier starts its next generation clean.
//!
//! User docs (example, promises) are on the type.
//!
//! The layout and the scripts are in `docs/protocol.md`, "Latches and barriers".

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::primitives::shared::{in_background, key, publish_command, reply_int, Waker, Woken};
use crate::primitives::traced;
use crate::transport::session::Session;
use crate::vocab::error::{Error, Result};
use crate::vocab::metrics::{LockLabel, Outcome, Primitive};
use crate::vocab::names::{check_cluster_name, check_count, check_name, check_ttl, ttl_ms};
use crate::vocab::protocol::scripts;
use crate::vocab::protocol::{BARRIER_RELEASED_SUFFIX, BARRIER_SUFFIX};

/// A barrier of N parties: they wait for each other, and when the N-th
/// arrives all N are released together and the next generation starts
/// clean. A recipe called by name, cheap to clone; made by
/// [`Client::barrier`](crate::Client::barrier).
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let step = client.barrier("simulation-step", 4, Duration::from_secs(600))?;
///
/// for round in 0.. {
///     // ... compute this worker's part of the round ...
///     match step.arrive_and_wait(Duration::from_secs(30)).await? {
///         Some(generation) => println!("round {round}: all 4 done (generation {generation})"),
///         None => break, // someone did not come; our arrival was taken back
///     }
/// }
/// # Ok(()) }
/// ```
///
/// # What it promises
/// * All N parties of a generation are released by one script call: the
///   N-th arrival moves the generation on and publishes the generation
///   released; the others, subscribed before they arrived, wake on that
///   message (or, after a missed message, read the generation and see it
///   moved on). No party of generation g can count towards generation g+1.
/// * A party that gives up (timeout, cancellation) takes its arrival back,
///   unless its generation was released meanwhile: then it was released
///   too, and says so.
/// * Reuse: a barrier is cyclic. Each release starts the next generation
///   empty, and N is a property of a generation, not of the name: every
///   caller passes N, the first arrival of a generation stores it, and an
///   arrival with another N fails with [`Error::PartiesMismatch`] only
///   while parties of that generation wait. With nobody waiting (after a
///   release, or once every party gave up), the next arrival starts the
///   generation with its own N.
/// * The barrier's key lives `ttl` after the last arrival while nobody
///   waits, so an abandoned one disappears; while parties wait, it lives at
///   least as long as the longest of their waits (an arrival raises its TTL
///   to its own timeout plus a second), so a TTL shorter than the wait never
///   makes parties that all arrived time out.
#[derive(Clone)]
pub struct Barrier {
    session: Session,
    name: Arc<[u8]>,
    key: Arc<[u8]>,
    channel: Arc<[u8]>,
    parties: u32,
    ttl: Duration,
    metrics_label: LockLabel,
}

impl std::fmt::Debug for Barrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Barrier")
            .field("name", &String::from_utf8_lossy(&self.name))
            .field("parties", &self.parties)
            .field("ttl", &self.ttl)
            .finish()
    }
}

impl Barrier {
    /// See [`Client::barrier`](crate::Client::barrier).
    pub(crate) fn on_session(
        session: &Session,
        name: &[u8],
        parties: u64,
        ttl: Duration,
    ) -> Result<Barrier> {
        check_name(name)?;
        check_cluster_name(session.prefix(), name, session.is_cluster())?;
        check_ttl(ttl)?;
        let parties = check_count("barrier parties", parties)?;
        Ok(Barrier {
            session: session.clone(),
            name: Arc::from(name),
            key: key(session, name, BARRIER_SUFFIX).into(),
            channel: key(session, name, BARRIER_RELEASED_SUFFIX).into(),
            parties,
            ttl,
            metrics_label: LockLabel::new(&session.inner.metrics_labels, Primitive::Barrier, name),
        })
    }

    /// The barrier's name.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// The number of parties.
    pub fn parties(&self) -> u32 {
        self.parties
    }

    /// The Redis key holding the barrier.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current generation and how many of its parties arrived; `None`
    /// when the barrier does not exist (never used, or gone at its TTL).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn state(&self) -> Result<Option<(u64, u64)>> {
        let mut get = redis::cmd("HMGET");
        get.arg(&self.key[..]).arg("gen").arg("arrived");
        let fields: Vec<Option<String>> =
            self.session.query("barrier state", get, &self.key).await?;
        let parse = |v: Option<&Option<String>>| v.cloned().flatten().map(|s| s.parse::<u64>());
        match (parse(fields.first()), parse(fields.get(1))) {
            (None, _) => Ok(None),
            (Some(Ok(gen)), None) => Ok(Some((gen, 0))),
            (Some(Ok(gen)), Some(Ok(arrived))) => Ok(Some((gen, arrived))),
            _ => Err(Error::WrongType {
                key: String::from_utf8_lossy(&self.key).into_owned(),
            }),
        }
    }

    /// Arrives and waits at most `timeout` for the other parties:
    /// `Ok(Some(generation))` when this generation was released (all
    /// `parties` arrived), `Ok(None)` when the timeout passed first (our
    /// arrival is then taken back). The barrier's key lives at least the
    /// barrier's TTL and `timeout` (plus a second) after our arrival.
    ///
    /// Fails with [`Error::PartiesMismatch`] when parties of the barrier's
    /// current generation wait and it was started with another number of
    /// parties (nothing changed), and with
    /// [`Error::WrongType`] when its key holds something else. A transient
    /// error while waiting is retried until the deadline.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call that had arrived takes its arrival back
    /// in the background (unless its generation was released), tracked by
    /// the client ([`Client::flush`](crate::Client::flush) waits for it).
    pub async fn arrive_and_wait(&self, timeout: Duration) -> Result<Option<u64>> {
        let (label, name) = (&self.metrics_label, &self.name[..]);
        let waiting = traced::wait(label, name, self.arrive_and_wait_once(timeout), |_| None);
        let released = |result: &Result<Option<u64>>| Outcome::of_bounded(result, Option::is_some);
        traced::acquire(label, name, waiting, released, |_| None).await
    }

    /// The arrival and wait of [`Barrier::arrive_and_wait`].
    async fn arrive_and_wait_once(&self, timeout: Duration) -> Result<Option<u64>> {
        let deadline = Instant::now() + timeout;
        // The key outlives our wait: a last party that comes just before our
        // deadline still finds our arrival.
        let keep = self.ttl.max(timeout.saturating_add(KEEP_AFTER_WAIT));
        // Subscribe first: the release cannot slip in before we listen.
        let mut waker =
            Waker::subscribe(&self.session, self.channel.to_vec(), Some(deadline)).await;
        let mut pending = PendingArrival {
            barrier: self,
            token: None,
            generation: 0,
        };
        let Some(generation) = self.arrive(&mut pending, keep).await? else {
            return Ok(pending.released());
        };
        let mine = generation.to_string();
        loop {
            match waker.sleep(None, Some(deadline)).await {
                Woken::Message(payload) if payload[..] == *mine.as_bytes() => {
                    return Ok(pending.released())
                }
                Woken::Message(_) => continue,
                Woken::Recheck => {}
            }
            // A missed message, a timer, the deadline: read where we are.
            match self.state().await {
                Ok(Some((gen, _))) if gen != generation => return Ok(pending.released()),
                Ok(None) => return Ok(pending.gone()),
                Ok(Some(_)) => {}
                Err(e) if e.is_transient() => {}
                Err(e) => return Err(e),
            }
            if Instant::now() >= deadline {
                return pending.leave().await;
            }
        }
    }

    /// The arrival itself. `Ok(None)`: ours was the last (`pending` says
    /// which generation was released).
    async fn arrive(
        &self,
        pending: &mut PendingArrival<'_>,
        keep: Duration,
    ) -> Result<Option<u64>> {
        let parties = self.parties.to_string();
        let ttl = ttl_ms(self.ttl).to_string();
        let keep = ttl_ms(keep.min(KEEP_AT_MOST)).to_string();
        let token = self.session.inner.identity.new_token()?;
        // Armed before the request is sent: if the future is dropped now,
        // the arrival may have happened. Taking back one that did not find
        // nothing under its token.
        pending.token = Some(token.clone());
        let reply: Result<(i64, i64)> = self
            .session
            .eval(
                "barrier arrive",
                &scripts::BARRIER_ARRIVE,
                &[&self.key],
                &[
                    parties.as_bytes(),
                    ttl.as_bytes(),
                    publish_command(&self.session),
                    &self.channel,
                    token.as_bytes(),
                    keep.as_bytes(),
                ],
            )
            .await;
        let (generation, last) = match reply {
            Ok(reply) => reply,
            Err(Error::Redis(e)) if e.code() == Some("BADPARTIES") => {
                pending.token = None;
                let stored = e
                    .detail()
                    .and_then(|d| d.trim().parse().ok())
                    .unwrap_or_default();
                return Err(Error::PartiesMismatch {
                    name: String::from_utf8_lossy(&self.name).into_owned(),
                    stored,
                    given: u64::from(self.parties),
                });
            }
            Err(e) => {
                // A transient failure may have arrived: `pending` takes it back.
                if !e.is_transient() {
                    pending.token = None;
                }
                return Err(e);
            }
        };
        let generation: u64 = reply_int("barrier arrive", generation)?;
        pending.generation = generation;
        if last == 1 {
            pending.token = None;
            return Ok(None);
        }
        Ok(Some(generation))
    }
}

/// Takes an arrival back in the background if the wait is dropped or fails.
struct PendingArrival<'a> {
    barrier: &'a Barrier,
    /// The arrival's token while it may need taking back.
    token: Option<String>,
    /// The generation arrived in, once known.
    generation: u64,
}

impl PendingArrival<'_> {
    /// Our generation was released: nothing to take back.
    fn released(&mut self) -> Option<u64> {
        self.token = None;
        Some(self.generation)
    }

    /// The barrier is gone (its TTL ran out while we waited).
    fn gone(&mut self) -> Option<u64> {
        self.token = None;
        None
    }

    /// Timed out: take our arrival back, unless we were released meanwhile.
    async fn leave(&mut self) -> Result<Option<u64>> {
        let Some(token) = &self.token else {
            return Ok(None);
        };
        let outcome = leave(&self.barrier.session, &self.barrier.key, token).await?;
        self.token = None;
        match outcome {
            0 => Ok(Some(self.generation)),
            _ => Ok(None),
        }
    }
}

impl Drop for PendingArrival<'_> {
    fn drop(&mut self) {
        let Some(token) = self.token.take() else {
            return;
        };
        let session = self.barrier.session.clone();
        let key = self.barrier.key.clone();
        in_background(
            &self.barrier.session,
            "a barrier wait was cancelled or failed after arriving; taking the arrival back",
            async move { leave(&session, &key, &token).await.map(|_| ()) },
        );
    }
}

/// How long past a party's own timeout the barrier's key is kept.
const KEEP_AFTER_WAIT: Duration = Duration::from_secs(1);
/// A bound on that TTL, so that an endless wait (`Duration::MAX`) still
/// makes a TTL Redis accepts.
const KEEP_AT_MOST: Duration = Duration::from_secs(365 * 24 * 3600);

/// Runs the leave script: 1 withdrawn, 0 released already, -1 gone.
async fn leave(session: &Session, key: &[u8], token: &str) -> Result<i64> {
    session
        .eval(
            "barrier leave",
            &scripts::BARRIER_LEAVE,
            &[key],
            &[token.as_bytes()],
        )
        .await
}
