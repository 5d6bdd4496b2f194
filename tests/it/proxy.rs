//! The fault-injecting proxy of the test support, against a real redis-server.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::{Proxy, Server, eventually, threads_named};

/// A connection through the proxy, with a read timeout of `timeout`.
fn via(proxy: &Proxy, timeout: Duration) -> redis::Connection {
    let conn = redis::Client::open(proxy.url())
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap();
    conn.set_read_timeout(Some(timeout)).unwrap();
    conn
}

fn ping(conn: &mut redis::Connection) -> redis::RedisResult<String> {
    redis::cmd("PING").query(conn)
}

fn get(server: &Server, key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(key)
        .query(&mut server.conn())
        .unwrap()
}

#[test]
fn forwards_both_ways_and_counts_connections() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    assert_ne!(proxy.port(), server.port());
    assert_eq!(proxy.url(), format!("redis://127.0.0.1:{}/", proxy.port()));
    let mut conn = via(&proxy, Duration::from_secs(10));
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut conn)
        .unwrap();
    assert_eq!(get(&server, "k").as_deref(), Some("v"));
    let big = "x".repeat(1 << 20);
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query(&mut conn)
        .unwrap();
    let back: String = redis::cmd("GET").arg("big").query(&mut conn).unwrap();
    assert!(back == big, "a 1 MiB value came back changed");
    assert_eq!(proxy.connections(), 1);
    drop(conn);
    assert!(eventually(Duration::from_secs(10), || proxy.connections() == 0));
}

#[test]
fn pause_holds_the_bytes_until_resume() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let mut conn = via(&proxy, Duration::from_secs(30));
    assert_eq!(ping(&mut conn).unwrap(), "PONG");
    proxy.pause();
    let (tx, rx) = crossbeam_channel::unbounded();
    let client = std::thread::spawn(move || {
        let reply: redis::RedisResult<()> = redis::cmd("SET").arg("held").arg("v").query(&mut conn);
        tx.send(reply.is_ok()).unwrap();
    });
    // Nothing can get through while paused, however long we look.
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
    assert_eq!(
        get(&server, "held"),
        None,
        "the command passed a paused proxy"
    );
    // A connection opened while paused is accepted but not served either (raw TCP: the
    // redis crate would wait for its handshake replies).
    let mut late = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
    late.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    late.write_all(b"PING\r\n").unwrap();
    assert!(eventually(Duration::from_secs(10), || proxy.connections() == 2));
    proxy.resume();
    assert!(
        rx.recv_timeout(Duration::from_secs(30)).unwrap(),
        "the held reply"
    );
    assert_eq!(get(&server, "held").as_deref(), Some("v"));
    let mut pong = [0; 7];
    late.read_exact(&mut pong).unwrap();
    assert_eq!(&pong, b"+PONG\r\n");
    client.join().unwrap();
}

#[test]
fn silence_existing_leaves_old_connections_half_open_and_new_ones_working() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let mut old = via(&proxy, Duration::from_secs(10));
    assert_eq!(ping(&mut old).unwrap(), "PONG");
    proxy.silence_existing();
    old.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let err = redis::cmd("SET")
        .arg("sent")
        .arg("v")
        .query::<()>(&mut old)
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");
    // The command still reached the server; only its reply was lost.
    assert!(eventually(Duration::from_secs(10), || get(&server, "sent").is_some()));
    assert_eq!(proxy.connections(), 1, "the silent connection stays open");
    let mut new = via(&proxy, Duration::from_secs(10));
    assert_eq!(ping(&mut new).unwrap(), "PONG");
}

#[test]
fn delayed_replies_arrive_late_and_whole() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let mut conn = via(&proxy, Duration::from_secs(30));
    let delay = Duration::from_millis(300);
    proxy.delay_replies(delay);
    let started = Instant::now();
    assert_eq!(ping(&mut conn).unwrap(), "PONG");
    assert!(started.elapsed() >= delay, "the reply was not delayed");
    proxy.delay_replies(Duration::ZERO);
    assert_eq!(ping(&mut conn).unwrap(), "PONG");
}

#[test]
fn cut_on_reply_to_runs_the_command_and_drops_the_connection() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let mut other = via(&proxy, Duration::from_secs(10));
    let mut conn = via(&proxy, Duration::from_secs(10));
    assert_eq!(ping(&mut conn).unwrap(), "PONG");
    proxy.cut_on_reply_to(b"trapped");
    assert_eq!(ping(&mut conn).unwrap(), "PONG", "other commands pass");
    assert!(!proxy.trap_sprung());
    let err = redis::cmd("SET")
        .arg("trapped")
        .arg("v")
        .query::<()>(&mut conn)
        .unwrap_err();
    assert!(!err.is_timeout(), "dropped, not silent: {err}");
    assert!(err.is_io_error() || err.is_connection_dropped(), "{err}");
    assert!(proxy.trap_sprung());
    assert_eq!(get(&server, "trapped").as_deref(), Some("v"), "it ran");
    assert!(eventually(Duration::from_secs(10), || proxy.connections() == 1));
    // One shot: the other connection, and the same command again, pass.
    let _: () = redis::cmd("SET")
        .arg("trapped")
        .arg("w")
        .query(&mut other)
        .unwrap();
    assert_eq!(get(&server, "trapped").as_deref(), Some("w"));
}

#[test]
fn cut_all_drops_every_connection_and_new_ones_work() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let mut conns: Vec<_> = (0..3)
        .map(|_| via(&proxy, Duration::from_secs(10)))
        .collect();
    for conn in &mut conns {
        assert_eq!(ping(conn).unwrap(), "PONG");
    }
    assert_eq!(proxy.connections(), 3);
    proxy.cut_all();
    assert_eq!(proxy.connections(), 0);
    for conn in &mut conns {
        let err = ping(conn).unwrap_err();
        assert!(!err.is_timeout(), "dropped, not silent: {err}");
    }
    let mut fresh = via(&proxy, Duration::from_secs(10));
    assert_eq!(ping(&mut fresh).unwrap(), "PONG");
}

#[test]
#[cfg(target_os = "linux")]
fn dropping_the_proxy_closes_everything_and_ends_its_threads() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let name = format!("proxy-{}", proxy.port());
    let mut conn = via(&proxy, Duration::from_secs(10));
    assert_eq!(ping(&mut conn).unwrap(), "PONG");
    proxy.pause();
    // Threads name themselves once they run.
    assert!(eventually(Duration::from_secs(10), || threads_named(&name) == 3));
    let port = proxy.port();
    drop(proxy);
    // Joined, the threads have ended; the kernel may list them a moment longer.
    assert!(
        eventually(Duration::from_secs(10), || threads_named(&name) == 0),
        "threads outlived the proxy"
    );
    let err = ping(&mut conn).unwrap_err();
    assert!(!err.is_timeout(), "dropped, not silent: {err}");
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "still listening"
    );
}
