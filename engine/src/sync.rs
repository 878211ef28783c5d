//! The door through which the engine's modelled modules reach concurrency
//! primitives (the pattern of `mailbox/src/sync.rs`).
//!
//! Under `--cfg loom` these map to loom's checked versions, so the models
//! in `loom-tests/` explore every interleaving of the real code; otherwise
//! they are `std`'s, re-exported unchanged (no cost). Only the modules that
//! compile under loom go through here: the result slot
//! (`api/promise.rs`), the timer slot's state machine
//! (`patterns/timer_state.rs`), the terminating mailbox's drains
//! (`runtime/drain.rs`), a pipe's state word (`api/pipe_state.rs`) and
//! the system's one-shot claims (`runtime/claim.rs`). The rest of the
//! engine sits on the scheduler,
//! which compiles only in part under loom, and is left out of loom builds
//! (see `lib.rs`).

#[cfg(loom)]
pub(crate) use loom::{
    sync::atomic::{AtomicBool, AtomicU8, Ordering},
    sync::{Arc, Condvar, Mutex, MutexGuard},
    thread::yield_now,
};

#[cfg(not(loom))]
pub(crate) use std::{
    sync::atomic::{AtomicBool, AtomicU8, Ordering},
    sync::{Arc, Condvar, Mutex, MutexGuard},
    thread::yield_now,
};

/// Under loom, the stand-in for the scheduler's `TimerHandle` (whose timer
/// thread does not compile under loom): cancelling it sets a flag the model
/// reads, so a model can assert that no armed timer outlives its slot.
#[cfg(loom)]
#[derive(Debug)]
pub struct ModelTimer {
    cancelled: Arc<loom::sync::atomic::AtomicBool>,
}

#[cfg(loom)]
impl ModelTimer {
    /// A timer whose cancellation sets `cancelled`.
    pub fn new(cancelled: Arc<loom::sync::atomic::AtomicBool>) -> ModelTimer {
        ModelTimer { cancelled }
    }

    /// Cancels the timer (as `TimerHandle::cancel`).
    pub fn cancel(self) {
        // SeqCst: a model's flag, read after joins; no protocol rides on it.
        self.cancelled.store(true, Ordering::SeqCst);
    }
}
