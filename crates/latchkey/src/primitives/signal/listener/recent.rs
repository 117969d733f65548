//! De-duplication: with replicas a message arrives once per server, and a
//! name can match two patterns of one listener; [`Recent`] remembers what
//! was delivered lately so that each signal is passed on once.
//!
//! Kept apart because it is a pure, self-contained rule with its own tests,
//! independent of subscriptions and servers.

use std::collections::VecDeque;

/// How many recently delivered messages a listener remembers to drop their
/// copies from other servers (or overlapping subscriptions).
const RECENT: usize = 64;

/// What a listener delivered lately, to drop the copies that arrive from the
/// other servers (or through overlapping names and patterns).
///
/// A latchkey message carries a random 64-bit id: a second message with the
/// same id is a copy. A message from another tool carries none; it is known
/// by a hash of channel and payload, and a copy is one that arrives through
/// a *source* (server and subscription) that has not yet delivered that
/// fingerprint, so two identical messages sent on purpose are both passed on
/// (each source delivers both, and the copies pair up in order).
#[derive(Default)]
pub(super) struct Recent {
    entries: VecDeque<Seen>,
}

struct Seen {
    key: u64,
    enveloped: bool,
    sources: Vec<u32>,
}

impl Recent {
    /// True if `id` was delivered before; remembers it otherwise.
    pub(super) fn seen_id(&mut self, id: u64) -> bool {
        if self.entries.iter().any(|e| e.enveloped && e.key == id) {
            return true;
        }
        self.remember(Seen {
            key: id,
            enveloped: true,
            sources: Vec::new(),
        });
        false
    }

    /// True if this is a copy of a foreign message delivered before through
    /// another source; remembers it otherwise.
    pub(super) fn seen_foreign(&mut self, fingerprint: u64, source: u32) -> bool {
        let earlier = self
            .entries
            .iter_mut()
            .find(|e| !e.enveloped && e.key == fingerprint && !e.sources.contains(&source));
        if let Some(earlier) = earlier {
            earlier.sources.push(source);
            return true;
        }
        self.remember(Seen {
            key: fingerprint,
            enveloped: false,
            sources: vec![source],
        });
        false
    }

    fn remember(&mut self, seen: Seen) {
        if self.entries.len() == RECENT {
            self.entries.pop_front();
        }
        self.entries.push_back(seen);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_recognised() {
        let mut recent = Recent::default();
        assert!(!recent.seen_id(1));
        assert!(recent.seen_id(1));
        assert!(!recent.seen_id(2));
        // Foreign: the copy from source 1 pairs with the delivery from 0; a
        // second identical message from 0 is new, and so on.
        assert!(!recent.seen_foreign(9, 0));
        assert!(recent.seen_foreign(9, 1));
        assert!(!recent.seen_foreign(9, 0));
        assert!(!recent.seen_foreign(9, 0));
        assert!(recent.seen_foreign(9, 1));
        assert!(recent.seen_foreign(9, 1));
        assert!(!recent.seen_foreign(9, 1));
    }
}
