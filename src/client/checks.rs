//! The checks of [`LockClient::doctor`](crate::LockClient::doctor), each on one server, and
//! the [`DoctorReport`] they make. Every check only reads; where a managed service denies `CONFIG`
//! or `INFO`, the finding says "unknown" instead of failing.

use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::base::config::Config;
use crate::base::error::{Error, Result};
use crate::topology::quorum::validity_end;
use crate::transport::shard::Shard;

/// How a finding rates, from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum FindingLevel {
    /// Safe for locks.
    Ok,
    /// The server would not tell (a right or command denied).
    Unknown,
    /// Locks work, with a risk the reason names.
    Warn,
    /// Locks can be lost or granted twice, or cannot work.
    Fail,
}

/// One check on one server.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Finding {
    /// What was checked: `scripting`, `rights`, `role`, `eviction`, `persistence`,
    /// `replicas`, `version`, `round trip`, `clock` or `idle timeout`; or `client`, from
    /// [`LockClientBuilder::doctor`](crate::LockClientBuilder::doctor), when no client
    /// could be built.
    pub check: &'static str,
    /// The server, as `host:port` (or a Sentinel master name, a cluster's `cluster@..`).
    pub server: String,
    /// How it rates.
    pub level: FindingLevel,
    /// What was found, and why it matters.
    pub reason: String,
    /// What to change, when something should be.
    pub fix: Option<String>,
}

/// The findings of [`LockClient::doctor`](crate::LockClient::doctor), server by server.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct DoctorReport {
    /// Every finding, in the order the checks ran.
    pub findings: Vec<Finding>,
}

impl DoctorReport {
    /// The worst level found; `Ok` for an empty report.
    pub fn worst(&self) -> FindingLevel {
        (self.findings.iter().map(|f| f.level).max()).unwrap_or(FindingLevel::Ok)
    }

    pub(crate) fn push(
        &mut self,
        check: &'static str,
        server: &str,
        level: FindingLevel,
        reason: String,
    ) {
        self.findings.push(Finding {
            check,
            server: server.to_owned(),
            level,
            reason,
            fix: None,
        });
    }

    pub(crate) fn fix(&mut self, fix: &str) {
        if let Some(last) = self.findings.last_mut() {
            last.fix = Some(fix.to_owned());
        }
    }
}

impl fmt::Display for FindingLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FindingLevel::Ok => "ok",
            FindingLevel::Unknown => "unknown",
            FindingLevel::Warn => "warn",
            FindingLevel::Fail => "fail",
        })
    }
}

impl fmt::Display for Finding {
    /// One line, without its end: level, check, server, reason, and the fix after it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<8}{:<14}{:<24}{}",
            self.level.to_string(),
            self.check,
            self.server,
            self.reason
        )?;
        if let Some(fix) = &self.fix {
            write!(f, "; fix: {fix}")?;
        }
        Ok(())
    }
}

impl fmt::Display for DoctorReport {
    /// One line per finding.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for finding in &self.findings {
            writeln!(f, "{finding}")?;
        }
        Ok(())
    }
}

/// Logs, once per client at build, an eviction policy that can evict a held lock.
pub(crate) fn warn_about_eviction(shards: &[std::sync::Arc<Shard>], config: &Config) {
    let mut report = DoctorReport::default();
    for shard in shards {
        eviction(&mut report, shard, config);
    }
    for finding in report
        .findings
        .iter()
        .filter(|f| f.level >= FindingLevel::Warn)
    {
        log::warn!(
            "{}: {}; {}",
            finding.server,
            finding.reason,
            finding.fix.as_deref().unwrap_or("")
        );
    }
}

fn deadline(config: &Config) -> Instant {
    Instant::now() + config.connect_timeout + config.response_timeout
}

/// `CONFIG GET name`: its value, `None` when the server has no such setting.
fn config_get(shard: &Shard, name: &str, config: &Config) -> Result<Option<String>> {
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET").arg(name);
    let pairs: Vec<String> = shard.run(&cmd, deadline(config))?;
    Ok(pairs.into_iter().nth(1))
}

/// A field of `INFO section`.
fn info(shard: &Shard, section: &str, field: &str, config: &Config) -> Result<Option<String>> {
    let mut cmd = redis::cmd("INFO");
    cmd.arg(section);
    let text: String = shard.run(&cmd, deadline(config))?;
    let prefix = format!("{field}:");
    Ok(text
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map(|value| value.trim().to_owned()))
}

/// Records that `check` could not be made: unknown when the server refused the command
/// (rights, a managed service), failed when it could not be reached.
fn could_not(report: &mut DoctorReport, check: &'static str, shard: &Shard, err: &Error) {
    let refused = err.server_code().is_some();
    let level = if refused {
        FindingLevel::Unknown
    } else {
        FindingLevel::Fail
    };
    report.push(
        check,
        &shard.name,
        level,
        format!("could not tell: {err:#}"),
    );
}

/// Whether the server is a primary: a replica refuses every lock with `READONLY` (or, made
/// writable, keeps locks that its primary and the other clients never see).
pub(crate) fn role(report: &mut DoctorReport, shard: &Shard, config: &Config) {
    let reply: Vec<redis::Value> = match shard.run(&redis::cmd("ROLE"), deadline(config)) {
        Ok(reply) => reply,
        Err(err) => return could_not(report, "role", shard, &err),
    };
    let word = |i: usize| match reply.get(i) {
        Some(redis::Value::BulkString(bytes)) => String::from_utf8_lossy(bytes).into_owned(),
        Some(redis::Value::SimpleString(text)) => text.clone(),
        Some(redis::Value::Int(n)) => n.to_string(),
        _ => String::new(),
    };
    let (level, reason, fix) = match word(0).as_str() {
        "master" => (FindingLevel::Ok, "primary".to_owned(), None),
        "slave" | "replica" => {
            let writable = matches!(
                config_get(shard, "replica-read-only", config),
                Ok(Some(read_only)) if read_only == "no"
            );
            let (what, why) = match writable {
                false => ("read-only", "every lock call here fails with READONLY"),
                true => (
                    "writable",
                    "locks taken here are not seen by the primary nor by clients of it, and are lost when it resyncs",
                ),
            };
            let reason = format!(
                "{what} replica: point the client at the primary (this one replicates {}:{}): {why}",
                word(1),
                word(2)
            );
            let fix = "with Sentinel or Cluster, the client finds the primary itself";
            (FindingLevel::Fail, reason, Some(fix))
        }
        other => (
            FindingLevel::Fail,
            format!("a {other}, not a server that keeps locks"),
            Some(
                "the URL of a Redis primary (with Sentinel, the sentinels' URLs and the master name)",
            ),
        ),
    };
    report.push("role", &shard.name, level, reason);
    if let Some(fix) = fix {
        report.fix(fix);
    }
}

pub(crate) fn eviction(report: &mut DoctorReport, shard: &Shard, config: &Config) {
    let read = config_get(shard, "maxmemory-policy", config).and_then(|policy| {
        let policy = policy.unwrap_or_default();
        if policy == "noeviction" {
            return Ok((policy, 0));
        }
        let max: u64 = (config_get(shard, "maxmemory", config)?)
            .and_then(|max| max.parse().ok())
            .unwrap_or(0);
        Ok((policy, max))
    });
    let (policy, max) = match read {
        Ok(read) => read,
        Err(err) => return could_not(report, "eviction", shard, &err),
    };
    let (level, reason) = match (policy.as_str(), max) {
        ("noeviction", _) => (FindingLevel::Ok, "maxmemory-policy noeviction".to_owned()),
        (_, 0) => (
            FindingLevel::Warn,
            format!("maxmemory-policy {policy} would evict held locks once a maxmemory is set"),
        ),
        _ => (
            FindingLevel::Fail,
            format!(
                "maxmemory-policy {policy} with maxmemory {max}: a full Redis evicts held locks"
            ),
        ),
    };
    report.push("eviction", &shard.name, level, reason);
    if level != FindingLevel::Ok {
        report
            .fix("CONFIG SET maxmemory-policy noeviction (or keep locks on a Redis of their own)");
    }
}

pub(crate) fn persistence(
    report: &mut DoctorReport,
    shard: &Shard,
    config: &Config,
    redlock: bool,
) {
    let read = config_get(shard, "appendonly", config)
        .and_then(|aof| Ok((aof, config_get(shard, "appendfsync", config)?)));
    let (aof, fsync) = match read {
        Ok((aof, fsync)) => (aof.unwrap_or_default(), fsync.unwrap_or_default()),
        Err(err) => return could_not(report, "persistence", shard, &err),
    };
    let (level, reason, fix) = match (aof.as_str(), fsync.as_str(), redlock) {
        ("yes", "always", _) => (FindingLevel::Ok, "appendonly yes, appendfsync always", None),
        ("yes", _, false) => (FindingLevel::Ok, "appendonly yes", None),
        ("yes", _, true) => (
            FindingLevel::Warn,
            "appendfsync is not always: a crash may forget locks granted in the last second, and Redlock's safety needs every grant on disk",
            Some(
                "CONFIG SET appendfsync always, or restart a crashed node only after the longest lease",
            ),
        ),
        (_, _, true) => (
            FindingLevel::Fail,
            "appendonly no: a restarted node forgets its locks, and Redlock may then grant a lock twice",
            Some(
                "CONFIG SET appendonly yes and appendfsync always, or restart a crashed node only after the longest lease",
            ),
        ),
        _ => (
            FindingLevel::Warn,
            "appendonly no: a restart forgets every lock while their holders go on",
            Some("CONFIG SET appendonly yes, or restart only after the longest lease"),
        ),
    };
    report.push("persistence", &shard.name, level, reason.to_owned());
    if let Some(fix) = fix {
        report.fix(fix);
    }
}

pub(crate) fn replicas(report: &mut DoctorReport, shard: &Shard, config: &Config) {
    let read = info(shard, "replication", "connected_slaves", config).and_then(|replicas| {
        let min: u32 = (config_get(shard, "min-replicas-to-write", config)?)
            .and_then(|min| min.parse().ok())
            .unwrap_or(0);
        Ok((replicas.and_then(|n| n.parse().ok()).unwrap_or(0u32), min))
    });
    let (replicas, min) = match read {
        Ok(read) => read,
        Err(err) => return could_not(report, "replicas", shard, &err),
    };
    let acks = config.replica_acks.map_or(0, |acks| acks.replicas);
    if replicas == 0 || min > 0 || acks > 0 {
        let reason = format!(
            "{replicas} replicas; min-replicas-to-write {min}; the client waits for {acks}"
        );
        return report.push("replicas", &shard.name, FindingLevel::Ok, reason);
    }
    report.push(
        "replicas",
        &shard.name,
        FindingLevel::Warn,
        format!("{replicas} replicas, none required to have a lock before it is granted: a failover may promote one that never saw it"),
    );
    report.fix("the client's min_replica_acks(1, ..), or CONFIG SET min-replicas-to-write 1");
}

pub(crate) fn version(report: &mut DoctorReport, shard: &Shard, config: &Config) {
    let version = match info(shard, "server", "redis_version", config) {
        Ok(version) => version.unwrap_or_default(),
        Err(err) => return could_not(report, "version", shard, &err),
    };
    let major: u32 = (version.split('.').next())
        .and_then(|major| major.parse().ok())
        .unwrap_or(0);
    let (level, reason) = match major {
        0..=5 => (
            FindingLevel::Fail,
            format!("Redis {version}: unlock notifications need RESP3 (Redis 6)"),
        ),
        6 => (
            FindingLevel::Warn,
            format!(
                "Redis {version}: no sharded pub/sub on a cluster, and rights are only found missing when a lock first needs them"
            ),
        ),
        _ => (FindingLevel::Ok, format!("Redis {version}")),
    };
    report.push("version", &shard.name, level, reason);
    if level != FindingLevel::Ok {
        report.fix("upgrade to Redis 7");
    }
}

pub(crate) fn idle_timeout(report: &mut DoctorReport, shard: &Shard, config: &Config) {
    let seconds: u64 = match config_get(shard, "timeout", config) {
        Ok(timeout) => timeout.and_then(|t| t.parse().ok()).unwrap_or(0),
        Err(err) => return could_not(report, "idle timeout", shard, &err),
    };
    let idle = Duration::from_secs(seconds);
    let (level, reason) = if seconds == 0 {
        (FindingLevel::Ok, "idle clients are never closed".to_owned())
    } else if idle <= config.ping_interval {
        (
            FindingLevel::Fail,
            format!(
                "idle clients are closed after {seconds} s, within the subscriber's ping interval: waiters lose their notifications"
            ),
        )
    } else {
        (
            FindingLevel::Warn,
            format!(
                "idle clients are closed after {seconds} s: pooled connections are opened again after a quiet spell"
            ),
        )
    };
    report.push("idle timeout", &shard.name, level, reason);
    if level != FindingLevel::Ok {
        report.fix("CONFIG SET timeout 0");
    }
}

/// Times five `TIME` calls, records the median round trip, and returns the server clock's
/// offset from this machine's, taken at the middle of the fastest call.
pub(crate) fn round_trip(report: &mut DoctorReport, shard: &Shard, config: &Config) -> Option<f64> {
    let time = redis::cmd("TIME");
    let mut samples = Vec::new();
    for _ in 0..5 {
        let (sent, wall) = (Instant::now(), SystemTime::now());
        match shard.run::<(u64, u64)>(&time, deadline(config)) {
            Ok((secs, micros)) => {
                let took = sent.elapsed();
                let middle = wall + took / 2;
                let here = middle.duration_since(UNIX_EPOCH).ok()?.as_secs_f64();
                samples.push((took, secs as f64 + micros as f64 / 1e6 - here));
            }
            Err(err) => {
                could_not(report, "round trip", shard, &err);
                return None;
            }
        }
    }
    samples.sort_by_key(|&(took, _)| took);
    let median = samples[samples.len() / 2].0;
    let level = if median * 4 > config.response_timeout {
        FindingLevel::Warn
    } else {
        FindingLevel::Ok
    };
    let reason = format!(
        "{} µs (TIME, median of 5); response timeout {:?}",
        median.as_micros(),
        config.response_timeout
    );
    report.push("round trip", &shard.name, level, reason);
    if level != FindingLevel::Ok {
        report.fix("a response_timeout well above the round trip, or a nearer Redis");
    }
    Some(samples[0].1)
}

/// Redlock: each node's clock against the median of them all. Expiry runs on each node's
/// own clock; a node whose clock is off by more than the drift Redlock allows for is one
/// that stepped or runs at another rate, and may expire a lock early.
pub(crate) fn clocks(report: &mut DoctorReport, offsets: &[(String, f64)], config: &Config) {
    for (server, level, reason) in clock_findings(offsets, allowance(config.lease)) {
        report.push("clock", &server, level, reason);
        if level != FindingLevel::Ok {
            report.fix("run NTP (slewing, not stepping) on every Redlock node");
        }
    }
}

/// The drift Redlock allows for on a lease: what `validity_end` takes off it.
fn allowance(lease: Duration) -> f64 {
    let start = Instant::now();
    let valid = validity_end(start, lease).map_or(Duration::ZERO, |end| end - start);
    lease.saturating_sub(valid).as_secs_f64()
}

/// Per server, its clock's offset from the median of all, rated against `allowance`
/// seconds.
fn clock_findings(
    offsets: &[(String, f64)],
    allowance: f64,
) -> Vec<(String, FindingLevel, String)> {
    let mut sorted: Vec<f64> = offsets.iter().map(|&(_, offset)| offset).collect();
    sorted.sort_by(f64::total_cmp);
    let Some(&median) = sorted.get(sorted.len() / 2) else {
        return Vec::new();
    };
    offsets
        .iter()
        .map(|(server, offset)| {
            let off = offset - median;
            let level = if off.abs() > allowance {
                FindingLevel::Warn
            } else {
                FindingLevel::Ok
            };
            let reason = format!(
                "{:+.1} ms from the other nodes' median (allowed drift {:.1} ms)",
                off * 1e3,
                allowance * 1e3
            );
            (server.clone(), level, reason)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_whose_clock_is_off_by_more_than_the_drift_is_a_warning() {
        let offsets = [
            ("a".to_owned(), 0.010),
            ("b".to_owned(), 0.012),
            ("c".to_owned(), 5.0),
        ];
        let findings = clock_findings(&offsets, 0.302);
        let levels: Vec<FindingLevel> = findings.iter().map(|f| f.1).collect();
        assert_eq!(
            levels,
            [FindingLevel::Ok, FindingLevel::Ok, FindingLevel::Warn]
        );
        assert!(findings[2].2.contains("+4988.0 ms"), "{}", findings[2].2);
        assert!(clock_findings(&[], 0.3).is_empty());
    }

    #[test]
    fn the_allowance_is_redlock_s_drift() {
        let allowed = allowance(Duration::from_secs(30));
        assert!((0.30..0.31).contains(&allowed), "{allowed}");
    }

    #[test]
    fn levels_order_from_best_to_worst() {
        assert!(
            FindingLevel::Ok < FindingLevel::Unknown && FindingLevel::Unknown < FindingLevel::Warn
        );
        assert!(FindingLevel::Warn < FindingLevel::Fail);
        assert_eq!(DoctorReport::default().worst(), FindingLevel::Ok);
    }
}
