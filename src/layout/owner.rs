//! Who holds a lock: a random id per client and a process-unique number per thread.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// A random UUID in its usual text form, naming one client: version 4 (random, as
/// Redisson's client ids are), or, for a client that takes direct hand-offs (`granted`),
/// version 8 with random bits, which marks its owner fields as this crate's to the fair
/// lock's release script (see [`GRANTED_VERSION`]). Both are 122 random bits.
pub(crate) fn new_client_id(granted: bool) -> String {
    let mut bytes = rand::random::<u128>().to_be_bytes();
    let version = if granted { GRANTED_VERSION } else { 4 };
    bytes[6] = (bytes[6] & 0x0f) | (version << 4);
    bytes[8] = (bytes[8] & 0x3f) | 0x80; // RFC 4122 variant
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// The UUID version that marks the client id of a client taking direct hand-offs: 8, the
/// version RFC 9562 leaves to implementations. Redisson's ids are random version-4 UUIDs,
/// so a release can tell, from the owner field alone, a waiter that understands a grant
/// (`fair_release.lua` looks at the 15th character) without reading another key.
pub(crate) const GRANTED_VERSION: u8 = 8;

/// This thread's number: unique in the process, never reused, starting at 1.
///
/// `std::thread::ThreadId::as_u64` would do, but it is not stable.
pub(crate) fn current_thread() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local!(static ID: Cell<u64> = const { Cell::new(0) });
    ID.with(|id| {
        if id.get() == 0 {
            id.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        id.get()
    })
}

/// The hash field naming an owner: `"<client-uuid>:<thread-id>"`.
pub(crate) fn field(client_id: &str, thread: u64) -> String {
    format!("{client_id}:{thread}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_ids_are_uuid_v4_and_differ() {
        let a = new_client_id(false);
        assert_eq!(a.len(), 36);
        assert_eq!(a.as_bytes()[14], b'4');
        assert!(matches!(a.as_bytes()[19], b'8' | b'9' | b'a' | b'b'));
        assert_ne!(a, new_client_id(false));
    }

    #[test]
    fn the_ids_of_clients_taking_grants_are_version_8_and_differ() {
        let a = new_client_id(true);
        assert_eq!(a.len(), 36);
        assert_eq!(a.as_bytes()[14], b'8');
        assert_eq!((a.as_bytes()[8], a.as_bytes()[13]), (b'-', b'-'));
        assert!(matches!(a.as_bytes()[19], b'8' | b'9' | b'a' | b'b'));
        assert_ne!(a, new_client_id(true));
    }

    #[test]
    fn thread_ids_are_stable_per_thread_and_distinct_across() {
        let here = current_thread();
        assert_eq!(here, current_thread());
        let there = std::thread::spawn(current_thread).join().unwrap();
        assert_ne!(here, there);
    }
}
