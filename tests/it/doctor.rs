//! The diagnostics: eviction policies that can evict a held lock, persistence under Redlock,
//! checks a user without CONFIG rights cannot make, and the warning `build()` logs.

use crate::support;

use std::time::Duration;

use redmutex::{DoctorReport, Finding, FindingLevel, LockClient};
use support::{Server, logs};

/// The warnings the library logged about the server on `port`.
fn warnings_about(port: u16) -> Vec<String> {
    logs::capture();
    logs::messages(log::Level::Warn, &format!(":{port}"))
}

fn finding<'a>(report: &'a DoctorReport, check: &str) -> &'a Finding {
    (report.findings.iter())
        .find(|f| f.check == check)
        .unwrap_or_else(|| panic!("no {check} finding in\n{report}"))
}

fn config_set(server: &Server, name: &str, value: &str) {
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query(&mut server.conn())
        .unwrap();
}

#[test]
fn an_eviction_policy_that_can_evict_a_held_lock_fails_and_is_logged_at_build() {
    warnings_about(0);
    let server = Server::start();
    let report = server.client().doctor().unwrap();
    assert_eq!(
        finding(&report, "eviction").level,
        FindingLevel::Ok,
        "{report}"
    );
    assert!(warnings_about(server.port()).is_empty());

    config_set(&server, "maxmemory-policy", "allkeys-lru");
    let report = server.client().doctor().unwrap();
    let eviction = finding(&report, "eviction");
    assert_eq!(
        eviction.level,
        FindingLevel::Warn,
        "no maxmemory yet: {report}"
    );
    config_set(&server, "maxmemory", "100mb");
    let client = server.client();
    let report = client.doctor().unwrap();
    let eviction = finding(&report, "eviction");
    assert_eq!(eviction.level, FindingLevel::Fail, "{report}");
    assert!(
        eviction.reason.contains("allkeys-lru"),
        "{}",
        eviction.reason
    );
    assert!(eviction.fix.as_deref().unwrap().contains("noeviction"));
    assert_eq!(report.worst(), FindingLevel::Fail);
    let logged = warnings_about(server.port());
    assert_eq!(
        logged.iter().filter(|w| w.contains("allkeys-lru")).count(),
        2,
        "one warning per client built with the policy set: {logged:?}"
    );
}

#[test]
fn every_check_reports_on_a_plain_server() {
    let server = Server::start();
    let report = server.client().doctor().unwrap();
    let checks: Vec<&str> = report.findings.iter().map(|f| f.check).collect();
    for check in [
        "scripting",
        "rights",
        "role",
        "eviction",
        "persistence",
        "replicas",
        "version",
        "idle timeout",
        "round trip",
    ] {
        assert!(checks.contains(&check), "{check} missing from\n{report}");
    }
    // The test servers run without persistence: a restart forgets every lock.
    assert_eq!(finding(&report, "persistence").level, FindingLevel::Warn);
    assert_eq!(finding(&report, "idle timeout").level, FindingLevel::Ok);
    config_set(&server, "timeout", "30");
    let report = server.client().doctor().unwrap();
    assert_eq!(finding(&report, "idle timeout").level, FindingLevel::Warn);
    let text = report.to_string();
    assert_eq!(text.lines().count(), report.findings.len(), "{text}");
}

#[test]
fn a_server_that_stopped_running_scripts_fails_the_scripting_check() {
    let mut server = Server::start();
    let client = server.client();
    let report = client.doctor().unwrap();
    assert_eq!(
        finding(&report, "scripting").level,
        FindingLevel::Ok,
        "{report}"
    );
    // The same port, EVAL and EVALSHA renamed away: as after an upgrade that left Lua out.
    let renamed = [
        "--rename-command",
        "EVAL",
        "",
        "--rename-command",
        "EVALSHA",
        "",
    ];
    server.restart_with(&renamed);
    let report = client.doctor().unwrap();
    let scripting = finding(&report, "scripting");
    assert_eq!(scripting.level, FindingLevel::Fail, "{report}");
    assert!(scripting.reason.contains("runs no scripts"), "{report}");
    assert!(
        scripting.reason.contains("every lock is a Lua script"),
        "{report}"
    );
    let fix = scripting.fix.as_deref().unwrap_or_default();
    assert!(
        fix.contains("rename-command") && fix.contains("Lua module"),
        "{report}"
    );
    // The rights are checked by a script, which cannot run there.
    assert_eq!(
        finding(&report, "rights").level,
        FindingLevel::Unknown,
        "{report}"
    );
    assert_eq!(report.worst(), FindingLevel::Fail);
    // The checks that need no script still report.
    assert_eq!(
        finding(&report, "eviction").level,
        FindingLevel::Ok,
        "{report}"
    );
}

#[test]
fn redlock_without_persistence_fails_and_its_clocks_are_compared() {
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let report = LockClient::redlock(&urls)
        .build()
        .unwrap()
        .doctor()
        .unwrap();
    let persistence: Vec<&Finding> = (report.findings.iter())
        .filter(|f| f.check == "persistence")
        .collect();
    assert_eq!(persistence.len(), 3);
    assert!(
        persistence.iter().all(|f| f.level == FindingLevel::Fail),
        "{report}"
    );
    let clocks: Vec<&Finding> = (report.findings.iter())
        .filter(|f| f.check == "clock")
        .collect();
    assert_eq!(clocks.len(), 3, "{report}");
    // One machine, one clock.
    assert!(
        clocks.iter().all(|f| f.level == FindingLevel::Ok),
        "{report}"
    );
}

#[test]
fn a_user_without_config_rights_gets_unknown_not_a_failure() {
    let server = Server::start();
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("locker")
        .arg("on")
        .arg(">secret")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .arg("-config")
        .query(&mut server.conn())
        .unwrap();
    let url = format!("redis://locker:secret@127.0.0.1:{}/", server.port());
    let report = LockClient::open(&url).unwrap().doctor().unwrap();
    for check in ["eviction", "persistence", "idle timeout", "replicas"] {
        let found = finding(&report, check);
        assert_eq!(found.level, FindingLevel::Unknown, "{check}: {report}");
    }
    assert_eq!(
        finding(&report, "rights").level,
        FindingLevel::Ok,
        "{report}"
    );
    assert_eq!(
        finding(&report, "version").level,
        FindingLevel::Ok,
        "{report}"
    );
}

/// A Redlock node whose clock runs 5 s ahead of the others' (a stub in front of a server
/// that answers TIME itself) is a warning; the others are fine.
#[test]
fn a_redlock_node_with_a_skewed_clock_is_a_warning() {
    let servers = [Server::start(), Server::start(), Server::start()];
    let skewed = support::ClockSkew::start(servers[2].port(), Duration::from_secs(5));
    let urls = [servers[0].url(), servers[1].url(), skewed.url()];
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let report = LockClient::redlock(&urls)
        .build()
        .unwrap()
        .doctor()
        .unwrap();
    let clock = |url: &str| {
        let port = url.trim_end_matches('/').rsplit(':').next().unwrap();
        (report.findings.iter())
            .find(|f| f.check == "clock" && f.server.ends_with(&format!(":{port}")))
            .unwrap_or_else(|| panic!("no clock finding for {url}:\n{report}"))
    };
    assert_eq!(clock(urls[0]).level, FindingLevel::Ok, "{report}");
    assert_eq!(clock(urls[1]).level, FindingLevel::Ok, "{report}");
    let skewed = clock(urls[2]);
    assert_eq!(skewed.level, FindingLevel::Warn, "{report}");
    assert!(
        skewed.reason.starts_with("+4") || skewed.reason.starts_with("+5"),
        "{}",
        skewed.reason
    );
    assert!(report.worst() >= FindingLevel::Warn);
}

/// The tool's doctor against `url` with `args`: its exit code and standard output.
#[cfg(feature = "cli")]
fn doctor_tool(url: &str, args: &[&str]) -> (i32, String) {
    let (code, stdout, _) = crate::cli::tool_with(url, &[&["doctor"], args].concat(), &[]);
    (code, stdout)
}

/// A replica refuses every lock with READONLY: the role check fails there, and passes on
/// its primary.
#[test]
fn a_replica_fails_the_role_check() {
    let primary = Server::start();
    let replica = Server::start_with(support::Args {
        trailing: vec![
            "--replicaof".into(),
            "127.0.0.1".into(),
            primary.port().to_string(),
        ],
        ..support::Args::default()
    });
    let client = replica.client();
    let refused = client.lock("orders:42").try_lock().unwrap_err();
    assert_eq!(refused.server_code(), Some("READONLY"), "{refused}");

    let report = client.doctor().unwrap();
    let role = finding(&report, "role");
    assert_eq!(role.level, FindingLevel::Fail, "{report}");
    assert!(
        role.reason
            .contains("read-only replica: point the client at the primary"),
        "{report}"
    );
    assert!(
        role.reason.contains(&primary.port().to_string()),
        "{report}"
    );
    let report = primary.client().doctor().unwrap();
    assert_eq!(finding(&report, "role").level, FindingLevel::Ok, "{report}");

    #[cfg(feature = "cli")]
    {
        let (code, said) = doctor_tool(&replica.url(), &[]);
        assert_eq!(code, 1, "{said}");
        assert!(said.contains("fail    role"), "{said}");
    }
}

/// A user who may run neither EVALSHA nor SCRIPT gets no client, and still a full report:
/// rights and persistence among the findings, and a failed `client` finding saying why no
/// client builds. The tool prints it, as JSON too, and exits 1.
#[test]
fn a_client_that_cannot_build_still_gets_a_full_report() {
    let server = Server::start();
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("noscript")
        .arg(&["on", ">secret", "~*", "&*", "+@all", "-evalsha", "-script"][..])
        .query(&mut server.conn())
        .unwrap();
    let url = format!("redis://noscript:secret@127.0.0.1:{}/", server.port());
    let refused = LockClient::builder(&url).build().unwrap_err();
    assert!(refused.is_permission(), "{refused}");

    let report = LockClient::builder(&url).doctor();
    assert_eq!(
        finding(&report, "rights").level,
        FindingLevel::Fail,
        "{report}"
    );
    assert_eq!(
        finding(&report, "persistence").level,
        FindingLevel::Warn,
        "{report}"
    );
    let client = finding(&report, "client");
    assert_eq!(client.level, FindingLevel::Fail, "{report}");
    assert!(client.reason.contains("evalsha"), "{report}");
    // A client that builds has no such finding.
    let report = LockClient::builder(&server.url()).doctor();
    assert_eq!(report.worst(), FindingLevel::Warn, "{report}");
    assert!(
        report.findings.iter().all(|f| f.check != "client"),
        "{report}"
    );

    #[cfg(feature = "cli")]
    {
        let (code, said) = doctor_tool(&url, &[]);
        assert_eq!(code, 1, "{said}");
        for line in ["fail    rights", "warn    persistence", "fail    client"] {
            assert!(said.contains(line), "{line} missing from\n{said}");
        }
        let (code, said) = doctor_tool(&url, &["--json"]);
        assert_eq!(code, 1, "{said}");
        let report: serde_json::Value = serde_json::from_str(&said).unwrap();
        assert_eq!(report["worst"], "fail", "{report}");
        let checks: Vec<&str> = (report["findings"].as_array().unwrap().iter())
            .map(|f| f["check"].as_str().unwrap())
            .collect();
        for check in ["rights", "persistence", "eviction", "client"] {
            assert!(checks.contains(&check), "{check} missing from {report}");
        }
    }
}

/// `--strict` fails on a check whose answer is unknown, as on a warning: a user without
/// CONFIG rights leaves the checks that read settings unknown, and nothing worse.
#[cfg(feature = "cli")]
#[test]
fn strict_fails_on_unknown_too() {
    let server = Server::start();
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("locker")
        .arg(&["on", ">secret", "~*", "&*", "+@all", "-config"][..])
        .query(&mut server.conn())
        .unwrap();
    let url = format!("redis://locker:secret@127.0.0.1:{}/", server.port());
    let (code, said) = doctor_tool(&url, &["--json"]);
    assert_eq!(code, 0, "{said}");
    let report: serde_json::Value = serde_json::from_str(&said).unwrap();
    assert_eq!(report["worst"], "unknown", "{report}");
    let (code, said) = doctor_tool(&url, &["--strict"]);
    assert_eq!(code, 1, "{said}");
}
