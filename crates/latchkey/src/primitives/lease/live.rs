//! A lease among its client's live holds (`transport/live.rs`): entered
//! when taken, removed when it ends; a close ends it (lost, reason
//! `Closed`) and releases it.

use std::sync::{Arc, Weak};

use crate::primitives::lease::background::release_in_background;
use crate::primitives::lease::state::State;
use crate::primitives::lease::LeaseSpec;
use crate::transport::live::Live;

/// What the registry needs to end a hold.
pub(super) struct Entry<H: LeaseSpec> {
    hold: H,
    token: String,
    state: Arc<State>,
}

impl<H: LeaseSpec> Live for Entry<H> {
    fn close(&self) {
        if !self.state.close() {
            return;
        }
        release_in_background(
            self.hold.clone(),
            self.token.clone(),
            "released by its client's close",
            true,
            self.state.deadline(),
        );
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
            entry.close();
            None
        }
    }
}
