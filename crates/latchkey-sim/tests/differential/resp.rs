//! A blocking RESP2 connection that pipelines commands and parses replies
//! into the simulator's `Reply`, so both sides compare as one type.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use latchkey_sim::Reply;

pub struct Connection {
    reader: BufReader<TcpStream>,
}

impl Connection {
    pub fn open(addr: SocketAddr) -> io::Result<Connection> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.set_nodelay(true)?;
        Ok(Connection {
            reader: BufReader::new(stream),
        })
    }

    /// Sends every command in one write, then reads one reply for each:
    /// the server runs them back to back.
    pub fn pipeline(&mut self, commands: &[Vec<Vec<u8>>]) -> io::Result<Vec<Reply>> {
        let mut out = Vec::new();
        for args in commands {
            out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for arg in args {
                out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
                out.extend_from_slice(arg);
                out.extend_from_slice(b"\r\n");
            }
        }
        self.reader.get_mut().write_all(&out)?;
        commands
            .iter()
            .map(|_| read_reply(&mut self.reader))
            .collect()
    }

    /// Reads one more reply (a subscriber's next message).
    pub fn receive(&mut self) -> io::Result<Reply> {
        read_reply(&mut self.reader)
    }

    pub fn command(&mut self, args: &[&[u8]]) -> io::Result<Reply> {
        let words = vec![args.iter().map(|a| a.to_vec()).collect()];
        let mut replies = self.pipeline(&words)?;
        replies.pop().ok_or_else(|| io::Error::other("no reply"))
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

fn read_line(r: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if !line.ends_with(b"\r\n") {
        return Err(bad("a reply line without CRLF"));
    }
    line.truncate(line.len() - 2);
    Ok(line)
}

fn read_reply(r: &mut impl BufRead) -> io::Result<Reply> {
    let line = read_line(r)?;
    let (&kind, rest) = line
        .split_first()
        .ok_or_else(|| bad("an empty reply line"))?;
    let text = String::from_utf8_lossy(rest).into_owned();
    let number = || {
        text.parse::<i64>()
            .map_err(|_| bad("a bad length or integer"))
    };
    Ok(match kind {
        b'+' => Reply::Status(text),
        b'-' => Reply::Error(text),
        b':' => Reply::Int(number()?),
        b'$' => match usize::try_from(number()?) {
            Err(_) => Reply::Bulk(None),
            Ok(len) => {
                let mut data = vec![0; len + 2];
                r.read_exact(&mut data)?;
                data.truncate(len);
                Reply::Bulk(Some(data))
            }
        },
        b'*' => match usize::try_from(number()?) {
            Err(_) => Reply::Array(None),
            Ok(len) => Reply::Array(Some(
                (0..len).map(|_| read_reply(r)).collect::<io::Result<_>>()?,
            )),
        },
        _ => return Err(bad("an unknown reply type")),
    })
}
