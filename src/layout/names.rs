//! Redisson's naming contract: the keys, channels and messages a lock is made of.
//!
//! Redisson keeps every auxiliary key and channel of a lock in the lock key's cluster slot:
//! a name that already holds a hash tag (contains `{`) is used as it is, any other name is
//! wrapped in braces. Everything here follows that rule, so Java services and this crate
//! meet on the same keys and channels.

/// `prefix:name` when the name holds a hash tag, else `prefix:{name}` (Redisson's
/// `prefixName`).
fn prefixed(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    if name.contains(&b'{') {
        [prefix, b":", name].concat()
    } else {
        [prefix, b":{", name, b"}"].concat()
    }
}

/// The channel on which a lock's release is announced: `redisson_lock__channel:{<key>}`.
pub(crate) fn channel(key: &[u8]) -> Vec<u8> {
    prefixed(b"redisson_lock__channel", key)
}

/// Where a client's subscriber threads are woken and send probes to themselves: the lock
/// channel of a key under the client's prefix, so that the rights a lock user needs cover it
/// (`&redisson_lock__channel:*`). A random id per subscriber thread follows.
pub(crate) fn wake_channel_prefix(key_prefix: &[u8]) -> Vec<u8> {
    [
        &channel(&[key_prefix, b"redmutex:notify"].concat())[..],
        b":",
    ]
    .concat()
}

/// The fair lock's queue of waiting owners: `redisson_lock_queue:{<key>}`.
pub(crate) fn fair_queue(key: &[u8]) -> Vec<u8> {
    prefixed(b"redisson_lock_queue", key)
}

/// The fair lock's sorted set of waiting owners by when they lose their place:
/// `redisson_lock_timeout:{<key>}`.
pub(crate) fn fair_timeouts(key: &[u8]) -> Vec<u8> {
    prefixed(b"redisson_lock_timeout", key)
}

/// This crate's own record of its fair-lock waiters, by when each loses its place unless
/// it comes back: `redisson_lock_timeout:{<key>}:redmutex_alive`, a sorted set beside
/// Redisson's, which Redisson's clients neither read nor write. It expires once the latest
/// place of its waiters in Redisson's sorted set has passed, so that each waiter is found
/// in it for as long as that place could keep it in the queue. Named under the prefix of
/// Redisson's places, so that the rights a fair lock's user has cover it.
pub(crate) fn fair_alive(key: &[u8]) -> Vec<u8> {
    [&fair_timeouts(key)[..], b":redmutex_alive"].concat()
}

/// The channel on which one waiter of a fair lock, `field`, is told its turn has come:
/// the lock's channel, `:`, the owner field.
pub(crate) fn waiter_channel(key: &[u8], field: &str) -> Vec<u8> {
    [&channel(key)[..], b":", field.as_bytes()].concat()
}

/// `name:suffix` when the name holds a hash tag, else `{name}:suffix` (Redisson's
/// `suffixName`).
fn suffixed(name: &[u8], suffix: &[u8]) -> Vec<u8> {
    [&tagged(name)[..], b":", suffix].concat()
}

/// The name with a hash tag: itself when it holds one, else `{name}`.
fn tagged(name: &[u8]) -> Vec<u8> {
    if name.contains(&b'{') {
        name.to_vec()
    } else {
        [b"{", name, b"}"].concat()
    }
}

/// The read-write lock's channel: `redisson_rwlock:{<key>}`.
pub(crate) fn rwlock_channel(key: &[u8]) -> Vec<u8> {
    prefixed(b"redisson_rwlock", key)
}

/// Where a reader's read holds keep their leases: `{<key>}:<owner>:rwlock_timeout`, each
/// hold `i` at that followed by `:i`.
pub(crate) fn read_timeouts(key: &[u8], field: &str) -> Vec<u8> {
    [&suffixed(key, field.as_bytes())[..], b":rwlock_timeout"].concat()
}

/// What every reader's timeout keys begin with: `{<key>}` (see [`read_timeouts`]).
pub(crate) fn read_timeouts_prefix(key: &[u8]) -> Vec<u8> {
    tagged(key)
}

/// A leased semaphore's held permits by when their leases end: `{<key>}:timeout`.
pub(crate) fn semaphore_timeouts(key: &[u8]) -> Vec<u8> {
    suffixed(key, b"timeout")
}

/// A semaphore's channel, on which the number of permits available is published:
/// `redisson_sc:{<key>}`.
pub(crate) fn semaphore_channel(key: &[u8]) -> Vec<u8> {
    prefixed(b"redisson_sc", key)
}

/// A count-down latch's channel: `redisson_countdownlatch__channel__{<key>}`, the key in
/// braces whatever it holds (Redisson names it so, not by the rule of the other names, so
/// a key with a hash tag of its own has its channel in another cluster slot).
pub(crate) fn latch_channel(key: &[u8]) -> Vec<u8> {
    [LATCH_CHANNEL_PREFIX, key, b"}"].concat()
}

const LATCH_CHANNEL_PREFIX: &[u8] = b"redisson_countdownlatch__channel__{";

/// How many waiters of `channel` a message `payload` wakes, as Redisson's clients do: on a
/// semaphore's channel the number of permits it names; on a lock's, all for `1` (a
/// read-write lock's write release) and one for anything else. On a count-down latch's,
/// all for any message: each looks at the count, and a deletion (`1`) opens the latch as
/// its opening (`0`) does. `None`: all.
pub(crate) fn woken_by(channel: &[u8], payload: &[u8]) -> Option<usize> {
    if channel.starts_with(LATCH_CHANNEL_PREFIX) {
        return None;
    }
    if channel.starts_with(b"redisson_sc:") {
        return Some(
            std::str::from_utf8(payload)
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(1),
        );
    }
    (payload != b"1").then_some(1)
}

/// The prefix of the message with which a fair lock's release tells the waiter at the head
/// of its queue that it holds the lock now (a direct hand-off): `granted:<ms>:<place>`,
/// `<ms>` the longest the grant lease may be (the releasing client's watchdog lease) and
/// `<place>` the waiter's time in this crate's set of its waiters when it was granted, as
/// its last attempt set it. Redisson never sends it, and is never sent it.
pub(crate) const GRANT_MESSAGE: &str = "granted:";

/// What a grant message says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Granted {
    /// The grant lease: the expiry the release gave the key. The waiter's validity, counted
    /// from its last busy attempt, is no longer.
    pub cap: std::time::Duration,
    /// The waiter's place (milliseconds, the server's clock) when it was granted.
    pub place: u64,
}

/// What a grant message says; `None` for any other message.
pub(crate) fn granted_by(payload: &[u8]) -> Option<Granted> {
    let rest = std::str::from_utf8(payload.strip_prefix(GRANT_MESSAGE.as_bytes())?).ok()?;
    let (cap, place) = rest.split_once(':')?;
    Some(Granted {
        cap: std::time::Duration::from_millis(cap.parse().ok()?),
        place: place.parse().ok()?,
    })
}

/// The fenced lock's token counter: `redisson_lock_token:{<key>}`.
pub(crate) fn fence_counter(key: &[u8]) -> Vec<u8> {
    prefixed(b"redisson_lock_token", key)
}

/// The channel on which an election's observers hear of every change of leader (a new
/// leader, a resignation): `redisson_lock__channel:{<key>}:leader`. Its candidates wait on
/// the lock channel, [`channel`]; the two are apart so that an election wakes no
/// candidate when a leader is elected.
pub(crate) fn election_channel(key: &[u8]) -> Vec<u8> {
    [&channel(key)[..], b":leader"].concat()
}

/// An election's record of its recent leaders, oldest first, as `"<epoch> <name>"`:
/// `redisson_lock_token:{<key>}:redmutex_leaders`, beside the epoch counter (the fencing
/// counter, [`fence_counter`]) so that the rights an election's user has cover it.
pub(crate) fn election_record(key: &[u8]) -> Vec<u8> {
    [&fence_counter(key)[..], b":redmutex_leaders"].concat()
}

/// An election's candidates now waiting to lead, a hash of `<candidate id>` to
/// `"<listed until> <since> <name>"` (server times in milliseconds):
/// `redisson_lock_token:{<key>}:redmutex_candidates`, beside its record of leaders.
pub(crate) fn election_candidates(key: &[u8]) -> Vec<u8> {
    [&fence_counter(key)[..], b":redmutex_candidates"].concat()
}

/// The fair lock on which the candidates of a first-come-first-served election queue
/// before they campaign: `{<key>}:redmutex_queue` (`<key>:redmutex_queue` when the key
/// already holds a hash tag), in the election's cluster slot. Its queue, places and
/// channels are named after it as every fair lock's are.
pub(crate) fn election_queue(key: &[u8]) -> Vec<u8> {
    suffixed(key, b"redmutex_queue")
}

/// What a key of the Redis type `redis_type` holds, as a lock, for errors: a hash is
/// Redisson's reentrant (or fenced) lock; a string is a SET-NX lock, which no kind refuses.
pub(crate) fn kind_of(redis_type: &str) -> &'static str {
    match redis_type {
        "hash" => "a reentrant, fenced or fair lock (a hash)",
        "rwlock" => "a read-write lock (a hash with a mode)",
        "election" => "an election's leader (a hash with an epoch)",
        "string" => "a string: a semaphore's permits, or a SET-NX lock",
        "token" => "a SET-NX lock's token (a string)",
        "semaphore" => "a semaphore's permits (a string)",
        "list" => "a list",
        "set" => "a set",
        "zset" => "a sorted set",
        "stream" => "a stream",
        "text" => "a string that is not a count",
        _ => "a key of another type",
    }
}

/// What a waiter that holds `held` waits for, written beside `held` (in its cluster slot)
/// under the owner that holds it: `{<held>}:redmutex_wait:<owner>`. Redisson never reads
/// it; a deadlock check follows it from a lock to what its holder waits for.
pub(crate) fn wait_edge(held: &[u8], owner: &str) -> Vec<u8> {
    [&suffixed(held, WAIT_EDGE)[..], b":", owner.as_bytes()].concat()
}

/// The part of a wait edge's name after the held lock's name and a colon.
pub(crate) const WAIT_EDGE: &[u8] = b"redmutex_wait";

/// The marker with which an attempt on a semaphore without leases records the permits it
/// took, so that its undo gives back exactly those: `{<key>}:redmutex_taken:<claim id>`,
/// in the key's cluster slot. Redisson never reads it.
pub(crate) fn counting_taken(key: &[u8], claim: &str) -> Vec<u8> {
    [
        &suffixed(key, b"redmutex_taken")[..],
        b":",
        claim.as_bytes(),
    ]
    .concat()
}

/// The key a release leaves behind for a few seconds to record that it ran, so that a retry
/// of the same call after a lost reply reports what the first attempt did:
/// `redisson_unlock_latch:{<key>}:<request id>`.
pub(crate) fn unlock_latch(key: &[u8], request: &str) -> Vec<u8> {
    [
        &prefixed(b"redisson_unlock_latch", key)[..],
        b":",
        request.as_bytes(),
    ]
    .concat()
}

/// Whether every key and channel of every kind named after `key` falls in the key's own
/// cluster slot, as a script on a cluster needs. Redisson's rules see to it unless the key
/// holds braces that make no hash tag (`a{}b`, `a{b`, `a}b`).
pub(crate) fn one_slot(key: &[u8]) -> bool {
    use crate::topology::slots::slot;
    let own = slot(key);
    let field = "00000000-0000-0000-0000-000000000000:1";
    let request = "0";
    [
        channel(key),
        fair_queue(key),
        fair_timeouts(key),
        fair_alive(key),
        waiter_channel(key, field),
        rwlock_channel(key),
        read_timeouts(key, field),
        semaphore_timeouts(key),
        semaphore_channel(key),
        fence_counter(key),
        election_channel(key),
        election_record(key),
        election_candidates(key),
        election_queue(key),
        fair_queue(&election_queue(key)),
        waiter_channel(&election_queue(key), field),
        unlock_latch(key, request),
        counting_taken(key, request),
    ]
    .iter()
    .all(|name| slot(name) == own)
}

/// 16 bytes from the thread's CSPRNG as 32 lowercase hex digits: the shape of Redisson's
/// request ids and of node-redlock's lock values. Used for both.
pub(crate) fn random_id() -> String {
    hex_id(rand::random())
}

/// `bits` as 32 lowercase hex digits, written out without the formatting machinery: this
/// runs twice per lock and release.
pub(crate) fn hex_id(bits: u128) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 32];
    for (at, digit) in digits.iter_mut().enumerate() {
        *digit = HEX[(bits >> (124 - 4 * at)) as usize & 0xf];
    }
    std::str::from_utf8(&digits).map_or_else(|_| String::new(), str::to_owned)
}

/// The id that `text` writes in [`hex_id`]'s shape, exactly 32 lowercase hex digits;
/// `None` for anything else. Integer parsing alone would also take a leading `+` or
/// upper-case digits, which `hex_id` never writes.
pub(crate) fn parse_hex_id(text: &str) -> Option<u128> {
    let shaped = text.len() == 32 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    shaped.then(|| text.bytes().fold(0, |bits, b| bits << 4 | hex_digit(b)))
}

/// The value of a lowercase hex digit.
fn hex_digit(b: u8) -> u128 {
    u128::from(match b {
        b'a'..=b'f' => b - b'a' + 10,
        _ => b - b'0',
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_of_a_key_shares_its_slot_unless_its_braces_make_no_tag() {
        for key in [
            &b"orders:42"[..],
            b"{user1}:lock",
            b"a{{b}",
            b"p:{x}y{z}",
            b"{",
        ] {
            assert_eq!(
                one_slot(key),
                key != b"{",
                "{:?}",
                String::from_utf8_lossy(key)
            );
        }
        for key in [&b"a{}b"[..], b"a{b", b"a}b", b"{}"] {
            assert!(!one_slot(key), "{:?}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn a_message_wakes_one_all_or_as_many_as_it_names() {
        let lock = channel(b"l");
        assert_eq!(woken_by(&lock, b"0"), Some(1));
        assert_eq!(woken_by(&rwlock_channel(b"l"), b"1"), None);
        let semaphore = semaphore_channel(b"s");
        assert_eq!(woken_by(&semaphore, b"3"), Some(3));
        assert_eq!(woken_by(&semaphore, b"1"), Some(1));
        assert_eq!(woken_by(&semaphore, b"x"), Some(1));
        let latch = latch_channel(b"{t}c");
        assert_eq!(latch, b"redisson_countdownlatch__channel__{{t}c}");
        assert_eq!(woken_by(&latch, b"0"), None);
        assert_eq!(woken_by(&latch, b"1"), None);
    }

    #[test]
    fn a_grant_message_names_its_longest_lease_and_place_and_others_name_none() {
        assert_eq!(
            granted_by(b"granted:30000:1764000000000"),
            Some(Granted {
                cap: std::time::Duration::from_secs(30),
                place: 1_764_000_000_000
            })
        );
        for other in [
            &b"0"[..],
            b"1",
            b"granted:",
            b"granted:30000",
            b"granted:x:1",
            b"granted:-1:1",
            b"granted:1:1.5",
        ] {
            assert_eq!(granted_by(other), None, "{other:?}");
        }
    }

    #[test]
    fn names_without_a_hash_tag_are_wrapped_in_braces() {
        assert_eq!(channel(b"orders:42"), b"redisson_lock__channel:{orders:42}");
        assert_eq!(
            unlock_latch(b"orders:42", "ab"),
            b"redisson_unlock_latch:{orders:42}:ab"
        );
    }

    #[test]
    fn names_with_a_hash_tag_are_used_as_they_are() {
        assert_eq!(
            channel(b"{user1}:lock"),
            b"redisson_lock__channel:{user1}:lock"
        );
        assert_eq!(channel(b"a{b"), b"redisson_lock__channel:a{b");
        assert_eq!(
            fence_counter(b"{user1}:lock"),
            b"redisson_lock_token:{user1}:lock"
        );
        assert_eq!(fence_counter(b"orders"), b"redisson_lock_token:{orders}");
        assert_eq!(election_queue(b"cron"), b"{cron}:redmutex_queue");
        assert_eq!(counting_taken(b"p", "ab"), b"{p}:redmutex_taken:ab");
        assert_eq!(wait_edge(b"p", "u:1"), b"{p}:redmutex_wait:u:1");
        assert_eq!(wait_edge(b"{jobs}:p", "u:1"), b"{jobs}:p:redmutex_wait:u:1");
        assert_eq!(
            counting_taken(b"{jobs}:p", "ab"),
            b"{jobs}:p:redmutex_taken:ab"
        );
        assert_eq!(
            election_queue(b"{jobs}:cron"),
            b"{jobs}:cron:redmutex_queue"
        );
        assert_eq!(
            unlock_latch(b"{user1}:lock", "ab"),
            b"redisson_unlock_latch:{user1}:lock:ab"
        );
    }

    #[test]
    fn ids_are_written_as_32_hex_digits() {
        for bits in [0, 1, 0xfedc_ba98_7654_3210_0123_4567_89ab_cdef, u128::MAX] {
            assert_eq!(hex_id(bits), format!("{bits:032x}"));
        }
    }

    #[test]
    fn ids_are_read_back_only_in_the_shape_they_are_written() {
        for bits in [0, 1, 0xfedc_ba98_7654_3210_0123_4567_89ab_cdef, u128::MAX] {
            assert_eq!(parse_hex_id(&hex_id(bits)), Some(bits));
        }
        let one = format!("{:032x}", 1);
        for not in [
            String::new(),
            format!("+{}", &one[1..]),
            format!("-{}", &one[1..]),
            format!(" {}", &one[1..]),
            format!("0x{}", &one[2..]),
            one[1..].to_owned(),
            format!("{one}0"),
            "0123456789ABCDEF0123456789abcdef".to_owned(),
            "0123456789abcdef0123456789abcdeg".to_owned(),
            "0123456789abcdef0123456789abcdé".to_owned(),
        ] {
            assert_eq!(parse_hex_id(&not), None, "{not:?}");
        }
    }

    #[test]
    fn random_ids_are_32_hex_digits_and_differ() {
        let id = random_id();
        assert_eq!(id.len(), 32);
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_ne!(id, random_id());
    }
}
