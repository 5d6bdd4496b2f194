//! How to reach one Redis server: a `redis::Client` with the crate's transport settings.

use redis::{Client, ConnectionInfo, RedisResult};

/// The server to connect to now.
pub(crate) struct Endpoint {
    pub client: Client,
    /// The generation a connection opened to it belongs to.
    pub generation: u64,
}

/// Makes a `redis::Client`: every one the crate opens connections with (pools, sentinels,
/// discovered primaries) comes from here, so that transport settings apply to all of them.
pub(crate) fn client(info: ConnectionInfo) -> RedisResult<Client> {
    Client::open(info)
}
