//! `redmutex`: who holds which lock, breaking one that is stuck, and whether a Redis is safe
//! for locks. Built with the `cli` feature. Exit codes: 0 ok, 1 a finding or an error, 2 bad
//! usage.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use redmutex::{Holder, Level, LockClient, LockInfo, LockKind, Report};
use serde_json::{Value, json};

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
    Show { name: String },
    /// Deletes a lock whoever holds it and wakes its waiters.
    Unlock {
        name: String,
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
    /// Checks the servers for settings that break locks. Exits 1 on a failure; warnings
    /// alone exit 0, unless --strict.
    Doctor {
        /// Exit 1 on warnings too.
        #[arg(long)]
        strict: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.urls.is_empty() {
        eprintln!("redmutex: no server: pass --url or set REDIS_URL");
        return ExitCode::from(2);
    }
    match run(&cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("redmutex: {err:#}");
            if err.is_auth() {
                eprintln!(
                    "redmutex: give the user and password in the URL: \
                     --url redis://USER:PASSWORD@HOST:PORT/ (or REDIS_URL); with --sentinel, \
                     the sentinels' go in their URLs"
                );
            }
            if err.is_scripting_disabled() {
                eprintln!(
                    "redmutex: every lock is a Lua script: turn scripting on (no rename-command \
                     of EVAL, EVALSHA or SCRIPT; on Valkey 9.1 and later, load its Lua module)"
                );
            }
            ExitCode::from(1)
        }
    }
}

fn client(cli: &Cli, prefix: &str) -> redmutex::Result<LockClient> {
    let urls: Vec<&str> = cli.urls.iter().map(String::as_str).collect();
    let builder = match (&cli.sentinel, cli.cluster, urls.len()) {
        (Some(master), _, _) => LockClient::sentinel(&urls, master),
        (None, true, _) => LockClient::cluster(&urls),
        (None, false, 1) => LockClient::builder(urls[0]),
        (None, false, _) => LockClient::redlock(&urls),
    };
    builder.key_prefix(prefix).build()
}

fn run(cli: &Cli) -> redmutex::Result<ExitCode> {
    if cli.prefix.ends_with(|c: char| c.is_alphanumeric()) {
        eprintln!(
            "redmutex: warning: the prefix {:?} ends without a separator, so a lock NAME is \
             the key \"{}NAME\"; did you mean --prefix {}:?",
            cli.prefix, cli.prefix, cli.prefix
        );
    }
    let client = client(cli, &cli.prefix)?;
    match &cli.command {
        Command::Locks { pattern, all } => {
            let locks = match all {
                true => client.scan(pattern)?,
                false => client.locks(pattern)?,
            };
            if cli.json {
                print_json(&Value::Array(locks.iter().map(lock_json).collect()));
            } else {
                print_table(&locks);
            }
            // What could not be read is listed too; the exit code says the listing is
            // incomplete.
            let unread = locks
                .iter()
                .filter(|info| matches!(info.kind, LockKind::Unreadable(_)))
                .count();
            if unread > 0 {
                eprintln!("redmutex: {unread} could not be read; the listing is incomplete");
                return Ok(ExitCode::from(1));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Show { name } => {
            let info = client.inspect(name)?;
            if info.kind == LockKind::Free
                && let Some(prefix) = likely_prefix(cli, name)?
            {
                eprintln!("redmutex: no lock here; did you mean --prefix {prefix}?");
            }
            if cli.json {
                print_json(&lock_json(&info));
            } else {
                print_lock(&info);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Unlock {
            name,
            force,
            yes,
            token,
        } => unlock(cli, &client, name, (*force, *yes), token.as_deref()),
        Command::Doctor { strict } => {
            let report = client.doctor()?;
            if cli.json {
                print_json(&report_json(&report));
            } else {
                print!("{report}");
            }
            Ok(match report.worst() {
                Level::Fail => ExitCode::from(1),
                Level::Warn if *strict => ExitCode::from(1),
                _ => ExitCode::SUCCESS,
            })
        }
    }
}

fn unlock(
    cli: &Cli,
    client: &LockClient,
    name: &str,
    (force, yes): (bool, bool),
    token: Option<&str>,
) -> redmutex::Result<ExitCode> {
    if !force {
        eprintln!("redmutex: unlock breaks a lock that someone may hold; add --force");
        return Ok(ExitCode::from(2));
    }
    let info = client.inspect(name)?;
    let removed = match &info.kind {
        LockKind::Free => {
            eprintln!("redmutex: {name} is not locked");
            return Ok(ExitCode::from(1));
        }
        LockKind::NotALock(what) => {
            eprintln!("redmutex: {name} is no lock ({what}); nothing removed");
            return Ok(ExitCode::from(1));
        }
        LockKind::Semaphore => {
            eprintln!("redmutex: {name} is a semaphore, which unlock does not break");
            return Ok(ExitCode::from(1));
        }
        _ => info.keys[0].clone(),
    };
    if let (Some(doubt), None) = (&info.doubt, token) {
        eprintln!(
            "redmutex: {name} may be application data ({doubt}); nothing removed. If it is a \
             lock, name its holder: --token HOLDER"
        );
        return Ok(ExitCode::from(1));
    }
    if !yes {
        if !std::io::stdin().is_terminal() {
            eprintln!("redmutex: not asking on a non-terminal: add --yes");
            return Ok(ExitCode::from(2));
        }
        eprint!(
            "break {name} ({}, held by {})? [y/N] ",
            kind_name(&info.kind),
            holders_text(&info.holders)
        );
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer).ok();
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            eprintln!("redmutex: left as it was");
            return Ok(ExitCode::from(1));
        }
    }
    // The script judges the key's shape again before it deletes; with a holder named, it
    // deletes only while that holder holds it.
    let deleted = match (&info.kind, token) {
        (LockKind::Fair, None) => client.fair_lock(name).force_unlock()?,
        (LockKind::Fair, Some(held)) => client.fair_lock(name).force_unlock_held_by(held)?,
        (LockKind::ReadWrite, _) => {
            // Each side deletes the lock only in its own mode.
            let lock = client.read_write_lock(name);
            let (write, read) = (lock.write(), lock.read());
            match token {
                None => write.force_unlock()? || read.force_unlock()?,
                Some(held) => {
                    write.force_unlock_held_by(held)? || read.force_unlock_held_by(held)?
                }
            }
        }
        (LockKind::Token, None) => client.token_lock(name).force_unlock()?,
        (LockKind::Token, Some(held)) => client.token_lock(name).force_unlock_held_by(held)?,
        // As a resignation: observers are told too. It resigns the leader it reads only.
        (LockKind::Election, _) => client.election(name).force_resign()?,
        (_, None) => client.lock(name).force_unlock()?,
        (_, Some(held)) => client.lock(name).force_unlock_held_by(held)?,
    };
    if cli.json {
        print_json(&json!({
            "name": name,
            "removed": deleted.then_some(removed.as_str()),
            "holders": info.holders.iter().map(holder_json).collect::<Vec<_>>(),
        }));
    } else if deleted {
        println!(
            "removed {removed} ({}, held by {}); waiters told",
            kind_name(&info.kind),
            holders_text(&info.holders)
        );
    } else if token.is_some() {
        println!("{name} is not held by that holder (or was released meanwhile); nothing removed");
    } else {
        println!("{name} was released meanwhile; nothing removed");
    }
    Ok(ExitCode::SUCCESS)
}

/// The prefix under which a lock named `name` exists when it does not under the one given:
/// found by scanning for keys that end in `name`.
fn likely_prefix(cli: &Cli, name: &str) -> redmutex::Result<Option<String>> {
    let mut pattern = String::from("*");
    for c in name.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    let found = client(cli, "")?.locks(&pattern)?;
    Ok(found.into_iter().find_map(|info| {
        let prefix = info.name.strip_suffix(name)?;
        (!prefix.is_empty() && prefix != cli.prefix).then(|| prefix.to_owned())
    }))
}

fn kind_name(kind: &LockKind) -> String {
    match kind {
        LockKind::Free => "free".into(),
        LockKind::Reentrant => "reentrant".into(),
        LockKind::Fenced => "fenced".into(),
        LockKind::Fair => "fair".into(),
        LockKind::ReadWrite => "read-write".into(),
        LockKind::Token => "token".into(),
        LockKind::Semaphore => "semaphore".into(),
        LockKind::Election => "election".into(),
        LockKind::NotALock(what) => format!("no lock: {what}"),
        LockKind::Unreadable(why) => format!("unreadable: {why}"),
        _ => "unknown".into(),
    }
}

/// The kind of `info`, marked when the key may be data rather than a lock.
fn kind_text(info: &LockInfo) -> String {
    match info.doubt {
        Some(_) => format!("{} (may be a lock)", kind_name(&info.kind)),
        None => kind_name(&info.kind),
    }
}

fn holder_text(holder: &Holder) -> String {
    let mut text = holder.id.clone();
    if let Some(client) = &holder.client {
        text = format!("{text} [{client}]");
    }
    if let Some(mode) = holder.mode {
        text = format!("{mode} {text}");
    }
    if holder.holds > 1 {
        text += &format!(" ×{}", holder.holds);
    }
    if let Some(left) = holder.lease_left {
        text += &format!(" ({} left)", duration_text(Some(left)));
    }
    text
}

/// An election's leader by name and epoch, or the holders of any other lock.
fn leader_or_holders(info: &LockInfo) -> String {
    match (&info.kind, info.holders.first(), info.epoch) {
        (
            LockKind::Election,
            Some(Holder {
                client: Some(name), ..
            }),
            Some(epoch),
        ) => {
            format!("{name} (epoch {epoch})")
        }
        _ => holders_text(&info.holders),
    }
}

fn holders_text(holders: &[Holder]) -> String {
    match holders {
        [] => "nobody".into(),
        _ => (holders.iter().map(holder_text))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn duration_text(duration: Option<Duration>) -> String {
    match duration {
        None => "-".into(),
        Some(d) if d >= Duration::from_secs(10) => format!("{}s", d.as_secs()),
        Some(d) => format!("{:.1}s", d.as_secs_f64()),
    }
}

fn waiters_text(info: &LockInfo) -> String {
    info.waiters.map_or("?".into(), |n| n.to_string())
}

fn print_table(locks: &[LockInfo]) {
    let rows: Vec<[String; 5]> = locks
        .iter()
        .map(|info| {
            [
                info.name.clone(),
                kind_text(info),
                leader_or_holders(info),
                duration_text(info.lease_left),
                waiters_text(info),
            ]
        })
        .collect();
    let header = ["NAME", "KIND", "HOLDERS", "LEASE", "WAITERS"].map(String::from);
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = (row.iter().zip(widths))
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        println!("{}", cells.join("  ").trim_end());
    }
}

fn print_lock(info: &LockInfo) {
    println!("name:       {}", info.name);
    println!("kind:       {}", kind_text(info));
    if let Some(doubt) = &info.doubt {
        println!("doubt:      {doubt}; unlock needs --token HOLDER");
    }
    println!("server:     {}", info.server);
    println!("lease left: {}", duration_text(info.lease_left));
    if info.kind == LockKind::Election {
        println!("leader:     {}", leader_or_holders(info));
        println!("candidates: {} waiting", waiters_text(info));
    } else {
        println!("holders:    {}", holders_text(&info.holders));
        println!("waiters:    {}", waiters_text(info));
    }
    if !info.queue.is_empty() {
        println!("queue:      {}", info.queue.join(", "));
    }
    if let Some(fence) = info.fence {
        println!("fence:      {fence}");
    }
    if let Some(available) = info.available {
        println!("available:  {available}");
    }
    println!("keys:       {}", info.keys.join(", "));
}

fn holder_json(holder: &Holder) -> Value {
    json!({
        "id": holder.id,
        "holds": holder.holds,
        "mode": holder.mode,
        "lease_left_ms": holder.lease_left.map(|d| d.as_millis() as u64),
        "client": holder.client,
    })
}

fn lock_json(info: &LockInfo) -> Value {
    json!({
        "name": info.name,
        "kind": kind_name(&info.kind),
        "holders": info.holders.iter().map(holder_json).collect::<Vec<_>>(),
        "lease_left_ms": info.lease_left.map(|d| d.as_millis() as u64),
        "waiters": info.waiters,
        "queue": info.queue,
        "fence": info.fence,
        "epoch": info.epoch,
        "available": info.available,
        "keys": info.keys,
        "server": info.server,
        "doubt": info.doubt,
    })
}

fn report_json(report: &Report) -> Value {
    let findings: Vec<Value> = (report.findings.iter())
        .map(|f| {
            json!({
                "check": f.check,
                "server": f.server,
                "level": f.level.to_string(),
                "reason": f.reason,
                "fix": f.fix,
            })
        })
        .collect();
    json!({ "worst": report.worst().to_string(), "findings": findings })
}

fn print_json(value: &Value) {
    println!("{value:#}");
}
