//! Unlock notifications: one subscriber connection and thread per node of a client, the
//! shared table of channels and waiting signals, the waiter's side of subscribing, and the
//! tokens that cancel waits, also where a call pauses deep in the transport. Uses `layout`, `topology` and `base`.

pub(crate) mod cancel;
pub(crate) mod hub;
pub(crate) mod interrupt;
pub(crate) mod notifier;
pub(crate) mod subscriber;
