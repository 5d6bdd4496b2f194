//! The multi-lock's script: one hold of each of several reentrant locks, all or none.

use std::time::Duration;

use redis::{Cmd, FromRedisValue, ParsingError, Value};

use crate::transport::scripts::{Lua, evalsha, millis};

static MULTI_ACQUIRE: Lua = Lua::new(&[include_str!("multi_acquire.lua")]);

/// Every script above, declared to the registry before a client sends any.
pub(crate) static SCRIPTS: &[&Lua] = &[&MULTI_ACQUIRE];

/// One hold of each of `keys` for `field`, all or none: `claims[i]` is the holds the owner
/// believes it has of `keys[i]` and the lease the attempt sets on it. Replies [`MultiTaken`].
pub(crate) fn multi_acquire(keys: &[&[u8]], field: &str, claims: &[(u32, Duration)]) -> Cmd {
    let mut cmd = evalsha(&MULTI_ACQUIRE, keys);
    cmd.arg(field);
    for (held, lease) in claims {
        cmd.arg(held).arg(millis(*lease));
    }
    cmd
}

/// What a multi-lock's attempt on several reentrant locks did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MultiTaken {
    /// Every hold taken; per key, whether the owner's earlier holds were gone.
    Taken(Vec<bool>),
    /// The key at this index (from 0) is someone else's; nothing written.
    Busy(usize),
    /// The key at this index holds another kind of data, of this type; nothing written.
    WrongKind(usize, String),
}

impl FromRedisValue for MultiTaken {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        let mut items = Vec::<Value>::from_redis_value(value)?.into_iter();
        let code = i64::from_redis_value(items.next().ok_or("an empty reply")?)?;
        let mut at = || -> Result<usize, ParsingError> {
            let at = i64::from_redis_value(items.next().ok_or("no index")?)?;
            Ok(usize::try_from(at - 1).map_err(|_| "a bad index")?)
        };
        Ok(match code {
            0 => MultiTaken::Taken(
                (items.map(|fresh| Ok(i64::from_redis_value(fresh)? == 1)))
                    .collect::<Result<_, ParsingError>>()?,
            ),
            1 => MultiTaken::Busy(at()?),
            2 => {
                let at = at()?;
                let found = String::from_redis_value(items.next().ok_or("no type")?)?;
                MultiTaken::WrongKind(at, found)
            }
            _ => return Err("an unknown reply".into()),
        })
    }
}
