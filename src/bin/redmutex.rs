//! `redmutex`: who holds which lock, breaking one that is stuck, and whether a Redis is safe
//! for locks. Built with the `cli` feature. Exit codes: 0 ok, 1 a finding or an error, 2 bad
//! usage. Output ends quietly when its reader goes away.

// The tool's modules are in the folder named after it.
#[path = "redmutex/out.rs"]
mod out;

use std::io::{BufRead, IsTerminal};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use redmutex::{Holder, Level, LockClient, LockInfo, LockKind, Report};
use serde_json::{Value, json};

use out::{Out, ask, say};

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
        /// List the keys that are no locks too, marked as such.
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
        say("no server: pass --url or set REDIS_URL");
        return ExitCode::from(2);
    }
    let mut out = Out::new();
    let code = match run(&cli, &mut out) {
        Ok(code) => code,
        Err(err) => {
            say(&format!("{err:#}"));
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
    let urls: Vec<&str> = cli.urls.iter().map(String::as_str).collect();
    let builder = match (&cli.sentinel, cli.cluster, urls.len()) {
        (Some(master), _, _) => LockClient::sentinel(&urls, master),
        (None, true, _) => LockClient::cluster(&urls),
        (None, false, 1) => LockClient::builder(urls[0]),
        (None, false, _) => LockClient::redlock(&urls),
    };
    builder.key_prefix(prefix).build()
}

fn run(cli: &Cli, out: &mut Out) -> redmutex::Result<ExitCode> {
    if cli.prefix.ends_with(|c: char| c.is_alphanumeric()) {
        say(&format!(
            "warning: the prefix {:?} ends without a separator, so a lock NAME is \
             the key \"{}NAME\"; did you mean --prefix {}:?",
            cli.prefix, cli.prefix, cli.prefix
        ));
    }
    let client = client(cli, &cli.prefix)?;
    match &cli.command {
        Command::Locks { pattern, all } => {
            let locks = match all {
                true => client.scan(pattern)?,
                false => client.locks(pattern)?,
            };
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
            let info = client.inspect(name)?;
            if info.kind == LockKind::Free
                && let Some(prefix) = likely_prefix(cli, name)?
            {
                say(&format!("no lock here; did you mean --prefix {prefix}?"));
            }
            if cli.json {
                print_json(out, &lock_json(&info));
            } else {
                print_lock(out, &info);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Unlock { name, force, yes } => unlock(cli, out, &client, name, *force, *yes),
        Command::Doctor { strict } => {
            let report = client.doctor()?;
            if cli.json {
                print_json(out, &report_json(&report));
            } else {
                for line in report.to_string().lines() {
                    out.line(line);
                }
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
    out: &mut Out,
    client: &LockClient,
    name: &str,
    force: bool,
    yes: bool,
) -> redmutex::Result<ExitCode> {
    if !force {
        say("unlock breaks a lock that someone may hold; add --force");
        return Ok(ExitCode::from(2));
    }
    let info = client.inspect(name)?;
    let removed = match &info.kind {
        LockKind::Free => {
            say(&format!("{name} is not locked"));
            return Ok(ExitCode::from(1));
        }
        LockKind::NotALock(what) => {
            say(&format!("{name} is no lock ({what}); nothing removed"));
            return Ok(ExitCode::from(1));
        }
        LockKind::Semaphore => {
            say(&format!(
                "{name} is a semaphore, which unlock does not break"
            ));
            return Ok(ExitCode::from(1));
        }
        _ => info.keys[0].clone(),
    };
    if !yes {
        if !std::io::stdin().is_terminal() {
            say("not asking on a non-terminal: add --yes");
            return Ok(ExitCode::from(2));
        }
        ask(&format!(
            "break {name} ({}, held by {})? [y/N] ",
            kind_name(&info.kind),
            holders_text(&info.holders)
        ));
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer).ok();
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            say("left as it was");
            return Ok(ExitCode::from(1));
        }
    }
    let deleted = match info.kind {
        LockKind::Fair => client.fair_lock(name).force_unlock()?,
        LockKind::ReadWrite => {
            // Each side deletes the lock only in its own mode.
            let lock = client.read_write_lock(name);
            lock.write().force_unlock()? || lock.read().force_unlock()?
        }
        LockKind::Token => client.token_lock(name).force_unlock()?,
        // As a resignation: observers are told too.
        LockKind::Election => client.election(name).force_resign()?,
        _ => client.lock(name).force_unlock()?,
    };
    if cli.json {
        print_json(
            out,
            &json!({
            "name": name,
            "removed": deleted.then_some(removed.as_str()),
            "holders": info.holders.iter().map(holder_json).collect::<Vec<_>>(),
            }),
        );
    } else if deleted {
        out.line(&format!(
            "removed {removed} ({}, held by {}); waiters told",
            kind_name(&info.kind),
            holders_text(&info.holders)
        ));
    } else {
        out.line(&format!("{name} was released meanwhile; nothing removed"));
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

fn print_table(out: &mut Out, locks: &[LockInfo]) {
    let rows: Vec<[String; 5]> = locks
        .iter()
        .map(|info| {
            [
                info.name.clone(),
                kind_name(&info.kind),
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
        out.line(cells.join("  ").trim_end());
    }
}

fn print_lock(out: &mut Out, info: &LockInfo) {
    out.line(&format!("name:       {}", info.name));
    out.line(&format!("kind:       {}", kind_name(&info.kind)));
    out.line(&format!("server:     {}", info.server));
    out.line(&format!("lease left: {}", duration_text(info.lease_left)));
    if info.kind == LockKind::Election {
        out.line(&format!("leader:     {}", leader_or_holders(info)));
        out.line(&format!("candidates: {} waiting", waiters_text(info)));
    } else {
        out.line(&format!("holders:    {}", holders_text(&info.holders)));
        out.line(&format!("waiters:    {}", waiters_text(info)));
    }
    if !info.queue.is_empty() {
        out.line(&format!("queue:      {}", info.queue.join(", ")));
    }
    if let Some(fence) = info.fence {
        out.line(&format!("fence:      {fence}"));
    }
    if let Some(available) = info.available {
        out.line(&format!("available:  {available}"));
    }
    out.line(&format!("keys:       {}", info.keys.join(", ")));
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

fn print_json(out: &mut Out, value: &Value) {
    out.line(&format!("{value:#}"));
}
