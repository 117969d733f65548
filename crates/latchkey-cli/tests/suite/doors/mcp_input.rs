//! `latchkey mcp`'s surface: the tools it lists and their schemas, and bad
//! input answered with a typed tool error that takes nothing.

use serde_json::{json, Value};

use super::session::*;
use crate::common::*;

fn tool_names(session: &mut Session) -> Vec<String> {
    let listed = session.request("tools/list", json!({}));
    let tools = listed["result"]["tools"].as_array().expect("tools").clone();
    for tool in &tools {
        let name = tool["name"].as_str().unwrap_or_default();
        assert!(
            tool["description"].as_str().is_some_and(|d| d.len() > 40),
            "{name}: a description an agent can act on"
        );
        assert_eq!(tool["inputSchema"]["type"], "object", "{name}");
        assert_eq!(
            tool["inputSchema"]["additionalProperties"], false,
            "{name}: unknown arguments are refused"
        );
        assert_eq!(tool["outputSchema"]["type"], "object", "{name}");
    }
    tools
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn every_verb_is_a_tool_with_schemas_and_revoke_only_when_allowed() {
    let redis = RedisServer::start();
    let mut plain = Session::start(&redis);
    let mut names = tool_names(&mut plain);
    names.sort();
    assert_eq!(
        names,
        [
            "acquire",
            "elect",
            "extend",
            "leader",
            "list",
            "release",
            "request_release",
            "signal",
            "status",
            "wait"
        ]
    );
    let refused = plain.request(
        "tools/call",
        json!({"name": "revoke", "arguments": {"name": "x"}}),
    );
    assert!(refused["error"].is_object(), "no revoke tool: {refused}");

    let mut operator = Session::start_with(&redis, &["--allow-revoke"]);
    assert!(tool_names(&mut operator).contains(&"revoke".to_owned()));
    let listed = operator.request("tools/list", json!({}));
    let acquire = listed["result"]["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == "acquire"))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(acquire["inputSchema"]["required"], json!(["name", "ttl"]));
}

#[test]
fn bad_input_is_a_typed_tool_error_and_takes_nothing() {
    let redis = RedisServer::start();
    let mut agent = Session::start(&redis);
    let cases = [
        ("acquire", json!({"name": "x", "ttl": "-5s"}), "INVALID_TTL"),
        ("acquire", json!({"name": "x", "ttl": "0s"}), "INVALID_TTL"),
        ("acquire", json!({"name": "x", "ttl": "25h"}), "INVALID_TTL"),
        ("acquire", json!({"name": "x", "ttl": "10"}), "INVALID_TTL"),
        ("acquire", json!({"name": "x", "ttl": -5}), "INVALID_INPUT"),
        ("acquire", json!({"ttl": "10s"}), "INVALID_INPUT"),
        (
            "acquire",
            json!({"name": "x", "ttl": "10s", "force": true}),
            "INVALID_INPUT",
        ),
        (
            "acquire",
            json!({"name": "x", "ttl": "10s", "wait": "-1s"}),
            "INVALID_INPUT",
        ),
        ("acquire", json!({"name": "", "ttl": "10s"}), "INVALID_NAME"),
        ("acquire", json!({}), "INVALID_INPUT"),
        (
            "extend",
            json!({"name": "x", "token": "t", "ttl": "-1s"}),
            "INVALID_TTL",
        ),
        ("extend", json!({"name": "x", "ttl": "1m"}), "INVALID_INPUT"),
        ("release", json!({"name": "x"}), "INVALID_INPUT"),
        ("wait", json!({"names": ["x"]}), "INVALID_INPUT"),
        (
            "signal",
            json!({"name": "x", "payload": 7}),
            "INVALID_INPUT",
        ),
    ];
    for (tool, arguments, expected) in cases {
        let error = agent.err(tool, arguments.clone());
        assert_eq!(error.code, expected, "{tool} {arguments}: {error:?}");
        assert!(!error.message.is_empty());
    }
    assert!(!exists(&redis, "x"));
    assert_eq!(dbsize(&redis), 0, "nothing was taken or written");
    // The session is still good after the errors.
    let held = agent.ok("acquire", json!({"name": "x", "ttl": "10s"}));
    assert_eq!(held["acquired"], true);
}

#[test]
fn a_door_started_before_redis_answers_unreachable_then_serves() {
    let port = latchkey_testkit::free_port();
    let mut agent = Session::start_at(&format!("redis://127.0.0.1:{port}"), &[]);
    // Nothing listens there yet: the session starts all the same, and a
    // call says why it cannot serve, with the library's code.
    let down = agent.err("acquire", json!({"name": "x", "ttl": "10s"}));
    assert_eq!(down.code, "UNREACHABLE", "{down:?}");
    assert!(
        down.message.contains(&port.to_string()),
        "names the server: {down:?}"
    );

    let redis = RedisServer::builder().port(port).start();
    let held = agent.ok("acquire", json!({"name": "x", "ttl": "10s"}));
    assert_eq!(held["acquired"], true);
    assert!(exists(&redis, "x"));
}

#[test]
fn the_doors_refuse_several_redis_urls_with_exit_2() {
    let redis = RedisServer::start();
    let other = RedisServer::start();
    for door in [&["mcp"][..], &["serve", "--listen", "127.0.0.1:0"][..]] {
        let out = output(
            latchkey_at(&format!("{},{}", redis.url(), other.url())).args(door),
            REPLY_WITHIN,
        );
        assert_eq!(code(out.status), 2, "{door:?}: {}", stderr(&out));
        assert_one_error_line(&out);
        assert!(
            stderr(&out).contains("one Redis server"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn the_door_exits_0_when_the_host_closes_its_stdin_and_leaves_locks_to_their_ttl() {
    let redis = RedisServer::start();
    let mut agent = Session::start(&redis);
    agent.ok("acquire", json!({"name": "kept", "ttl": "1m"}));
    assert_eq!(agent.close(REPLY_WITHIN), 0);
    // Its locks are the caller's, by their tokens: ending the door ends none.
    assert!(exists(&redis, "kept"));
}
