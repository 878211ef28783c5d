//! A one-shot claim: the system's `terminate_called` and `reaping` flags
//! (`runtime/system.rs`). `terminate` starts the termination only for the
//! first of its callers (an application thread, the coordinated
//! shutdown's last phase, the task that the last user handle's drop
//! spawns, a signal); the root guardian's end spawns the reaper only once.
//! Each is a [`Claim`]; the last handle's drop reads both as a hint first
//! ([`Claim::is_claimed`]) to save a task.
//!
//! Compiled under loom too (through `crate::sync`):
//! `loom-tests/tests/system_claims.rs` models the claims as the system
//! makes them.
#![cfg_attr(not(loom), allow(unreachable_pub))]

use crate::sync::{AtomicBool, Ordering};

/// A flag that exactly one caller claims over its life: the first.
#[derive(Debug)]
pub struct Claim {
    claimed: AtomicBool,
}

impl Claim {
    /// An unclaimed flag.
    pub fn new() -> Claim {
        Claim {
            claimed: AtomicBool::new(false),
        }
    }

    /// `true` for the first caller, `false` for every later one (also for
    /// concurrent ones: one read-modify-write decides). AcqRel: pairs with
    /// this swap in the other callers, so a loser's later reads see what
    /// the winner wrote before it claimed (the system writes nothing else
    /// there today; the ordering keeps that true if it does).
    pub fn claim(&self) -> bool {
        !self.claimed.swap(true, Ordering::AcqRel)
    }

    /// Whether the flag has been claimed, as a hint. Relaxed: a stale
    /// `false` only costs the caller a claim it will lose; nothing is read
    /// on the strength of a `true`.
    pub fn is_claimed(&self) -> bool {
        self.claimed.load(Ordering::Relaxed)
    }
}

impl Default for Claim {
    fn default() -> Claim {
        Claim::new()
    }
}
