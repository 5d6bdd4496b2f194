//! Where a node's server is now: a fixed address or the primary Redis Sentinel names,
//! followed across failovers; which cluster slot a key hashes to and which primary serves
//! it; how a connection to a server is opened, and what is wrong with a URL; and the arithmetic of agreeing nodes (quorum
//! and validity), pure functions. Uses `base`.

pub(crate) mod endpoint;
pub(crate) mod quorum;
pub(crate) mod redis_url;
pub(crate) mod sentinel;
pub(crate) mod server;
pub(crate) mod slots;
