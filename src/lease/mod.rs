//! What a client holds and what keeps it: the state every lock of a client shares
//! (settings, nodes, the table of reentrant holds, watchdog threads, counters), the target
//! of one call (client and lock names), each holding's validity and loss, and the watchdog
//! that renews watched holds on threads of their own. Uses `transport` and everything below.

pub(crate) mod give_back;
pub(crate) mod hold_table;
pub(crate) mod holding;
pub(crate) mod shared;
pub(crate) mod target;
pub(crate) mod watchdog;
pub(crate) mod workers;
