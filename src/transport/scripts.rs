//! The script registry: the Lua scripts, sent as EVALSHA and loaded when Redis answers
//! NOSCRIPT.
//!
//! Whoever calls a script declares it as a [`Lua`] static beside its `.lua` file, and has
//! one function that builds its call through [`evalsha`]: the keys and arguments in the
//! order its header states, so no call site knows that order. A kind's scripts live with
//! the kind; this module never names one. A client [`declare`]s every script before it
//! sends any, so that one [`load_all`] after NOSCRIPT loads all of them, as before any was
//! needed; a script is registered on its first call anyway, so that [`sharded`],
//! [`unlatched`] and [`load_all`] know every script a command was ever built with.
//!
//! Pub/sub channels go among a script's arguments, never its keys: a channel is never a
//! key, so it is always absent, and declared as a key it would make a Cluster turn the call
//! away (`TRYAGAIN`, as for any call whose keys are partly absent) while the lock's slot
//! migrates. Named with the lock's hash tag, it stays in the lock's slot.

use std::collections::HashMap;
use std::sync::{LazyLock, OnceLock, PoisonError, RwLock};
use std::time::Duration;

use redis::{Arg, Cmd, Connection, RedisResult, Script};

/// A Lua script, declared as a `static` by whoever calls it.
#[derive(Debug)]
pub(crate) struct Lua {
    /// Its source: its file, after the file of the functions it uses if any.
    parts: &'static [&'static str],
    /// Whether it is a release whose last key is its latch (see [`unlatched`]).
    latched: bool,
    /// Its hash, set when its first call registers it.
    hash: OnceLock<String>,
}

impl Lua {
    /// The script whose source is `parts`, one after the other.
    pub(crate) const fn new(parts: &'static [&'static str]) -> Lua {
        Lua {
            parts,
            latched: false,
            hash: OnceLock::new(),
        }
    }

    /// A release whose last key is its latch, which [`unlatched`] may leave out.
    pub(crate) const fn latched(parts: &'static [&'static str]) -> Lua {
        Lua {
            parts,
            latched: true,
            hash: OnceLock::new(),
        }
    }

    /// Its hash, registering it on first use.
    fn hash(&self) -> &str {
        self.hash
            .get_or_init(|| register(self.parts.concat(), self.latched))
    }
}

/// Registers each of `scripts` that is not yet: the library's, before a client sends any.
pub(crate) fn declare(scripts: impl IntoIterator<Item = &'static Lua>) {
    for script in scripts {
        script.hash();
    }
}

/// What the registry knows of a script.
struct Registered {
    /// Its source.
    source: String,
    /// Whether it is a release whose last key is its latch.
    latched: bool,
    /// The hash of its sharded flavour, if it publishes (see [`sharded`]).
    sharded: Option<String>,
}

/// Every script called so far, in both flavours, by hash.
static REGISTRY: LazyLock<RwLock<HashMap<String, Registered>>> = LazyLock::new(Default::default);

/// Registers `source` and its sharded flavour if it publishes or counts subscribers:
/// `'publish'` (the call and the ACL check) becomes `'spublish'`, and `'numsub'`
/// `'shardnumsub'`. Returns its hash.
fn register(source: String, latched: bool) -> String {
    let hash = Script::new(&source).get_hash().to_owned();
    let mut registry = REGISTRY.write().unwrap_or_else(PoisonError::into_inner);
    let mut sharded = None;
    if source.contains("'publish'") || source.contains("'numsub'") {
        let flavour =
            (source.replace("'publish'", "'spublish'")).replace("'numsub'", "'shardnumsub'");
        let flavour_hash = Script::new(&flavour).get_hash().to_owned();
        sharded = Some(flavour_hash.clone());
        let flavour = Registered {
            source: flavour,
            latched,
            sharded: None,
        };
        registry.insert(flavour_hash, flavour);
    }
    let script = Registered {
        source,
        latched,
        sharded,
    };
    registry.insert(hash.clone(), script);
    hash
}

/// What `f` reads of the registered script whose hash is `hash`, if one is.
fn registered<T>(hash: &[u8], f: impl FnOnce(&Registered) -> T) -> Option<T> {
    let registry = REGISTRY.read().unwrap_or_else(PoisonError::into_inner);
    Some(f(registry.get(std::str::from_utf8(hash).ok()?)?))
}

/// `cmd` (an `EVALSHA`) in the flavour for a cluster's sharded pub/sub, if its script
/// publishes.
pub(crate) fn sharded(cmd: &Cmd) -> Option<Cmd> {
    let mut args = cmd.args_iter().map(|arg| match arg {
        Arg::Simple(bytes) => bytes,
        _ => &[],
    });
    if !args.next()?.eq_ignore_ascii_case(b"EVALSHA") {
        return None;
    }
    let hash = registered(args.next()?, |script| script.sharded.clone())??;
    let mut flavoured = redis::cmd("EVALSHA");
    flavoured.arg(hash);
    for arg in args {
        flavoured.arg(arg);
    }
    Some(flavoured)
}

/// `cmd`, a release with a latch of its own ([`Lua::latched`]), without it: for a cluster
/// slot that is being migrated, which refuses (`TRYAGAIN`) a script whose keys are partly
/// absent, as a latch that is yet to be written is. Only for a release that surely has not
/// run yet: a resend of it would not find what an earlier send did. `None` for any other
/// command (the read release, which reads every reader's lease keys, needs a settled slot
/// anyway).
pub(crate) fn unlatched(cmd: &Cmd) -> Option<Cmd> {
    let args: Vec<&[u8]> = (cmd.args_iter())
        .map(|arg| match arg {
            Arg::Simple(bytes) => Some(bytes),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let [name, hash, keys, rest @ ..] = &args[..] else {
        return None;
    };
    let known = registered(hash, |script| script.latched).unwrap_or(false);
    if !name.eq_ignore_ascii_case(b"EVALSHA") || !known {
        return None;
    }
    let keys: usize = std::str::from_utf8(keys).ok()?.parse().ok()?;
    let latch = keys.checked_sub(1)?;
    let mut bare = redis::cmd("EVALSHA");
    bare.arg(*hash).arg(latch);
    for (i, arg) in rest.iter().enumerate() {
        if i != latch {
            bare.arg(*arg);
        }
    }
    Some(bare)
}

/// `EVALSHA <sha> <number of keys> <keys...>` of `script`, with room for up to 7
/// arguments, a channel (about as long as the first key) among them, so that building the
/// command does not grow it piecemeal.
pub(crate) fn evalsha(script: &Lua, keys: &[&[u8]]) -> Cmd {
    let key_bytes: usize = keys.iter().map(|key| key.len()).sum();
    let channel_bytes = keys.first().map_or(0, |key| key.len() + 32);
    let mut cmd = Cmd::with_capacity(3 + keys.len() + 7, 64 + key_bytes + channel_bytes + 160);
    cmd.arg("EVALSHA").arg(script.hash()).arg(keys.len());
    for key in keys {
        cmd.arg(*key);
    }
    cmd
}

/// A duration in whole milliseconds, as Redis takes it.
pub(crate) fn millis(duration: Duration) -> u64 {
    duration.as_millis() as u64
}

/// Loads every registered script on `conn`, in both flavours, after Redis answered
/// NOSCRIPT (a restart, a failover, `SCRIPT FLUSH`): one round trip.
pub(crate) fn load_all(conn: &mut Connection) -> RedisResult<()> {
    let mut load = redis::pipe();
    let registry = REGISTRY.read().unwrap_or_else(PoisonError::into_inner);
    for script in registry.values() {
        load.cmd("SCRIPT").arg("LOAD").arg(&script.source).ignore();
    }
    drop(registry);
    load.query::<()>(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A release that publishes, with a latch for its last key.
    static RELEASE: Lua = Lua::latched(&[
        "redis.call('publish', ARGV[1], ARGV[2])\n",
        "return redis.call('del', KEYS[1], KEYS[2])\n",
    ]);

    /// A script that publishes nothing.
    static READ: Lua = Lua::new(&["return redis.call('get', KEYS[1])\n"]);

    fn args(cmd: &Cmd) -> Vec<String> {
        (cmd.args_iter())
            .map(|arg| match arg {
                Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                _ => String::new(),
            })
            .collect()
    }

    fn release() -> Cmd {
        let mut cmd = evalsha(&RELEASE, &[b"lock", b"latch"]);
        cmd.arg("channel").arg("0");
        cmd
    }

    #[test]
    fn scripts_that_publish_have_a_sharded_flavour_that_only_spublishes() {
        let classic = release();
        let flavoured = sharded(&classic).expect("a release publishes");
        let (a, b) = (args(&classic), args(&flavoured));
        assert_eq!(a.len(), b.len());
        assert_ne!(a[1], b[1], "another script");
        assert_eq!(a[2..], b[2..], "the same keys and arguments");
        assert!(sharded(&flavoured).is_none(), "one sharded flavour");
        let registry = REGISTRY.read().unwrap();
        let source = &registry[&b[1]].source;
        assert_eq!(
            source,
            &RELEASE.parts.concat().replace("'publish'", "'spublish'")
        );
        drop(registry);
        assert!(
            sharded(&evalsha(&READ, &[b"lock"])).is_none(),
            "a read publishes nothing"
        );
    }

    #[test]
    fn a_release_without_its_latch_drops_its_last_key_only() {
        let classic = release();
        for latched in [classic.clone(), sharded(&classic).unwrap()] {
            let (with, without) = (args(&latched), args(&unlatched(&latched).unwrap()));
            assert_eq!(without[..2], with[..2], "the same script");
            assert_eq!((&with[2], &without[2]), (&"2".to_owned(), &"1".to_owned()));
            assert_eq!(without[3], "lock");
            assert_eq!(without[4..], with[5..], "the same arguments");
        }
        assert!(unlatched(&evalsha(&READ, &[b"lock", b"other"])).is_none());
    }
}
