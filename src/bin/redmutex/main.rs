//! `redmutex`: who holds which lock, who waits for whom, breaking one that is stuck, and
//! whether a Redis is safe for locks. Built with the `cli` feature. Exit codes: 0 ok, 1 a finding or an error, 2 bad
//! usage. Output ends quietly when its reader goes away. Names are printed escaped
//! (`escape`), and taken back in that form.

mod escape;
mod json;
mod out;
mod progress;
mod text;

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, IsTerminal};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use redmutex::{FindingLevel, LockClient, LockClientBuilder, LockInfo, LockKind, Waiter};
use serde_json::Value;

use escape::{escape, escape_str};
use json::{lock_json, print_json, report_json, unlocked_json, waits_json};
use out::{Out, ask, say};
use progress::Progress;
use text::{
    holders_text, kind_text, print_candidates, print_lock, print_lock_waiters, print_report,
    print_table, print_waits,
};

/// Inspect and operate the Redis locks of redmutex and Redisson.
#[derive(Parser)]
#[command(name = "redmutex", version)]
struct Cli {
    /// A Redis URL; repeat it for Redlock nodes, sentinels (with --sentinel) or cluster
    /// seeds (with --cluster).
    #[arg(long = "url", env = "REDIS_URL", value_delimiter = ',', global = true)]
    urls: Vec<String>,
    /// The URLs are sentinels; this is the master name.
    #[arg(long, global = true, conflicts_with = "cluster")]
    sentinel: Option<String>,
    /// The URLs are seeds of a Redis Cluster.
    #[arg(long, global = true)]
    cluster: bool,
    /// The key prefix of the locks (the client's `key_prefix`), such as `myapp:`.
    #[arg(long, env = "REDMUTEX_PREFIX", default_value = "", global = true)]
    prefix: String,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// A table of the locks whose names match PATTERN (a Redis glob).
    Locks {
        #[arg(default_value = "*")]
        pattern: String,
        /// List too the keys that are no locks, and those that may be (a token's shape,
        /// or a lock's without an expiry), marked as such.
        #[arg(long)]
        all: bool,
    },
    /// Everything known about one lock, and the Redis keys involved.
    Show {
        /// The name as the tool prints it: \xNN, \n, \r, \t and \\ stand for the bytes
        /// they escape.
        name: OsString,
    },
    /// Deletes a lock whoever holds it and wakes its waiters.
    Unlock {
        /// The name as the tool prints it (see show).
        name: OsString,
        /// Required: breaking a lock can let two holders in.
        #[arg(long)]
        force: bool,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
        /// Remove the lock only while this holder holds it (a token, or an owner field
        /// `<uuid>:<thread>`, as `show` prints it): required for a key that may be data.
        #[arg(long, value_name = "HOLDER")]
        token: Option<String>,
    },
    /// The wait-for graph: who waits for which lock held by whom, and what each waiter
    /// holds, marking those in a cycle (a deadlock). Exits 1 when there is one.
    Waits,
    /// Checks the servers for settings that break locks. Exits 1 on a failure; warnings
    /// and unknowns alone exit 0, unless --strict.
    Doctor {
        /// Exit 1 on warnings too, and on checks whose answer is unknown (a command the
        /// server or the user's rights refused).
        #[arg(long)]
        strict: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.urls.is_empty() {
        say("no server: pass --url or set REDIS_URL");
        return ExitCode::from(2);
    }
    let mut out = Out::new();
    let code = match run(&cli, &mut out) {
        Ok(code) => code,
        Err(err) => {
            say(&escape_str(&format!("{err:#}")));
            if err.is_auth() {
                say("give the user and password in the URL: \
                     --url redis://USER:PASSWORD@HOST:PORT/ (or REDIS_URL); with --sentinel, \
                     the sentinels' go in their URLs");
            }
            if err.is_scripting_disabled() {
                say(
                    "every lock is a Lua script: turn scripting on (no rename-command \
                     of EVAL, EVALSHA or SCRIPT; on Valkey 9.1 and later, load its Lua module)",
                );
            }
            ExitCode::from(1)
        }
    };
    match out.finish() {
        Ok(()) => code,
        Err(err) => {
            say(&format!("cannot write the output: {err}"));
            ExitCode::from(1)
        }
    }
}

fn client(cli: &Cli, prefix: &str) -> redmutex::Result<LockClient> {
    builder(cli, prefix).build()
}

fn builder(cli: &Cli, prefix: &str) -> LockClientBuilder {
    let urls: Vec<&str> = cli.urls.iter().map(String::as_str).collect();
    let builder = match (&cli.sentinel, cli.cluster, urls.len()) {
        (Some(master), _, _) => LockClient::sentinel(&urls, master),
        (None, true, _) => LockClient::cluster(&urls),
        (None, false, 1) => LockClient::builder(urls[0]),
        (None, false, _) => LockClient::redlock(&urls),
    };
    builder.key_prefix(prefix)
}

fn run(cli: &Cli, out: &mut Out) -> redmutex::Result<ExitCode> {
    if cli.prefix.ends_with(|c: char| c.is_alphanumeric()) {
        say(&format!(
            "warning: the prefix {:?} ends without a separator, so a lock NAME is \
             the key \"{}NAME\"; did you mean --prefix {}:?",
            cli.prefix, cli.prefix, cli.prefix
        ));
    }
    // The doctor reports on servers where no client builds.
    let connect = || client(cli, &cli.prefix);
    match &cli.command {
        Command::Locks { pattern, all } => {
            let client = connect()?;
            let mut progress = Progress::new();
            let mut locks = client.scan_counting(pattern, |seen| progress.show(seen))?;
            progress.clear();
            if !all {
                locks.retain(LockInfo::is_lock);
            }
            if cli.json {
                print_json(out, &Value::Array(locks.iter().map(lock_json).collect()));
            } else {
                print_table(out, &locks);
            }
            // What could not be read is listed too; the exit code says the listing is
            // incomplete.
            let unread = locks
                .iter()
                .filter(|info| matches!(info.kind, LockKind::Unreadable(_)))
                .count();
            if unread > 0 {
                say(&format!(
                    "{unread} could not be read; the listing is incomplete"
                ));
                return Ok(ExitCode::from(1));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Show { name } => {
            let Some(name) = name_arg(name) else {
                return Ok(ExitCode::from(2));
            };
            let client = connect()?;
            let info = client.inspect(&name)?;
            if info.kind == LockKind::Election && info.candidates.is_none() {
                say("the candidates could not be read");
            }
            if info.kind == LockKind::Free
                && let Some(prefix) = likely_prefix(cli, &name)?
            {
                say(&format!(
                    "no lock here; did you mean --prefix {}?",
                    escape(&prefix)
                ));
            }
            // The waiters that recorded their wait for this lock (a deadlock check's edges),
            // found by a scan of every key: only for a lock something may wait on.
            let key = [cli.prefix.as_bytes(), &name[..]].concat();
            let waited = info.kind != LockKind::Free && info.waiters != Some(0);
            let waits = if waited {
                client.waits()
            } else {
                Ok(Vec::new())
            };
            if let Err(err) = &waits {
                say(&escape_str(&format!(
                    "the waiters' edges could not be read: {err:#}"
                )));
            }
            let waits = waits.unwrap_or_default();
            let waiting: Vec<&Waiter> = (waits.iter())
                .filter(|w| w.edge.lock.as_bytes() == key)
                .collect();
            if cli.json {
                let mut value = lock_json(&info);
                let waiting: Vec<Waiter> = waiting.into_iter().cloned().collect();
                value["waits"] = waits_json(&waiting);
                print_json(out, &value);
            } else {
                print_lock(out, &info);
                print_candidates(out, info.candidates.as_deref().unwrap_or_default());
                print_lock_waiters(out, &waiting);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Waits => {
            let waits = connect()?.waits()?;
            if cli.json {
                print_json(out, &waits_json(&waits));
            } else {
                print_waits(out, &waits);
            }
            let deadlocked = waits.iter().filter(|w| w.deadlocked).count();
            if deadlocked > 0 {
                say(&format!("{deadlocked} waiters are in a deadlock"));
                return Ok(ExitCode::from(1));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Unlock {
            name,
            force,
            yes,
            token,
        } => match name_arg(name) {
            Some(name) => unlock(
                cli,
                out,
                &connect()?,
                &name,
                (*force, *yes),
                token.as_deref(),
            ),
            None => Ok(ExitCode::from(2)),
        },
        Command::Doctor { strict } => {
            let report = builder(cli, &cli.prefix).doctor();
            if cli.json {
                print_json(out, &report_json(&report));
            } else {
                print_report(out, &report);
            }
            Ok(match report.worst() {
                FindingLevel::Fail => ExitCode::from(1),
                FindingLevel::Warn | FindingLevel::Unknown if *strict => ExitCode::from(1),
                _ => ExitCode::SUCCESS,
            })
        }
    }
}

fn unlock(
    cli: &Cli,
    out: &mut Out,
    client: &LockClient,
    name: &[u8],
    (force, yes): (bool, bool),
    token: Option<&str>,
) -> redmutex::Result<ExitCode> {
    if !force {
        say("unlock breaks a lock that someone may hold; add --force");
        return Ok(ExitCode::from(2));
    }
    let info = client.inspect(name)?;
    let shown = escape(name);
    let removed = match &info.kind {
        LockKind::Free => {
            say(&format!("{shown} is not locked"));
            return Ok(ExitCode::from(1));
        }
        LockKind::NotALock(what) => {
            let what = escape_str(what);
            say(&format!("{shown} is no lock ({what}); nothing removed"));
            return Ok(ExitCode::from(1));
        }
        LockKind::LeasedSemaphore | LockKind::CountingSemaphore => {
            say(&format!(
                "{shown} is a semaphore, which unlock does not break"
            ));
            return Ok(ExitCode::from(1));
        }
        LockKind::CountDownLatch => {
            say(&format!(
                "{shown} is a count-down latch, which unlock does not break (count it down                  or delete it)"
            ));
            return Ok(ExitCode::from(1));
        }
        LockKind::Unreadable(why) => {
            say(&format!(
                "{shown} could not be read ({}); nothing removed",
                escape_str(why)
            ));
            return Ok(ExitCode::from(1));
        }
        _ => info.keys_bytes[0].clone(),
    };
    if let (Some(doubt), None) = (&info.doubt, token) {
        say(&format!(
            "{shown} may be application data ({}); nothing removed. If it is a lock, name \
             its holder: --token HOLDER",
            escape_str(doubt)
        ));
        return Ok(ExitCode::from(1));
    }
    if !yes {
        if !std::io::stdin().is_terminal() {
            say("not asking on a non-terminal: add --yes");
            return Ok(ExitCode::from(2));
        }
        ask(&format!(
            "break {shown} ({}, held by {})? [y/N] ",
            kind_text(&info),
            holders_text(&info.holders)
        ));
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer).ok();
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            say("left as it was");
            return Ok(ExitCode::from(1));
        }
    }
    // The script judges the key's shape again before it deletes, and deletes only while
    // the holder named (or else the one shown) holds it: a lock released and taken by
    // someone else while the operator was asked is left alone.
    let writer = (info.holders.iter()).find(|h| h.mode == Some("write"));
    let holder = writer.or(info.holders.first()).map(|h| h.id.as_str());
    let deleted = match (&info.kind, token.or(holder)) {
        (_, None) => match info.kind {
            // A fair queue whose lock is gone: its lapsed waiters cleared, the next woken.
            LockKind::Fair => client.fair_lock(name).force_unlock()?,
            _ => false,
        },
        (LockKind::Fair, Some(held)) => client.fair_lock(name).force_unlock_held_by(held)?,
        (LockKind::ReadWrite, Some(held)) => {
            // Each side deletes the lock only in its own mode: the one shown.
            let lock = client.read_write_lock(name);
            match writer {
                Some(_) => lock.write().force_unlock_held_by(held)?,
                None => lock.read().force_unlock_held_by(held)?,
            }
        }
        (LockKind::Token, Some(held)) => client.token_lock(name).force_unlock_held_by(held)?,
        // As a resignation: observers are told too.
        (LockKind::Election, Some(held)) => client.election(name).force_resign_held_by(held)?,
        (_, Some(held)) => client.lock(name).force_unlock_held_by(held)?,
    };
    if cli.json {
        let removed = deleted.then_some(&removed[..]);
        print_json(out, &unlocked_json(name, removed, &info.holders));
    } else if deleted {
        out.line(&format!(
            "removed {} ({}, held by {}); waiters told",
            escape(&removed),
            kind_text(&info),
            holders_text(&info.holders)
        ));
    } else if token.is_some() {
        out.line(&format!(
            "{shown} is not held by that holder (or was released meanwhile); nothing removed"
        ));
    } else {
        out.line(&format!(
            "{shown} was released (or taken by another) meanwhile; nothing removed"
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// A lock's name from the command line, in the escaped form the tool prints (raw bytes
/// pass as they are); `None`, said why, when it is no such form.
fn name_arg(arg: &OsStr) -> Option<Vec<u8>> {
    match escape::unescape(arg.as_encoded_bytes()) {
        Ok(name) => Some(name),
        Err(why) => {
            say(&format!("NAME: {why}"));
            None
        }
    }
}

/// The prefix under which a lock named `name` exists when it does not under the one given:
/// found by scanning for keys that end in `name` (a byte that is not UTF-8 matched by `?`,
/// then compared exactly).
fn likely_prefix(cli: &Cli, name: &[u8]) -> redmutex::Result<Option<Vec<u8>>> {
    let mut pattern = String::from("*");
    for chunk in name.utf8_chunks() {
        for c in chunk.valid().chars() {
            if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                pattern.push('\\');
            }
            pattern.push(c);
        }
        pattern.extend(chunk.invalid().iter().map(|_| '?'));
    }
    let found = client(cli, "")?.locks(&pattern)?;
    Ok(found.into_iter().find_map(|info| {
        let prefix = info.name_bytes.strip_suffix(name)?;
        (!prefix.is_empty() && prefix != cli.prefix.as_bytes()).then(|| prefix.to_vec())
    }))
}
