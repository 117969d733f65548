//! The resource `latchkey://session/holds` of `latchkey mcp`: the holds this
//! session took (locks, permits, sides of read-write locks, leaderships)
//! and has not released, with their kinds, owner tokens, fencing tokens and
//! deadlines, so an agent that lost track (a long task, a
//! summarised context) can read back what it holds and until when.
//!
//! A memo of this session's replies, not state the locks depend on: the
//! locks are in Redis, the tokens are the handles, and a restarted door (or
//! another one) serves them as well without it. Nothing here renews or
//! checks a lock: a hold past its deadline is listed as such
//! (`past_deadline`), since it may have expired or been taken by now;
//! `status` asks Redis.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use rmcp::model::{ReadResourceResult, Resource, ResourceContents};
use serde::Serialize;

use super::verbs::lease::HoldKind;

/// The resource's URI.
pub const URI: &str = "latchkey://session/holds";

/// One hold this session took.
#[derive(Debug, Clone, Serialize)]
struct Hold {
    name: String,
    kind: HoldKind,
    token: String,
    fencing_token: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    k: Option<u32>,
    deadline_unix_ms: u64,
}

/// What `acquire` or `elect` took.
pub struct Took<'a> {
    pub name: &'a str,
    pub kind: HoldKind,
    pub token: &'a str,
    pub fencing_token: Option<u64>,
    pub k: Option<u32>,
    pub deadline_unix_ms: u64,
}

/// The holds by name and owner token (a name may be held more than once:
/// permits, readers).
#[derive(Clone, Default)]
pub struct Holds(Arc<Mutex<BTreeMap<(String, String), Hold>>>);

impl Holds {
    fn map(&self) -> MutexGuard<'_, BTreeMap<(String, String), Hold>> {
        // A panic elsewhere while holding it leaves a map still worth reading.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `acquire` or `elect` took a hold.
    pub fn took(&self, took: Took<'_>) {
        let hold = Hold {
            name: took.name.to_owned(),
            kind: took.kind,
            token: took.token.to_owned(),
            fencing_token: took.fencing_token,
            k: took.k,
            deadline_unix_ms: took.deadline_unix_ms,
        };
        self.map().insert(key(took.name, took.token), hold);
    }

    /// `extend` moved the deadline of `token`'s hold of `name`.
    pub fn extended(&self, name: &str, token: &str, deadline: u64) {
        if let Some(hold) = self.map().get_mut(&key(name, token)) {
            hold.deadline_unix_ms = deadline;
        }
    }

    /// `token` no longer holds `name`: released, or found not held.
    pub fn gone(&self, name: &str, token: &str) {
        self.map().remove(&key(name, token));
    }

    /// The resource as `resources/list` names it.
    pub fn resource() -> Resource {
        Resource::new(URI, "holds")
            .with_title("Locks this session holds")
            .with_description(
                "The holds this session took and has not released: name, kind, owner token, \
                 fencing token, k (permits), deadline (Unix ms; extend before it). \
                 past_deadline: it may be lost.",
            )
            .with_mime_type("application/json")
    }

    /// The resource's contents: `{"holds": [...]}`, by name.
    pub fn read(&self) -> ReadResourceResult {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let holds: Vec<serde_json::Value> = self
            .map()
            .values()
            .map(|hold| {
                let mut entry = serde_json::json!(hold);
                entry["past_deadline"] = (hold.deadline_unix_ms <= now).into();
                entry
            })
            .collect();
        let text = serde_json::json!({ "holds": holds }).to_string();
        ReadResourceResult::new(vec![
            ResourceContents::text(text, URI).with_mime_type("application/json")
        ])
    }
}

fn key(name: &str, token: &str) -> (String, String) {
    (name.to_owned(), token.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(holds: &Holds) -> serde_json::Value {
        let read = holds.read();
        let Some(ResourceContents::TextResourceContents { text, .. }) = read.contents.first()
        else {
            panic!("one text content");
        };
        serde_json::from_str(text).expect("JSON")
    }

    fn took<'a>(name: &'a str, token: &'a str, fencing_token: u64, deadline: u64) -> Took<'a> {
        Took {
            name,
            kind: HoldKind::Lock,
            token,
            fencing_token: Some(fencing_token),
            k: None,
            deadline_unix_ms: deadline,
        }
    }

    #[test]
    fn holds_follow_acquire_extend_and_release_by_token() {
        let holds = Holds::default();
        holds.took(took("a", "t1", 7, 1));
        holds.took(took("b", "t2", 8, u64::MAX));
        holds.extended("a", "other", u64::MAX);
        assert_eq!(listed(&holds)["holds"][0]["past_deadline"], true);
        holds.extended("a", "t1", u64::MAX);
        assert_eq!(listed(&holds)["holds"][0]["past_deadline"], false);
        holds.gone("b", "not-its-token");
        assert_eq!(listed(&holds)["holds"].as_array().map(Vec::len), Some(2));
        holds.gone("b", "t2");
        let now = listed(&holds);
        assert_eq!(now["holds"].as_array().map(Vec::len), Some(1));
        assert_eq!(now["holds"][0]["name"], "a");
        assert_eq!(now["holds"][0]["kind"], "lock");
        assert_eq!(now["holds"][0]["token"], "t1");
        assert_eq!(now["holds"][0]["fencing_token"], 7);
    }

    #[test]
    fn a_name_held_twice_is_listed_twice() {
        let holds = Holds::default();
        let permits = |token| Took {
            kind: HoldKind::Semaphore,
            k: Some(2),
            ..took("pool", token, 1, u64::MAX)
        };
        holds.took(permits("t1"));
        holds.took(permits("t2"));
        let now = listed(&holds);
        assert_eq!(now["holds"].as_array().map(Vec::len), Some(2));
        assert_eq!(now["holds"][1]["kind"], "semaphore");
        assert_eq!(now["holds"][1]["k"], 2);
        holds.gone("pool", "t1");
        assert_eq!(listed(&holds)["holds"][0]["token"], "t2");
    }
}
