//! Who holds a lock: a random id per client and a process-unique number per thread.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// A random version-4 UUID in its usual text form, naming one client.
pub(crate) fn new_client_id() -> String {
    let mut bytes = rand::random::<u128>().to_be_bytes();
    bytes[6] = (bytes[6] & 0x0f) | 0x40; // version 4
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
        let a = new_client_id();
        assert_eq!(a.len(), 36);
        assert_eq!(a.as_bytes()[14], b'4');
        assert!(matches!(a.as_bytes()[19], b'8' | b'9' | b'a' | b'b'));
        assert_ne!(a, new_client_id());
    }

    #[test]
    fn thread_ids_are_stable_per_thread_and_distinct_across() {
        let here = current_thread();
        assert_eq!(here, current_thread());
        let there = std::thread::spawn(current_thread).join().unwrap();
        assert_ne!(here, there);
    }
}
