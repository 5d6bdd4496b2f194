//! Leader election: three candidates in one process, each with a client of its own. The
//! leader's client is dropped (its leadership with it), the next candidate takes over with
//! a higher epoch, and an observer prints every hand-over; a store that checks epochs
//! refuses a write from a leader that has been replaced.
//!
//! Uses the Redis at `REDIS_URL` when set; otherwise starts a throwaway `redis-server`.

use std::sync::mpsc;
use std::time::Duration;

use redmutex::{Change, LockClient};

const ELECTION: &str = "leader-demo";

/// What the leaders write to: it remembers the highest epoch it has seen and refuses
/// writes with a lower one.
#[derive(Default)]
struct Store {
    highest: u64,
}

impl Store {
    fn write(&mut self, epoch: u64, what: &str) -> Result<(), String> {
        if epoch < self.highest {
            return Err(format!("epoch {epoch} is older than {}", self.highest));
        }
        self.highest = epoch;
        println!("  store: wrote {what:?} at epoch {epoch}");
        Ok(())
    }
}

fn main() -> redmutex::Result<()> {
    let (url, _throwaway) = redis_url();
    let watcher = LockClient::builder(&url).client_name("watcher").build()?;
    let mut observer = watcher.election(ELECTION).observe();
    print_change(observer.recv()?);

    // Each candidate campaigns on a thread of its own, says when it leads, and drops its
    // client (and with it its leadership) when told to step down.
    let (leads, led) = mpsc::channel();
    let mut step_down = Vec::new();
    let mut candidates = Vec::new();
    for n in 1..=3 {
        let client = LockClient::builder(&url)
            .client_name(&format!("node-{n}"))
            .build()?;
        let (tell, told) = mpsc::channel::<()>();
        step_down.push(tell);
        let leads = leads.clone();
        candidates.push(std::thread::spawn(move || -> redmutex::Result<()> {
            let leadership = client.election(ELECTION).campaign()?;
            let _ = leads.send((n, leadership.epoch()));
            let _ = told.recv();
            println!("dropping node-{n}'s client");
            drop(leadership);
            drop(client);
            Ok(())
        }));
    }

    let mut store = Store::default();
    let mut first = None;
    for _ in 0..3 {
        let (n, epoch) = led.recv().expect("a candidate leads");
        println!("node-{n} leads with epoch {epoch}");
        let _ = store.write(epoch, &format!("node-{n}'s report"));
        first.get_or_insert(epoch);
        // The observer hears the election (and, before it, the previous resignation).
        loop {
            let change = observer.recv()?;
            let elected = matches!(&change, Change::Elected(l) if l.epoch() == epoch);
            print_change(change);
            if elected {
                break;
            }
        }
        let _ = step_down[n - 1].send(());
    }
    for candidate in candidates {
        candidate.join().expect("no panic")?;
    }
    while let Some(change) = observer.recv_timeout(Duration::from_secs(5))? {
        let vacant = change == Change::Vacant;
        print_change(change);
        if vacant {
            break;
        }
    }

    // The first leader, paused all along, comes back and writes with its old epoch.
    let stale = first.unwrap_or_default();
    match store.write(stale, "a replaced leader's report") {
        Ok(()) => println!("a replaced leader overwrote newer work: this must not happen"),
        Err(why) => println!("store refused the replaced leader: {why}"),
    }
    Ok(())
}

fn print_change(change: Change) {
    match change {
        Change::Elected(leader) => println!(
            "  observer: {} elected, epoch {}",
            leader.name(),
            leader.epoch()
        ),
        Change::Vacant => println!("  observer: nobody leads"),
        other => println!("  observer: {other:?}"),
    }
}

/// Your Redis at `REDIS_URL`, or else a throwaway `redis-server` on a free port of this
/// machine, which ends with the returned handle or with this process. (Each example stands
/// alone, so that it can be copied as it is.)
fn redis_url() -> (String, Option<Throwaway>) {
    if let Ok(url) = std::env::var("REDIS_URL") {
        return (url, None);
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    // The shell kills the server once this process closes its stdin, even if it crashes.
    let script =
        "redis-server --port \"$0\" --save '' --appendonly no >/dev/null & read _; kill $!; wait";
    let child = std::process::Command::new("sh")
        .args(["-c", script, &port.to_string()])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("sh and redis-server on the PATH, or REDIS_URL set");
    let server = Throwaway(child);
    for _ in 0..500 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return (format!("redis://127.0.0.1:{port}/"), Some(server));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("redis-server did not start on port {port}");
}

/// A throwaway `redis-server`, stopped when dropped.
struct Throwaway(std::process::Child);

impl Drop for Throwaway {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}
