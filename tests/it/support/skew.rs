//! A server whose clock looks shifted: a proxy in front of a real server that answers `TIME`
//! itself, `offset` ahead of this machine's clock, and passes every other command on (one
//! at a time, RESP2). libfaketime cannot be used: it clashes with Debian's redis-server.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::Value;

pub struct ClockSkew {
    port: u16,
}

impl ClockSkew {
    /// Listens on a free port; each connection gets its own connection to `target_port`.
    /// Its threads end with the test process.
    pub fn start(target_port: u16, offset: Duration) -> ClockSkew {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || serve(stream, target_port, offset));
            }
        });
        ClockSkew { port }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

fn serve(stream: TcpStream, target_port: u16, offset: Duration) {
    let Ok(mut server) = redis::Client::open(format!("redis://127.0.0.1:{target_port}/"))
        .and_then(|client| client.get_connection())
    else {
        return;
    };
    let mut out = stream.try_clone().unwrap();
    let mut input = BufReader::new(stream);
    while let Some(args) = request(&mut input) {
        let reply = if args[0].eq_ignore_ascii_case(b"TIME") {
            let now = (SystemTime::now() + offset)
                .duration_since(UNIX_EPOCH)
                .unwrap();
            Value::Array(vec![
                Value::BulkString(now.as_secs().to_string().into_bytes()),
                Value::BulkString(now.subsec_micros().to_string().into_bytes()),
            ])
        } else {
            let mut cmd = redis::cmd(&String::from_utf8_lossy(&args[0]));
            for arg in &args[1..] {
                cmd.arg(&arg[..]);
            }
            match cmd.query::<Value>(&mut server) {
                Ok(value) => value,
                Err(err) => Value::SimpleString(format!("-{}", err.to_string().replace('\n', " "))),
            }
        };
        let mut bytes = Vec::new();
        encode(&reply, &mut bytes);
        if out.write_all(&bytes).is_err() {
            return;
        }
    }
}

/// One request: an array of bulk strings.
fn request(input: &mut impl BufRead) -> Option<Vec<Vec<u8>>> {
    let mut line = String::new();
    input.read_line(&mut line).ok()?;
    let n: usize = line.trim_end().strip_prefix('*')?.parse().ok()?;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        line.clear();
        input.read_line(&mut line).ok()?;
        let len: usize = line.trim_end().strip_prefix('$')?.parse().ok()?;
        let mut arg = vec![0; len + 2];
        input.read_exact(&mut arg).ok()?;
        arg.truncate(len);
        args.push(arg);
    }
    (!args.is_empty()).then_some(args)
}

/// `value` in RESP2; an error travels as a simple string beginning with `-`.
fn encode(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Nil => out.extend_from_slice(b"$-1\r\n"),
        Value::Int(n) => out.extend_from_slice(format!(":{n}\r\n").as_bytes()),
        Value::BulkString(bytes) => {
            out.extend_from_slice(format!("${}\r\n", bytes.len()).as_bytes());
            out.extend_from_slice(bytes);
            out.extend_from_slice(b"\r\n");
        }
        Value::Array(items) | Value::Set(items) => {
            out.extend_from_slice(format!("*{}\r\n", items.len()).as_bytes());
            items.iter().for_each(|item| encode(item, out));
        }
        Value::SimpleString(text) if text.starts_with('-') => {
            out.extend_from_slice(format!("{text}\r\n").as_bytes());
        }
        Value::SimpleString(text) => out.extend_from_slice(format!("+{text}\r\n").as_bytes()),
        Value::Okay => out.extend_from_slice(b"+OK\r\n"),
        Value::ServerError(err) => {
            let text = format!("{} {}", err.code(), err.details().unwrap_or(""));
            out.extend_from_slice(format!("-{}\r\n", text.trim_end()).as_bytes());
        }
        other => out.extend_from_slice(format!("-ERR cannot relay {other:?}\r\n").as_bytes()),
    }
}
