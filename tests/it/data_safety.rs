//! The operations tool beside application data: a corpus of keys of every Redis type, many
//! of them named or shaped like locks, comes out of `locks`, `locks --all`, `show` and
//! `unlock --force --yes` byte for byte the same (`DUMP`), while real locks of every kind,
//! this crate's and other libraries', are still found and removed. Keys are read in bounded
//! parts only: a listing beside a hash of 200,000 fields sends back a few kilobytes.
#![cfg(feature = "cli")]

use crate::support;

use std::time::Duration;

use support::toolchain::{Toolchain, skip_without};
use support::{Peer, Server};

const PATIENCE: Duration = Duration::from_secs(60);
const OWNER: &str = "5d4a1b7e-0c3f-4b8e-9a21-6f0e2d3c4b5a";

/// Runs the tool against `url`; its exit code, standard output and standard error.
fn tool(url: &str, args: &[&str]) -> (i32, String, String) {
    let mut cmd = support::tool();
    cmd.arg("--url").arg(url).args(args);
    let output = cmd.timeout(PATIENCE).output().unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let code = output.status.code().unwrap_or(-1);
    (code, text(&output.stdout), text(&output.stderr))
}

/// Application data: (key, commands that write it). A TTL is given to some, as caches have.
fn corpus() -> Vec<(&'static str, Vec<redis::Cmd>)> {
    let hset = |key: &str, pairs: &[(&str, &str)]| {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(key);
        for (field, value) in pairs {
            cmd.arg(*field).arg(*value);
        }
        cmd
    };
    let set = |key: &str, value: &[u8]| redis::cmd("SET").arg(key).arg(value).clone();
    let expire = |key: &str| redis::cmd("PEXPIRE").arg(key).arg(600_000).clone();
    let owner = format!("{OWNER}:1");
    let owner2 = format!("{OWNER}:2");
    let with_ttl = |key: &'static str, cmd: redis::Cmd| (key, vec![cmd, expire(key)]);
    let plain = |key: &'static str, cmd: redis::Cmd| (key, vec![cmd]);
    vec![
        with_ttl("stats:daily", hset("stats:daily", &[("2024-01-05:13", "42")])),
        with_ttl("cart:7", hset("cart:7", &[("1001:2", "3")])),
        plain("sessions", hset("sessions", &[(&owner, "1700000000")])),
        with_ttl("sessions:ttl", hset("sessions:ttl", &[(&owner, "1700000000")])),
        with_ttl(
            "sessions:two",
            hset("sessions:two", &[(&owner, "1"), (&owner2, "1")]),
        ),
        with_ttl("rw:beef", hset("rw:beef", &[("mode", "read"), ("beef:1", "1")])),
        with_ttl("rw:bare", hset("rw:bare", &[("mode", "read")])),
        with_ttl(
            "rw:other",
            hset("rw:other", &[("mode", "write"), ("x", "y")]),
        ),
        with_ttl(
            "rw:two-writers",
            hset(
                "rw:two-writers",
                &[("mode", "write"), (&format!("{owner}:write"), "1"), (&owner2, "1")],
            ),
        ),
        plain("user:1", hset("user:1", &[("name", "bob"), ("age", "42")])),
        with_ttl(
            "job:9",
            hset("job:9", &[("token", "abc"), ("epoch", "3"), ("name", "x")]),
        ),
        with_ttl("held:zero", hset("held:zero", &[(&owner, "0")])),
        with_ttl("held:half", hset("held:half", &[(&owner, "1.5")])),
        plain("held:forever", hset("held:forever", &[(&owner, "1")])),
        with_ttl(
            "etag:md5",
            set("etag:md5", b"9e107d9d372bb6826bd81d3542a419d6"),
        ),
        plain(
            "etag:sha1",
            set("etag:sha1", b"2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"),
        ),
        with_ttl("oid:1", set("oid:1", b"507f1f77bcf86cd799439011")),
        plain("apikey:1", set("apikey:1", b"AbCdEfGhIjKlMnOpQrStUvWx")),
        plain(
            "upload:1",
            set("upload:1", b"0123456789abcdef0123456789abcdef"),
        ),
        with_ttl(
            "uuid4:1",
            set("uuid4:1", b"f47ac10b58cc4372a5670e02b2c3d479"),
        ),
        plain("json:1", set("json:1", br#"{"name":"bob"}"#)),
        plain("counter:1", set("counter:1", b"42")),
        plain(
            "jwt:1",
            set(
                "jwt:1",
                b"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            ),
        ),
        plain("blob:1", set("blob:1", &[b'x'; 5000])),
        plain("binary:1", set("binary:1", b"\x00\xff\x01lock")),
        plain("empty:1", set("empty:1", b"")),
        plain(
            "tags",
            redis::cmd("SADD").arg("tags").arg("a").arg("b").clone(),
        ),
        plain(
            "board",
            redis::cmd("ZADD").arg("board").arg(1).arg("a").clone(),
        ),
        plain(
            "events",
            redis::cmd("XADD").arg("events").arg("*").arg("f").arg("v").clone(),
        ),
        plain(
            "redisson_lock_queue:{orders}",
            redis::cmd("RPUSH")
                .arg("redisson_lock_queue:{orders}")
                .arg("first")
                .arg("second")
                .clone(),
        ),
        plain(
            "redisson_lock_timeout:{orders}",
            redis::cmd("ZADD")
                .arg("redisson_lock_timeout:{orders}")
                .arg(1)
                .arg("first")
                .clone(),
        ),
        plain("pool", set("pool", b"5")),
        plain(
            "{pool}:timeout",
            redis::cmd("ZADD")
                .arg("{pool}:timeout")
                .arg(1)
                .arg("member")
                .clone(),
        ),
    ]
}

fn dump(server: &Server, key: &str) -> (Vec<u8>, bool) {
    let mut conn = server.conn();
    let value: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut conn).unwrap();
    let pttl: i64 = redis::cmd("PTTL").arg(key).query(&mut conn).unwrap();
    assert!(!value.is_empty(), "{key} was not written");
    (value, pttl > 0)
}

/// Every key of the corpus stays as it was through every command of the tool, and none
/// of them is listed as a lock.
#[test]
fn the_tool_lists_and_removes_no_application_data() {
    let server = Server::start();
    let url = server.url();
    let mut conn = server.conn();
    let corpus = corpus();
    assert!(corpus.len() >= 30);
    for (_, cmds) in &corpus {
        for cmd in cmds {
            cmd.exec(&mut conn).unwrap();
        }
    }
    let before: Vec<_> = corpus.iter().map(|(key, _)| dump(&server, key)).collect();

    let (code, listed, err) = tool(&url, &["locks"]);
    assert_eq!(code, 0, "{listed}{err}");
    assert_eq!(listed.lines().count(), 1, "no lock here:\n{listed}");
    let (code, all, err) = tool(&url, &["locks", "--all"]);
    assert_eq!(code, 0, "{all}{err}");
    for line in all.lines().skip(1) {
        assert!(
            line.contains("no lock") || line.contains("(may be a lock)"),
            "{line}"
        );
    }
    // Shaped like a lock, but nothing proves one: only shown as possible.
    for maybe in [
        "held:forever",
        "etag:md5",
        "oid:1",
        "apikey:1",
        "upload:1",
        "uuid4:1",
    ] {
        let line = (all.lines())
            .find(|line| line.starts_with(&format!("{maybe} ")))
            .unwrap_or_else(|| panic!("{maybe} not listed with --all:\n{all}"));
        assert!(line.contains("(may be a lock)"), "{line}");
    }
    for (key, _) in &corpus {
        let (code, shown, err) = tool(&url, &["show", key]);
        assert_eq!(code, 0, "{key}: {shown}{err}");
        let (code, out, err) = tool(&url, &["unlock", key, "--force", "--yes"]);
        assert_eq!(code, 1, "{key}: {out}{err}");
    }
    // Neither does a fair lock's name whose queue and timeouts hold data.
    let (code, out, err) = tool(&url, &["unlock", "orders", "--force", "--yes"]);
    assert_ne!(code, 0, "{out}{err}");
    // Naming a holder that is not there removes nothing either.
    let (code, out, err) = tool(
        &url,
        &["unlock", "etag:md5", "--force", "--yes", "--token", "x"],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("nothing removed"), "{out}");

    let after: Vec<_> = corpus.iter().map(|(key, _)| dump(&server, key)).collect();
    for ((key, _), (before, after)) in corpus.iter().zip(before.iter().zip(&after)) {
        assert_eq!(before, after, "{key} changed");
    }
}

/// Real locks beside the corpus: every kind of this crate's, and redis-py's and
/// node-redlock's tokens, are found; the certain ones removed by `unlock --force`, the
/// tokens (and a lock's hash that lost its expiry) only with their holder named.
#[test]
fn real_locks_of_every_kind_and_library_are_found_and_removed() {
    if skip_without(&[Toolchain::Python, Toolchain::Node]) {
        return;
    }
    let server = Server::start();
    let url = server.url();
    let mut conn = server.conn();
    for (_, cmds) in corpus() {
        for cmd in cmds {
            cmd.exec(&mut conn).unwrap();
        }
    }
    let client = server.client();
    let lease = Duration::from_secs(600);
    let _held = (
        client
            .lock("real:reentrant")
            .lock_with_lease(lease)
            .unwrap(),
        client
            .fenced_lock("real:fenced")
            .lock_with_lease(lease)
            .unwrap(),
        client
            .fair_lock("real:fair")
            .lock_with_lease(lease)
            .unwrap(),
        (client.read_write_lock("real:read").read())
            .lock_with_lease(lease)
            .unwrap(),
        (client.read_write_lock("real:write").write())
            .lock_with_lease(lease)
            .unwrap(),
        client.election("real:elected").campaign().unwrap(),
    );
    let token = client
        .token_lock("real:token")
        .lock_with_lease(lease)
        .unwrap();
    let persisted = client
        .lock("real:persisted")
        .lock_with_lease(lease)
        .unwrap();
    let _: () = redis::cmd("PERSIST")
        .arg("real:persisted")
        .query(&mut conn)
        .unwrap();
    let persisted_owner: Vec<String> = redis::cmd("HKEYS")
        .arg("real:persisted")
        .query(&mut conn)
        .unwrap();
    let persisted_owner = persisted_owner[0].clone();
    let mut python = Peer::python(&url);
    let mut node = Peer::node(&url);
    let py_token = python.acquire("real:redis-py", 600_000, 0);
    let node_token = node.acquire("real:node-redlock", 600_000, 0);
    // redsync v4's layout: SET NX PX of 16 random bytes in padded base64 (its `genValue`).
    let redsync_token = "q83vEjRWeJq83vEjRWeJqw==";
    let _: () = redis::cmd("SET")
        .arg("real:redsync")
        .arg(redsync_token)
        .arg("PX")
        .arg(600_000)
        .query(&mut conn)
        .unwrap();

    let (code, listed, err) = tool(&url, &["locks", "real:*"]);
    assert_eq!(code, 0, "{listed}{err}");
    let certain = [
        "real:reentrant",
        "real:fenced",
        "real:fair",
        "real:read",
        "real:write",
        "real:elected",
    ];
    for name in certain {
        assert!(listed.contains(name), "{name} not listed:\n{listed}");
    }
    let (_, all, _) = tool(&url, &["locks", "--all", "real:*"]);
    let tokens = [
        ("real:token", token.token().to_owned()),
        ("real:redis-py", py_token),
        ("real:node-redlock", node_token),
        ("real:redsync", redsync_token.to_owned()),
        ("real:persisted", persisted_owner),
    ];
    for (name, _) in &tokens {
        assert!(
            !listed.contains(name),
            "{name} listed as certain:\n{listed}"
        );
        let line = (all.lines())
            .find(|line| line.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} not listed with --all:\n{all}"));
        assert!(line.contains("(may be a lock)"), "{line}");
    }
    for name in certain {
        let (code, out, err) = tool(&url, &["unlock", name, "--force", "--yes"]);
        assert_eq!(code, 0, "{name}: {out}{err}");
        assert!(!server.exists(name), "{name} left");
    }
    for (name, holder) in &tokens {
        let (code, out, err) = tool(&url, &["unlock", name, "--force", "--yes"]);
        assert_eq!(code, 1, "{name} removed without its holder: {out}{err}");
        assert!(server.exists(name));
        let (code, out, err) = tool(
            &url,
            &["unlock", name, "--force", "--yes", "--token", holder],
        );
        assert_eq!(code, 0, "{name}: {out}{err}");
        assert!(!server.exists(name), "{name} left: {out}");
    }
    drop(persisted);
}

/// A listing beside a hash of 200,000 fields reads a few dozen of them: what the server
/// sends back stays small, where reading the hash whole would send megabytes.
#[test]
fn a_listing_reads_a_bounded_part_of_a_huge_key() {
    let server = Server::start();
    let url = server.url();
    let mut conn = server.conn();
    for chunk in 0..20 {
        let mut cmd = redis::cmd("HSET");
        cmd.arg("huge");
        for i in 0..10_000 {
            cmd.arg(format!("{OWNER}:{}", chunk * 10_000 + i)).arg(1);
        }
        cmd.exec(&mut conn).unwrap();
    }
    let _: () = redis::cmd("SET")
        .arg("long")
        .arg(vec![b'7'; 1 << 20])
        .query(&mut conn)
        .unwrap();
    let mut sent = || -> u64 {
        let info: String = redis::cmd("INFO").arg("stats").query(&mut conn).unwrap();
        (info.lines())
            .find_map(|line| line.strip_prefix("total_net_output_bytes:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let before = sent();
    let (code, all, err) = tool(&url, &["locks", "--all", "--json"]);
    assert_eq!(code, 0, "{all}{err}");
    let (code, shown, err) = tool(&url, &["show", "huge"]);
    assert_eq!(code, 0, "{shown}{err}");
    let after = sent();
    assert!(
        after - before < 100_000,
        "{} bytes sent for two looks",
        after - before
    );
    assert!(
        all.contains("\"huge\"") && all.contains("\"long\""),
        "{all}"
    );
}
