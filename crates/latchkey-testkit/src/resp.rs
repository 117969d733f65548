//! A minimal blocking RESP2 client for admin commands.
//!
//! Tests need to poke at a server (CONFIG SET, DEBUG SLEEP, INFO, ...) without
//! depending on the client library under test, so this speaks the protocol
//! over a plain `std` socket: one connection per command, no pipelining.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Connects to `addr`, authenticates if `password` is set, sends `args` as one
/// command and returns the reply rendered as text (see
/// [`RedisServer::command`](crate::RedisServer::command)).
///
/// `timeout` bounds the connect and every read and write, so a paused or hung
/// server yields a `TimedOut` error instead of a hung test.
pub(crate) fn command(
    addr: SocketAddr,
    password: Option<&str>,
    args: &[&str],
    timeout: Duration,
) -> io::Result<String> {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    render(command_raw(addr, password, &args, timeout)?)
}

/// [`command`] with binary arguments, returning the parsed reply (an error
/// reply is `Ok(Reply::Error(..))`, not `Err`); for keys that need not be
/// text, as when migrating a slot's keys.
pub(crate) fn command_raw(
    addr: SocketAddr,
    password: Option<&str>,
    args: &[&[u8]],
    timeout: Duration,
) -> io::Result<Reply> {
    command_over(addr, None, password, args, timeout)
}

/// [`command`] over TLS when `tls` is given (a server started with
/// [`ServerBuilder::tls`](crate::ServerBuilder::tls)).
pub(crate) fn command_tls(
    addr: SocketAddr,
    tls: Option<&crate::tls::AdminTls>,
    password: Option<&str>,
    args: &[&str],
    timeout: Duration,
) -> io::Result<String> {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    render(command_over(addr, tls, password, &args, timeout)?)
}

fn command_over(
    addr: SocketAddr,
    tls: Option<&crate::tls::AdminTls>,
    password: Option<&str>,
    args: &[&[u8]],
    timeout: Duration,
) -> io::Result<Reply> {
    let stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.set_nodelay(true)?;
    match tls {
        None => exchange(stream, addr, password, args, timeout),
        Some(tls) => exchange(tls.wrap(stream)?, addr, password, args, timeout),
    }
}

/// Authenticates if `password` is set, then sends `args` on `stream`.
fn exchange(
    stream: impl Read + Write,
    addr: SocketAddr,
    password: Option<&str>,
    args: &[&[u8]],
    timeout: Duration,
) -> io::Result<Reply> {
    let mut stream = BufReader::new(stream);
    let mut call = |args: &[&[u8]]| -> io::Result<Reply> {
        stream.get_mut().write_all(&encode(args))?;
        read_reply(&mut stream).map_err(|e| match e.kind() {
            // A read timeout surfaces as WouldBlock on Unix; say what happened.
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no reply from {addr} within {timeout:?}"),
            ),
            _ => e,
        })
    };
    if let Some(password) = password {
        if let Reply::Error(message) = call(&[b"AUTH", password.as_bytes()])? {
            return Err(io::Error::other(message));
        }
    }
    call(args)
}

/// A parsed RESP2 reply.
#[derive(Debug, PartialEq)]
pub(crate) enum Reply {
    Simple(String),
    Error(String),
    Integer(i64),
    /// `None` is the nil bulk string (`$-1`).
    Bulk(Option<Vec<u8>>),
    /// `None` is the nil array (`*-1`).
    Array(Option<Vec<Reply>>),
}

/// Encodes a command as a RESP array of bulk strings.
fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn read_reply(r: &mut impl BufRead) -> io::Result<Reply> {
    let line = read_line(r)?;
    let (kind, rest) = line
        .split_at_checked(1)
        .ok_or_else(|| invalid("empty reply line"))?;
    match kind {
        "+" => Ok(Reply::Simple(rest.to_owned())),
        "-" => Ok(Reply::Error(rest.to_owned())),
        ":" => Ok(Reply::Integer(parse_int(rest)?)),
        "$" => match usize::try_from(parse_int(rest)?) {
            Err(_) => Ok(Reply::Bulk(None)),
            Ok(len) => {
                let mut data = vec![0; len + 2];
                r.read_exact(&mut data)?;
                if !data.ends_with(b"\r\n") {
                    return Err(invalid("bulk string not terminated by CRLF"));
                }
                data.truncate(len);
                Ok(Reply::Bulk(Some(data)))
            }
        },
        "*" => match usize::try_from(parse_int(rest)?) {
            Err(_) => Ok(Reply::Array(None)),
            Ok(len) => (0..len)
                .map(|_| read_reply(r))
                .collect::<io::Result<_>>()
                .map(|items| Reply::Array(Some(items))),
        },
        _ => Err(invalid(&format!("unexpected reply line {line:?}"))),
    }
}

/// Renders a reply the way the admin helper promises: strings as-is, integers
/// in decimal, nil as an empty string, array elements joined by `\n`, and any
/// error (even nested in an array) as `Err`.
fn render(reply: Reply) -> io::Result<String> {
    match reply {
        Reply::Simple(s) => Ok(s),
        Reply::Error(message) => Err(io::Error::other(message)),
        Reply::Integer(n) => Ok(n.to_string()),
        Reply::Bulk(data) => Ok(String::from_utf8_lossy(&data.unwrap_or_default()).into_owned()),
        Reply::Array(items) => Ok(items
            .unwrap_or_default()
            .into_iter()
            .map(render)
            .collect::<io::Result<Vec<_>>>()?
            .join("\n")),
    }
}

/// Reads one CRLF-terminated line, without the CRLF.
fn read_line(r: &mut impl BufRead) -> io::Result<String> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed before a complete reply",
        ));
    }
    line.strip_suffix("\r\n")
        .map(str::to_owned)
        .ok_or_else(|| invalid("reply line not terminated by CRLF"))
}

fn parse_int(s: &str) -> io::Result<i64> {
    s.parse()
        .map_err(|_| invalid(&format!("bad integer {s:?} in reply")))
}

fn invalid(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> io::Result<Reply> {
        read_reply(&mut &bytes[..])
    }

    #[test]
    fn encodes_commands_as_arrays_of_bulk_strings() {
        assert_eq!(
            encode(&[b"SET", b"k", b""]),
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n"
        );
    }

    #[test]
    fn renders_every_reply_type() {
        let text = |bytes: &[u8]| render(parse(bytes).unwrap());
        assert_eq!(text(b"+OK\r\n").unwrap(), "OK");
        assert_eq!(text(b":-42\r\n").unwrap(), "-42");
        assert_eq!(text(b"$5\r\nhe\r\no\r\n").unwrap(), "he\r\no");
        assert_eq!(text(b"$-1\r\n").unwrap(), "");
        assert_eq!(
            text(b"*3\r\n$1\r\na\r\n:2\r\n*1\r\n+c\r\n").unwrap(),
            "a\n2\nc"
        );
        assert_eq!(text(b"*-1\r\n").unwrap(), "");
        let err = text(b"-ERR unknown command\r\n").unwrap_err();
        assert_eq!(err.to_string(), "ERR unknown command");
        assert!(text(b"*1\r\n-WRONGTYPE nested\r\n").is_err());
    }

    #[test]
    fn rejects_malformed_replies() {
        assert!(parse(b"?what\r\n").is_err());
        assert!(parse(b":12").is_err());
        assert!(parse(b"$3\r\nabcXY").is_err());
        assert_eq!(
            parse(b"$10\r\nshort\r\n").unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
    }
}
