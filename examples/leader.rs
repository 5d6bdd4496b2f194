//! Leader election for a service: three nodes campaign, each publishing the address it
//! serves on, and the one that leads does the work. Followers learn the leader's address
//! from the election itself. An operator forces the leader out: it hears so at once, steps
//! down, and a node leads again with a higher epoch. A store that checks epochs refuses a
//! late write from the leader that was replaced.
//!
//! Uses the Redis at `REDIS_URL` when set; otherwise starts a throwaway `redis-server`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redmutex::{Cancel, Health, LeaderChange, LeadershipEvent, LockClient};

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
        if epoch > self.highest {
            println!("  store: first write at epoch {epoch}: {what}");
        }
        self.highest = epoch;
        Ok(())
    }
}

fn main() -> redmutex::Result<()> {
    let (url, _throwaway) = redis_url();
    let follower = LockClient::builder(&url).client_name("follower").build()?;
    let mut observer = follower.election(ELECTION).observe();
    print_change(observer.recv()?);

    // Each node leads whenever it can: `lead` campaigns, runs the work while this node
    // leads, and campaigns again after, until `stop` is cancelled.
    let stop = Cancel::new();
    let store = Arc::new(Mutex::new(Store::default()));
    let mut nodes = Vec::new();
    for n in 1..=3 {
        let client = LockClient::builder(&url)
            .client_name(&format!("node-{n}"))
            .build()?;
        let election = (client.election(ELECTION))
            .with_value(format!("10.0.0.{n}:8080"))
            .with_cancel(&stop)
            .with_listener(move |event| match event {
                LeadershipEvent::Leading { epoch } => println!("node-{n}: I lead (epoch {epoch})"),
                LeadershipEvent::NotLeading { epoch, lost } => {
                    println!("node-{n}: I no longer lead (epoch {epoch}, lost: {lost})")
                }
                _ => {}
            });
        let store = store.clone();
        nodes.push(std::thread::spawn(move || {
            election.lead(|leadership| {
                // The work: write, fenced by the epoch, while the leadership is sure.
                while leadership.health() == Health::Held {
                    let report = format!("node-{n}'s report");
                    let _ = store.lock().unwrap().write(leadership.epoch(), &report);
                    leadership.watch().wait_lost(Duration::from_millis(100));
                }
                println!("node-{n}: stepping down");
            })
        }));
    }

    // A follower sends its requests to the address the leader published.
    let first = next_leader(&mut observer)?;
    let operator = LockClient::builder(&url).client_name("operator").build()?;
    for _ in 0..2 {
        println!("operator: forcing the leader out");
        operator.election(ELECTION).force_resign()?;
        next_leader(&mut observer)?;
    }

    // The first leader, had it been paused all along, would come back with its old epoch.
    match store
        .lock()
        .unwrap()
        .write(first, "a replaced leader's report")
    {
        Ok(()) => println!("a replaced leader overwrote newer work: this must not happen"),
        Err(why) => println!("store refused the replaced leader: {why}"),
    }
    stop.cancel();
    for node in nodes {
        node.join().expect("no panic")?;
    }
    Ok(())
}

/// Waits for the observer to report the next leader, and returns its epoch.
fn next_leader(observer: &mut redmutex::Observer) -> redmutex::Result<u64> {
    loop {
        let change = observer.recv()?;
        let epoch = match &change {
            LeaderChange::Elected(leader) => Some(leader.epoch()),
            _ => None,
        };
        print_change(change);
        if let Some(epoch) = epoch {
            return Ok(epoch);
        }
    }
}

fn print_change(change: LeaderChange) {
    match change {
        LeaderChange::Elected(leader) => println!(
            "  follower: {} leads (epoch {}); requests go to {}",
            leader.name(),
            leader.epoch(),
            leader.value().unwrap_or("(no address)")
        ),
        LeaderChange::Vacant => println!("  follower: nobody leads"),
        other => println!("  follower: {other:?}"),
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
