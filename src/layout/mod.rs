//! Redisson's naming contract: lock keys, channels, latches, counters and messages, and the
//! owner identity (client id and thread number) written into the hashes, and the shapes
//! that tell a lock's data from other data. Pure functions;
//! uses nothing else of the crate.

pub(crate) mod names;
pub(crate) mod owner;
pub(crate) mod shape;
