//! An MCP client over a pipe: spawns `latchkey mcp`, does the handshake
//! (initialize, notifications/initialized) and calls tools, one JSON-RPC
//! message per line. Each session is one "agent".

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;

/// How long any one reply may take (a long wait's own bound is added).
pub const REPLY_WITHIN: Duration = Duration::from_secs(15);

pub struct Session {
    child: Child,
    /// `None` once closed.
    stdin: Option<ChildStdin>,
    replies: Receiver<Value>,
    /// Replies read while waiting for another id.
    early: HashMap<u64, Value>,
    next_id: u64,
}

/// A tool call's outcome: its structured reply, or its tool error.
pub type Called = Result<Value, ToolError>;

/// A tool error (`isError: true`) as the door writes it.
#[derive(Debug)]
pub struct ToolError {
    pub code: String,
    pub message: String,
}

impl Session {
    /// `latchkey mcp` on `redis`, initialized.
    pub fn start(redis: &RedisServer) -> Session {
        Session::start_with(redis, &[])
    }

    /// As [`Session::start`], with `args` after `mcp`.
    pub fn start_with(redis: &RedisServer, args: &[&str]) -> Session {
        Session::start_at(&redis.url(), args)
    }

    /// `latchkey mcp ARGS` on the server at `url` (which may not be up).
    pub fn start_at(url: &str, args: &[&str]) -> Session {
        let mut child = latchkey_at(url)
            .arg("mcp")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn latchkey mcp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, replies) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let message: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not one JSON message a line ({e}): {line:?}"));
                if tx.send(message).is_err() {
                    return;
                }
            }
        });
        let mut session = Session {
            child,
            stdin: Some(stdin),
            replies,
            early: HashMap::new(),
            next_id: 0,
        };
        let init = session.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "latchkey-tests", "version": "1"}
            }),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "latchkey", "{init}");
        session.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        session
    }

    /// The door's process id: the pid a lock it takes names as its holder.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Closes stdin, as a host does to stop the server, and returns its
    /// exit code.
    pub fn close(mut self, limit: Duration) -> i32 {
        drop(self.stdin.take());
        code(wait_exit(&mut self.child, limit))
    }

    /// True while the door process runs.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin, "{message}").expect("write to latchkey mcp");
        stdin.flush().expect("flush");
    }

    /// Sends a request; its reply is [`Session::reply`]'s.
    pub fn send_request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The reply to request `id`, within `limit`.
    pub fn reply(&mut self, id: u64, limit: Duration) -> Value {
        if let Some(reply) = self.early.remove(&id) {
            return reply;
        }
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.replies.recv_timeout(left) {
                Ok(message) => match message["id"].as_u64() {
                    Some(got) if got == id => return message,
                    Some(got) => {
                        self.early.insert(got, message);
                    }
                    // A notification (a log message): not a reply.
                    None => {}
                },
                Err(RecvTimeoutError::Timeout) => panic!("no reply to {id} within {limit:?}"),
                Err(RecvTimeoutError::Disconnected) => panic!("latchkey mcp closed stdout"),
            }
        }
    }

    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.reply(id, REPLY_WITHIN)
    }

    /// Starts a tools/call; [`Session::called`] reads its outcome.
    pub fn start_call(&mut self, tool: &str, arguments: Value) -> u64 {
        self.send_request("tools/call", json!({"name": tool, "arguments": arguments}))
    }

    /// Cancels request `id` as a host does (`notifications/cancelled`).
    pub fn cancel(&mut self, id: u64) {
        self.send(json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "the user gave up"}
        }));
    }

    /// The outcome of the call `id`, within `limit`.
    pub fn called(&mut self, id: u64, limit: Duration) -> Called {
        outcome(self.reply(id, limit))
    }

    /// Calls `tool` and returns its outcome.
    pub fn call(&mut self, tool: &str, arguments: Value) -> Called {
        let id = self.start_call(tool, arguments);
        self.called(id, REPLY_WITHIN)
    }

    /// Calls `tool`, which must succeed.
    pub fn ok(&mut self, tool: &str, arguments: Value) -> Value {
        self.call(tool, arguments.clone())
            .unwrap_or_else(|e| panic!("{tool} {arguments}: {e:?}"))
    }

    /// Calls `tool`, which must fail with a tool error.
    pub fn err(&mut self, tool: &str, arguments: Value) -> ToolError {
        match self.call(tool, arguments.clone()) {
            Ok(reply) => panic!("{tool} {arguments} succeeded: {reply}"),
            Err(e) => e,
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A tools/call reply as its outcome: a JSON-RPC error is not a tool error
/// and fails the test.
fn outcome(reply: Value) -> Called {
    let result = &reply["result"];
    assert!(result.is_object(), "not a tool result: {reply}");
    if result["isError"] == json!(true) {
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        let error: Value = serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("a tool error's text is {{code, message}} ({e}): {text:?}"));
        let code = error["code"].as_str().expect("code").to_owned();
        let message = error["message"].as_str().expect("message").to_owned();
        assert!(!message.contains('\n'), "one-line message: {message:?}");
        return Err(ToolError { code, message });
    }
    let structured = result["structuredContent"].clone();
    assert!(structured.is_object(), "structured content: {reply}");
    Ok(structured)
}

/// The lock key of `name`.
pub fn key(name: &str) -> String {
    format!("{PREFIX}{name}")
}

/// Whether `name`'s lock key exists.
pub fn exists(redis: &RedisServer, name: &str) -> bool {
    redis.command(&["EXISTS", &key(name)]).unwrap() == "1"
}

/// The keys in the database (nothing taken: zero).
pub fn dbsize(redis: &RedisServer) -> u64 {
    redis.command(&["DBSIZE"]).unwrap().parse().unwrap()
}

/// A reply's u64 field.
pub fn num(reply: &Value, field: &str) -> u64 {
    reply[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} is a number in {reply}"))
}

/// A reply's string field.
pub fn text(reply: &Value, field: &str) -> String {
    reply[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} is a string in {reply}"))
        .to_owned()
}
