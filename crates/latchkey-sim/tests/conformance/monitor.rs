//! What a real server was sent, read from `MONITOR` on a connection of
//! its own: each command a client sent (not those a script called), as
//! its words, in the order the server ran them.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::thread;
use std::time::Duration;

use tokio::sync::mpsc;

/// How long a command the test is sure was sent may take to show up.
const WITHIN: Duration = Duration::from_secs(10);

/// The server's `MONITOR` feed, read by a thread of its own.
pub struct Recorder {
    lines: mpsc::UnboundedReceiver<Vec<Vec<u8>>>,
    stream: TcpStream,
}

impl Recorder {
    /// Connects to `addr` and starts monitoring; what is sent from the
    /// moment this returns is recorded.
    pub fn start(addr: SocketAddr) -> io::Result<Recorder> {
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        stream.write_all(b"*1\r\n$7\r\nMONITOR\r\n")?;
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut ok = Vec::new();
        reader.read_until(b'\n', &mut ok)?;
        if !ok.starts_with(b"+OK") {
            return Err(io::Error::other(format!(
                "MONITOR answered {}",
                String::from_utf8_lossy(&ok)
            )));
        }
        let (tx, lines) = mpsc::unbounded_channel();
        thread::spawn(move || {
            let mut line = Vec::new();
            // Ends when the recorder shuts the socket or the server goes.
            while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                if let Some(words) = parse(&line) {
                    if tx.send(words).is_err() {
                        return;
                    }
                }
                line.clear();
            }
        });
        Ok(Recorder { lines, stream })
    }

    /// The next command sent about `key`: a script call whose first key it
    /// is, or a plain command on it (`SET key …`). Other commands are
    /// skipped. Panics, naming `what`, if none comes within 10 s.
    pub async fn next_on(&mut self, key: &[u8], what: &str) -> Vec<Vec<u8>> {
        self.next_among(&[key], what).await
    }

    /// The next command sent about any of `keys` (its first key), as
    /// [`Recorder::next_on`].
    pub async fn next_among(&mut self, keys: &[&[u8]], what: &str) -> Vec<Vec<u8>> {
        let wait = async {
            while let Some(words) = self.lines.recv().await {
                if first_key(&words).is_some_and(|k| keys.contains(&k)) {
                    return Some(words);
                }
            }
            None
        };
        match tokio::time::timeout(WITHIN, wait).await {
            Ok(Some(words)) => words,
            Ok(None) => panic!("{what}: the MONITOR connection closed"),
            Err(_) => panic!("{what}: nothing sent on its keys within {WITHIN:?}"),
        }
    }
}

impl Recorder {
    /// The next command that `wanted` accepts (for a call that names no
    /// key, as `signal_one.lua`), as [`Recorder::next_on`].
    pub async fn next_where(
        &mut self,
        wanted: impl Fn(&[Vec<u8>]) -> bool,
        what: &str,
    ) -> Vec<Vec<u8>> {
        let wait = async {
            while let Some(words) = self.lines.recv().await {
                if wanted(&words) {
                    return Some(words);
                }
            }
            None
        };
        match tokio::time::timeout(WITHIN, wait).await {
            Ok(Some(words)) => words,
            Ok(None) => panic!("{what}: the MONITOR connection closed"),
            Err(_) => panic!("{what}: not sent within {WITHIN:?}"),
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // Ends the reading thread (its read fails).
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

/// Loads `texts` into the server's script cache (`SCRIPT LOAD`), so that
/// the library's `EVALSHA` never meets `NOSCRIPT` and re-sends (which
/// `MONITOR` would show as two calls for one operation).
pub fn load_scripts<'a>(
    addr: SocketAddr,
    texts: impl IntoIterator<Item = &'a str>,
) -> io::Result<()> {
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(WITHIN))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    for text in texts {
        let mut command = Vec::new();
        for word in [&b"SCRIPT"[..], b"LOAD", text.as_bytes()] {
            command.extend_from_slice(format!("${}\r\n", word.len()).as_bytes());
            command.extend_from_slice(word);
            command.extend_from_slice(b"\r\n");
        }
        writer.write_all(b"*3\r\n")?;
        writer.write_all(&command)?;
        // `$40` and the SHA-1, or an error.
        let mut line = Vec::new();
        reader.read_until(b'\n', &mut line)?;
        if !line.starts_with(b"$") {
            return Err(io::Error::other(
                String::from_utf8_lossy(&line).into_owned(),
            ));
        }
        line.clear();
        reader.read_until(b'\n', &mut line)?;
    }
    Ok(())
}

/// A command's first key: a script call's first KEYS entry, or a plain
/// command's first argument.
fn first_key(words: &[Vec<u8>]) -> Option<&[u8]> {
    let name = String::from_utf8_lossy(words.first()?).to_ascii_uppercase();
    match name.as_str() {
        "EVALSHA" | "EVAL" | "EVALSHA_RO" | "EVAL_RO" | "FCALL" | "FCALL_RO" => {
            let count: usize = std::str::from_utf8(words.get(2)?).ok()?.parse().ok()?;
            match count {
                0 => None,
                _ => words.get(3).map(Vec::as_slice),
            }
        }
        _ => words.get(1).map(Vec::as_slice),
    }
}

/// One `MONITOR` line, `+<time> [<db> <client>] "word" "word" …`, as its
/// words; `None` for a command a script ran (`[0 lua]`) or a line that is
/// not a command.
fn parse(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let line = line.strip_prefix(b"+")?;
    let close = line.iter().position(|&b| b == b']')?;
    let from = &line[..close];
    if from.ends_with(b" lua") {
        return None;
    }
    let mut rest = &line[close + 1..];
    let mut words = Vec::new();
    loop {
        let start = rest.iter().position(|&b| b == b'"')?;
        rest = &rest[start + 1..];
        let (word, used) = unquote(rest)?;
        words.push(word);
        rest = &rest[used..];
        if !rest.contains(&b'"') {
            return Some(words);
        }
    }
}

/// A word as Redis quotes it (`sdscatrepr`), up to its closing quote:
/// the word and how many bytes it took, the quote included.
fn unquote(text: &[u8]) -> Option<(Vec<u8>, usize)> {
    let mut word = Vec::new();
    let mut i = 0;
    loop {
        match *text.get(i)? {
            b'"' => return Some((word, i + 1)),
            b'\\' => {
                let escaped = *text.get(i + 1)?;
                i += 2;
                word.push(match escaped {
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'a' => 7,
                    b'b' => 8,
                    b'x' => {
                        let hex = std::str::from_utf8(text.get(i..i + 2)?).ok()?;
                        i += 2;
                        u8::from_str_radix(hex, 16).ok()?
                    }
                    other => other,
                });
            }
            b => {
                word.push(b);
                i += 1;
            }
        }
    }
}

#[test]
fn monitor_lines_parse_as_redis_quotes_them() {
    let line = b"+1733480000.123456 [0 127.0.0.1:40000] \"SET\" \"a\\\"b\" \"\\x00\\n\" \"\"\r\n";
    let words = parse(line).expect("a command line");
    assert_eq!(
        words,
        vec![
            b"SET".to_vec(),
            b"a\"b".to_vec(),
            b"\0\n".to_vec(),
            Vec::new()
        ]
    );
    assert_eq!(parse(b"+1.0 [0 lua] \"GET\" \"k\"\r\n"), None);
}
