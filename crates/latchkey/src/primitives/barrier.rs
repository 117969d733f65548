//! [`Barrier`]: N parties wait for each other; when the N-th arrives, all N
//! are released together, and the barrier starts its next generation clean.
//!
//! User docs (example, promises) are on the type.
//!
//! The layout and the scripts are in `docs/protocol.md`, "Latches and barriers".

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::primitives::shared::{key, publish_command, reply_int};
use crate::primitives::traced;
use crate::primitives::wait::armed::{undo_in_background, Armed};
use crate::primitives::wait::waker::Waker;
use crate::primitives::wait::{deadline_after, wait_for, AfterOwnRequest, Tried, Waiting, Woken};
use crate::transport::session::Session;
use crate::vocab::error::{Error, Result};
use crate::vocab::kind::Kind;
use crate::vocab::metrics::LockLabel;
use crate::vocab::names::{check_count, check_primitive, ttl_ms};
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
///     match step.arrive_and_wait_until(Duration::from_secs(30)).await {
///         Ok(generation) => println!("round {round}: all 4 done (generation {generation})"),
///         // Someone did not come; our arrival was taken back.
///         Err(latchkey::Error::WaitTimedOut { .. }) => break,
///         Err(e) => return Err(e),
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
/// * A barrier gone under its parties (a restart of Redis without
///   persistence, its key expired under a paused party) and made again by
///   another arrival is not taken for a release, though its generations
///   repeat the old one's: each barrier has an identity (`id`, kept by its
///   releases), and a party of the old one is told it is gone.
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
///   makes parties that all arrived time out. A release keeps that longer
///   life: a party released while it could not hear the message (its
///   subscriber reconnecting) reads the generation moved on later, and is
///   not told the barrier is gone.
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
        check_primitive(session.prefix(), session.is_cluster(), name, ttl)?;
        let parties = check_count("barrier parties", parties)?;
        Ok(Barrier {
            session: session.clone(),
            name: Arc::from(name),
            key: key(session, name, BARRIER_SUFFIX).into(),
            channel: key(session, name, BARRIER_RELEASED_SUFFIX).into(),
            parties,
            ttl,
            metrics_label: LockLabel::new(&session.inner.metrics_labels, Kind::Barrier, name),
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

    /// Arrives and waits as long as it takes for the other parties. See
    /// [`Barrier::arrive_and_wait_until`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Barrier::arrive_and_wait_until`].
    pub async fn arrive_and_wait(&self) -> Result<u64> {
        self.arrive_and_wait_by(None).await
    }

    /// Arrives and waits at most `timeout` for the other parties, then
    /// fails with [`Error::WaitTimedOut`]. See [`Barrier::arrive_and_wait_until`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Barrier::arrive_and_wait_until`].
    #[deprecated(
        since = "0.4.0",
        note = "use `arrive_and_wait_until`, which takes a Duration (from now) as well as an Instant"
    )]
    pub async fn arrive_and_wait_timeout(&self, timeout: Duration) -> Result<u64> {
        self.arrive_and_wait_by(deadline_after(timeout)).await
    }

    /// Arrives and waits until the other parties did (`Ok(generation)`:
    /// this generation was released, all `parties` arrived) or `deadline`
    /// passes ([`Error::WaitTimedOut`]; our arrival is then taken back,
    /// unless the generation was released meanwhile: then it is `Ok`). The
    /// barrier's key lives at least the barrier's TTL and the wait (plus a
    /// second) after our arrival.
    ///
    /// Fails with [`Error::PartiesMismatch`] when parties of the barrier's
    /// current generation wait and it was started with another number of
    /// parties (nothing changed), with [`Error::NotFound`] when the
    /// barrier's key disappeared while we waited (deleted by hand, a
    /// restart without persistence) or was made again since, and
    /// with [`Error::WrongType`] when its key holds something else. A
    /// transient error while waiting is retried until the deadline.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call that had arrived takes its arrival back
    /// in the background (unless its generation was released), tracked by
    /// the client ([`Client::flush`](crate::Client::flush) waits for it).
    pub async fn arrive_and_wait_until(
        &self,
        deadline: impl Into<crate::vocab::deadline::Deadline>,
    ) -> Result<u64> {
        self.arrive_and_wait_by(deadline.into().instant()).await
    }

    /// [`Barrier::arrive_and_wait_until`] with an optional deadline
    /// (`None`: as long as it takes).
    pub(crate) async fn arrive_and_wait_by(&self, deadline: Option<Instant>) -> Result<u64> {
        let (label, name) = (&self.metrics_label, &self.name[..]);
        let waiting =
            crate::primitives::wait::bounded(deadline, self.arrive_and_wait_once(deadline));
        traced::waiting(label, name, waiting).await
    }

    /// The arrival and wait of [`Barrier::arrive_and_wait_until`].
    async fn arrive_and_wait_once(&self, deadline: Option<Instant>) -> Result<u64> {
        let wait = deadline.map_or(Duration::MAX, |d| {
            d.saturating_duration_since(Instant::now())
        });
        // The key outlives our wait: a last party that comes just before our
        // deadline still finds our arrival.
        let keep = self.ttl.max(wait.saturating_add(KEEP_AFTER_WAIT));
        // Subscribe first: the release cannot slip in before we listen.
        let started = Instant::now();
        let mut waker = Waker::subscribe(&self.session, self.channel.to_vec(), deadline).await;
        let token = self.session.inner.identity.new_token()?;
        // Armed from before the request is sent: if the future is dropped
        // now, the arrival may have happened. Taking back one that did not
        // finds nothing under its token.
        let pending = undo_in_background(
            &self.session,
            "a barrier wait was cancelled or failed after arriving; taking the arrival back",
            || {
                let (session, key, token) = (self.session.clone(), self.key.clone(), token.clone());
                // The arrival's reply may not have come: no id to send,
                // and the answer is not used.
                async move { leave(&session, &key, &token, None).await.map(|_| ()) }
            },
        );
        // What came before the arrival is sent is an earlier release (of
        // this barrier, or of one gone since: a generation's number
        // repeats); what comes after may be our generation's, which the
        // first attempt, reading nothing, must not forget.
        waker.skip_pending();
        let (generation, last, id) = self.arrive(&pending, &token, keep).await?;
        if last {
            return Ok(generation);
        }
        let mut waiting = Waiting::new(&self.name, started, deadline, AfterOwnRequest::new(waker));
        let mine = generation.to_string();
        let waited = wait_for(&mut waiting, |woken| {
            let (mine, id) = (mine.as_bytes(), id.as_str());
            async move {
                // A generation's number repeats once the barrier is gone
                // and made again, so what is read is judged with the
                // barrier's identity too (`judge`).
                let heard = match woken {
                    // We just arrived: nothing to read before a message.
                    Woken::Start => return Ok(Tried::Busy { recheck_at: None }),
                    Woken::Message(released) if released[..] == *mine => true,
                    Woken::Message(_) => return Ok(Tried::Busy { recheck_at: None }),
                    // A missed message, a timer: read where we are.
                    Woken::Recheck | Woken::Released => false,
                };
                match judge(self.instance().await?, id, generation, heard) {
                    Judged::Released => Ok(Tried::Done(())),
                    Judged::Waiting => Ok(Tried::Busy { recheck_at: None }),
                    Judged::Gone => Err(Error::NotFound {
                        what: "barrier",
                        name: String::from_utf8_lossy(&self.name).into_owned(),
                    }),
                }
            }
        })
        .await;
        match waited {
            Ok(()) => {
                pending.disarm();
                Ok(generation)
            }
            // Take our arrival back, unless we were released meanwhile
            // (a failure leaves it to `pending`, in the background).
            Err(timed_out @ Error::WaitTimedOut { .. }) => {
                let arrival = Some((id.as_str(), generation));
                let outcome = leave(&self.session, &self.key, &token, arrival).await?;
                pending.disarm();
                match outcome {
                    0 => Ok(generation),
                    _ => Err(timed_out),
                }
            }
            Err(gone @ Error::NotFound { .. }) => {
                pending.disarm();
                Err(gone)
            }
            Err(e) => Err(e),
        }
    }

    /// The barrier's generation and identity (`id`; none when a 0.3 client
    /// made or released it); `None` when it does not exist.
    async fn instance(&self) -> Result<Option<(u64, Option<String>)>> {
        let mut get = redis::cmd("HMGET");
        get.arg(&self.key[..]).arg("gen").arg("id");
        let fields: Vec<Option<String>> =
            self.session.query("barrier state", get, &self.key).await?;
        let id = fields.get(1).cloned().flatten();
        match fields.first().cloned().flatten().map(|g| g.parse::<u64>()) {
            None => Ok(None),
            Some(Ok(gen)) => Ok(Some((gen, id))),
            Some(Err(_)) => Err(Error::WrongType {
                key: String::from_utf8_lossy(&self.key).into_owned(),
            }),
        }
    }

    /// The arrival itself: the generation arrived in, whether ours was the
    /// last arrival (which released it), and the barrier's identity.
    /// Disarms `pending` when nothing is to be taken back.
    async fn arrive(
        &self,
        pending: &Armed<impl FnOnce()>,
        token: &str,
        keep: Duration,
    ) -> Result<(u64, bool, String)> {
        let parties = self.parties.to_string();
        let ttl = ttl_ms(self.ttl).to_string();
        let keep = ttl_ms(keep.min(KEEP_AT_MOST)).to_string();
        let reply: Result<(i64, i64, String)> = self
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
        let (generation, last, id) = match reply {
            Ok(reply) => reply,
            Err(Error::Redis(e)) if e.code() == Some("BADPARTIES") => {
                pending.disarm();
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
                    pending.disarm();
                }
                return Err(e);
            }
        };
        let generation: u64 = reply_int("barrier arrive", generation)?;
        if last == 1 {
            pending.disarm();
        }
        Ok((generation, last == 1, id))
    }
}

/// How long past a party's own timeout the barrier's key is kept.
const KEEP_AFTER_WAIT: Duration = Duration::from_secs(1);
/// A bound on that TTL, so that an endless wait (`Duration::MAX`) still
/// makes a TTL Redis accepts.
const KEEP_AT_MOST: Duration = Duration::from_secs(365 * 24 * 3600);

/// What a waiter makes of the barrier it read: `heard`, whether the
/// release message named its generation.
#[derive(Debug, PartialEq, Eq)]
enum Judged {
    /// Its generation was released: it passes.
    Released,
    /// Not yet.
    Waiting,
    /// The barrier it arrived in is gone (`NotFound`).
    Gone,
}

/// Judges `read` (the barrier's generation and `id`, `None`: no key) for a
/// party that arrived in `generation` of the barrier `id`. Another `id` is
/// another barrier, made after ours was gone (its generations repeat ours):
/// gone, even when its release was the message heard. No `id` (a 0.3
/// client released it) is judged by the generation alone, as 0.3 did; so is
/// a message heard when the key is gone already (at its TTL, after it).
fn judge(read: Option<(u64, Option<String>)>, id: &str, generation: u64, heard: bool) -> Judged {
    match read {
        None if heard => Judged::Released,
        None => Judged::Gone,
        Some((_, Some(stored))) if stored != id => Judged::Gone,
        Some(_) if heard => Judged::Released,
        Some((gen, _)) if gen > generation => Judged::Released,
        Some((gen, _)) if gen == generation => Judged::Waiting,
        // Generations only grow in one barrier: a lower one is another.
        Some(_) => Judged::Gone,
    }
}

/// Runs the leave script: 1 withdrawn, 0 released already, -1 gone (or
/// made again). `arrival`: the barrier's id and the generation the arrival
/// answered, when its reply came.
async fn leave(
    session: &Session,
    key: &[u8],
    token: &str,
    arrival: Option<(&str, u64)>,
) -> Result<i64> {
    let generation = arrival.map(|(_, g)| g.to_string());
    let mut args: Vec<&[u8]> = vec![token.as_bytes()];
    if let (Some((id, _)), Some(generation)) = (arrival, &generation) {
        args.extend([id.as_bytes(), generation.as_bytes()]);
    }
    session
        .eval("barrier leave", &scripts::BARRIER_LEAVE, &[key], &args)
        .await
}

#[cfg(test)]
mod tests {
    use super::{judge, Judged};

    #[test]
    fn another_id_is_gone_and_no_id_is_judged_by_the_generation() {
        let ours = |gen| Some((gen, Some("a".to_string())));
        let other = Some((5, Some("b".to_string())));
        let none = |gen| Some((gen, None));
        // (read, heard) → what a party of barrier "a", generation 1, makes of it.
        for (read, heard, judged) in [
            (ours(2), false, Judged::Released),
            (ours(1), false, Judged::Waiting),
            (ours(1), true, Judged::Released),
            (other.clone(), false, Judged::Gone),
            (other, true, Judged::Gone),
            (none(2), false, Judged::Released),
            (none(1), false, Judged::Waiting),
            (none(0), false, Judged::Gone),
            (None, false, Judged::Gone),
            (None, true, Judged::Released),
        ] {
            assert_eq!(
                judge(read.clone(), "a", 1, heard),
                judged,
                "{read:?} {heard}"
            );
        }
    }
}
