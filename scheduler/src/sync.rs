//! The one door through which this crate reaches concurrency primitives.
//!
//! Under `--cfg loom` the atomics, `Arc`, `Mutex`/`Condvar` and threads map to loom's checked versions, so the models in `loom-tests/`
//! explore every interleaving of the park/unpark handshake ([`crate::idle`]);
//! otherwise they map to `std`. Nothing else in the crate imports
//! `std::sync::atomic`, `std::sync::{Mutex, Condvar}`, `std::thread` or
//! `std::cell::UnsafeCell` directly.
//!
//! Under loom the idle/park and LIFO-slot modules, the task state machine
//! and join state (`task_state`), a timer entry (`timer_entry`), the timer
//! intake (`timer_intake`), the quiesce gate (`quiesce`), the stall
//! monitor's sleep handshake (`monitor_sleep`), an I/O source's readiness
//! word (`scheduled_io`), the submit gate (`submit_gate`), `block_on`, and
//! the worker loop with `Shared`
//! compile, the last two on a stand-in for crossbeam-deque (`deque`),
//! which is not loom-aware (see docs/decisions/0014-loom-scheduler.md,
//! 0018-loom-worker-loop.md and 0026-loom-issue-28.md); the reactor, the
//! timer thread and `Scheduler` do not.
//!
//! `Arc` stays `std::sync::Arc` under loom: wakers are made with
//! `Waker::from(Arc<impl Wake>)` and runnables are `Arc<dyn Runnable>`,
//! neither of which loom's `Arc` supports. Its reference count is then not
//! modelled (std's, tested on its own); everything the `Arc` points to is
//! still built from loom's atomics, cells and mutexes, and those are.

#[cfg(loom)]
pub(crate) use loom::{
    cell::UnsafeCell,
    sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering},
    sync::{Condvar, Mutex, MutexGuard},
    thread,
};

#[cfg(loom)]
pub(crate) use std::sync::Arc;

#[cfg(not(loom))]
pub(crate) use std::{
    sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering},
    sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock},
    thread,
};

#[cfg(not(loom))]
pub(crate) use self::std_cell::UnsafeCell;

/// Locks `mutex`, ignoring poisoning.
///
/// Every mutex in this crate guards plain bookkeeping (a sleeper list, a
/// flag, a slot) that stays consistent even if a thread panicked while
/// holding it, because no code that can panic runs under these locks.
#[cfg(not(loom))]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Locks `mutex` if no other thread holds it, ignoring poisoning (see
/// [`lock`]).
#[cfg(not(loom))]
pub(crate) fn try_lock<T>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match mutex.try_lock() {
        Ok(guard) => Some(guard),
        Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// Locks `mutex` (loom's mutex does not poison).
#[cfg(loom)]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().expect("loom mutexes are never poisoned")
}

/// Waits on `condvar`, ignoring poisoning (see [`lock`]).
#[cfg(not(loom))]
pub(crate) fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar
        .wait(guard)
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Waits on `condvar` (loom's mutex does not poison).
#[cfg(loom)]
pub(crate) fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar
        .wait(guard)
        .expect("loom mutexes are never poisoned")
}

#[cfg(not(loom))]
mod std_cell {
    /// `std::cell::UnsafeCell` with loom's closure-based API, so the same code
    /// compiles both ways (the pattern of tokio's `loom/std/unsafe_cell.rs`).
    #[derive(Debug)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> UnsafeCell<T> {
            UnsafeCell(std::cell::UnsafeCell::new(value))
        }

        /// Runs `f` with an exclusive raw pointer to the contents.
        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}
