//! A test run ended by a signal to its whole process group (Ctrl-C in a terminal, a CI
//! job's timeout) leaves nothing behind: no redis-server, not even one the run had stopped
//! (SIGSTOP), and no worker process, stopped or not.

use crate::support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use support::{Server, alive, eventually, spawn_worker};

/// Runs on Linux, where `setsid`, `env --default-signal` and `setpriv` come with the
/// system (util-linux, coreutils).
#[test]
#[cfg(target_os = "linux")]
fn a_run_ended_by_a_signal_leaves_no_server_nor_worker_behind() {
    for signal in ["-TERM", "-INT"] {
        // A run in a session of its own, as a CI job starts one: when it ends, nothing
        // continues its stopped processes (as the kernel does for a terminal's).
        // With SIGINT as the run would have it in a terminal, whatever this process has.
        let inner = support::this_binary();
        let mut run = Command::new("setsid")
            .args(["env", "--default-signal=INT"])
            .arg(inner.get_program())
            .args(inner.get_args())
            .args([
                "--exact",
                "cleanup::a_run_left_running",
                "--ignored",
                "--nocapture",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = BufReader::new(run.stdout.take().unwrap()).lines();
        let started = (lines.map_while(Result::ok))
            .find_map(|line| line.strip_prefix("started ").map(str::to_owned))
            .expect("the run says what it started");
        let pids: Vec<u32> = started.split(' ').map(|pid| pid.parse().unwrap()).collect();
        assert!(pids.iter().all(|&pid| alive(pid)), "{signal}: {pids:?}");
        let group = format!("-{}", run.id());
        let status = Command::new("kill")
            .args([signal, "--", &group])
            .status()
            .unwrap();
        assert!(status.success());
        run.wait().unwrap();
        let gone = eventually(Duration::from_secs(30), || {
            !pids.iter().any(|&pid| alive(pid))
        });
        let left: Vec<String> = (pids.iter())
            .filter(|&&pid| alive(pid))
            .map(u32::to_string)
            .collect();
        if !gone {
            // Not left frozen by a failing test either.
            let _ = Command::new("kill").arg("-9").args(&left).status();
        }
        assert!(gone, "{signal} left {left:?} of {pids:?} running");
    }
}

/// Started by the test above: a server and a worker, both stopped, then waits for the
/// signal that ends the run. Prints `started <server pid> <worker pid>`.
#[test]
#[ignore = "run as a child process by the test above"]
fn a_run_left_running() {
    let server = Server::start();
    server.pause();
    let mut worker = spawn_worker("cleanup::a_worker_left_running", &[]);
    // Stopped only once it runs this binary as the worker: `setpriv` sets it to die with
    // this run and then starts it, and a stop before that (or before `setpriv` itself ran,
    // while the process still has this run's command line) would keep that from happening.
    let cmdline = format!("/proc/{}/cmdline", worker.id());
    let started = eventually(Duration::from_secs(30), || {
        let line = std::fs::read(&cmdline).unwrap_or_default();
        let mut args = line.split(|&b| b == 0).map(String::from_utf8_lossy);
        let first = args.next().unwrap_or_default();
        !first.ends_with("setpriv") && args.any(|arg| arg == "cleanup::a_worker_left_running")
    });
    assert!(started, "the worker did not start");
    let stopped = Command::new("kill")
        .args(["-STOP", &worker.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    println!("started {} {}", server.pid(), worker.id());
    // The worker is stopped: this waits until the signal ends the run.
    let _ = worker.wait();
}

/// A worker of the run above: runs until it is killed.
#[test]
#[ignore = "run as a child process by the run above"]
fn a_worker_left_running() {
    loop {
        std::thread::park();
    }
}
