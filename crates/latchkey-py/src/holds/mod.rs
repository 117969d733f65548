//! Every hold (a lock's guard, a permit, a read or write hold, several
//! locks at once, a leadership) is one Rust object here, `Holding`, over
//! the library's one door, `Box<dyn latchkey::Guard>`; its Python
//! classes are in class.rs (what every hold does) and kinds.rs (each
//! kind's own calls, and the blocking and asyncio twins).

pub(crate) mod class;
pub(crate) mod kinds;
pub(crate) mod lost;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use latchkey::{BoxFuture, LostReason, LostSignal, Ownership};
use tokio::sync::RwLock;

use crate::args::Name;
use crate::clients::core::Core;
use crate::runtime::{drop_in_runtime, pid};

/// A guard of the library, as the one door sees it (`as_any` reaches the
/// calls only one kind has, a leadership's `proclaim`).
pub(crate) use latchkey::Guard as Held;

/// A hold shared by its Python object and the calls in flight on it.
pub(crate) struct Holding {
    /// `None` once released (or forgotten).
    hold: RwLock<Option<Box<dyn Held>>>,
    pub(crate) name: Name,
    pub(crate) token: String,
    pub(crate) ttl: Duration,
    /// The deadline last seen: what `deadline` says once released.
    deadline: Mutex<Instant>,
    /// The fencing token issued, kept past the release.
    issued: Mutex<Option<u64>>,
    /// Why it was lost, kept past the release.
    reason: Mutex<Option<LostReason>>,
    /// Made on first need (`guard.lost`): without a watchdog, a lost
    /// signal starts a timer task, which most holds never need.
    lost: OnceLock<LostSignal>,
    /// The process that holds it (a forked child does nothing with it).
    pub(crate) owner: u32,
    /// The client it was taken with, which keeps the hold until it is
    /// released, lost or forgotten (or the client closed); kept until the
    /// hold is gone: the client's last flush (when it is dropped, and at
    /// exit) then sees the release this hold's drop may leave in the
    /// background.
    client: Arc<Core>,
}

impl Holding {
    /// Made on the runtime (the guard may start tasks).
    pub(crate) fn new(hold: Box<dyn Held>, name: &Name, client: &Arc<Core>) -> Arc<Holding> {
        let holding = Arc::new(Holding {
            name: name.like(hold.name()),
            token: hold.token().to_owned(),
            ttl: hold.ttl(),
            deadline: Mutex::new(hold.deadline()),
            reason: Mutex::new(None),
            issued: Mutex::new(hold.issued_fencing_token()),
            lost: OnceLock::new(),
            hold: RwLock::new(Some(hold)),
            owner: pid(),
            client: client.clone(),
        });
        holding
    }

    /// `latchkey::Guard` boxed: any guard of the library.
    pub(crate) fn of<G: latchkey::Guard + 'static>(
        guard: G,
        name: &Name,
        client: &Arc<Core>,
    ) -> Arc<Holding> {
        Holding::new(Box::new(guard), name, client)
    }

    fn not_held(&self) -> latchkey::Error {
        let whose = match self.owner == pid() {
            true => String::new(),
            false => format!(
                " (held by the parent process {}: a hold does not cross os.fork())",
                self.owner
            ),
        };
        latchkey::Error::NotHeld {
            name: format!("{}{whose}", String::from_utf8_lossy(&self.name.bytes)),
        }
    }

    /// What `op` answers of the hold while it is ours here; `gone` once
    /// released, and in a forked child.
    pub(crate) fn now<R>(&self, gone: R, op: impl FnOnce(&dyn Held) -> R) -> R {
        if self.owner != pid() {
            return gone;
        }
        match self.hold.try_read() {
            Ok(held) => match held.as_deref() {
                Some(hold) => op(hold),
                None => gone,
            },
            Err(_) => gone, // being released
        }
    }

    /// Runs `op` on the hold (a round trip); `NotHeld` once released, and
    /// in a forked child.
    pub(crate) async fn call<R>(
        self: Arc<Self>,
        op: impl for<'a> FnOnce(&'a dyn Held) -> BoxFuture<'a, latchkey::Result<R>>,
    ) -> latchkey::Result<R> {
        if self.owner != pid() {
            return Err(self.not_held());
        }
        let held = self.hold.read().await;
        match held.as_deref() {
            Some(hold) => op(hold).await,
            None => Err(self.not_held()),
        }
    }

    /// Resets the TTL: whether it was still ours (False once released).
    pub(crate) async fn extend(self: Arc<Self>, ttl: Duration) -> latchkey::Result<bool> {
        if self.owner != pid() {
            return Err(self.not_held());
        }
        let held = self.hold.read().await;
        let Some(hold) = held.as_deref() else {
            return Ok(false);
        };
        let owned = hold.extend(ttl).await? == Ownership::Owned;
        self.seen(hold);
        Ok(owned)
    }

    /// Releases if still ours: what it found, `None` when it was released
    /// already (or is a parent's, in a forked child).
    pub(crate) async fn release(self: Arc<Self>) -> latchkey::Result<Option<Ownership>> {
        if self.owner != pid() {
            return Ok(None);
        }
        let taken = self.hold.write().await.take();
        let Some(hold) = taken else {
            return Ok(None);
        };
        self.untrack();
        self.seen(&*hold);
        let found = hold.release().await?;
        if found != Ownership::Owned {
            let mut reason = self.reason.lock().unwrap_or_else(|p| p.into_inner());
            reason.get_or_insert(match found {
                Ownership::HeldByOther => LostReason::TakenOver,
                _ => LostReason::Expired,
            });
        }
        Ok(Some(found))
    }

    /// Gives the hold up without releasing: its owner token.
    pub(crate) async fn forget(self: Arc<Self>) -> latchkey::Result<String> {
        if self.owner != pid() {
            return Err(self.not_held());
        }
        match self.hold.write().await.take() {
            Some(hold) => {
                self.untrack();
                Ok(hold.forget())
            }
            None => Err(self.not_held()),
        }
    }

    /// Kept by its client from now on: called when its Python object is
    /// made. A hold made and never handed to Python (its call cancelled,
    /// its event loop closed) is dropped instead, and released then.
    pub(crate) fn keep(self: &Arc<Self>) {
        self.client.track(self);
    }

    /// No longer kept by the client (released, forgotten or lost).
    fn untrack(&self) {
        // Never the last reference: the caller holds an `Arc` of it.
        drop(self.client.untrack(self as *const Holding as usize));
    }

    fn seen(&self, hold: &dyn Held) {
        if let Some(token) = hold.issued_fencing_token() {
            *self.issued.lock().unwrap_or_else(|p| p.into_inner()) = Some(token);
        }
        *self.deadline.lock().unwrap_or_else(|p| p.into_inner()) = hold.deadline();
        if let Some(reason) = hold.lost_reason() {
            *self.reason.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason);
        }
    }

    /// Until when the hold may be assumed (the last deadline once released).
    pub(crate) fn deadline(&self) -> Instant {
        self.now((), |h| self.seen(h));
        *self.deadline.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The fencing token, if issued already (kept once released).
    pub(crate) fn issued_fencing_token(&self) -> Option<u64> {
        self.now((), |h| self.seen(h));
        *self.issued.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Why it was lost, if it was.
    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        self.now((), |h| self.seen(h));
        *self.reason.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn is_held(&self) -> bool {
        self.now(false, |h| h.is_held())
    }

    /// The hold's lost signal (one that never fires once released, or in
    /// a forked child, where `LostEvent` says it is set).
    pub(crate) fn lost_signal(&self) -> LostSignal {
        if self.owner != pid() {
            return LostSignal::default();
        }
        self.lost
            .get_or_init(|| {
                // Its timer task (no watchdog) needs the runtime.
                let Ok(handle) = crate::runtime::handle() else {
                    return LostSignal::default();
                };
                let _entered = handle.enter();
                self.now(LostSignal::default(), |h| h.lost_signal())
            })
            .clone()
    }
}

impl crate::clients::core::Kept for Holding {
    fn live(&self) -> bool {
        self.now(false, |h| h.lost_reason().is_none())
    }

    fn give_back(self: Arc<Self>) -> BoxFuture<'static, bool> {
        Box::pin(async move { self.release().await.is_ok() })
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        // A hold its client let go of unreleased (known lost): released in
        // the background, which finds it gone (or forgotten, in a forked
        // child).
        if let Some(hold) = self.hold.get_mut().take() {
            drop_in_runtime(hold, self.owner);
        }
    }
}
