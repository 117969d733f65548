//! `latchkey mcp`'s resource of the holds a session took, and its `leader`
//! tool beside `latchkey elect`.

use std::process::Stdio;

use serde_json::{json, Value};

use super::session::{num, text, Session};
use crate::common::*;

/// The holds the session's resource lists.
fn holds(session: &mut Session) -> Vec<Value> {
    let read = session.request("resources/read", json!({"uri": "latchkey://session/holds"}));
    let contents = &read["result"]["contents"][0];
    assert_eq!(contents["uri"], "latchkey://session/holds", "{read}");
    assert_eq!(contents["mimeType"], "application/json");
    let body: Value = serde_json::from_str(contents["text"].as_str().expect("text")).expect("JSON");
    body["holds"].as_array().expect("holds").clone()
}

#[test]
fn the_holds_resource_lists_what_this_session_took_and_has_not_released() {
    let redis = RedisServer::start();
    let mut agent = Session::start(&redis);
    let listed = agent.request("resources/list", json!({}));
    let resources = listed["result"]["resources"].as_array().expect("resources");
    assert_eq!(resources.len(), 1, "{listed}");
    assert_eq!(resources[0]["uri"], "latchkey://session/holds");
    assert!(holds(&mut agent).is_empty(), "nothing taken yet");

    let a = agent.ok("acquire", json!({"name": "a", "ttl": "1m"}));
    let b = agent.ok("acquire", json!({"name": "b", "ttl": "1m"}));
    let extended = agent.ok(
        "extend",
        json!({"name": "a", "token": a["token"], "ttl": "10m"}),
    );
    agent.ok("release", json!({"name": "b", "token": b["token"]}));
    let now = holds(&mut agent);
    assert_eq!(now.len(), 1, "{now:?}");
    assert_eq!(text(&now[0], "name"), "a");
    assert_eq!(now[0]["token"], a["token"]);
    assert_eq!(now[0]["fencing_token"], a["fencing_token"]);
    assert_eq!(
        num(&now[0], "deadline_unix_ms"),
        num(&extended, "deadline_unix_ms"),
        "the deadline extend set"
    );
    assert_eq!(now[0]["past_deadline"], false);

    // Another session (another agent) took nothing; a busy acquire is no hold.
    let mut other = Session::start(&redis);
    let busy = other.ok("acquire", json!({"name": "a", "ttl": "1m"}));
    assert_eq!(busy["acquired"], false);
    assert!(holds(&mut other).is_empty());

    // Lost (revoked elsewhere): a release that finds it not held drops it.
    redis.command(&["DEL", "test:a"]).expect("DEL");
    let lost = agent.err("release", json!({"name": "a", "token": a["token"]}));
    assert_eq!(lost.code, "NOT_HELD");
    assert!(holds(&mut agent).is_empty());

    let unknown = agent.request("resources/read", json!({"uri": "latchkey://nothing"}));
    assert!(unknown["error"].is_object(), "{unknown}");
}

#[test]
fn the_leader_tool_reads_who_leads_an_election() {
    let redis = RedisServer::start();
    let mut agent = Session::start(&redis);
    let none = agent.ok("leader", json!({"name": "scheduler"}));
    assert_eq!(none["leader"], false, "{none}");
    assert!(none["term"].is_null());

    let scratch = Scratch::new("mcp-leader");
    let marks = scratch.path("marks");
    let section = format!(
        "echo \"$LATCHKEY_TERM\" > {}; exec sleep 60",
        marks.display()
    );
    let mut elected = latchkey(&redis)
        .args([
            "elect",
            "scheduler",
            "--value",
            "agent-7",
            "--",
            "sh",
            "-c",
            &section,
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn latchkey elect");
    // The leader's command wrote its term: it leads now.
    let term: u64 = wait_for_text(&marks, "\n", std::time::Duration::from_secs(15))
        .trim()
        .parse()
        .expect("a term");
    let led = agent.ok("leader", json!({"name": "scheduler"}));
    let _ = elected.kill();
    let _ = elected.wait();
    assert_eq!(led["leader"], true, "{led}");
    assert_eq!(text(&led, "value"), "agent-7");
    assert_eq!(num(&led, "term"), term);
    assert!(num(&led, "since_ms") > 0);

    let bad = agent.err("leader", json!({"name": "scheduler", "ttl": "1m"}));
    assert_eq!(bad.code, "INVALID_INPUT");
}
