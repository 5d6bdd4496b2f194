//! How to reach one Redis server: a `redis::Client` with the crate's transport settings.

use std::time::Duration;

use redis::{Client, Connection, ConnectionInfo, IntoConnectionInfo, RedisResult};

use crate::base::cause;
use crate::base::error::{Error, Result, redact};
use crate::base::tls::{self, Certificates};
use crate::topology::redis_url;

/// The server to connect to now.
pub(crate) struct Endpoint {
    pub client: Client,
    /// The generation a connection opened to it belongs to.
    pub generation: u64,
}

/// Makes a `redis::Client`: every one the crate opens connections with (pools, sentinels,
/// discovered primaries; the subscriber's derives from the pool's) comes from here, so
/// that the TLS settings apply to all of them.
///
/// Its connections skip the Redis client's `CLIENT SETINFO` pair: the client reads every
/// reply of its set-up, each within the whole connect timeout, so a server that accepts
/// and never answers held a connect for twice that timeout (the crate names its
/// connections with `CLIENT SETNAME` instead).
pub(crate) fn client(info: ConnectionInfo, certificates: &Certificates) -> RedisResult<Client> {
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    tls::client(info.set_redis_settings(settings), certificates)
}

/// Checks `url` and makes its client, as [`client`] does: `host:port` and the client.
/// A URL that cannot be used is [`Error::InvalidUrl`] saying why, certificates that do not
/// load [`Error::InvalidConfig`].
pub(crate) fn client_for_url(url: &str, certificates: &Certificates) -> Result<(String, Client)> {
    let invalid = |reason| Error::InvalidUrl {
        url: redact(url),
        reason,
    };
    redis_url::check(url, cfg!(feature = "tls")).map_err(invalid)?;
    // What the checks above let through and the Redis client still refuses, in its words
    // (which never repeat the URL).
    let info = url
        .into_connection_info()
        .map_err(|err| invalid(format!("the Redis client refused it: {err}")))?;
    let name = info.addr().to_string();
    let client = client(info, certificates).map_err(|source| Error::InvalidConfig {
        setting: "tls certificates",
        reason: source.to_string(),
    })?;
    Ok((name, client))
}

/// Opens a connection of `client` within `connect_timeout`, whose reads and writes then time
/// out after `response_timeout`. A server that answers the set-up with something else than
/// the Redis protocol fails as a connection that could not be made.
pub(crate) fn connect(
    client: &Client,
    connect_timeout: Duration,
    response_timeout: Duration,
) -> RedisResult<Connection> {
    connect_named(client, connect_timeout, response_timeout, None)
}

/// [`connect`], then names the connection `name` (`CLIENT SETNAME`) within the connect
/// timeout, as part of opening it. The name is only a label: a refusal (no right to run
/// `CLIENT`) is logged and the connection used unnamed.
pub(crate) fn connect_named(
    client: &Client,
    connect_timeout: Duration,
    response_timeout: Duration,
    name: Option<&str>,
) -> RedisResult<Connection> {
    let mut conn = client
        .get_connection_with_timeout(connect_timeout)
        .map_err(cause::while_connecting)?;
    if let Some(name) = name {
        conn.set_read_timeout(Some(connect_timeout))?;
        conn.set_write_timeout(Some(connect_timeout))?;
        let named = redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg(name)
            .exec(&mut conn);
        match named.map_err(cause::while_connecting) {
            Err(err) if err.is_io_error() || err.is_timeout() => return Err(err),
            Err(err) => log::debug!("naming a connection {name:?} refused: {err}"),
            Ok(()) => {}
        }
    }
    conn.set_read_timeout(Some(response_timeout))?;
    conn.set_write_timeout(Some(response_timeout))?;
    Ok(conn)
}
