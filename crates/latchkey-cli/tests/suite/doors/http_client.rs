//! `latchkey serve` started on a free loopback port, and a plain HTTP/1.1
//! client over a TCP stream (one request a connection): what `curl` does.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::*;

pub struct Served {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// Whether it said it serves `https://`.
    pub https: bool,
}

impl Served {
    /// `latchkey serve --listen 127.0.0.1:0 ARGS` with `env`, once it listens.
    pub fn start(redis: &RedisServer, args: &[&str], env: &[(&str, &str)]) -> Served {
        let mut cmd = latchkey(redis);
        cmd.args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env_remove("LATCHKEY_SERVE_TOKENS")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (key, value) in env {
            cmd.env(key, value);
        }
        let mut child = cmd.spawn().expect("spawn latchkey serve");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        // The one line it prints says where it listens: it listens now.
        let line = rx
            .recv_timeout(Duration::from_secs(15))
            .expect("latchkey serve said where it listens");
        let line = line.trim();
        let addr = line
            .strip_prefix("listening on http://")
            .or_else(|| line.strip_prefix("listening on https://"))
            .unwrap_or_else(|| panic!("not the listening line: {line:?}"))
            .to_owned();
        let https = line.starts_with("listening on https://");
        Served { child, addr, https }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `METHOD PATH` with an optional bearer token and JSON body: the status
    /// and the JSON reply.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: &str,
    ) -> (u16, Value) {
        request(&self.addr, method, path, token, body)
    }

    /// As [`Served::request`] without a token.
    pub fn post(&self, path: &str, body: &str) -> (u16, Value) {
        self.request("POST", path, None, body)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request on its own connection (`Connection: close`).
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, Value) {
    let mut stream = TcpStream::connect(addr).expect("connect to latchkey serve");
    stream
        .set_read_timeout(Some(Duration::from_secs(40)))
        .expect("timeout");
    let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{auth}\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut reply = String::new();
    stream.read_to_string(&mut reply).expect("read the reply");
    let (status, json) = split(&reply);
    let json: Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("a JSON body ({e}): {reply:?}"));
    (status, json)
}

/// `GET path` with an optional bearer token: the status and the body as text.
pub fn get_text(addr: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect to latchkey serve");
    stream
        .set_read_timeout(Some(Duration::from_secs(40)))
        .expect("timeout");
    let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{auth}\r\n"
    )
    .expect("send");
    let mut reply = String::new();
    stream.read_to_string(&mut reply).expect("read the reply");
    let (status, body) = split(&reply);
    (status, body.to_owned())
}

/// An HTTP/1.1 reply (no chunked encoding: the server sends lengths): its
/// status and its body.
pub fn split(reply: &str) -> (u16, &str) {
    let (head, body) = reply
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head: {reply:?}"));
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status: {head:?}"));
    (status, body)
}
