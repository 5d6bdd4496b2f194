//! The kinds of lock, one file of protocol each, and the seam they implement (`kind`): how
//! one attempt takes a hold, how a hold is given back, what a guard carries; and the
//! count-down latch's protocol (`latch`), which holds nothing and keeps off the seam. Uses
//! `lease` and everything below.

pub(crate) mod counted;
pub(crate) mod election;
pub(crate) mod fair;
pub(crate) mod fenced;
pub(crate) mod kind;
pub(crate) mod latch;
pub(crate) mod multi;
pub(crate) mod non_reentrant;
pub(crate) mod permits;
pub(crate) mod read_write;
pub(crate) mod reentrant;
pub(crate) mod spin;
pub(crate) mod token;
