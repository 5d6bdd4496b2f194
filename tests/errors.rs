//! Errors classify the same on one node and on Redlock, and an error reporter that walks
//! the `source()` chain prints each cause once.

mod support;

use std::error::Error as _;

use redmutex::{Error, LockClient};
use support::Server;

/// One node, and three for Redlock, each with a client.
fn topologies() -> Vec<(&'static str, Vec<Server>, LockClient)> {
    let one = Server::start();
    let single = LockClient::open(&one.url()).unwrap();
    let three: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = three.iter().map(Server::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let redlock = LockClient::redlock(&urls).unwrap();
    vec![("one node", vec![one], single), ("redlock", three, redlock)]
}

/// The error's message and its source's, if any: the message does not repeat the source
/// (what the dependencies' own errors chain further is theirs).
fn printed_once(err: &Error) -> String {
    let message = err.to_string();
    if let Some(source) = err.source() {
        let source = source.to_string();
        assert!(
            !message.contains(&source),
            "printed twice: {source:?} in {message:?}"
        );
        return format!("{message}: {source}");
    }
    message
}

#[test]
fn a_key_of_another_kind_is_wrong_kind_on_every_topology() {
    for (topology, servers, client) in topologies() {
        for server in &servers {
            let _: () = redis::cmd("RPUSH")
                .arg("listed")
                .arg("x")
                .query(&mut server.conn())
                .unwrap();
        }
        let err = client.lock("listed").try_lock().unwrap_err();
        assert!(err.is_wrong_kind(), "{topology}: {err}");
        assert!(!err.is_connection(), "{topology}: {err}");
        printed_once(&err);
    }
}

#[test]
fn a_refused_command_is_permission_not_connection_on_every_topology() {
    for (topology, servers, client) in topologies() {
        for server in &servers {
            let _: () = redis::cmd("ACL")
                .arg("SETUSER")
                .arg("default")
                .arg("-evalsha")
                .query(&mut server.conn())
                .unwrap();
        }
        let err = client.lock("refused").try_lock().unwrap_err();
        assert!(err.is_permission(), "{topology}: {err}");
        assert!(!err.is_connection(), "{topology}: {err}");
        let report = printed_once(&err);
        assert!(report.contains("NOPERM"), "{topology}: {report}");
    }
}

#[test]
fn an_unreachable_server_is_connection_on_every_topology() {
    for (topology, mut servers, client) in topologies() {
        for server in &mut servers {
            server.stop();
        }
        let err = client.lock("gone").try_lock().unwrap_err();
        assert!(err.is_connection(), "{topology}: {err}");
        assert!(
            !err.is_wrong_kind() && !err.is_permission(),
            "{topology}: {err}"
        );
        printed_once(&err);
    }
}
