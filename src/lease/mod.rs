//! The lock machine's holds, for every kind alike: the state every lock of a client shares
//! (settings, nodes, the table of thread-owned holds, give-backs, watchdog threads,
//! counters), the target of one call (client and lock names, the kinds' call context),
//! the hold a kind's grant becomes and its release (`hold`), and the watchdog that renews
//! watched holds on threads of their own. Uses `kinds` and everything below.

pub(crate) mod give_back;
pub(crate) mod hold;
pub(crate) mod hold_table;
pub(crate) mod shared;
pub(crate) mod target;
pub(crate) mod watchdog;
pub(crate) mod workers;
