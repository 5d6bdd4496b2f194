//! The client API: the entry points, the builder of a client's settings, and the client
//! that makes lock handles. Uses `lock` and everything below.

#[cfg(feature = "bench")]
#[doc(hidden)]
pub mod bench_hooks;
pub(crate) mod builder;
pub(crate) mod checks;
pub(crate) mod doctor;
pub(crate) mod inspect;
pub(crate) mod lock_client;
pub(crate) mod waits;
