//! Talking to Redis: per server a connection pool and an unlock notifier (a shard), a
//! cluster's shards chosen by slot, commands sent to every node at once, the registry of
//! Lua scripts (`scripts`: EVALSHA, loaded once on NOSCRIPT) into which every kind declares
//! its own, the scripts and replies that are no one kind's (`common`), and how a server
//! that runs no scripts is told apart. Never names a kind. Uses `notify`, `layout`,
//! `topology` and `base`.

pub(crate) mod cluster;
pub(crate) mod common;
pub(crate) mod no_scripts;
pub(crate) mod node;
pub(crate) mod pool;
pub(crate) mod scripts;
pub(crate) mod shard;
