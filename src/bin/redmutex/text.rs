//! The tool's text output: the table of locks, one lock in full, the doctor's report. Every
//! name and value in it is escaped (`escape`), so that what a key holds cannot act on the
//! terminal, and a name is printed in the form `show` and `unlock` take back.

use std::time::{Duration, SystemTime};

use redmutex::{Candidate, DoctorReport, Holder, LockInfo, LockKind, Waiter};

use crate::escape::{escape, escape_str};
use crate::out::Out;

/// The kind's word, as the JSON output gives it in its `kind` field: a name only, without
/// what a key that is no lock holds or why one could not be read.
pub fn kind_word(kind: &LockKind) -> &'static str {
    match kind {
        LockKind::Free => "free",
        LockKind::Reentrant => "reentrant",
        LockKind::Fenced => "fenced",
        LockKind::Fair => "fair",
        LockKind::ReadWrite => "read-write",
        LockKind::Token => "token",
        LockKind::LeasedSemaphore => "leased-semaphore",
        LockKind::CountingSemaphore => "counting-semaphore",
        LockKind::CountDownLatch => "count-down-latch",
        LockKind::Election => "election",
        LockKind::NotALock(_) => "no-lock",
        LockKind::Unreadable(_) => "unreadable",
        _ => "unknown",
    }
}

/// The kind in words for text output (not escaped): its word, and for a key that is no
/// lock what it holds, for one that could not be read why.
fn kind_name(kind: &LockKind) -> String {
    match kind {
        LockKind::CountingSemaphore => "counting semaphore".into(),
        LockKind::CountDownLatch => "count-down latch".into(),
        LockKind::NotALock(what) => format!("no lock: {what}"),
        LockKind::Unreadable(why) => format!("unreadable: {why}"),
        other => kind_word(other).into(),
    }
}

/// The kind of `info`, escaped, and marked when the key may be data rather than a lock.
pub fn kind_text(info: &LockInfo) -> String {
    let kind = escape_str(&kind_name(&info.kind));
    match info.doubt {
        Some(_) => format!("{kind} (may be a lock)"),
        None => kind,
    }
}

fn holder_text(holder: &Holder) -> String {
    let mut text = escape_str(&holder.id);
    if let Some(client) = &holder.client {
        text = format!("{text} [{}]", escape_str(client));
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

/// An election's leader by name and epoch, a counting semaphore's permits available and a
/// latch's count (neither records holders), or the holders of any other lock.
fn leader_or_holders(info: &LockInfo) -> String {
    match (&info.kind, info.available, info.count) {
        (LockKind::CountingSemaphore, Some(available), _) => {
            return format!("{available} available");
        }
        (LockKind::CountDownLatch, _, Some(count)) => return format!("count {count}"),
        _ => {}
    }
    match (&info.kind, info.holders.first(), info.epoch) {
        (
            LockKind::Election,
            Some(Holder {
                client: Some(name), ..
            }),
            Some(epoch),
        ) => {
            format!("{} (epoch {epoch})", escape_str(name))
        }
        _ => holders_text(&info.holders),
    }
}

/// The holders, escaped.
pub fn holders_text(holders: &[Holder]) -> String {
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

/// Several byte strings, escaped, comma-separated.
fn list_text(items: impl IntoIterator<Item = impl AsRef<[u8]>>) -> String {
    (items.into_iter())
        .map(|item| escape(item.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A table of locks: name, kind, holders, lease left, waiters.
pub fn print_table(out: &mut Out, locks: &[LockInfo]) {
    let rows: Vec<[String; 5]> = locks
        .iter()
        .map(|info| {
            [
                escape(&info.name_bytes),
                kind_text(info),
                leader_or_holders(info),
                duration_text(info.lease_left),
                waiters_text(info),
            ]
        })
        .collect();
    print_rows(out, ["NAME", "KIND", "HOLDERS", "LEASE", "WAITERS"], &rows);
}

/// A table: `header` and `rows`, each column as wide as its widest cell.
fn print_rows<const N: usize>(out: &mut Out, header: [&str; N], rows: &[[String; N]]) {
    let header = header.map(String::from);
    let mut widths = header.clone().map(|h| h.len());
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(rows) {
        let cells: Vec<String> = (row.iter().zip(widths))
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.line(cells.join("  ").trim_end());
    }
}

/// Everything known about one lock, a line each.
pub fn print_lock(out: &mut Out, info: &LockInfo) {
    out.line(&format!("name:       {}", escape(&info.name_bytes)));
    out.line(&format!("kind:       {}", kind_text(info)));
    if let Some(doubt) = &info.doubt {
        let doubt = escape_str(doubt);
        out.line(&format!("doubt:      {doubt}; unlock needs --token HOLDER"));
    }
    out.line(&format!("server:     {}", escape_str(&info.server)));
    out.line(&format!("lease left: {}", duration_text(info.lease_left)));
    if info.kind == LockKind::Election {
        out.line(&format!("leader:     {}", leader_or_holders(info)));
        out.line(&format!("candidates: {} waiting", waiters_text(info)));
    } else if matches!(
        info.kind,
        LockKind::CountingSemaphore | LockKind::CountDownLatch
    ) {
        out.line("holders:    not recorded");
        out.line(&format!("waiters:    {}", waiters_text(info)));
    } else {
        out.line(&format!("holders:    {}", holders_text(&info.holders)));
        out.line(&format!("waiters:    {}", waiters_text(info)));
    }
    if !info.queue.is_empty() {
        out.line(&format!("queue:      {}", list_text(&info.queue)));
    }
    if let Some(fence) = info.fence {
        out.line(&format!("fence:      {fence}"));
    }
    if let Some(available) = info.available {
        out.line(&format!("available:  {available}"));
    }
    if let Some(count) = info.count {
        out.line(&format!("count:      {count}"));
    }
    out.line(&format!("keys:       {}", list_text(&info.keys_bytes)));
}

/// An election's candidates, a line each: the leader first, then those waiting.
pub fn print_candidates(out: &mut Out, candidates: &[Candidate]) {
    for candidate in candidates {
        let role = if candidate.is_leader() {
            "leads"
        } else {
            "waits"
        };
        let since = match candidate
            .since()
            .map(|since| SystemTime::now().duration_since(since))
        {
            Some(Ok(ago)) => format!(", since {} s ago", ago.as_secs()),
            Some(Err(_)) => ", since just now".to_owned(),
            None => String::new(),
        };
        out.line(&format!(
            "candidate:  {} {role} (id {}{since})",
            escape_str(candidate.name()),
            escape_str(candidate.id()),
        ));
    }
}

/// The doctor's report, a line per finding.
pub fn print_report(out: &mut Out, report: &DoctorReport) {
    for finding in &report.findings {
        out.line(&escape_str(&finding.to_string()));
    }
}

/// How long ago `since` was, in words.
fn ago(since: SystemTime) -> String {
    match SystemTime::now().duration_since(since) {
        Ok(ago) => format!("{:.1} s", ago.as_secs_f64()),
        Err(_) => "0.0 s".to_owned(),
    }
}

/// The wait-for graph: a waiter a line, what it waits for and who holds that, what it
/// holds, and a mark on those in a cycle.
pub fn print_waits(out: &mut Out, waiters: &[Waiter]) {
    let rows: Vec<[String; 7]> = (waiters.iter())
        .map(|w| {
            [
                escape_str(&w.edge.waiter),
                escape_str(&w.edge.client),
                escape_str(&w.edge.lock),
                ago(w.edge.since),
                w.waits_on
                    .iter()
                    .map(|h| escape_str(h))
                    .collect::<Vec<_>>()
                    .join(", "),
                w.holds
                    .iter()
                    .map(|h| escape_str(h))
                    .collect::<Vec<_>>()
                    .join(", "),
                if w.deadlocked { "DEADLOCK" } else { "" }.to_owned(),
            ]
        })
        .collect();
    let header = [
        "WAITER",
        "CLIENT",
        "WAITS FOR",
        "FOR",
        "HELD BY",
        "HOLDS",
        "CYCLE",
    ];
    print_rows(out, header, &rows);
}

/// The waiters of one lock that recorded their wait, a line each.
pub fn print_lock_waiters(out: &mut Out, waiters: &[&Waiter]) {
    for w in waiters {
        let mark = if w.deadlocked { ", in a deadlock" } else { "" };
        out.line(&format!(
            "waits:      {} of {:?} for {}, holding {}{mark}",
            escape_str(&w.edge.waiter),
            escape_str(&w.edge.client),
            ago(w.edge.since),
            w.holds
                .iter()
                .map(|h| escape_str(h))
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
}
