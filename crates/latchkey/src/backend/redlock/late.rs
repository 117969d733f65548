//! Acquires still running after their round was won.
//!
//! A won round returns at its majority; the other instances' `SET NX` run
//! on in tasks of their own, so that a slower instance still gets our key.
//! A release sent soon after could reach such an instance *before* that
//! task wrote its `SET NX` to the connection: the release finds nothing,
//! the key lands after it and stays until its TTL — a hold given back
//! everywhere but there. So a won round leaves its late acquires here, and
//! the release of that hold follows each one still running with a release
//! of its own on that instance once it ends, in the background (so the
//! release is no slower, and `flush`/`close` wait for the follow-up).

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::task::JoinHandle;

use crate::vocab::error::Result;
use crate::vocab::outcome::Attempt;

/// One instance's acquire still running: its index, its task.
pub(super) type LateAcquire = (usize, JoinHandle<Result<Attempt>>);

/// The late acquires of each hold not yet released, by lock key and owner
/// token.
#[derive(Default)]
pub(super) struct LateAcquires(Mutex<ByHold>);

type ByHold = HashMap<(Vec<u8>, String), Vec<LateAcquire>>;

impl LateAcquires {
    /// Keeps `late`, the acquires of the hold (`key`, `token`) still
    /// running when its round was won; drops those of other holds that have
    /// finished (a hold forgotten or lost is never released).
    pub(super) fn keep(&self, key: &[u8], token: &str, late: Vec<LateAcquire>) {
        let mut holds = self.0.lock().unwrap_or_else(|e| e.into_inner());
        holds.retain(|_, tasks| {
            tasks.retain(|(_, t)| !t.is_finished());
            !tasks.is_empty()
        });
        if !late.is_empty() {
            holds.insert((key.to_vec(), token.to_owned()), late);
        }
    }

    /// The late acquires of (`key`, `token`) still running, taken: what a
    /// release must follow. One that finished wrote its `SET NX` before
    /// this release is sent, on the same connection: the release follows
    /// it there already.
    pub(super) fn take(&self, key: &[u8], token: &str) -> Vec<LateAcquire> {
        let mut holds = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let late = holds
            .remove(&(key.to_vec(), token.to_owned()))
            .unwrap_or_default();
        late.into_iter().filter(|(_, t)| !t.is_finished()).collect()
    }
}
