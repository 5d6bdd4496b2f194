//! The kinds of lock, one file of protocol each, and the seam they implement (`kind`): a
//! kind's request and claim, how one attempt takes a hold and what it grants, how a hold is
//! renewed (`renewal`) and given back, what a guard carries. A kind sees its lock through a
//! call context (`call`) that the lock machine provides, and describes its give-backs
//! (`undo`) and thread-owned holds (`slot`) for the machine to run and count; a holding's
//! validity and loss (`holding`) is what kinds and machine share. Also the count-down
//! latch's protocol (`latch`), which holds nothing and keeps off the seam. Uses
//! `transport` and everything below, never the machine above it (`lease`, `lock`). Each
//! kind's scripts are in its folder, with the functions that build their calls (`scripts`).

pub(crate) mod call;
pub(crate) mod candidacy;
pub(crate) mod counted;
pub(crate) mod election;
pub(crate) mod fair;
pub(crate) mod fenced;
pub(crate) mod holding;
pub(crate) mod kind;
pub(crate) mod latch;
pub(crate) mod multi;
pub(crate) mod non_reentrant;
pub(crate) mod permits;
pub(crate) mod read_write;
pub(crate) mod reentrant;
pub(crate) mod renewal;
pub(crate) mod slot;
pub(crate) mod spin;
pub(crate) mod token;
pub(crate) mod undo;

use crate::transport::scripts::Lua;

/// Every kind's scripts.
pub(crate) fn scripts() -> impl Iterator<Item = &'static Lua> {
    let kinds = [
        counted::scripts::SCRIPTS,
        election::scripts::SCRIPTS,
        fair::scripts::SCRIPTS,
        fenced::scripts::SCRIPTS,
        latch::scripts::SCRIPTS,
        multi::scripts::SCRIPTS,
        permits::scripts::SCRIPTS,
        read_write::scripts::SCRIPTS,
        reentrant::scripts::SCRIPTS,
        token::scripts::SCRIPTS,
    ];
    kinds.into_iter().flatten().copied()
}
