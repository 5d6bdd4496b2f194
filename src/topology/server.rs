//! Where a node's server is now: at the fixed address of its URL, or wherever the sentinels
//! say the primary of a master name is ([`Sentinel`]). The pool, the subscriber and the node
//! ask this on every connect instead of keeping an address.
//!
//! Each change of address starts a new *generation*. Connections remember the generation
//! they were opened in; one from an older generation is never used again.

use std::sync::Arc;

use redis::{Client, Connection, RedisResult};

use crate::topology::endpoint::Endpoint;

use crate::base::error::Result;
use crate::topology::sentinel::Sentinel;

/// Where a node's server is.
pub(crate) enum Topology {
    /// One address for the client's whole life.
    Fixed(Box<Client>),
    /// The primary the sentinels name, followed across failovers.
    Sentinel(Arc<Sentinel>),
}

impl Topology {
    /// The server to connect to now; a Sentinel topology asks the sentinels when it does
    /// not know yet.
    pub fn endpoint(&self) -> Result<Endpoint> {
        match self {
            Topology::Fixed(client) => Ok(Endpoint {
                client: (**client).clone(),
                generation: 0,
            }),
            Topology::Sentinel(sentinel) => sentinel.endpoint(),
        }
    }

    /// The current generation: one atomic load.
    pub fn generation(&self) -> u64 {
        match self {
            Topology::Fixed(_) => 0,
            Topology::Sentinel(sentinel) => sentinel.generation(),
        }
    }

    /// Checks a connection just opened to the endpoint of `generation`: a Sentinel primary
    /// must say it is a master (`ROLE`); a replica is refused.
    pub fn verify(&self, conn: &mut Connection, generation: u64) -> RedisResult<()> {
        match self {
            Topology::Fixed(_) => Ok(()),
            Topology::Sentinel(sentinel) => sentinel.verify(conn, generation),
        }
    }

    /// Whether the server may move (and `READONLY` then means it did).
    pub fn follows(&self) -> bool {
        matches!(self, Topology::Sentinel(_))
    }

    /// A connection of `generation` was answered `READONLY`: its server is a replica now.
    /// A Sentinel topology asks the sentinels where the primary went, in the background.
    pub fn demoted(&self, generation: u64) {
        if let Topology::Sentinel(sentinel) = self {
            sentinel.demoted(generation);
        }
    }

    /// Runs `listener` after every move of the server, until it returns false. A fixed
    /// server never moves.
    pub fn on_move(&self, listener: impl Fn() -> bool + Send + Sync + 'static) {
        if let Topology::Sentinel(sentinel) = self {
            sentinel.on_move(Box::new(listener));
        }
    }
}
