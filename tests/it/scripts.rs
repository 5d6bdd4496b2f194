//! The scripts on their own: running one twice (a retry after a lost reply) has the effect
//! of running it once, and reports what the first run did, which is what makes retrying them
//! safe; a key of another type is someone else's lock.

use crate::support;

use redis::Script;
use support::{Server, hash};

const FIELD: &str = "6f1c2a9e-2222-4d4d-9999-abcdefabcdef:7";

fn acquire(redis: &mut redis::Connection, held: u32) -> Option<i64> {
    Script::new(include_str!("../../src/kinds/reentrant/acquire.lua"))
        .key("k")
        .arg(30_000)
        .arg(FIELD)
        .arg(held)
        .invoke(redis)
        .unwrap()
}

/// One release call; a retry of the same call passes the same `call` (its latch).
fn release(redis: &mut redis::Connection, held: u32, call: &str) -> Option<i64> {
    Script::new(include_str!("../../src/kinds/reentrant/release.lua"))
        .key("k")
        .key(format!("redisson_unlock_latch:{{k}}:{call}"))
        .arg(0)
        .arg(30_000)
        .arg(FIELD)
        .arg(held)
        .arg(10_000)
        .arg("redisson_lock__channel:{k}")
        .invoke(redis)
        .unwrap()
}

fn force_unlock(redis: &mut redis::Connection, call: &str) -> i64 {
    Script::new(concat!(
        include_str!("../../src/transport/scripts/shape.lua"),
        include_str!("../../src/transport/scripts/force_unlock.lua")
    ))
    .key("k")
    .key(format!("redisson_unlock_latch:{{k}}:{call}"))
    .arg(0)
    .arg(10_000)
    .arg("hash")
    .arg("redisson_lock__channel:{k}")
    .arg("")
    .arg(64)
    .invoke(redis)
    .unwrap()
}

fn renew(redis: &mut redis::Connection) -> i64 {
    Script::new(include_str!("../../src/kinds/reentrant/renew.lua"))
        .key("k")
        .arg(30_000)
        .arg(FIELD)
        .arg(0)
        .invoke(redis)
        .unwrap()
}

#[test]
fn a_repeated_acquire_takes_one_hold() {
    let server = Server::start();
    let mut redis = server.conn();
    assert_eq!(acquire(&mut redis, 0), None);
    assert_eq!(acquire(&mut redis, 0), None, "the retry of the first hold");
    assert_eq!(hash(&mut redis, "k"), [(FIELD.to_owned(), 1)]);
    assert_eq!(acquire(&mut redis, 1), None);
    assert_eq!(acquire(&mut redis, 1), None, "the retry of the re-entry");
    assert_eq!(hash(&mut redis, "k"), [(FIELD.to_owned(), 2)]);
}

#[test]
fn a_repeated_release_gives_back_one_hold() {
    let server = Server::start();
    let mut redis = server.conn();
    for held in 0..3 {
        acquire(&mut redis, held);
    }
    assert_eq!(release(&mut redis, 3, "a"), Some(0));
    assert_eq!(release(&mut redis, 3, "a"), Some(0), "the retry");
    assert_eq!(hash(&mut redis, "k"), [(FIELD.to_owned(), 2)]);
    assert_eq!(release(&mut redis, 2, "b"), Some(0));
    assert_eq!(
        release(&mut redis, 1, "c"),
        Some(1),
        "the last hold deletes the key"
    );
    // Someone else takes the free lock before the retry arrives.
    let _: i64 = redis::cmd("HSET")
        .arg("k")
        .arg("other:1")
        .arg(1)
        .query(&mut redis)
        .unwrap();
    assert_eq!(
        release(&mut redis, 1, "c"),
        Some(1),
        "the retry reports the release its first run did"
    );
    assert_eq!(hash(&mut redis, "k"), [("other:1".to_owned(), 1)]);
    assert_eq!(
        release(&mut redis, 1, "d"),
        None,
        "another call finds nothing of ours"
    );
}

#[test]
fn a_repeated_force_unlock_never_deletes_a_lock_taken_since() {
    let server = Server::start();
    let mut redis = server.conn();
    acquire(&mut redis, 0);
    assert_eq!(force_unlock(&mut redis, "a"), 1);
    acquire(&mut redis, 0);
    assert_eq!(
        force_unlock(&mut redis, "a"),
        1,
        "the retry reports the delete"
    );
    assert_eq!(
        hash(&mut redis, "k"),
        [(FIELD.to_owned(), 1)],
        "and leaves the new hold"
    );
    assert_eq!(force_unlock(&mut redis, "b"), 1);
    assert_eq!(force_unlock(&mut redis, "c"), 0);
    assert_eq!(
        force_unlock(&mut redis, "c"),
        0,
        "the retry of a call that found nothing"
    );
}

#[test]
fn wrong_type_a_key_of_another_type_is_a_busy_foreign_lock() {
    let server = Server::start();
    let mut redis = server.conn();
    // A SET NX PX lock of another library.
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("token")
        .arg("PX")
        .arg(5_000)
        .query(&mut redis)
        .unwrap();
    let ttl = acquire(&mut redis, 0).expect("busy");
    assert!(ttl > 0 && ttl <= 5_000, "its PTTL: {ttl}");
    assert!(
        acquire(&mut redis, 1).is_some_and(|ttl| ttl > 0),
        "a re-entry finds it busy too"
    );
    assert_eq!(release(&mut redis, 1, "a"), None, "not ours");
    assert_eq!(renew(&mut redis), 0, "not ours to renew");
    let value: String = redis::cmd("GET").arg("k").query(&mut redis).unwrap();
    assert_eq!(value, "token", "left alone");
}

#[test]
fn an_acquire_whose_earlier_holds_are_gone_says_so() {
    let server = Server::start();
    let mut redis = server.conn();
    assert_eq!(acquire(&mut redis, 2), Some(-3));
    assert_eq!(
        hash(&mut redis, "k"),
        [(FIELD.to_owned(), 3)],
        "counted as believed"
    );
}

#[test]
fn a_foreign_holder_gets_its_pttl_back_and_is_left_alone() {
    let server = Server::start();
    let mut redis = server.conn();
    let _: i64 = redis::cmd("HSET")
        .arg("k")
        .arg("other:1")
        .arg(1)
        .query(&mut redis)
        .unwrap();
    assert_eq!(acquire(&mut redis, 0), Some(-1), "no expiry set");
    let _: bool = redis::cmd("PEXPIRE")
        .arg("k")
        .arg(5_000)
        .query(&mut redis)
        .unwrap();
    let ttl = acquire(&mut redis, 0).unwrap();
    assert!(ttl > 0 && ttl <= 5_000);
    assert_eq!(release(&mut redis, 1, "a"), None);
    assert_eq!(hash(&mut redis, "k"), [("other:1".to_owned(), 1)]);
}
