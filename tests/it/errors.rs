//! Errors classify the same on one node and on Redlock, an error reporter that walks the
//! `source()` chain prints each cause once, and what is not Redis (a closed port, an HTTP
//! server, a server that never answers, a bad URL) says so. Server errors are known by their
//! code, whatever their words; a server that runs no scripts fails every call at once.

use crate::support;

use std::error::Error as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redmutex::{Error, LockClient};
use support::{Proxy, Server, eventually, logs};

/// One node, and three for Redlock, each with a client.
fn topologies() -> Vec<(&'static str, Vec<Server>, LockClient)> {
    let one = Server::start();
    let single = LockClient::open(&one.url()).unwrap();
    let three: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = three.iter().map(Server::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let redlock = LockClient::redlock(&urls).build().unwrap();
    vec![("one node", vec![one], single), ("redlock", three, redlock)]
}

/// The whole chain, as `anyhow`'s `{:#}` prints it (each message, then each `source()`'s,
/// joined by ": "), after checking that no message repeats the one below it.
fn printed_once(err: &Error) -> String {
    let mut report = err.to_string();
    let mut parent = report.clone();
    let mut next = err.source();
    while let Some(source) = next {
        let message = source.to_string();
        assert!(
            !parent.contains(&message),
            "printed twice: {message:?} in {parent:?}"
        );
        report = format!("{report}: {message}");
        parent = message;
        next = source.source();
    }
    report
}

/// How often `what` occurs in `report`, in any case.
fn count(report: &str, what: &str) -> usize {
    report.to_lowercase().matches(&what.to_lowercase()).count()
}

/// A port on which nothing listens (bound, then closed again).
/// A port nothing listens on, that no server of the suite will take, and that is below the
/// range the kernel draws the local ends of connections from (a connection to a port of
/// that range may meet one of the suite's own connections there).
fn closed_port() -> u16 {
    support::free_port()
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
        // Once per node: one node, or each of Redlock's in its list.
        let nodes = servers.len();
        assert_eq!(
            count(&report, "no permissions"),
            nodes,
            "{topology}: {report}"
        );
        assert!(count(&report, "NOPERM") <= nodes, "{topology}: {report}");
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

#[test]
fn a_closed_port_names_the_refusal_once_on_every_topology() {
    let port = closed_port();
    let err = LockClient::builder(&format!("redis://127.0.0.1:{port}/"))
        .build()
        .unwrap_err();
    assert!(err.is_connection(), "{err}");
    let report = printed_once(&err);
    assert_eq!(count(&report, "connection refused"), 1, "{report}");
    assert_eq!(count(&report, &port.to_string()), 1, "{report}");
    // The alternate form, for a log line, is the whole chain.
    assert_eq!(format!("{err:#}"), report);

    let ports: Vec<u16> = (0..3).map(|_| closed_port()).collect();
    let urls: Vec<String> = ports
        .iter()
        .map(|port| format!("redis://127.0.0.1:{port}/"))
        .collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let err = LockClient::redlock(&urls).build().unwrap_err();
    assert!(err.is_no_quorum() && err.is_connection(), "{err}");
    let report = printed_once(&err);
    assert_eq!(format!("{err:#}"), report);
    assert_eq!(count(&report, "connection refused"), 3, "{report}");
    for port in ports {
        assert_eq!(count(&report, &port.to_string()), 1, "{report}");
    }
}

#[test]
fn a_refusal_names_its_server_code_once() {
    let server = Server::start();
    let client = server.client();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("default")
        .arg("-evalsha")
        .query(&mut server.conn())
        .unwrap();
    let err = client.lock("refused").try_lock().unwrap_err();
    assert_eq!(err.server_code(), Some("NOPERM"), "{err}");
    let report = printed_once(&err);
    assert_eq!(count(&report, "NOPERM"), 1, "{report}");
    assert_eq!(count(&report, "\"refused\""), 1, "{report}");
}

/// A listener on a free port whose every connection gets `answer` (when given) once it has
/// sent something, and is then kept open until the test process ends.
fn listener(answer: Option<&'static [u8]>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        let mut open: Vec<TcpStream> = Vec::new();
        for mut conn in listener.incoming().flatten() {
            if let Some(answer) = answer {
                let mut request = [0; 1024];
                let _ = conn.read(&mut request);
                let _ = conn.write_all(answer);
            }
            open.push(conn);
        }
    });
    port
}

const HTTP_ANSWER: &[u8] =
    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\nConnection: close\r\n\r\nBad Request";

#[test]
fn a_server_that_is_not_redis_is_a_connection_problem() {
    let port = listener(Some(HTTP_ANSWER));
    let err = LockClient::builder(&format!("redis://127.0.0.1:{port}/"))
        .connect_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(5))
        .build()
        .unwrap_err();
    assert!(err.is_connection(), "{err}");
    assert!(!err.is_auth() && !err.is_permission(), "{err}");
    let report = printed_once(&err);
    assert_eq!(
        count(&report, "did not answer as a Redis server"),
        1,
        "{report}"
    );
}

/// A listener on a free port that accepts every connection and never answers, and what
/// each connection sent it.
fn silent_listener() -> (u16, Arc<Mutex<Vec<Vec<u8>>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let received = Arc::new(Mutex::new(Vec::new()));
    let sent = received.clone();
    thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let sent = sent.clone();
            thread::spawn(move || {
                let at = {
                    let mut sent = sent.lock().unwrap();
                    sent.push(Vec::new());
                    sent.len() - 1
                };
                let mut buffer = [0; 4096];
                while let Ok(n @ 1..) = conn.read(&mut buffer) {
                    sent.lock().unwrap()[at].extend_from_slice(&buffer[..n]);
                }
            });
        }
    });
    (port, received)
}

#[test]
fn build_against_a_server_that_never_answers_ends_within_its_timeouts() {
    let (port, received) = silent_listener();
    let timeout = Duration::from_millis(500);
    let started = Instant::now();
    let err = LockClient::builder(&format!("redis://127.0.0.1:{port}/"))
        .connect_timeout(timeout)
        .response_timeout(timeout)
        .build()
        .unwrap_err();
    let took = started.elapsed();
    assert!(err.is_connection(), "{err}");
    printed_once(&err);
    // Promised: the connect timeout plus one response timeout. Five times that proves the
    // bound on a busy machine without timing the promise itself.
    assert!(took < 5 * (timeout + timeout), "took {took:?}: {err}");
    // What the promise rests on: a connection waits for one reply at most before it gives
    // up (each command sent is one more timeout waited).
    for sent in received.lock().unwrap().iter() {
        let commands = sent
            .split(|b| *b == b'\n')
            .filter(|line| line.starts_with(b"*"));
        let shown = String::from_utf8_lossy(sent);
        assert!(
            commands.count() <= 1,
            "more than one command waited on: {shown:?}"
        );
    }
}

#[test]
fn failed_connects_of_the_pool_are_logged_at_debug_level_only() {
    logs::capture();
    let mut server = Server::start();
    let client = server.client();
    let port = server.port().to_string();
    server.stop();
    let err = client.lock("gone").try_lock().unwrap_err();
    assert!(err.is_connection(), "{err}");
    // The pool's own connects fail in the background too; each is reported once, by the
    // crate, at debug level.
    let reported = eventually(Duration::from_secs(10), || {
        !logs::records(|r| {
            r.level == log::Level::Debug
                && r.target.starts_with("redmutex")
                && r.message.contains(&port)
        })
        .is_empty()
    });
    assert!(reported, "no debug record of the failed connects");
    let pool = logs::records(|r| r.target.starts_with("r2d2"));
    assert!(pool.is_empty(), "the pool logged on its own: {pool:?}");
}

#[test]
fn a_bad_url_says_what_is_wrong_and_never_the_password() {
    for (url, says) in [
        ("", "empty"),
        ("127.0.0.1:6379", "no scheme"),
        ("user:secret@127.0.0.1:6379", "no scheme"),
        ("http://:secret@127.0.0.1/", "unknown scheme \"http\""),
        (
            "redis://:secret@127.0.0.1:notaport/",
            "bad port \"notaport\"",
        ),
        ("redis://:secret@/", "no host"),
        ("redis://:secret@127.0.0.1:1/x", "bad database"),
    ] {
        let err = LockClient::open(url).unwrap_err();
        assert!(err.is_invalid_input(), "{url:?}: {err}");
        let report = printed_once(&err);
        assert!(report.contains(says), "{url:?}: {report}");
        assert!(!report.contains("secret"), "password repeated: {report}");
    }
    let err = LockClient::open("http://127.0.0.1/").unwrap_err();
    assert!(err.to_string().contains("redis://"), "{err}");
}

/// A name over the limit is refused saying the limit.
#[test]
fn a_name_over_the_limit_says_the_limit() {
    let server = Server::start();
    let name = "n".repeat(redmutex::MAX_NAME_LEN + 1);
    let err = server
        .client()
        .lock(&name)
        .try_lock()
        .map(drop)
        .unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    assert!(err.to_string().contains("1024"), "{err}");
}

/// A handle names its lock whole, however long, and so do its errors and what inspect
/// finds; messages print a long name cut. Names were cut to 64 bytes everywhere.
#[test]
fn a_long_name_is_named_whole_and_printed_cut() {
    let server = Server::start();
    let client = server.client();
    let name = format!("{}:{}", "orders".repeat(20), "x".repeat(900));
    assert!(name.len() <= redmutex::MAX_NAME_LEN);
    let lock = client.lock(&name);
    assert_eq!(lock.name(), name);
    assert_eq!(client.leased_semaphore(&name).name(), name);
    assert_eq!(client.election(&name).name(), name);
    assert_eq!(client.fenced_lock(&name).name(), name);
    assert_eq!(client.read_write_lock(&name).write().name(), name);

    let guard = lock.lock().unwrap();
    assert_eq!(client.inspect(&name).unwrap().name, name);
    let err = client.leased_semaphore(&name).try_acquire().unwrap_err();
    assert!(err.is_wrong_kind(), "{err}");
    assert_eq!(err.lock_name(), Some(name.as_str()));
    let message = err.to_string();
    assert!(message.contains(&name[..64]), "{message}");
    assert!(!message.contains(&name), "printed whole: {message}");
    guard.unlock().unwrap();

    // Bytes that are not UTF-8 read as U+FFFD in the name; the key keeps them.
    let bytes = client.lock(b"ab\xffcd");
    assert_eq!(bytes.name(), "ab\u{fffd}cd");
    let _held = bytes.lock().unwrap();
    let exists: bool = redis::cmd("EXISTS")
        .arg(b"ab\xffcd")
        .query(&mut server.conn())
        .unwrap();
    assert!(exists, "the key is the name's bytes");
}

// Server errors are told apart by their code, the first word of the reply, never by the
// words after it: servers change those (Valkey 8 reworded NOSCRIPT). Each test below has a
// proxy answer one command with a known code in words no server uses, and checks that the
// library does what it does for that code.

/// Words no server uses, after each code.
const OTHER_WORDS: &str = "in words no server has used";

/// An error reply: `code`, then [`OTHER_WORDS`].
fn reworded(code: &str) -> Vec<u8> {
    format!("-{code} {OTHER_WORDS}\r\n").into_bytes()
}

/// A server, a proxy in front of it, and a client through the proxy.
fn proxied() -> (Server, Proxy, LockClient) {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let client = LockClient::builder(&proxy.url())
        .connect_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    (server, proxy, client)
}

#[test]
fn noscript_in_other_words_loads_the_scripts_and_runs_again() {
    let (server, proxy, client) = proxied();
    let loads = server.calls("script|load");
    proxy.answer_instead(b"EVALSHA", &reworded("NOSCRIPT"));
    let guard = client.lock("reworded").try_lock().unwrap();
    assert!(proxy.trap_sprung());
    assert!(guard.is_some(), "taken once the scripts were loaded again");
    assert!(
        server.calls("script|load") > loads,
        "the scripts were loaded"
    );
}

#[test]
fn refusals_in_other_words_keep_their_meaning() {
    let (_server, proxy, client) = proxied();
    let refused = |code: &str| {
        proxy.answer_instead(b"EVALSHA", &reworded(code));
        let err = client.lock("reworded").try_lock().map(drop).unwrap_err();
        assert!(proxy.trap_sprung(), "{code}");
        assert_eq!(err.server_code(), Some(code), "{err:#}");
        // A refusal is no broken connection, and none is a server without scripts: only a
        // plain ERR makes the library ask whether the server runs scripts.
        assert!(
            !err.is_connection() && !err.is_scripting_disabled(),
            "{err:#}"
        );
        let report = printed_once(&err);
        assert_eq!(count(&report, OTHER_WORDS), 1, "{report}");
        err
    };
    assert!(refused("NOPERM").is_permission());
    assert!(refused("NOAUTH").is_auth());
    assert!(refused("WRONGPASS").is_auth());
    // A script running too long elsewhere, a server loading its data: the call fails at
    // once, saying so, for the caller to decide.
    for code in ["BUSY", "LOADING"] {
        let err = refused(code);
        assert!(!err.is_permission() && !err.is_auth(), "{err:#}");
    }
}

#[test]
fn a_script_s_own_codes_are_read_from_the_code() {
    let (_server, proxy, client) = proxied();
    // WRONGKIND is the scripts' own code; the word after it names the key's type.
    proxy.answer_instead(b"EVALSHA", b"-WRONGKIND a type no server has\r\n");
    let err = client.lock("reworded").try_lock().map(drop).unwrap_err();
    assert!(proxy.trap_sprung());
    assert!(err.is_wrong_kind(), "{err:#}");
    // WRONGTYPE to reading a hold count: the key is someone else's, with no holds of ours.
    proxy.answer_instead(b"HGET", &reworded("WRONGTYPE"));
    assert_eq!(client.lock("reworded").hold_count().unwrap(), 0);
    assert!(proxy.trap_sprung());
}

#[test]
fn a_plain_err_from_a_script_on_a_server_that_runs_scripts_stays_an_error_of_its_own() {
    let (_server, proxy, client) = proxied();
    // As a script that fails as it runs is answered: the server is asked, runs scripts, and
    // the error stands as it was.
    proxy.answer_instead(b"EVALSHA", &reworded("ERR"));
    let err = client.lock("reworded").try_lock().map(drop).unwrap_err();
    assert!(proxy.trap_sprung());
    assert_eq!(err.server_code(), Some("ERR"), "{err:#}");
    assert!(!err.is_scripting_disabled(), "{err:#}");
    assert!(client.lock("reworded").try_lock().unwrap().is_some());
}

#[test]
fn readonly_in_other_words_is_a_demoted_primary_behind_sentinel() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let sentinel = support::StaleSentinel::start(proxy.port(), 1);
    let client = LockClient::sentinel(&[&sentinel.url()], support::MASTER)
        .connect_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let asked = sentinel.asked();
    proxy.answer_instead(b"EVALSHA", &reworded("READONLY"));
    // The reply of a primary that became a replica is refused, the sentinels asked again,
    // and the command sent again where they say the primary is.
    let guard = client.lock("demoted").try_lock().unwrap();
    assert!(proxy.trap_sprung());
    assert!(guard.is_some(), "taken on the primary the sentinels name");
    assert!(
        eventually(Duration::from_secs(20), || sentinel.asked() > asked),
        "the sentinels were not asked again"
    );
}

#[test]
fn cluster_redirections_in_other_words_are_followed() {
    let node = support::lone_primary();
    let proxy = Proxy::start(node.port());
    // The node names the proxy as its address, so that every command goes through it.
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("cluster-announce-port")
        .arg(proxy.port())
        .query(&mut node.conn())
        .unwrap();
    let announced = eventually(Duration::from_secs(30), || {
        let mut conn = node.conn();
        let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut conn).unwrap();
        let slots: Vec<Vec<redis::Value>> =
            redis::cmd("CLUSTER").arg("SLOTS").query(&mut conn).unwrap();
        let port = redis::Value::Int(proxy.port().into());
        info.contains("cluster_state:ok")
            && matches!(&slots[..], [slot] if matches!(slot.get(2),
                Some(redis::Value::Array(primary)) if primary.get(1) == Some(&port)))
    });
    assert!(announced, "the lone primary did not become ready");
    let client = LockClient::cluster(&[&proxy.url()])
        .connect_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg("redirected")
        .query(&mut node.conn())
        .unwrap();
    let at = format!("127.0.0.1:{}", proxy.port());
    // MOVED and ASK carry the slot and the address after the code; the other two only words.
    let replies = [
        format!("-MOVED {slot} {at}\r\n").into_bytes(),
        format!("-ASK {slot} {at}\r\n").into_bytes(),
        reworded("TRYAGAIN"),
        reworded("CLUSTERDOWN"),
    ];
    for reply in replies {
        let shown = String::from_utf8_lossy(&reply).into_owned();
        proxy.answer_instead(b"EVALSHA", &reply);
        let guard = client.lock("redirected").try_lock().unwrap();
        assert!(proxy.trap_sprung(), "{shown}");
        let guard = guard.unwrap_or_else(|| panic!("not taken after {shown}"));
        guard.unlock().unwrap();
    }
}

// A server that runs no scripts: scripting turned off with `rename-command` here, as on a
// managed service or by an operator; Valkey 9.1 without its Lua module answers the same way
// in other words (see `src/transport/no_scripts.rs`).

/// The arguments that turn scripting off on Redis 7: EVAL and EVALSHA renamed away.
const NO_EVAL: [&str; 6] = [
    "--rename-command",
    "EVAL",
    "",
    "--rename-command",
    "EVALSHA",
    "",
];

/// `args` after the test defaults.
fn trailing(args: &[&str]) -> support::Args {
    support::Args {
        trailing: args.iter().map(|arg| arg.to_string()).collect(),
        ..support::Args::default()
    }
}

/// Error replies the server has given since it started (`INFO errorstats`), asked on
/// `conn` (opening a connection may cost error replies of its own).
fn error_replies(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("errorstats").query(conn).unwrap();
    info.lines()
        .filter_map(|line| line.split_once(":count=")?.1.split(',').next())
        .map(|n| n.trim().parse::<u64>().unwrap())
        .sum()
}

#[test]
fn a_client_cannot_be_built_on_a_server_that_runs_no_scripts() {
    // EVALSHA unknown; or EVALSHA answers NOSCRIPT and loading the scripts is refused, as
    // on Valkey without its Lua module.
    for renamed in [&NO_EVAL[..], &["--rename-command", "SCRIPT", ""]] {
        let server = Server::start_with(trailing(renamed));
        let err = server.builder().build().unwrap_err();
        assert!(err.is_scripting_disabled(), "{renamed:?}: {err:#}");
        assert!(!err.is_connection() && !err.is_permission(), "{err:#}");
        let report = printed_once(&err);
        assert_eq!(count(&report, "runs no scripts"), 1, "{report}");
        assert_eq!(count(&report, &server.port().to_string()), 1, "{report}");
    }
}

#[test]
fn redlock_with_a_node_that_runs_no_scripts_cannot_be_built() {
    let servers = [
        Server::start(),
        Server::start(),
        Server::start_with(trailing(&NO_EVAL)),
    ];
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    // Two nodes would make a quorum; a node without scripts is a mistake to fix all the same.
    let err = LockClient::redlock(&urls).build().unwrap_err();
    assert!(err.is_scripting_disabled(), "{err:#}");
}

/// Takes a lock of kind `K` every way that waits, on a server that stopped running scripts:
/// each fails with the typed error, at once and with at most `most` error replies, however
/// long it was to wait (a call that waited or retried would not end). The token kind's
/// lock is held by another token: taking a free one is a plain `SET NX`, no script.
fn refused_at_once<K: support::MakeLock>(
    client: &LockClient,
    conn: &mut redis::Connection,
    most: u64,
) {
    let name = format!("unscripted-{}", K::NAME);
    let lock = K::make(client, &name);
    if K::NAME == "token" {
        let () = redis::cmd("SET")
            .arg(&name)
            .arg("another token")
            .query(conn)
            .unwrap();
    }
    let (wait, lease) = (Duration::from_secs(3600), Duration::from_secs(60));
    for call in ["lock", "try_lock_for", "try_lock_with_lease_for"] {
        let before = error_replies(conn);
        let taken = match call {
            "lock" => lock.lock().map(drop),
            "try_lock_for" => lock.try_lock_for(wait).map(drop),
            _ => lock.try_lock_with_lease_for(wait, lease).map(drop),
        };
        let err = taken.unwrap_err();
        assert!(err.is_scripting_disabled(), "{} {call}: {err:#}", K::NAME);
        assert!(!err.is_connection() && !err.is_timeout(), "{err:#}");
        assert_eq!(err.lock_name(), Some(lock.name()), "{err:#}");
        // The script's, and the question whether the server runs any; the token kind's
        // release of what its attempt may have taken, and that question again.
        let replies = error_replies(conn) - before;
        assert!(
            replies <= most,
            "{} {call}: {replies} error replies",
            K::NAME
        );
    }
}

#[test]
fn every_kind_fails_at_once_on_a_server_that_stopped_running_scripts() {
    let mut server = Server::start();
    // No max_wait: a lock() that waited for a server without scripts would wait for ever.
    let client = server.client();
    let semaphore = client.leased_semaphore("unscripted-permits");
    semaphore.try_set_permits(1).unwrap();
    // The same port, scripting turned off: as after an upgrade that left Lua out.
    server.restart_with(&NO_EVAL);
    let conn = &mut server.conn();
    refused_at_once::<redmutex::Reentrant>(&client, conn, 4);
    refused_at_once::<redmutex::Fenced>(&client, conn, 4);
    refused_at_once::<redmutex::Token>(&client, conn, 4);
    refused_at_once::<redmutex::Fair>(&client, conn, 4);
    refused_at_once::<redmutex::Read>(&client, conn, 4);
    refused_at_once::<redmutex::Write>(&client, conn, 4);
    // A free token lock is taken without a script; giving it back is one, and says why it
    // failed.
    let guard = client.token_lock("unscripted-free").lock().unwrap();
    assert!(guard.unlock().unwrap_err().is_scripting_disabled());
    let before = error_replies(conn);
    let err = semaphore.acquire().map(drop).unwrap_err();
    assert!(err.is_scripting_disabled(), "{err:#}");
    let err = (semaphore.try_acquire_for(Duration::from_secs(3600)))
        .map(drop)
        .unwrap_err();
    assert!(err.is_scripting_disabled(), "{err:#}");
    assert!(error_replies(conn) - before <= 8);
}

/// Valkey 9.1 moved Lua into a module: a server whose module was unloaded answers a script
/// `NOSCRIPT` and refuses to load it. Skipped where Lua is not a module (Redis).
#[test]
fn a_server_whose_lua_module_was_unloaded_is_refused_at_once() {
    let server = Server::start_with(trailing(&["--enable-module-command", "yes"]));
    let client = server.client();
    let conn = &mut server.conn();
    let unloaded: redis::RedisResult<()> =
        redis::cmd("MODULE").arg("UNLOAD").arg("lua").query(conn);
    if let Err(err) = unloaded {
        let _ = writeln!(
            std::io::stderr(),
            "skipped errors::a_server_whose_lua_module_was_unloaded_is_refused_at_once: \
             Lua is not a module of this server ({err})"
        );
        return;
    }
    let err = server.builder().build().unwrap_err();
    assert!(err.is_scripting_disabled(), "{err:#}");
    // One round: the script's NOSCRIPT, one pipelined load of every script, each refused,
    // and the question whether the server runs any. No call may cost more than that.
    let before = error_replies(conn);
    let err = client.lock("unscripted-round").try_lock().unwrap_err();
    assert!(err.is_scripting_disabled(), "{err:#}");
    let round = error_replies(conn) - before;
    refused_at_once::<redmutex::Reentrant>(&client, conn, round);
    refused_at_once::<redmutex::Fenced>(&client, conn, round);
    // The token kind's attempt, then its give-back of what the attempt may have taken.
    refused_at_once::<redmutex::Token>(&client, conn, 2 * round);
    refused_at_once::<redmutex::Fair>(&client, conn, round);
    refused_at_once::<redmutex::Read>(&client, conn, round);
    refused_at_once::<redmutex::Write>(&client, conn, round);
    let err = client
        .leased_semaphore("unscripted")
        .acquire()
        .map(drop)
        .unwrap_err();
    assert!(err.is_scripting_disabled(), "{err:#}");
    let report = client.doctor().unwrap();
    let scripting = (report.findings.iter()).find(|f| f.check == "scripting");
    assert!(
        scripting.is_some_and(|f| f.level == redmutex::FindingLevel::Fail),
        "{report}"
    );
}
