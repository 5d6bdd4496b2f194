//! Every kind the client makes, each as one entry: how to make it, how to ready a fresh
//! name for it, what excludes its takers, and where each property is checked for it.

use redmutex::{Cancel, LockClient};

use super::Property::{self, *};
use super::subject::{self, Held, Subject};

/// Where a property is checked for an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// By the generic body in `properties.rs` (or `cluster.rs` for the Cluster).
    Here,
    /// By a test of its own, `file::function` under `tests/it`, with why it is there.
    At(&'static str, &'static str),
    /// Nowhere, with why the property does not apply.
    Not(&'static str),
}
use Coverage::*;

/// One kind on the list.
pub struct Entry {
    /// Its name in test names and messages.
    pub name: &'static str,
    /// The `LockClient` method that makes it.
    pub constructor: &'static str,
    /// Makes it for `name` on `client`, cancellable by `cancel` when given.
    pub make: fn(&LockClient, &str, Option<&Cancel>) -> Box<dyn Subject>,
    /// Makes what excludes its takers: the same kind, or the write side for readers.
    pub rival: fn(&LockClient, &str) -> Box<dyn Subject>,
    /// Readies a fresh name so that one party can take it (a semaphore's one permit).
    pub prepare: fn(&LockClient, &str),
    /// Makes it busy for others, where taking its rival does not (the latch's count).
    pub occupy: Option<fn(&LockClient, &str) -> Held>,
    /// The command its attempt sends, as the proxy sees it.
    pub attempt: &'static [u8],
    /// The docs' further `ACL SETUSER` lines (`docs/deploying.md`, else `docs/kinds.md`), by
    /// how each begins, that its least-privilege user needs beside the lock user's.
    pub rights: &'static [&'static str],
    /// Whether its waiters subscribe to a channel named after it (the spin lock's do not).
    pub subscribes: bool,
    /// Where each property is checked for it.
    pub coverage: fn(Property) -> Coverage,
}

impl Entry {
    /// Makes `name` busy for others through `client`, and returns how to give it back.
    pub fn occupy(&self, client: &LockClient, name: &str) -> Held {
        match self.occupy {
            Some(occupy) => occupy(client, name),
            None => (self.rival)(client, name).take().unwrap(),
        }
    }
}

const EVALSHA: &[u8] = b"EVALSHA";

fn nothing(_: &LockClient, _: &str) {}

fn same(entry: &Entry, client: &LockClient, name: &str) -> Box<dyn Subject> {
    (entry.make)(client, name, None)
}

/// What the lock kinds share: the cut and late replies of their scripts are checked here,
/// the Cluster, Valkey and least-privilege cases by the shared bodies and files below.
fn a_lock(p: Property, java: Coverage, model: &'static str) -> Coverage {
    match p {
        Quartet | Deadline | Cancel | Close | CutAttempt | LateAttempt | CutRelease | Lapse
        | Acl | Cluster | Migration | Failover | Inspect | Deadlock => Here,
        Redisson => java,
        Model => At(model, "random steps of several owners against a model"),
    }
}

/// Why a kind whose holds belong to no thread is in no cycle the check follows.
const NO_THREAD: &str = "its holds belong to no thread, so a cycle through them is not followed";

/// The real Redisson holds and waits beside ours in `test`.
const fn java(test: &'static str) -> Coverage {
    At(test, "the real Redisson beside ours")
}

macro_rules! make {
    ($method:ident) => {
        |client: &LockClient, name: &str, cancel: Option<&Cancel>| {
            subject::lock(client.$method(name), cancel)
        }
    };
}

pub static REENTRANT: Entry = Entry {
    name: "reentrant",
    constructor: "lock",
    make: make!(lock),
    rival: |c, n| same(&REENTRANT, c, n),
    prepare: nothing,
    occupy: None,
    attempt: EVALSHA,
    rights: &[],
    subscribes: true,
    coverage: |p| {
        let java = java("java_lock::java_s_release_wakes_our_waiter_and_ours_wakes_java_s");
        a_lock(p, java, "model::reentrant_lock_follows_its_model")
    },
};

pub static FENCED: Entry = Entry {
    name: "fenced",
    constructor: "fenced_lock",
    make: make!(fenced_lock),
    rival: |c, n| same(&FENCED, c, n),
    prepare: nothing,
    occupy: None,
    attempt: EVALSHA,
    rights: &[],
    subscribes: true,
    coverage: |p| {
        let java = java("java_lock::fencing_tokens_increase_across_java_and_ours");
        a_lock(p, java, "model::fenced_lock_follows_its_model")
    },
};

pub static FAIR: Entry = Entry {
    name: "fair",
    constructor: "fair_lock",
    make: make!(fair_lock),
    rival: |c, n| same(&FAIR, c, n),
    prepare: nothing,
    occupy: None,
    attempt: EVALSHA,
    rights: &[],
    subscribes: true,
    coverage: |p| {
        let java = java(
            "java_fair::a_mixed_queue_is_served_in_the_order_it_joined_with_and_without_direct_handoff",
        );
        a_lock(p, java, "model::fair_lock_follows_its_model")
    },
};

pub static NON_REENTRANT: Entry = Entry {
    name: "non_reentrant",
    constructor: "non_reentrant_lock",
    make: make!(non_reentrant_lock),
    rival: |c, n| same(&NON_REENTRANT, c, n),
    prepare: nothing,
    occupy: None,
    attempt: EVALSHA,
    rights: &[],
    subscribes: true,
    coverage: |p| {
        let java =
            java("java_non_reentrant::java_s_release_wakes_our_waiter_and_ours_wakes_java_s");
        a_lock(p, java, "model::non_reentrant_lock_follows_its_model")
    },
};

pub static NON_REENTRANT_FAIR: Entry = Entry {
    name: "non_reentrant_fair",
    constructor: "non_reentrant_fair_lock",
    make: make!(non_reentrant_fair_lock),
    rival: |c, n| same(&NON_REENTRANT_FAIR, c, n),
    prepare: nothing,
    occupy: None,
    attempt: EVALSHA,
    rights: &[],
    subscribes: true,
    coverage: |p| {
        let java =
            java("java_non_reentrant::a_mixed_queue_of_java_and_our_waiters_is_served_in_order");
        a_lock(p, java, "model::non_reentrant_fair_lock_follows_its_model")
    },
};

pub static SPIN: Entry = Entry {
    name: "spin",
    constructor: "spin_lock",
    make: make!(spin_lock),
    rival: |c, n| same(&SPIN, c, n),
    prepare: nothing,
    occupy: None,
    attempt: EVALSHA,
    rights: &[],
    subscribes: false,
    coverage: |p| {
        let java =
            java("java_spin::our_spin_lock_is_taken_by_java_s_spinning_waiter_after_its_release");
        a_lock(p, java, "model::spin_lock_follows_its_model")
    },
};

pub static TOKEN: Entry = Entry {
    name: "token",
    constructor: "token_lock",
    make: make!(token_lock),
    rival: |c, n| same(&TOKEN, c, n),
    prepare: nothing,
    occupy: None,
    attempt: b"\r\nSET\r\n",
    rights: &[],
    subscribes: true,
    coverage: |p| {
        let peers = At(
            "token_interop::their_hold_excludes_us_and_our_waiter_gets_in_after_their_release",
            "Redisson has no SET-NX lock: redis-py, redsync and node-redlock share it instead",
        );
        match p {
            Deadlock => Not(NO_THREAD),
            _ => a_lock(p, peers, "model::token_lock_follows_its_model"),
        }
    },
};

pub static READ: Entry = Entry {
    name: "read",
    constructor: "read_write_lock.read",
    make: |c, n, cancel| subject::lock(c.read_write_lock(n).read().clone(), cancel),
    rival: |c, n| subject::lock(c.read_write_lock(n).write().clone(), None),
    prepare: nothing,
    occupy: None,
    attempt: EVALSHA,
    rights: &[],
    subscribes: true,
    coverage: |p| {
        let java = java(
            "java_read_write::readers_of_both_sides_share_and_a_writer_of_either_side_is_woken_when_both_leave",
        );
        a_lock(p, java, "model::read_write_lock_follows_its_model")
    },
};

pub static WRITE: Entry = Entry {
    name: "write",
    constructor: "read_write_lock.write",
    make: |c, n, cancel| subject::lock(c.read_write_lock(n).write().clone(), cancel),
    rival: |c, n| same(&WRITE, c, n),
    prepare: nothing,
    occupy: None,
    attempt: EVALSHA,
    rights: &[],
    subscribes: true,
    coverage: |p| {
        let java = java(
            "java_read_write::a_writer_of_either_side_excludes_the_other_s_readers_and_its_release_wakes_them_all",
        );
        a_lock(p, java, "model::read_write_lock_follows_its_model")
    },
};

fn multi(client: &LockClient, name: &str, cancel: Option<&Cancel>) -> Box<dyn Subject> {
    // The members share the name's slot, and their channels name it.
    let multi = client.multi_lock([format!("{{{name}}}:a"), format!("{{{name}}}:b")]);
    Box::new(match cancel {
        Some(cancel) => multi.with_cancel(cancel),
        None => multi,
    })
}

pub static MULTI: Entry = Entry {
    name: "multi",
    constructor: "multi_lock",
    make: multi,
    rival: |c, n| multi(c, n, None),
    prepare: nothing,
    occupy: None,
    attempt: EVALSHA,
    rights: &[],
    subscribes: true,
    coverage: |p| {
        let java =
            java("java_multi::our_multi_lock_excludes_java_s_and_our_release_wakes_its_waiter");
        match p {
            Inspect => Not("a multi-lock has no key of its own: its members are shown"),
            _ => a_lock(p, java, "model::multi_lock_follows_its_model"),
        }
    },
};

pub static SEMAPHORE: Entry = Entry {
    name: "leased_semaphore",
    constructor: "leased_semaphore",
    make: |c, n, cancel| {
        let semaphore = c.leased_semaphore(n);
        Box::new(match cancel {
            Some(cancel) => semaphore.with_cancel(cancel),
            None => semaphore,
        })
    },
    rival: |c, n| same(&SEMAPHORE, c, n),
    prepare: |c, n| assert!(c.leased_semaphore(n).try_set_permits(1).unwrap()),
    occupy: None,
    attempt: EVALSHA,
    rights: &[],
    subscribes: true,
    coverage: |p| {
        let java = java("java_semaphore::a_release_on_either_side_wakes_a_waiter_on_the_other");
        match p {
            Deadlock => Not(
                "a permit may move to another thread (it is Send): the thread that holds it is \
                 not known, so a cycle through it is not followed",
            ),
            _ => a_lock(p, java, "model::semaphore_follows_its_model"),
        }
    },
};

pub static COUNTING: Entry = Entry {
    name: "counting",
    constructor: "counting_semaphore",
    make: |c, n, cancel| {
        let semaphore = c.counting_semaphore(n);
        Box::new(match cancel {
            Some(cancel) => semaphore.with_cancel(cancel),
            None => semaphore,
        })
    },
    rival: |c, n| same(&COUNTING, c, n),
    prepare: |c, n| assert!(c.counting_semaphore(n).try_set_permits(1).unwrap()),
    occupy: None,
    attempt: EVALSHA,
    rights: &[],
    subscribes: true,
    coverage: |p| match p {
        Lapse => Not("counted permits have no lease: they are held until released"),
        Deadlock => Not("counted permits have no holders on record to follow"),
        _ => {
            let java = java(
                "java_counting_semaphore::a_release_on_either_side_wakes_a_waiter_on_the_other",
            );
            a_lock(p, java, "model::counting_semaphore_follows_its_model")
        }
    },
};

pub static LATCH: Entry = Entry {
    name: "latch",
    constructor: "count_down_latch",
    make: |c, n, cancel| {
        let latch = c.count_down_latch(n);
        Box::new(match cancel {
            Some(cancel) => latch.with_cancel(cancel),
            None => latch,
        })
    },
    rival: |c, n| same(&LATCH, c, n),
    prepare: nothing,
    occupy: Some(|c, n| {
        let latch = c.count_down_latch(n);
        assert!(latch.try_set_count(1).unwrap());
        Box::new(move || latch.count_down().map(drop))
    }),
    attempt: EVALSHA,
    rights: &["ACL SETUSER locker &redisson_countdownlatch__channel__*"],
    subscribes: true,
    coverage: |p| match p {
        Quartet | Deadline | Cancel | Close | Acl | Cluster | Migration | Failover | Inspect => {
            Here
        }
        CutAttempt | LateAttempt => Not("a wait on a latch takes nothing: it reads the count"),
        CutRelease => At(
            "latch::a_count_down_whose_reply_was_lost_counts_once",
            "an open latch stays open, so a second count-down would not show here",
        ),
        Lapse => Not("a latch holds nothing that could lapse"),
        Deadlock => Not("a latch's count has no holders: nothing to follow from its waiter"),
        Redisson => java("java_latch::the_last_count_down_on_either_side_opens_the_other_s_waiter"),
        Model => At(
            "model::count_down_latch_follows_its_model",
            "random steps against a model",
        ),
    },
};

pub static ELECTION: Entry = Entry {
    name: "election",
    constructor: "election",
    make: |c, n, cancel| {
        let election = c.election(n);
        Box::new(match cancel {
            Some(cancel) => election.with_cancel(cancel),
            None => election,
        })
    },
    rival: |c, n| same(&ELECTION, c, n),
    prepare: nothing,
    occupy: None,
    attempt: EVALSHA,
    rights: &[],
    subscribes: true,
    coverage: |p| match p {
        Redisson => Not("Redisson has no leader election"),
        Model => At(
            "model::election_follows_its_model",
            "random steps against a model",
        ),
        Quartet | Deadline | Cancel | Close | CutAttempt | LateAttempt | CutRelease | Lapse
        | Acl | Cluster | Migration | Failover | Inspect => Here,
        Deadlock => Not("a leadership belongs to its candidate's token, not to a thread"),
    },
};

pub static ELECTION_FCFS: Entry = Entry {
    name: "election_fcfs",
    constructor: "election.first_come_first_served",
    make: |c, n, cancel| {
        let election = c.election(n).first_come_first_served();
        Box::new(match cancel {
            Some(cancel) => election.with_cancel(cancel),
            None => election,
        })
    },
    rival: |c, n| same(&ELECTION_FCFS, c, n),
    prepare: nothing,
    occupy: None,
    attempt: EVALSHA,
    rights: &[],
    subscribes: true,
    coverage: |p| match p {
        Redisson => Not("Redisson has no leader election"),
        Model => Not(
            "its leader, epochs and resignations are the election's, which has a model; \
             the queue's order is checked across processes by election_fcfs",
        ),
        Quartet | Deadline | Cancel | Close | CutAttempt | LateAttempt | CutRelease | Lapse
        | Acl | Cluster | Migration | Failover | Inspect => Here,
        Deadlock => Not("a leadership belongs to its candidate's token, not to a thread"),
    },
};
