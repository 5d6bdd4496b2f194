//! How to reach one Redis server: a `redis::Client` with the crate's transport settings.

use redis::{Client, ConnectionInfo, RedisResult};

use crate::tls::{self, Certificates};

/// The server to connect to now.
pub(crate) struct Endpoint {
    pub client: Client,
    /// The generation a connection opened to it belongs to.
    pub generation: u64,
}

/// Makes a `redis::Client`: every one the crate opens connections with (pools, sentinels,
/// discovered primaries; the subscriber's derives from the pool's) comes from here, so
/// that the TLS settings apply to all of them.
pub(crate) fn client(info: ConnectionInfo, certificates: &Certificates) -> RedisResult<Client> {
    tls::client(info, certificates)
}
