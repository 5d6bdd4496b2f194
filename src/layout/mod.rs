//! Redisson's naming contract: lock keys, channels, latches, counters and messages, and the
//! owner identity (client id and thread number) written into the hashes. Pure functions;
//! uses nothing else of the crate. What tells a lock's data from other data is judged on
//! the server, by `transport/scripts/shape.lua`.

pub(crate) mod names;
pub(crate) mod owner;
