//! A lease among its client's live holds (`transport/live.rs`): entered
//! when taken, removed when it ends; a close ends it (lost, reason
//! `Closed`) and releases it.

use std::sync::{Arc, Weak};

use crate::primitives::lease::state::State;
use crate::primitives::lease::LeaseSpec;
use crate::transport::live::{Closing, Live};

/// What the registry needs to end a hold.
pub(super) struct Entry<H: LeaseSpec> {
    hold: H,
    token: String,
    state: Arc<State>,
}

impl<H: LeaseSpec> Live for Entry<H> {
    fn close(&self) -> Option<Closing> {
        if !self.state.close() {
            return None;
        }
        let (hold, token, until) = (self.hold.clone(), self.token.clone(), self.state.deadline());
        tracing::info!(kind = hold.label().kind(), name = %String::from_utf8_lossy(hold.name()), "released by the client's close");
        Some(Box::pin(async move {
            let what = "a hold released by its client's close";
            let result =
                crate::vocab::retry::until_deadline(until, &what, || hold.release(&token, true))
                    .await;
            crate::vocab::metrics::release_outcome(hold.label(), result.as_ref().ok().copied());
            if let Err(e) = result {
                tracing::warn!(error = %e, "a release at close failed; the hold ends by itself at its TTL");
            }
        }))
    }
}

/// Enters a new hold; one taken after its client closed is ended at once
/// (`Closed`), released in the background.
pub(super) fn enter<H: LeaseSpec>(
    hold: &H,
    token: &str,
    state: &Arc<State>,
) -> Option<(u64, Arc<Entry<H>>)> {
    let entry = Arc::new(Entry {
        hold: hold.clone(),
        token: token.to_owned(),
        state: state.clone(),
    });
    let weak: Weak<dyn Live> = Arc::downgrade(&(entry.clone() as Arc<dyn Live>));
    match hold.live().add(weak) {
        Some(id) => Some((id, entry)),
        None => {
            if let Some(closing) = entry.close() {
                if tokio::runtime::Handle::try_current().is_ok() {
                    hold.tracker().spawn(closing);
                }
            }
            None
        }
    }
}
