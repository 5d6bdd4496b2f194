//! The toolchains that run the other lock libraries the peer tests drive: a JDK with Maven
//! for Redisson ([`super::java`]), Python 3 with venv for redis-py, Node.js with npm for
//! node-redlock and Go for redsync ([`super::Peer`]).
//!
//! A test that needs some of them starts with
//! `if skip_without(&[Toolchain::Java]) { return; }`. When one is missing, the test writes
//! one line to stderr saying that it is skipped and what to install, and passes; with
//! `REDMUTEX_REQUIRE_PEERS=1` it fails instead, naming what is missing, so that a run that
//! must cover every test (CI) cannot skip one.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Set to `1`, a missing toolchain fails the tests that need it instead of skipping them.
pub const REQUIRE_VAR: &str = "REDMUTEX_REQUIRE_PEERS";

/// A toolchain that a peer test may need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Toolchain {
    Java,
    Python,
    Node,
    Go,
}

impl Toolchain {
    /// The commands `tests/peers/install` and the drivers run, each with arguments with
    /// which it succeeds when it works.
    fn probes(self) -> &'static [&'static [&'static str]] {
        match self {
            Toolchain::Java => &[
                &["java", "--version"],
                &["javac", "--version"],
                &["mvn", "--version"],
            ],
            // `python3 -m venv` needs both modules; Debian ships them apart from python3.
            Toolchain::Python => &[&["python3", "-c", "import venv, ensurepip"]],
            Toolchain::Node => &[&["node", "--version"], &["npm", "--version"]],
            Toolchain::Go => &[&["go", "version"]],
        }
    }

    /// What to install, for messages.
    pub fn what(self) -> &'static str {
        match self {
            Toolchain::Java => "a JDK 17 or newer with Maven",
            Toolchain::Python => "Python 3 with venv",
            Toolchain::Node => "Node.js with npm",
            Toolchain::Go => "Go 1.21 or newer",
        }
    }

    /// Its Debian packages, for messages.
    pub fn debian(self) -> &'static str {
        match self {
            Toolchain::Java => "default-jdk-headless maven",
            Toolchain::Python => "python3 python3-venv",
            Toolchain::Node => "nodejs npm",
            Toolchain::Go => "golang-go",
        }
    }

    /// Whether every command of the toolchain runs from the `PATH`, found once per test
    /// process.
    pub fn present(self) -> bool {
        static PRESENT: [OnceLock<bool>; 4] = [const { OnceLock::new() }; 4];
        *PRESENT[self as usize].get_or_init(|| {
            self.probes().iter().all(|probe| {
                Command::new(probe[0])
                    .args(&probe[1..])
                    .stdin(Stdio::null())
                    .output()
                    .is_ok_and(|out| out.status.success())
            })
        })
    }
}

/// Whether the calling test must stop because a toolchain of `needed` is missing. If so,
/// writes one line saying so to stderr (past the test harness's capture, so that it shows
/// for a test that passes), naming the test by its thread; with `REDMUTEX_REQUIRE_PEERS=1`,
/// panics instead.
pub fn skip_without(needed: &[Toolchain]) -> bool {
    let missing: Vec<Toolchain> = needed.iter().copied().filter(|t| !t.present()).collect();
    if missing.is_empty() {
        return false;
    }
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a peer test");
    let what: Vec<&str> = missing.iter().map(|t| t.what()).collect();
    let what = match what.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => what.concat(),
    };
    let debian: Vec<&str> = missing.iter().map(|t| t.debian()).collect();
    let debian = debian.join(" ");
    if required() {
        panic!(
            "{test} needs {what} on the PATH, and {REQUIRE_VAR}=1 forbids skipping it \
             (Debian: {debian})"
        );
    }
    let pronoun = if missing.len() == 1 { "it" } else { "them" };
    let _ = writeln!(
        std::io::stderr(),
        "skipped {test}: it needs {what} on the PATH; install {pronoun} to run the test \
         (Debian: {debian})"
    );
    true
}

/// Whether `REDMUTEX_REQUIRE_PEERS` is `1`. A value other than `1`, `0` or empty is
/// refused, so that a misspelt value cannot let a test be skipped.
fn required() -> bool {
    match std::env::var(REQUIRE_VAR).as_deref() {
        Ok("1") => true,
        Ok("0") | Ok("") | Err(std::env::VarError::NotPresent) => false,
        Ok(other) => panic!("{REQUIRE_VAR} is `1` or `0`, not `{other}`"),
        Err(err) => panic!("{REQUIRE_VAR}: {err}"),
    }
}
