//! Talking to Redis: per server a connection pool and an unlock notifier (a shard), a
//! cluster's shards chosen by slot, commands sent to every node at once, the Lua scripts
//! with their typed calls and replies (EVALSHA, loaded once on NOSCRIPT), and how a server
//! that runs no scripts is told apart. Uses `notify`, `layout`, `topology` and `base`.

pub(crate) mod cluster;
pub(crate) mod no_scripts;
pub(crate) mod node;
pub(crate) mod pool;
pub(crate) mod scripts;
pub(crate) mod shard;
