//! A piped future's state word and the task's waker, shared by its
//! `PipeHandle` and its task (`pipe.rs`): the one
//! PENDING -> CANCELLED/DELIVERED/PANICKED transition, and the handshake
//! by which a cancel reaches a task whose future is pending. Compiled under
//! loom too (with the engine's sync shim), where `loom-tests/tests/pipe.rs`
//! drives it.
// `pub` for the loom build's `__loom` re-export; crate-internal otherwise.
#![cfg_attr(not(loom), allow(unreachable_pub))]

use crate::sync::{AtomicU8, Mutex, Ordering};
use std::task::Waker;

/// Not over yet.
pub const PENDING: u8 = 0;
/// Cancelled by its handle before delivery.
pub const CANCELLED: u8 = 1;
/// The message was handed to `tell` (delivered or dead-lettered).
pub const DELIVERED: u8 = 2;
/// The future or the mapping panicked: nothing delivered.
pub const PANICKED: u8 = 3;

/// What a pipe's handle and its task share.
#[derive(Debug)]
pub struct PipeShared {
    /// `PENDING`, then one of the others; written by compare-and-swap from
    /// `PENDING`, by the handle (`CANCELLED`) or the task (the rest).
    state: AtomicU8,
    /// The task's waker, for a cancel to wake it so it drops its future.
    /// Stored by the task's poll, taken by a cancel and by the task once
    /// its poll loop is over: the lock orders "store, re-check the state"
    /// against "claim the state, take the waker" (see `poll_gate`).
    waker: Mutex<Option<Waker>>,
}

impl Default for PipeShared {
    fn default() -> PipeShared {
        PipeShared::new()
    }
}

impl PipeShared {
    /// A pending pipe.
    pub fn new() -> PipeShared {
        PipeShared {
            state: AtomicU8::new(PENDING),
            waker: Mutex::new(None),
        }
    }

    /// The state (`PENDING` or the final one).
    pub fn state(&self) -> u8 {
        // Acquire: pairs with the AcqRel compare-and-swap in `finish`.
        self.state.load(Ordering::Acquire)
    }

    /// PENDING -> `to`; true for the one winner.
    pub fn finish(&self, to: u8) -> bool {
        // AcqRel: the winner's earlier writes are visible to whoever reads
        // the final state (Acquire in `state`), and a loser sees the winner's.
        self.state
            .compare_exchange(PENDING, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The handle's cancel: claims the pipe (PENDING -> CANCELLED), then
    /// wakes the task so that it drops its future. Returns whether this
    /// call cancelled it.
    pub fn cancel(&self) -> bool {
        if !self.finish(CANCELLED) {
            return false;
        }
        let waker = self.waker.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(w) = waker {
            w.wake();
        }
        true
    }

    /// The start of each poll of the task: whether the pipe is still
    /// pending (then the caller polls its future, with `waker` stored for a
    /// cancel to wake); `false` once it is over (the caller stops).
    ///
    /// No lost cancel: a cancel claims the state, then takes the waker
    /// under the lock; this stores the waker under that lock, then reads
    /// the state again. If the cancel's lock comes first, this re-check
    /// sees CANCELLED; if this lock comes first, the cancel finds the
    /// waker.
    pub fn poll_gate(&self, waker: &Waker) -> bool {
        if self.state() != PENDING {
            return false;
        }
        {
            let mut slot = self.waker.lock().unwrap_or_else(|e| e.into_inner());
            match &*slot {
                Some(w) if w.will_wake(waker) => {}
                _ => *slot = Some(waker.clone()),
            }
        }
        // A cancel between the check above and the registration found no
        // waker to wake: look again now that it is registered.
        self.state() == PENDING
    }

    /// The task's poll loop is over: drops the stored waker (a cancel now
    /// only loses its race).
    pub fn drop_waker(&self) {
        drop(self.waker.lock().unwrap_or_else(|e| e.into_inner()).take());
    }
}
