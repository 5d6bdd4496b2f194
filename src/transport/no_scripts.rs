//! Telling a server that runs no scripts from a script call that failed.
//!
//! Every lock is a Lua script, so a server without scripting can serve none, and waiting
//! does not help. Such a server has no error code of its own to say so; it answers a script
//! call with a plain `ERR`:
//!
//! - `EVALSHA` or `SCRIPT` renamed away (`rename-command EVALSHA ""`): `ERR unknown command
//!   'EVALSHA', with args beginning with: ...`, and the same for `SCRIPT LOAD`;
//! - Valkey 9.1 and later without its Lua module: `EVALSHA` finds no script (`NOSCRIPT`), and
//!   `SCRIPT LOAD` answers `ERR Could not find scripting engine 'lua'`.
//!
//! A plain `ERR` to a script call proves nothing by itself: a script that fails as it runs
//! (a command inside it refused with `ERR`, such as `HINCRBY` on a field that holds no
//! number) is answered so too, and the words after `ERR` differ between servers and
//! versions. So nothing here reads them. Instead, after a plain `ERR` to a script call,
//! the same connection is asked to load and run a script that every Lua engine runs
//! (`scripts/runs.lua`, `return 1`): a server that answers that with `ERR` too runs no
//! scripts; one that runs it does, and the first error stands as it was. Anything else
//! (`NOPERM` for a user without those rights, `BUSY`, a broken connection) tells nothing,
//! and the first error stands. The question costs one round trip, and only after a plain
//! `ERR` to a script.

use redis::{Cmd, Connection, ConnectionLike, ErrorKind, RedisError, ServerErrorKind, Value};

/// The script asked about: any Lua engine runs it, and it neither reads nor writes.
const PROBE: &str = include_str!("scripts/runs.lua");

/// Whether `err`, the failure of `cmd`, is worth asking the server about: a plain `ERR`
/// reply to a script call (its `EVALSHA`, or the `SCRIPT LOAD` sent after `NOSCRIPT`).
pub(crate) fn worth_asking(cmd: &Cmd, err: &RedisError) -> bool {
    err.kind() == ErrorKind::Server(ServerErrorKind::ResponseError) && is_script_call(cmd)
}

/// Whether `cmd` runs a script.
fn is_script_call(cmd: &Cmd) -> bool {
    let name = cmd.args_iter().next();
    matches!(name, Some(redis::Arg::Simple(name)) if name.eq_ignore_ascii_case(b"EVALSHA"))
}

/// Asks the server on `conn` whether it runs scripts at all: loads and runs [`PROBE`] in one
/// round trip. True when it answered either with a plain `ERR`: it runs no scripts.
pub(crate) fn runs_none(conn: &mut Connection) -> redis::RedisResult<bool> {
    let sha = redis::Script::new(PROBE).get_hash().to_owned();
    let mut probe = redis::cmd("SCRIPT");
    probe.arg("LOAD").arg(PROBE);
    let mut packed = probe.get_packed_command();
    let mut run = redis::cmd("EVALSHA");
    run.arg(sha).arg(0);
    run.write_packed_command(&mut packed);
    let replies = conn.req_packed_commands(&packed, 0, 2)?;
    Ok(replies.iter().any(|reply| {
        matches!(reply, Value::ServerError(err)
            if err.kind() == Some(ServerErrorKind::ResponseError))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(line: &str) -> RedisError {
        let value = redis::parse_redis_value(line.as_bytes()).unwrap();
        value.extract_error().unwrap_err()
    }

    #[test]
    fn only_a_plain_err_to_a_script_call_is_asked_about() {
        let mut script = redis::cmd("EVALSHA");
        script.arg("0123").arg(0);
        let mut other = redis::cmd("CONFIG");
        other.arg("GET").arg("timeout");
        let err = refusal("-ERR whatever the words\r\n");
        assert!(worth_asking(&script, &err));
        assert!(!worth_asking(&other, &err));
        for code in [
            "NOPERM",
            "BUSY",
            "NOSCRIPT",
            "LOADING",
            "READONLY",
            "WRONGKIND",
        ] {
            let err = refusal(&format!("-{code} ERR in the words\r\n"));
            assert!(!worth_asking(&script, &err), "{code}");
        }
    }
}
