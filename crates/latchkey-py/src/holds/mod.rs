//! Every hold (a lock's guard, a permit, a read or write hold, several
//! locks at once, a leadership) is one library handle here, a
//! `latchkey::Kept`: the client keeps the hold until the program releases
//! it, it is lost, the client is closed or the interpreter exits, never
//! because Python collected its object. A hold just taken is `Taken`
//! until its Python object is made (class.rs: what every hold does;
//! kinds.rs: each kind's own calls, and the blocking and asyncio twins).

pub(crate) mod class;
pub(crate) mod kinds;
pub(crate) mod lost;

use std::sync::Arc;

use latchkey::{BoxFuture, Kept, Ownership};
use pyo3::prelude::*;

use crate::args::Name;
use crate::clients::core::Core;
use crate::runtime::{drop_in_runtime, pid};

/// A guard of the library, as the one door sees it (`as_any` reaches the
/// calls only one kind has, a leadership's `proclaim`).
pub(crate) use latchkey::Guard as Held;

/// A hold taken and not yet handed to Python: kept by its client once its
/// Python object is made. Dropped before (its call cancelled, its event
/// loop closed), it is released in the background, as a dropped guard is.
pub(crate) struct Taken {
    guard: Option<Box<dyn Held>>,
    name: Name,
    core: Arc<Core>,
    owner: u32,
}

impl Taken {
    pub(crate) fn new(guard: Box<dyn Held>, name: &Name, core: &Arc<Core>) -> Taken {
        Taken {
            name: name.like(guard.name()),
            guard: Some(guard),
            core: core.clone(),
            owner: pid(),
        }
    }

    /// `latchkey::Guard` boxed: any guard of the library.
    pub(crate) fn of<G: Held + 'static>(guard: G, name: &Name, core: &Arc<Core>) -> Taken {
        Taken::new(Box::new(guard), name, core)
    }

    /// Kept by the client that took it: called as its Python object is
    /// made. `ClientClosed` when the client was closed meanwhile (the
    /// close ended the hold).
    pub(crate) fn keep(mut self, py: Python<'_>) -> PyResult<Ours> {
        let closed = |py| crate::errors::to_py(py, latchkey::Error::ClientClosed);
        let client = self.core.connected().ok_or_else(|| closed(py))?;
        let guard = self.guard.take().ok_or_else(|| closed(py))?;
        // Kept on the runtime: a hold's last drop finishes there.
        let handle = crate::runtime::handle()?;
        let _entered = handle.enter();
        Ok(Ours {
            kept: client
                .keep(guard)
                .map_err(|e| crate::errors::to_py(py, e))?,
            name: self.name.clone(),
            owner: self.owner,
        })
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        if let Some(guard) = self.guard.take() {
            drop_in_runtime(guard, self.owner);
        }
    }
}

/// A kept hold, with what Python adds: its name as given (`str` or
/// `bytes`) and the process that holds it (in a forked child the copy of
/// a parent's hold does nothing).
pub(crate) struct Ours {
    pub(crate) kept: Kept,
    pub(crate) name: Name,
    pub(crate) owner: u32,
}

impl Ours {
    /// Whether this process holds it (not a forked child's copy).
    fn here(&self) -> bool {
        self.owner == pid()
    }

    fn not_held(&self) -> latchkey::Error {
        let whose = match self.here() {
            true => String::new(),
            false => format!(
                " (held by the parent process {}: a hold does not cross os.fork())",
                self.owner
            ),
        };
        latchkey::Error::NotHeld {
            name: format!("{}{whose}", self.name.shown()),
        }
    }

    /// `op` on the guard while it is held here; `gone` once released, and
    /// in a forked child.
    pub(crate) fn now<R>(&self, gone: R, op: impl FnOnce(&dyn Held) -> R) -> R {
        match self.here() {
            true => self.kept.with_guard(op).unwrap_or(gone),
            false => gone,
        }
    }

    /// Runs `op` on the hold (a round trip); `NotHeld` once released, and
    /// in a forked child.
    pub(crate) fn call<R: Send + 'static>(
        &self,
        op: impl for<'a> FnOnce(&'a dyn Held) -> BoxFuture<'a, latchkey::Result<R>> + Send + 'static,
    ) -> BoxFuture<'static, latchkey::Result<R>> {
        let (kept, refused) = (self.kept.clone(), (!self.here()).then(|| self.not_held()));
        Box::pin(async move {
            match refused {
                Some(refused) => Err(refused),
                None => kept.call(op).await,
            }
        })
    }

    /// Resets the TTL: whether it was still ours (False once released).
    pub(crate) fn extend(
        &self,
        ttl: std::time::Duration,
    ) -> BoxFuture<'static, latchkey::Result<bool>> {
        let kept = self.kept.clone();
        let extending = self.call(move |h| h.extend(ttl));
        Box::pin(async move {
            match extending.await {
                Ok(found) => Ok(found == Ownership::Owned),
                Err(latchkey::Error::NotHeld { .. }) if kept.is_ended() => Ok(false),
                Err(e) => Err(e),
            }
        })
    }

    /// Releases if still ours: what it found, `None` when it was released
    /// already (or is a parent's, in a forked child).
    pub(crate) fn release(&self) -> BoxFuture<'static, latchkey::Result<Option<Ownership>>> {
        let (kept, here) = (self.kept.clone(), self.here());
        Box::pin(async move {
            match here {
                true => kept.release().await,
                false => Ok(None),
            }
        })
    }

    /// Gives the hold up without releasing: its owner token.
    pub(crate) fn forget(&self) -> BoxFuture<'static, latchkey::Result<String>> {
        let (kept, not_held) = (self.kept.clone(), self.not_held());
        let here = self.here();
        Box::pin(async move {
            match here {
                true => kept.forget().await.ok_or(not_held),
                false => Err(not_held),
            }
        })
    }

    pub(crate) fn is_held(&self) -> bool {
        self.here() && self.kept.is_held()
    }

    /// The hold's lost signal (one that never fires once released, or in
    /// a forked child, where `LostEvent` says it is set).
    pub(crate) fn lost_signal(&self) -> latchkey::LostSignal {
        match self.here() {
            true => self.kept.lost_signal(),
            false => latchkey::LostSignal::default(),
        }
    }
}

impl Drop for Ours {
    fn drop(&mut self) {
        // A parent's hold in a forked child: never dropped here (its drop
        // would reach the parent's runtime and locks, copied mid-flight).
        if !self.here() {
            std::mem::forget(self.kept.clone());
        }
    }
}
