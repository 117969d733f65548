//! The one lease under every hold (layer 4): a lock's guard, a semaphore's
//! permit, a read-write lock's reader or writer, an election's leadership.
//!
//! A [`Lease`] owns what every hold has: the owner token, the validity
//! deadline (`sent + ttl - drift`, moved only by an answer), the watchdog,
//! the lost signal, the fencing token, the release with its one failure
//! policy, and the release in the background of a hold dropped without
//! one. What differs between kinds, the scripts, is a [`LeaseSpec`]: how to
//! renew, release and fence one token of it. The one public hold,
//! [`Hold<K>`](hold::Hold), is thin over a lease.
//!
//! Files: `hold.rs` (the public hold, its surface written once),
//! `state.rs` (deadline and lost signal), `renew.rs` (the watchdog),
//! `extend.rs` (the program's own renewals), `at_least.rs` (a release
//! before the hold's least time keeps it until then), `background.rs` (releases
//! left to the background, and the armed guard of an attempt whose reply
//! was never read).

mod at_least;
pub(crate) mod background;
mod extend;
pub(crate) mod hold;
mod live;
pub(crate) mod options;
pub(crate) mod renew;
pub(crate) mod state;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::backend::release_span;
use crate::primitives::lease::background::release_in_background;
use crate::primitives::lease::options::LeaseOptions;
use crate::primitives::lease::renew::Heard;
use crate::primitives::lease::state::{LostSignal, State};
use crate::vocab::error::{Error, Result};
use crate::vocab::metrics::LockLabel;
use crate::vocab::outcome::{Issued, LostReason, Ownership, Renewal};
use crate::vocab::token::short;

/// What a lease holds: the few things a kind of hold does its own way (its
/// scripts). Cheap to clone (an `Arc` inside): the watchdog and background
/// releases keep a clone.
pub(crate) trait LeaseSpec: Clone + Send + Sync + 'static {
    /// The metrics label: the kind and the name.
    fn label(&self) -> &LockLabel;
    /// The primitive's name, as the caller gave it.
    fn name(&self) -> &[u8];
    /// The TTL, watchdog, cap and stop margin of the primitive's holds.
    fn options(&self) -> &LeaseOptions;
    /// What a message on the hold's channel means to the holder: by
    /// default, as for an exclusive hold (anything but a request or a
    /// waiter's mark may mean it changed hands).
    fn heard(&self, payload: &[u8]) -> Heard {
        renew::heard_exclusive(payload)
    }
    /// Where background work is tracked (see [`Client::flush`](crate::Client::flush)).
    fn tracker(&self) -> &tokio_util::task::TaskTracker;
    /// The live holds of the client the hold was taken on (see
    /// [`Client::close`](crate::Client::close)).
    fn live(&self) -> &crate::transport::live::LiveHolds;
    /// Renews `token` for `ttl` from now: what was found, and the new
    /// deadline when renewed. `batch_by`: may wait in the server's renewal
    /// batch until then (`transport/batch.rs`); `None`: sent now.
    fn renew(
        &self,
        token: &str,
        ttl: Duration,
        batch_by: Option<Instant>,
    ) -> impl Future<Output = Renewal> + Send;
    /// Owner-only release of `token`, waking the waiters. `background`: a
    /// clean-up (a dropped guard, a cancelled attempt), not the holder's call.
    fn release(
        &self,
        token: &str,
        background: bool,
    ) -> impl Future<Output = Result<Ownership>> + Send;
    /// Issues a fencing token for a hold of `token` still valid until
    /// `deadline`: `Ok(Err(found))` when it is no longer ours. Kinds that
    /// have no fencing token fail with [`Error::Unsupported`].
    fn issue_fence(&self, token: &str, deadline: Instant) -> impl Future<Output = Issued> + Send;
    /// Subscribes to the channel(s) a release request arrives on (the
    /// primitive's release channel; an election's changes channel).
    fn listen(&self) -> impl Future<Output = Result<crate::backend::Wakeups>> + Send;
    /// A hold of this kind begins (a lock counts its local holds).
    fn began(&self) {}
    /// A hold of this kind ended: released, forgotten or dropped.
    fn ended(&self) {}
}

/// The [`LeaseSpec`] methods every kind answers from its spec's fields (`name`,
/// `lease`, `metrics_label`), reached through the field path given
/// (`hold_basics!(spec)` for `self.spec.…`, or `hold_basics!()` for an
/// `Arc` of the spec itself).
macro_rules! hold_basics {
    ($($field:ident).*) => {
        fn label(&self) -> &crate::vocab::metrics::LockLabel {
            &self $(.$field)* .metrics_label
        }
        fn name(&self) -> &[u8] {
            &self $(.$field)* .name
        }
        fn options(&self) -> &crate::primitives::lease::options::LeaseOptions {
            &self $(.$field)* .lease
        }
    };
}

/// The [`LeaseSpec`] methods of a kind many hold at once (a semaphore's permits,
/// a read-write lock's holds) whose spec, at `self.$field`, has a
/// `session`: other holders' releases on its channel are normal traffic
/// (only a revocation matters to a holder), and its background work is
/// the session's.
macro_rules! shared_hold {
    ($field:ident) => {
        fn heard(&self, payload: &[u8]) -> crate::primitives::lease::renew::Heard {
            crate::primitives::lease::renew::heard_shared(payload)
        }

        fn tracker(&self) -> &tokio_util::task::TaskTracker {
            &self.$field.session.inner.background
        }

        fn live(&self) -> &crate::transport::live::LiveHolds {
            &self.$field.session.inner.live
        }
    };
}

/// [`LeaseSpec::listen`] of a kind whose release requests come on one channel
/// of its session (a permit's, a read-write hold's, a leadership's).
pub(crate) async fn listen_on(
    session: &crate::transport::session::Session,
    channel: &[u8],
) -> Result<crate::backend::Wakeups> {
    let topic = crate::transport::subscriber::Topic::Channel(channel.to_vec());
    let subscription = session.subscriber().subscribe(topic).await?;
    Ok(crate::backend::Wakeups::new(vec![subscription]))
}

/// How far a lease's release got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReleaseState {
    /// Never asked: `Drop` releases in the background.
    NotAsked,
    /// Sent, reply not read (the future was dropped): `Drop` finishes it.
    Sent,
    /// Failed transiently (counted in the metrics): `Drop` tries once more.
    Failed,
    /// Answered, failed for good, or forgotten: nothing left to do.
    Done,
}

/// One hold: see the module docs.
pub(crate) struct Lease<H: LeaseSpec> {
    hold: H,
    token: String,
    /// Set at acquisition (made `with_fencing`, or a leadership's term) or
    /// on the first [`Lease::fencing_token`] call.
    fencing: tokio::sync::OnceCell<u64>,
    state: Arc<State>,
    release: ReleaseState,
    /// When the hold began, for the hold-time metric.
    acquired_at: Instant,
    /// Its place among its client's live holds (what `close` gives back):
    /// the id, and what the registry reaches weakly.
    live: Option<(u64, Arc<live::Entry<H>>)>,
}

impl<H: LeaseSpec> std::fmt::Debug for Lease<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("kind", &self.hold.label().kind())
            .field("name", &String::from_utf8_lossy(self.hold.name()))
            .field("token", &short(&self.token))
            .field("fencing_token", &self.fencing.get())
            .field("held", &self.is_held())
            .finish()
    }
}

impl<H: LeaseSpec> Lease<H> {
    /// A hold of `token`, valid until `valid_until`; starts the watchdog
    /// when the hold has one.
    pub(crate) fn new(
        hold: H,
        token: String,
        fencing_token: Option<u64>,
        valid_until: Instant,
    ) -> Lease<H> {
        let options = hold.options();
        let cap = options.max_hold.map(|d| Instant::now() + d);
        let state = Arc::new(State::new(
            valid_until,
            options.margin(),
            cap,
            hold.label().clone(),
        ));
        if options.renew_every.is_some() {
            start_watch(&hold, &token, &state);
        }
        hold.began();
        tracing::debug!(kind = hold.label().kind(), name = %String::from_utf8_lossy(hold.name()), token = short(&token), ?fencing_token, "acquired");
        let live = live::enter(&hold, &token, &state);
        Lease {
            hold,
            token,
            fencing: tokio::sync::OnceCell::new_with(fencing_token),
            state,
            release: ReleaseState::NotAsked,
            acquired_at: Instant::now(),
            live,
        }
    }

    pub(crate) fn hold(&self) -> &H {
        &self.hold
    }

    pub(crate) fn name(&self) -> &[u8] {
        self.hold.name()
    }

    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    pub(crate) fn state(&self) -> &Arc<State> {
        &self.state
    }

    pub(crate) fn deadline(&self) -> Instant {
        self.state.deadline()
    }

    pub(crate) fn ttl(&self) -> Duration {
        self.hold.options().ttl
    }

    pub(crate) fn is_held(&self) -> bool {
        self.state.is_held()
    }

    /// Completes when the hold is lost: what the watch finds (started on
    /// the first call, if the hold has none), or the stop margin.
    pub(crate) async fn lost(&self) {
        self.watched();
        self.state.until_lost().await
    }

    pub(crate) fn lost_signal(&self) -> LostSignal {
        self.watched();
        self.state.lost_signal()
    }

    /// Why the hold was lost; `None` while it is held.
    pub(crate) fn lost_reason(&self) -> Option<crate::vocab::outcome::LostReason> {
        self.state.reason()
    }

    /// Starts the watch of a hold without a watchdog, once: someone waits
    /// for its `lost`.
    fn watched(&self) {
        if !self
            .state
            .timer_running
            .load(std::sync::atomic::Ordering::Relaxed)
            && !self.state.is_finished()
        {
            start_watch(&self.hold, &self.token, &self.state);
        }
    }

    pub(crate) fn issued_fencing_token(&self) -> Option<u64> {
        self.fencing.get().copied()
    }

    /// The fencing token, issued on the first call unless it came with the
    /// hold; a hold found gone is marked lost ([`Error::NotHeld`]).
    pub(crate) async fn fencing_token(&self) -> Result<u64> {
        self.fencing
            .get_or_try_init(|| async {
                let issued = self
                    .hold
                    .issue_fence(&self.token, self.state.deadline())
                    .await?;
                issued.map_err(|outcome| {
                    tracing::warn!(name = %String::from_utf8_lossy(self.name()), token = short(&self.token), ?outcome, "fencing token refused: the hold is no longer ours");
                    self.state.mark_lost(LostReason::from_check(outcome, false));
                    Error::NotHeld {
                        name: String::from_utf8_lossy(self.name()).into_owned(),
                    }
                })
            })
            .await
            .copied()
    }

    /// A new fencing token for this hold, greater than every one issued
    /// before (also this hold's own): for each local hold inside a hold
    /// kept while idle.
    pub(crate) async fn fresh_fencing_token(&self) -> Result<u64> {
        let issued = self
            .hold
            .issue_fence(&self.token, self.state.deadline())
            .await?;
        issued.map_err(|outcome| {
            self.state.mark_lost(LostReason::from_check(outcome, false));
            Error::NotHeld {
                name: String::from_utf8_lossy(self.name()).into_owned(),
            }
        })
    }

    /// Completes when another process asks this hold to be let go
    /// ([`Client::request_release`](crate::Client::request_release)):
    /// subscribes on the first poll, then reads the channel's messages.
    pub(crate) async fn release_requested(&self) -> Result<()> {
        let mut wakeups = self.hold.listen().await?;
        loop {
            if let crate::transport::subscriber::Event::Message(published) = wakeups.next().await {
                if *published.payload == *crate::vocab::protocol::RELEASE_REQUESTED {
                    tracing::info!(name = %String::from_utf8_lossy(self.name()), token = short(&self.token), "release requested");
                    return Ok(());
                }
                // The watch may not listen yet (it subscribes a little into
                // the hold): what this listener hears, it passes on.
                if self.hold.heard(&published.payload) == (Heard::Check { revoked: true }) {
                    self.state
                        .revoked_heard
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    self.state.check_now.notify_one();
                }
            }
        }
    }

    /// Releases the hold; transient errors are retried by the one failure
    /// policy while the deadline has not passed. Whatever is left undone
    /// (cancelled, or failed transiently) the `Drop` finishes.
    pub(crate) async fn release(&mut self) -> Result<Ownership> {
        if self.state.closed.load(std::sync::atomic::Ordering::SeqCst) {
            // Its client's close released it already.
            self.release = ReleaseState::Done;
            return Ok(Ownership::Expired);
        }
        if let Some(left) = self.hold.options().left_to_keep(self.acquired_at) {
            return self.keep_for(left).await;
        }
        self.release = ReleaseState::Sent;
        self.state.finish();
        let label = self.hold.label();
        crate::vocab::metrics::hold_time(label, self.acquired_at.elapsed());
        let mut retry = crate::vocab::retry::Retry::until(Some(self.state.deadline()));
        let result = loop {
            let span = release_span(label.kind(), self.name(), &self.token);
            let release = self.hold.release(&self.token, false);
            // As in `Lock::try_acquire`: unwrapped without a subscriber for the span.
            let result = match span.is_disabled() {
                true => release.await,
                // Boxed: the release's future, moved into the span's, would
                // otherwise be carried twice by every release's future.
                false => Box::pin(release.instrument(span)).await,
            };
            match result {
                // Boxed: the rare retry's sleep is not carried by every release.
                Err(e) if e.is_transient() => {
                    let what = String::from_utf8_lossy(self.name()).into_owned();
                    match retry.failed(e, &what) {
                        Ok(delay) => Box::pin(tokio::time::sleep(delay)).await,
                        Err(e) => break Err(e),
                    }
                }
                other => break other,
            }
        };
        crate::vocab::metrics::release_outcome(label, result.as_ref().ok().copied());
        self.release = match &result {
            // The request may never have reached Redis: `Drop` tries once
            // more in the background (owner-only, so never someone else's).
            Err(e) if e.is_transient() => ReleaseState::Failed,
            _ => ReleaseState::Done,
        };
        if let Some(outcome) = result.as_ref().ok().filter(|o| **o != Ownership::Owned) {
            tracing::warn!(name = %String::from_utf8_lossy(self.name()), token = short(&self.token), ?outcome, "release found the hold no longer ours");
        }
        result
    }

    /// Stops the watchdog and gives the hold up without releasing it: it
    /// ends at its TTL, or by a release with the token returned.
    pub(crate) fn forget(mut self) -> String {
        self.release = ReleaseState::Done;
        std::mem::take(&mut self.token)
    }
}

/// Starts the watch of a lease (see `renew.rs`): the watchdog, if the hold
/// has one, and the checks its channel and reconnections call for.
fn start_watch<H: LeaseSpec>(hold: &H, token: &str, state: &Arc<State>) {
    if state
        .timer_running
        .swap(true, std::sync::atomic::Ordering::Relaxed)
    {
        return;
    }
    if tokio::runtime::Handle::try_current().is_err() {
        // No runtime to watch on (a guard made or polled outside one):
        // `lost` still fires at the stop margin when polled.
        return;
    }
    let every = hold.options().renewal_interval();
    state
        .watchdog
        .store(every.is_some(), std::sync::atomic::Ordering::Relaxed);
    let (hold, token, state) = (hold.clone(), token.to_owned(), state.clone());
    let cap = state.cap;
    tokio::spawn(renew::watch(hold, token, state, every, cap));
}

impl<H: LeaseSpec> Drop for Lease<H> {
    fn drop(&mut self) {
        self.state.finish();
        // After a release this runs once the release has finished.
        self.hold.ended();
        if let Some((id, _)) = self.live.take() {
            self.hold.live().remove(id);
        }
        if self.state.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let why = match self.release {
            ReleaseState::Done => return,
            ReleaseState::Failed => "the release failed; trying once more",
            ReleaseState::Sent => {
                "the release was cancelled before its reply was read; finishing it"
            }
            ReleaseState::NotAsked => {
                crate::vocab::metrics::hold_time(self.hold.label(), self.acquired_at.elapsed());
                if let Some(left) = self.hold.options().left_to_keep(self.acquired_at) {
                    at_least::keep_in_background(
                        self.hold.clone(),
                        std::mem::take(&mut self.token),
                        left,
                    );
                    return;
                }
                "guard dropped without release()"
            }
        };
        tracing::warn!(kind = self.hold.label().kind(), name = %String::from_utf8_lossy(self.name()), token = short(&self.token), why, "releasing in the background");
        // A failed release was counted already; every other one is counted here.
        let counted = self.release != ReleaseState::Failed;
        release_in_background(
            self.hold.clone(),
            std::mem::take(&mut self.token),
            why,
            counted,
            self.state.deadline(),
        );
    }
}
