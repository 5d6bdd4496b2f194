//! [`LockClient::doctor`]: whether the servers a client locks on are safe for locks, and
//! [`LockClientBuilder::doctor`]: the same for a client that may not build.

use crate::base::error::{Error, Result};
use crate::client::builder::LockClientBuilder;
use crate::client::checks::{self, DoctorReport, FindingLevel};
use crate::client::lock_client::LockClient;

impl LockClient {
    /// Checks the servers this client locks on for settings that break locks, and returns a
    /// finding per check and server; see "Is this Redis safe for locks?" in the crate's
    /// `docs/operating.md` for each check.
    /// Reads only. Fails only when the client is used in a forked child.
    ///
    /// ```no_run
    /// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
    /// let report = client.doctor()?;
    /// print!("{report}");
    /// if report.worst() >= redmutex::FindingLevel::Warn {
    ///     // page someone
    /// }
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn doctor(&self) -> Result<DoctorReport> {
        self.shared().check_process()?;
        Ok(self.examine().0)
    }

    /// Every finding, and each node's check of its scripting and rights as `build()` makes
    /// it (its first failure), in the order of the nodes.
    fn examine(&self) -> (DoctorReport, Vec<Result<()>>) {
        let shared = self.shared();
        let config = shared.config();
        let nodes = shared.nodes().list();
        let redlock = nodes.len() > 1;
        let probe = [&config.key_prefix[..], b"redmutex:probe"].concat();
        let mut report = DoctorReport::default();
        let mut offsets = Vec::new();
        let mut node_checks = Vec::new();
        for node in nodes {
            let mut node_checked = Ok(());
            for (server, checked) in node.checks(&probe) {
                rights(&mut report, &server, &checked);
                if node_checked.is_ok() {
                    node_checked = checked;
                }
            }
            // A node that could not be reached, or refused the credentials, would only fail
            // every other check the same way, each after waiting as long.
            let unreachable =
                (node_checked.as_ref()).is_err_and(|err| err.is_connection() || err.is_auth());
            node_checks.push(node_checked);
            if unreachable {
                continue;
            }
            let shards = match node.shards() {
                Ok(shards) => shards,
                Err(err) => {
                    report.push(
                        "round trip",
                        &node.name,
                        FindingLevel::Fail,
                        format!("{err:#}"),
                    );
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
        (report, node_checks)
    }
}

impl LockClientBuilder {
    /// Checks the servers as [`LockClient::doctor`] does, with no need for a client that
    /// builds: where [`build`](Self::build) would fail (the user lacks rights, a server runs
    /// no scripts, too few servers answer, a setting is invalid), the report has a failed
    /// `client` finding saying why, beside every other finding. Reads only.
    ///
    /// ```no_run
    /// let report = redmutex::LockClient::builder("redis://127.0.0.1:6379/").doctor();
    /// print!("{report}");
    /// ```
    pub fn doctor(self) -> DoctorReport {
        let urls = self.urls_text();
        let client = self
            .settled()
            .and_then(|(urls, config)| LockClient::unchecked(&urls, config));
        let client = match client {
            Ok(client) => client,
            Err(err) => {
                let mut report = DoctorReport::default();
                cannot_build(&mut report, &urls, &err);
                return report;
            }
        };
        let (mut report, checked) = client.examine();
        if let Err(err) = client.admit(checked) {
            let names: Vec<&str> = (client.shared().nodes().list().iter())
                .map(|node| node.name.as_str())
                .collect();
            cannot_build(&mut report, &names.join(","), &err);
        }
        report
    }
}

/// The failed `client` finding of a client that cannot build, for `err`.
fn cannot_build(report: &mut DoctorReport, server: &str, err: &Error) {
    let reason = format!("no client can lock here: {err:#}");
    report.push("client", server, FindingLevel::Fail, reason);
}

/// The scripting and rights findings for `server` from its check.
fn rights(report: &mut DoctorReport, server: &str, checked: &Result<()>) {
    match checked {
        Ok(()) => {
            let runs = "runs the lock scripts (EVALSHA, SCRIPT LOAD)";
            report.push("scripting", server, FindingLevel::Ok, runs.into());
            report.push(
                "rights",
                server,
                FindingLevel::Ok,
                "may run every command and channel the locks need".into(),
            );
        }
        Err(err) if err.is_scripting_disabled() => {
            report.push("scripting", server, FindingLevel::Fail, err.detail());
            report.fix(
                "turn scripting on: no rename-command of EVAL, EVALSHA or SCRIPT; on \
                 Valkey 9.1 and later, load its Lua module",
            );
            let unknown = "could not tell: the rights are checked by a script";
            report.push("rights", server, FindingLevel::Unknown, unknown.into());
        }
        Err(Error::Permission { denied, .. }) => {
            report.push("rights", server, FindingLevel::Fail, denied.join("; "));
            report.fix("grant the rights redmutex's docs/deploying.md lists for a lock user");
        }
        Err(err) if err.is_auth() => {
            report.push("rights", server, FindingLevel::Fail, format!("{err:#}"));
            report.fix("the user and password in the URL: redis://USER:PASSWORD@HOST:PORT/");
        }
        Err(err) => report.push("rights", server, FindingLevel::Fail, format!("{err:#}")),
    }
}
