//! The scripts on their own: running one twice (a retry after a lost reply) has the effect
//! of running it once, which is what makes retrying them safe.

mod support;

use redis::Script;
use support::{Server, hash};

const FIELD: &str = "6f1c2a9e-2222-4d4d-9999-abcdefabcdef:7";

fn acquire(redis: &mut redis::Connection, held: u32) -> Option<i64> {
    Script::new(include_str!("../src/scripts/acquire.lua"))
        .key("k")
        .arg(30_000)
        .arg(FIELD)
        .arg(held)
        .invoke(redis)
        .unwrap()
}

fn release(redis: &mut redis::Connection, held: u32) -> Option<i64> {
    Script::new(include_str!("../src/scripts/release.lua"))
        .key("k")
        .key("redisson_lock__channel:{k}")
        .arg(0)
        .arg(30_000)
        .arg(FIELD)
        .arg(held)
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
    assert_eq!(release(&mut redis, 3), Some(0));
    assert_eq!(release(&mut redis, 3), Some(0), "the retry");
    assert_eq!(hash(&mut redis, "k"), [(FIELD.to_owned(), 2)]);
    assert_eq!(release(&mut redis, 2), Some(0));
    assert_eq!(
        release(&mut redis, 1),
        Some(1),
        "the last hold deletes the key"
    );
    assert_eq!(
        release(&mut redis, 1),
        None,
        "the retry finds nothing to release"
    );
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
    assert_eq!(release(&mut redis, 1), None);
    assert_eq!(hash(&mut redis, "k"), [("other:1".to_owned(), 1)]);
}
