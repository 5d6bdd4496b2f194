//! How to reach one Redis server: a `redis::Client` with the crate's transport settings.

use std::time::Duration;

use redis::{Client, Connection, ConnectionInfo, IntoConnectionInfo, RedisResult};

use crate::base::error::{Error, Result, redact};
use crate::base::tls::{self, Certificates};

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

/// Checks `url` and makes its client, as [`client`] does: `host:port` and the client.
/// A URL that does not parse is [`Error::InvalidUrl`], certificates that do not load
/// [`Error::InvalidConfig`].
pub(crate) fn client_for_url(url: &str, certificates: &Certificates) -> Result<(String, Client)> {
    let invalid = |source| Error::InvalidUrl {
        url: redact(url),
        source,
    };
    tls::check_url(url).map_err(invalid)?;
    let info = url.into_connection_info().map_err(invalid)?;
    let name = info.addr().to_string();
    let client = client(info, certificates).map_err(|source| Error::InvalidConfig {
        setting: "tls certificates",
        reason: source.to_string(),
    })?;
    Ok((name, client))
}

/// Opens a connection of `client` within `connect_timeout`, whose reads and writes then time
/// out after `response_timeout`.
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
    let mut conn = client.get_connection_with_timeout(connect_timeout)?;
    if let Some(name) = name {
        conn.set_read_timeout(Some(connect_timeout))?;
        conn.set_write_timeout(Some(connect_timeout))?;
        match redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg(name)
            .exec(&mut conn)
        {
            Err(err) if err.is_io_error() || err.is_timeout() => return Err(err),
            Err(err) => log::debug!("naming a connection {name:?} refused: {err}"),
            Ok(()) => {}
        }
    }
    conn.set_read_timeout(Some(response_timeout))?;
    conn.set_write_timeout(Some(response_timeout))?;
    Ok(conn)
}
