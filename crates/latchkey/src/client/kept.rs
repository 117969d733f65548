//! [`Kept`]: a hold its client keeps until the program releases it, it is
//! lost, or the client is closed — whoever holds (or drops) the handles.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::RwLock;
use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::primitives::guard::{BoxFuture, Guard};
use crate::primitives::lease::state::LostSignal;
use crate::transport::live::Live;
use crate::vocab::error::{Error, Result};
use crate::vocab::outcome::{LostReason, Ownership};

/// A hold kept by its client ([`Client::keep`]): shared by every clone of
/// the handle and released through any of them, and alive until the
/// program releases or forgets it, it is lost, or the client is
/// [closed](Client::close) — never because the last handle was dropped.
/// What a binding hands to a host whose objects a garbage collector may
/// take at any time, or a program shares between tasks that may each end
/// the hold.
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// use std::time::Duration;
/// let guard = client.lock("report", Duration::from_secs(30))?.with_watchdog().acquire().await?;
/// let kept = client.keep(Box::new(guard))?;
/// let worker = {
///     let kept = kept.clone();
///     tokio::spawn(async move {
///         tokio::select! {
///             _ = kept.lost() => eprintln!("lost: {}", kept.lost_reason().expect("lost")),
///             _ = async { /* the job */ } => {}
///         }
///         // Released by whichever side gets there first; the other finds
///         // it released already (`None`).
///         kept.release().await
///     })
/// };
/// drop(worker); // the hold stays: the client keeps it
/// assert!(kept.is_held());
/// kept.release().await?;
/// # Ok(()) }
/// ```
///
/// Once released or forgotten, what the hold was stays readable (its
/// name, token, last deadline, fencing token, why it was lost) and every
/// call to Redis fails with [`Error::NotHeld`].
#[derive(Clone)]
pub struct Kept {
    shared: Arc<Shared>,
}

struct Shared {
    /// `None` once released or forgotten.
    guard: RwLock<Option<Box<dyn Guard>>>,
    name: Vec<u8>,
    token: String,
    ttl: Duration,
    /// What was last seen of the hold: what is answered once it ended.
    seen: Mutex<Seen>,
    /// Made on first need: a hold without a watchdog then starts the
    /// timer task most holds never need.
    lost: OnceLock<LostSignal>,
    /// Cancelled when the program releases or forgets the hold.
    ended: CancellationToken,
    /// Its place among the client's kept holds.
    id: OnceLock<u64>,
    client: Client,
    /// Where the hold was kept: its drop (the last handle's, after the
    /// client let go) may release in the background from a thread
    /// outside any runtime (a garbage collector's).
    runtime: Option<tokio::runtime::Handle>,
}

#[derive(Clone, Copy)]
struct Seen {
    deadline: Instant,
    issued: Option<u64>,
    reason: Option<LostReason>,
}

impl Client {
    /// Keeps `guard` (taken through this client) until the program releases
    /// or forgets it, it is lost, or this client is closed: the
    /// [`Kept`] handle can be cloned, shared and dropped freely, and
    /// released through any clone. Fails with
    /// [`Error::ClientClosed`] once the client is closed (the guard was
    /// ended by the close already).
    pub fn keep(&self, guard: Box<dyn Guard>) -> Result<Kept> {
        let shared = Arc::new(Shared {
            name: guard.name().to_vec(),
            token: guard.token().to_owned(),
            ttl: guard.ttl(),
            seen: Mutex::new(Seen {
                deadline: guard.deadline(),
                issued: guard.issued_fencing_token(),
                reason: guard.lost_reason(),
            }),
            guard: RwLock::new(Some(guard)),
            lost: OnceLock::new(),
            ended: CancellationToken::new(),
            id: OnceLock::new(),
            client: self.clone(),
            runtime: tokio::runtime::Handle::try_current().ok(),
        });
        match self.backend.live().keep(shared.clone()) {
            Some(id) => {
                let _ = shared.id.set(id);
                Ok(Kept { shared })
            }
            None => Err(Error::ClientClosed),
        }
    }
}

impl Kept {
    /// The name of what is held.
    pub fn name(&self) -> &[u8] {
        &self.shared.name
    }

    /// The owner token Redis keeps for the hold.
    pub fn token(&self) -> &str {
        &self.shared.token
    }

    /// How long an acquisition or a renewal holds for.
    pub fn ttl(&self) -> Duration {
        self.shared.ttl
    }

    /// Until when the hold may be assumed ([`Hold::deadline`](crate::Hold::deadline));
    /// the last one seen once it ended.
    pub fn deadline(&self) -> Instant {
        self.shared.refresh();
        self.shared.seen().deadline
    }

    /// The fencing token, if one was issued (kept once the hold ended).
    pub fn issued_fencing_token(&self) -> Option<u64> {
        self.shared.refresh();
        self.shared.seen().issued
    }

    /// Why the hold was lost, if it was (kept once it ended; a release
    /// that found it no longer ours says `TakenOver` or `Expired`).
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.shared.refresh();
        self.shared.seen().reason
    }

    /// Whether it is still ours ([`Hold::is_held`](crate::Hold::is_held));
    /// false once it ended.
    pub fn is_held(&self) -> bool {
        self.with_guard(|g| g.is_held()).unwrap_or(false)
    }

    /// Whether the program released or forgot it.
    pub fn is_ended(&self) -> bool {
        self.shared.ended.is_cancelled()
    }

    /// The hold's lost signal ([`Hold::lost_signal`](crate::Hold::lost_signal));
    /// one that never fires once the hold ended.
    pub fn lost_signal(&self) -> LostSignal {
        if self.is_ended() {
            return LostSignal::default();
        }
        self.shared
            .lost
            .get_or_init(|| {
                // A hold without a watchdog starts its timer task here.
                let _entered = self.shared.runtime.as_ref().map(|r| r.enter());
                self.with_guard(|g| g.lost_signal()).unwrap_or_default()
            })
            .clone()
    }

    /// Completes when the hold is lost ([`Hold::lost`](crate::Hold::lost));
    /// never once the program released it.
    ///
    /// # Cancel safety
    /// Cancel safe; it can be polled again, or from several places.
    pub async fn lost(&self) {
        self.lost_signal().lost().await
    }

    /// Completes when the program releases or forgets the hold.
    ///
    /// # Cancel safety
    /// Cancel safe; it can be polled again, or from several places.
    pub async fn ended(&self) {
        self.shared.ended.cancelled().await
    }

    /// `op` on the guard while it is held here: `None` once the hold ended,
    /// and while a release is in flight. What only one kind has is reached
    /// through [`Guard::as_any`].
    pub fn with_guard<R>(&self, op: impl FnOnce(&dyn Guard) -> R) -> Option<R> {
        let held = self.shared.guard.try_read().ok()?;
        held.as_deref().map(op)
    }

    /// Runs `op` (a call to Redis) on the guard; [`Error::NotHeld`] once
    /// the hold ended. A release waits for the calls in flight.
    ///
    /// # Cancel safety
    /// As `op`'s.
    pub async fn call<R>(
        &self,
        op: impl for<'a> FnOnce(&'a dyn Guard) -> BoxFuture<'a, Result<R>>,
    ) -> Result<R> {
        let held = self.shared.guard.read().await;
        let Some(guard) = held.as_deref() else {
            return Err(self.shared.not_held());
        };
        let result = op(guard).await;
        self.shared.saw(guard);
        result
    }

    /// Resets the TTL ([`Hold::extend`](crate::Hold::extend)).
    ///
    /// # Cancel safety
    /// As [`Hold::extend`](crate::Hold::extend).
    pub async fn extend(&self, ttl: Duration) -> Result<Ownership> {
        self.call(|g| g.extend(ttl)).await
    }

    /// Asks Redis whether it is still ours ([`Hold::confirm`](crate::Hold::confirm)).
    ///
    /// # Cancel safety
    /// Cancel safe: nothing changes but, on a reply, what is known.
    pub async fn confirm(&self) -> Result<Ownership> {
        self.call(|g| g.confirm()).await
    }

    /// The fencing token ([`Hold::fencing_token`](crate::Hold::fencing_token)).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call issues no token, or one nobody uses.
    pub async fn fencing_token(&self) -> Result<u64> {
        self.call(|g| g.fencing_token()).await
    }

    /// Every fencing token of the hold ([`Guard::fencing_tokens`]).
    ///
    /// # Cancel safety
    /// As [`fencing_token`](Kept::fencing_token).
    pub async fn fencing_tokens(&self) -> Result<Vec<u64>> {
        self.call(|g| g.fencing_tokens()).await
    }

    /// Completes when another process asks the hold to be let go
    /// ([`Hold::release_requested`](crate::Hold::release_requested)).
    /// A release waits for it to be dropped: select it against
    /// [`ended`](Kept::ended).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it unsubscribes.
    pub async fn release_requested(&self) -> Result<()> {
        self.call(|g| g.release_requested()).await
    }

    /// Releases the hold (owner-only), whichever clone asks: what it found,
    /// or `None` when it was released or forgotten already. Waits for the
    /// calls in flight on it.
    ///
    /// # Cancel safety
    /// Cancel safe: the hold is no longer kept once this is first polled;
    /// dropped before the reply was read, the release is finished in the
    /// background ([`Client::flush`] waits for it).
    pub async fn release(&self) -> Result<Option<Ownership>> {
        self.shared.ended.cancel();
        let taken = self.shared.guard.write().await.take();
        let Some(guard) = taken else {
            return Ok(None);
        };
        self.shared.let_go();
        self.shared.saw(&*guard);
        let found = guard.release().await?;
        if found != Ownership::Owned {
            self.shared.seen_mut().reason.get_or_insert(match found {
                Ownership::HeldByOther => LostReason::TakenOver,
                _ => LostReason::Expired,
            });
        }
        Ok(Some(found))
    }

    /// Gives the hold up without releasing it ([`Hold::forget`](crate::Hold::forget)):
    /// its owner token, or `None` when it ended already.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped while a call in flight holds the hold, it
    /// forgets nothing (the hold stops being kept from its first poll).
    pub async fn forget(&self) -> Option<String> {
        self.shared.ended.cancel();
        let taken = self.shared.guard.write().await.take()?;
        self.shared.let_go();
        self.shared.saw(&*taken);
        Some(taken.forget())
    }
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kept")
            .field("name", &String::from_utf8_lossy(&self.shared.name))
            .field("token", &crate::vocab::token::short(&self.shared.token))
            .field("held", &self.is_held())
            .field("ended", &self.is_ended())
            .finish()
    }
}

impl Shared {
    fn seen(&self) -> Seen {
        *self.seen_mut()
    }

    fn seen_mut(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes what the guard says now.
    fn saw(&self, guard: &dyn Guard) {
        let mut seen = self.seen_mut();
        seen.deadline = guard.deadline();
        if let Some(token) = guard.issued_fencing_token() {
            seen.issued = Some(token);
        }
        if let Some(reason) = guard.lost_reason() {
            seen.reason = Some(reason);
        }
    }

    fn refresh(&self) {
        if let Ok(held) = self.guard.try_read() {
            if let Some(guard) = held.as_deref() {
                self.saw(guard);
            }
        }
    }

    fn not_held(&self) -> Error {
        Error::NotHeld {
            name: String::from_utf8_lossy(&self.name).into_owned(),
        }
    }

    /// No longer kept by the client.
    fn let_go(&self) {
        if let Some(id) = self.id.get() {
            self.client.backend.live().let_go(*id);
        }
    }
}

impl Live for Shared {
    fn close(&self) {
        // The hold itself is among the client's live holds, which the
        // close ended first; what is left is to say so to the waiters.
        self.refresh();
    }

    fn ended(&self) -> bool {
        match self.guard.try_read() {
            Ok(held) => held.as_deref().is_none_or(|g| g.lost_reason().is_some()),
            Err(_) => false, // a release in flight lets go of it itself
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Let go of by the client unreleased (lost, or closed) and by every
        // handle: what is left of it is released in the background, on the
        // runtime it was kept on.
        if let Some(guard) = self.guard.get_mut().take() {
            let _entered = self.runtime.as_ref().map(|r| r.enter());
            drop(guard);
        }
    }
}
