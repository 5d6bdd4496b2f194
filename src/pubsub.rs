//! A bare subscriber connection speaking just enough RESP2 for SUBSCRIBE.
//!
//! The `redis` crate's blocking pub/sub owns its socket in one place, so a thread blocked
//! reading messages cannot also send a SUBSCRIBE. Here the socket is cloned: the notifier's
//! thread reads, and waiters write their (un)subscriptions straight to the other handle.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::time::Duration;

use redis::{ConnectionAddr, ConnectionInfo};

/// The subscriber connection's name in `CLIENT LIST`.
pub(crate) const CLIENT_NAME: &str = "redmutex-notify";

/// One end of the subscriber socket.
pub(crate) enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
}

/// What the server sent on a subscribed connection.
#[derive(Debug, PartialEq)]
pub(crate) enum Event {
    Subscribed(Vec<u8>),
    Message(Vec<u8>),
    /// The answer to a PING, subscribed (`pong`) or not (`+PONG`).
    Pong,
    /// An error reply: on a subscriber connection, a refused SUBSCRIBE (`NOPERM`).
    Refused(Vec<u8>),
    /// Unsubscribe confirmations and anything else the notifier does not act on.
    Other,
}

impl Stream {
    /// Connects within `connect_timeout`, turns TCP keepalive on, authenticates when the URL
    /// has credentials (each reply awaited at most `response_timeout`), and returns
    /// (reader, writer).
    pub fn connect(
        info: &ConnectionInfo,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> io::Result<(BufReader<Stream>, Stream)> {
        let timeout = response_timeout;
        let stream = match info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                let mut last = io::Error::new(io::ErrorKind::NotFound, "no address resolved");
                let mut connected = None;
                for addr in (host.as_str(), *port).to_socket_addrs()? {
                    match TcpStream::connect_timeout(&addr, connect_timeout) {
                        Ok(stream) => {
                            connected = Some(stream);
                            break;
                        }
                        Err(err) => last = err,
                    }
                }
                let stream = connected.ok_or(last)?;
                stream.set_nodelay(true)?;
                // A backstop under the notifier's own PING: the kernel notices a peer that
                // vanished even when nothing is sent.
                let keepalive = socket2::TcpKeepalive::new()
                    .with_time(Duration::from_secs(10))
                    .with_interval(Duration::from_secs(5));
                socket2::SockRef::from(&stream).set_tcp_keepalive(&keepalive)?;
                stream.set_write_timeout(Some(timeout))?;
                Stream::Tcp(stream)
            }
            #[cfg(unix)]
            ConnectionAddr::Unix(path) => {
                let stream = UnixStream::connect(path)?;
                stream.set_write_timeout(Some(timeout))?;
                Stream::Unix(stream)
            }
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("unsupported address for notifications: {other}"),
                ));
            }
        };
        let mut writer = stream.try_clone()?;
        let mut reader = BufReader::new(stream);
        // Authenticate when the URL says so, and name the connection so that it shows in
        // CLIENT LIST as ours.
        let settings = info.redis_settings();
        let mut setup: Vec<Vec<&[u8]>> = Vec::new();
        if let Some(password) = settings.password() {
            let mut auth: Vec<&[u8]> = vec![b"AUTH"];
            auth.extend(settings.username().map(str::as_bytes));
            auth.push(password.as_bytes());
            setup.push(auth);
        }
        setup.push(vec![b"CLIENT", b"SETNAME", CLIENT_NAME.as_bytes()]);
        reader.get_ref().set_read_timeout(Some(timeout))?;
        for command in &setup {
            writer.command(command)?;
        }
        for command in &setup {
            match read_value(&mut reader)? {
                Value::Simple(_) => {}
                // The name is only a label; a user without CLIENT rights still gets messages.
                Value::Error(message) if command[0] == b"CLIENT" => log::debug!(
                    "naming the subscriber connection refused: {}",
                    String::from_utf8_lossy(&message)
                ),
                Value::Error(message) => {
                    let (name, message) = (
                        String::from_utf8_lossy(command[0]),
                        String::from_utf8_lossy(&message),
                    );
                    return Err(invalid(format!("{name} refused: {message}")));
                }
                other => return Err(invalid(format!("unexpected reply {other:?}"))),
            }
        }
        Ok((reader, writer))
    }

    fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            #[cfg(unix)]
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }

    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(timeout),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_read_timeout(timeout),
        }
    }

    /// Closes both directions, which ends a read blocked on the other handle.
    pub fn shutdown(&self) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            #[cfg(unix)]
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }

    /// Sends one command.
    pub fn command(&mut self, args: &[&[u8]]) -> io::Result<()> {
        self.write_all(&encode(args))
    }
}

/// A command as a RESP array of bulk strings.
fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The RESP2 values a subscriber sees.
#[derive(Debug)]
enum Value {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Int,
    Bulk(Option<Vec<u8>>),
    Array(Vec<Value>),
}

/// Reads the next pub/sub event. Blocks; an error or end of stream means the connection is gone.
pub(crate) fn read_event(reader: &mut impl BufRead) -> io::Result<Event> {
    let items = match read_value(reader)? {
        Value::Array(items) => items,
        Value::Simple(text) if text.eq_ignore_ascii_case(b"pong") => return Ok(Event::Pong),
        Value::Error(message) => return Ok(Event::Refused(message)),
        _ => return Ok(Event::Other),
    };
    let mut items = items.into_iter();
    let (Some(Value::Bulk(Some(kind))), Some(Value::Bulk(Some(channel)))) =
        (items.next(), items.next())
    else {
        return Ok(Event::Other);
    };
    Ok(match kind.as_slice() {
        b"subscribe" => Event::Subscribed(channel),
        b"message" => Event::Message(channel),
        b"pong" => Event::Pong,
        _ => Event::Other,
    })
}

/// Longest bulk string or array accepted from the server: far above any lock channel.
const MAX_LEN: usize = 64 * 1024 * 1024;

fn read_value(reader: &mut impl BufRead) -> io::Result<Value> {
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line)?;
    if line.is_empty() {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    if !line.ends_with(b"\r\n") {
        return Err(invalid("unterminated line".into()));
    }
    line.truncate(line.len() - 2);
    let (kind, rest) = line
        .split_first()
        .ok_or_else(|| invalid("empty line".into()))?;
    let number = || -> io::Result<i64> {
        std::str::from_utf8(rest)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| invalid("bad number".into()))
    };
    let length = |n: i64| -> io::Result<Option<usize>> {
        match usize::try_from(n) {
            Ok(n) if n <= MAX_LEN => Ok(Some(n)),
            Ok(_) => Err(invalid("length too large".into())),
            Err(_) => Ok(None),
        }
    };
    Ok(match kind {
        b'+' => Value::Simple(rest.to_vec()),
        b'-' => Value::Error(rest.to_vec()),
        b':' => number().map(|_| Value::Int)?,
        b'$' => match length(number()?)? {
            None => Value::Bulk(None),
            Some(n) => {
                let mut data = vec![0; n + 2];
                reader.read_exact(&mut data)?;
                data.truncate(n);
                Value::Bulk(Some(data))
            }
        },
        b'*' => match length(number()?)? {
            None => Value::Array(Vec::new()),
            Some(n) => (0..n)
                .map(|_| read_value(reader))
                .collect::<io::Result<_>>()
                .map(Value::Array)?,
        },
        _ => {
            return Err(invalid(format!(
                "unexpected reply type {:?}",
                *kind as char
            )));
        }
    })
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(wire: &[u8]) -> Vec<io::Result<Event>> {
        let mut reader = wire;
        let mut out = Vec::new();
        while !reader.is_empty() {
            out.push(read_event(&mut reader));
        }
        out
    }

    #[test]
    fn parses_confirmations_and_messages() {
        let wire = b"*3\r\n$9\r\nsubscribe\r\n$4\r\nch:1\r\n:1\r\n\
                     *3\r\n$7\r\nmessage\r\n$4\r\nch:1\r\n$1\r\n0\r\n\
                     *3\r\n$11\r\nunsubscribe\r\n$4\r\nch:1\r\n:0\r\n";
        let got: Vec<_> = events(wire).into_iter().map(Result::unwrap).collect();
        assert_eq!(
            got,
            [
                Event::Subscribed(b"ch:1".to_vec()),
                Event::Message(b"ch:1".to_vec()),
                Event::Other
            ]
        );
    }

    #[test]
    fn pongs_and_refusals_are_told_apart() {
        let wire = b"*2\r\n$4\r\npong\r\n$0\r\n\r\n+PONG\r\n-NOPERM no\r\n";
        let got: Vec<_> = events(wire).into_iter().map(Result::unwrap).collect();
        assert_eq!(
            got,
            [
                Event::Pong,
                Event::Pong,
                Event::Refused(b"NOPERM no".to_vec())
            ]
        );
    }

    #[test]
    fn binary_channels_survive() {
        let wire = b"*3\r\n$7\r\nmessage\r\n$3\r\n\xff\r\n\r\n$1\r\n0\r\n";
        assert_eq!(
            read_event(&mut &wire[..]).unwrap(),
            Event::Message(b"\xff\r\n".to_vec())
        );
    }

    #[test]
    fn garbage_and_truncation_are_errors_not_panics() {
        for wire in [
            &b""[..],
            b"?x\r\n",
            b"*1\r\n$5\r\nab",
            b"$99999999999\r\n",
            b":12",
        ] {
            assert!(read_event(&mut &wire[..]).is_err(), "{wire:?}");
        }
    }

    #[test]
    fn commands_are_encoded_as_bulk_arrays() {
        assert_eq!(
            encode(&[b"SUBSCRIBE", b"x y"]),
            b"*2\r\n$9\r\nSUBSCRIBE\r\n$3\r\nx y\r\n"
        );
    }
}
