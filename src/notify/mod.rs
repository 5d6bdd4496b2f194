//! Unlock notifications: one subscriber connection and thread per node of a client, the
//! shared table of channels and waiting signals, and the waiter's side of subscribing. Uses
//! `layout`, `topology` and `base`.

pub(crate) mod hub;
pub(crate) mod notifier;
pub(crate) mod subscriber;
