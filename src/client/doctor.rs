//! [`LockClient::doctor`]: whether the servers a client locks on are safe for locks.

use crate::base::error::{Error, Result};
use crate::client::checks::{self, Level, Report};
use crate::client::lock_client::LockClient;

impl LockClient {
    /// Checks the servers this client locks on for settings that break locks, and returns a
    /// finding per check and server; see the crate README ("Operating") for each check.
    /// Reads only. Fails only when the client is used in a forked child.
    ///
    /// ```no_run
    /// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
    /// let report = client.doctor()?;
    /// print!("{report}");
    /// if report.worst() >= redmutex::Level::Warn {
    ///     // page someone
    /// }
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn doctor(&self) -> Result<Report> {
        let shared = self.shared();
        shared.check_process()?;
        let config = shared.config();
        let nodes = shared.nodes().list();
        let redlock = nodes.len() > 1;
        let probe = [&config.key_prefix[..], b"redmutex:probe"].concat();
        let mut report = Report::default();
        let mut offsets = Vec::new();
        for node in nodes {
            for (server, checked) in node.checks(&probe) {
                rights(&mut report, &server, checked);
            }
            let shards = match node.shards() {
                Ok(shards) => shards,
                Err(err) => {
                    report.push("round trip", &node.name, Level::Fail, format!("{err:#}"));
                    continue;
                }
            };
            for shard in shards {
                checks::role(&mut report, &shard, config);
                checks::eviction(&mut report, &shard, config);
                checks::persistence(&mut report, &shard, config, redlock);
                checks::replicas(&mut report, &shard, config);
                checks::version(&mut report, &shard, config);
                checks::idle_timeout(&mut report, &shard, config);
                if let Some(offset) = checks::round_trip(&mut report, &shard, config) {
                    offsets.push((shard.name.clone(), offset));
                }
            }
        }
        if redlock {
            checks::clocks(&mut report, &offsets, config);
        }
        Ok(report)
    }
}

/// The scripting and rights findings for `server` from its check.
fn rights(report: &mut Report, server: &str, checked: Result<()>) {
    match checked {
        Ok(()) => {
            let runs = "runs the lock scripts (EVALSHA, SCRIPT LOAD)";
            report.push("scripting", server, Level::Ok, runs.into());
            report.push(
                "rights",
                server,
                Level::Ok,
                "may run every command and channel the locks need".into(),
            );
        }
        Err(err) if err.is_scripting_disabled() => {
            report.push("scripting", server, Level::Fail, err.detail());
            report.fix(
                "turn scripting on: no rename-command of EVAL, EVALSHA or SCRIPT; on \
                 Valkey 9.1 and later, load its Lua module",
            );
            let unknown = "could not tell: the rights are checked by a script";
            report.push("rights", server, Level::Unknown, unknown.into());
        }
        Err(Error::Permission { denied, .. }) => {
            report.push("rights", server, Level::Fail, denied.join("; "));
            report.fix("grant the rights the README lists for a lock user");
        }
        Err(err) => report.push("rights", server, Level::Fail, format!("{err:#}")),
    }
}
