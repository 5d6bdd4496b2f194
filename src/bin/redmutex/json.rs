//! The tool's `--json` output. Strings are exact: a name or key that is UTF-8 is given as
//! it is (JSON escapes its control characters); one that is not is given in the escaped
//! form the text output prints (`escape`), with its bytes beside it in hex, two digits a
//! byte, under the same field name followed by `_hex` (`name_hex`, `keys_hex`,
//! `removed_hex`).
//! Characters a terminal would act on are written as `\u` escapes, which JSON reads as the
//! same characters.

use std::fmt::Write;
use std::time::UNIX_EPOCH;

use redmutex::{Candidate, DoctorReport, Holder, LockInfo, LockKind, Waiter};
use serde_json::{Map, Value, json};

use crate::escape::{escape, json_escapes};
use crate::out::Out;
use crate::text::kind_word;

/// Sets `field` to `bytes` as text: exact when UTF-8, else escaped, with `<field>_hex`
/// the bytes.
fn put_bytes(object: &mut Map<String, Value>, field: &str, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(text) => drop(object.insert(field.into(), text.into())),
        Err(_) => {
            object.insert(field.into(), escape(bytes).into());
            object.insert(format!("{field}_hex"), hex(bytes).into());
        }
    }
}

/// Sets `field` to a list of byte strings as text, as [`put_bytes`] does; when any is
/// not UTF-8, `<field>_hex` holds the bytes of each.
fn put_list(object: &mut Map<String, Value>, field: &str, items: &[Vec<u8>]) {
    let texts: Vec<Value> = (items.iter())
        .map(|item| match std::str::from_utf8(item) {
            Ok(text) => text.into(),
            Err(_) => escape(item).into(),
        })
        .collect();
    object.insert(field.into(), texts.into());
    if items.iter().any(|item| std::str::from_utf8(item).is_err()) {
        let hexes: Vec<Value> = items.iter().map(|item| hex(item).into()).collect();
        object.insert(format!("{field}_hex"), hexes.into());
    }
}

/// `bytes` in hex, two lowercase digits a byte.
fn hex(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(text, "{byte:02x}");
    }
    text
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

/// The holders of a lock.
pub fn holders_json(holders: &[Holder]) -> Value {
    holders.iter().map(holder_json).collect()
}

/// Everything known about one lock. `kind` is the kind's word only; what a key that is no
/// lock holds is in `contents`, and why one could not be read in `error`; an election's
/// candidates are in `candidates` when they were read.
pub fn lock_json(info: &LockInfo) -> Value {
    let mut value = json!({
        "kind": kind_word(&info.kind),
        "holders": holders_json(&info.holders),
        "lease_left_ms": info.lease_left.map(|d| d.as_millis() as u64),
        "waiters": info.waiters,
        "queue": info.queue,
        "fence": info.fence,
        "epoch": info.epoch,
        "available": info.available,
        "count": info.count,
        "server": info.server,
        "doubt": info.doubt,
    });
    if let Value::Object(object) = &mut value {
        put_bytes(object, "name", &info.name_bytes);
        put_list(object, "keys", &info.keys_bytes);
        match &info.kind {
            LockKind::NotALock(what) => {
                drop(object.insert("contents".into(), what.as_str().into()))
            }
            LockKind::Unreadable(why) => drop(object.insert("error".into(), why.as_str().into())),
            _ => {}
        }
        if let Some(candidates) = &info.candidates {
            object.insert("candidates".into(), candidates_json(candidates));
        }
    }
    value
}

/// An election's candidates: id, client name, whether it leads, and since when (Unix
/// milliseconds by the server's clock, `null` when not known).
fn candidates_json(candidates: &[Candidate]) -> Value {
    (candidates.iter())
        .map(|c| {
            let since = (c.since())
                .and_then(|since| since.duration_since(UNIX_EPOCH).ok())
                .map(|since| since.as_millis() as u64);
            json!({"id": c.id(), "name": c.name(), "leader": c.is_leader(), "since_ms": since})
        })
        .collect()
}

/// What `unlock` did: the name, the key removed (`null` when it was released meanwhile),
/// and who held it.
pub fn unlocked_json(name: &[u8], removed: Option<&[u8]>, holders: &[Holder]) -> Value {
    let mut object = Map::new();
    put_bytes(&mut object, "name", name);
    match removed {
        Some(key) => put_bytes(&mut object, "removed", key),
        None => drop(object.insert("removed".into(), Value::Null)),
    }
    object.insert("holders".into(), holders_json(holders));
    object.into()
}

/// The wait-for graph: each waiter, what it waits for since when (Unix milliseconds by
/// its clock), who holds that, what it holds, and whether it is in a cycle.
pub fn waits_json(waiters: &[Waiter]) -> Value {
    (waiters.iter())
        .map(|w| {
            let since = (w.edge.since.duration_since(UNIX_EPOCH).ok())
                .map(|since| since.as_millis() as u64);
            json!({
                "waiter": w.edge.waiter,
                "client": w.edge.client,
                "waits_for": w.edge.lock,
                "kind": w.edge.kind,
                "since_ms": since,
                "held_by": w.waits_on,
                "holds": w.holds,
                "deadlocked": w.deadlocked,
            })
        })
        .collect()
}

/// The doctor's report: the worst level, and every finding.
pub fn report_json(report: &DoctorReport) -> Value {
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

/// Writes `value`, pretty-printed, with nothing a terminal acts on.
pub fn print_json(out: &mut Out, value: &Value) {
    out.line(&terminal_safe(&format!("{value:#}")));
}

/// JSON text with every character a terminal acts on as a `\u` escape: such characters
/// can only be inside strings, where the escape reads as the character itself.
fn terminal_safe(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if json_escapes(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_is_not_utf8_is_escaped_with_its_bytes_beside_it() {
        let mut object = Map::new();
        put_bytes(&mut object, "name", b"caf\xff");
        put_bytes(&mut object, "plain", "café\x1b".as_bytes());
        assert_eq!(
            Value::from(object),
            json!({ "name": r"caf\xff", "name_hex": "636166ff", "plain": "café\x1b" })
        );
    }

    #[test]
    fn json_text_is_terminal_safe_and_reads_back_the_same() {
        let value = json!({ "name": "a\u{1b}b\u{7f}c\u{9b}d\u{202e}e\\f\n" });
        let text = terminal_safe(&format!("{value:#}"));
        assert!(!text.chars().any(json_escapes), "{text}");
        assert!(
            text.contains(r"\u007f") && text.contains(r"\u009b"),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
    }
}
