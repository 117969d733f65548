//! The resource `latchkey://session/holds` of `latchkey mcp`: the locks this
//! session took and has not released, with their owner tokens, fencing
//! tokens and deadlines, so an agent that lost track (a long task, a
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

/// The resource's URI.
pub const URI: &str = "latchkey://session/holds";

/// One hold this session took.
#[derive(Debug, Clone, Serialize)]
struct Hold {
    name: String,
    token: String,
    fencing_token: Option<u64>,
    deadline_unix_ms: u64,
}

/// The holds by lock name (a name is held once at a time).
#[derive(Clone, Default)]
pub struct Holds(Arc<Mutex<BTreeMap<String, Hold>>>);

impl Holds {
    fn map(&self) -> MutexGuard<'_, BTreeMap<String, Hold>> {
        // A panic elsewhere while holding it leaves a map still worth reading.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `acquire` took `name` with `token`.
    pub fn took(&self, name: &str, token: &str, fencing_token: Option<u64>, deadline: u64) {
        let hold = Hold {
            name: name.to_owned(),
            token: token.to_owned(),
            fencing_token,
            deadline_unix_ms: deadline,
        };
        self.map().insert(name.to_owned(), hold);
    }

    /// `extend` moved the deadline of `token`'s hold of `name`.
    pub fn extended(&self, name: &str, token: &str, deadline: u64) {
        if let Some(hold) = self.map().get_mut(name) {
            if hold.token == token {
                hold.deadline_unix_ms = deadline;
            }
        }
    }

    /// `token` no longer holds `name`: released, or found not held.
    pub fn gone(&self, name: &str, token: &str) {
        let mut map = self.map();
        if map.get(name).is_some_and(|hold| hold.token == token) {
            map.remove(name);
        }
    }

    /// The resource as `resources/list` names it.
    pub fn resource() -> Resource {
        Resource::new(URI, "holds")
            .with_title("Locks this session holds")
            .with_description(
                "The locks this session took and has not released: name, owner token, fencing \
                 token, deadline (Unix ms; extend before it). past_deadline: it may be lost.",
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

    #[test]
    fn holds_follow_acquire_extend_and_release_by_token() {
        let holds = Holds::default();
        holds.took("a", "t1", Some(7), 1);
        holds.took("b", "t2", Some(8), u64::MAX);
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
        assert_eq!(now["holds"][0]["token"], "t1");
        assert_eq!(now["holds"][0]["fencing_token"], 7);
    }
}
