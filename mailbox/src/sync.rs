//! The one door through which this crate reaches concurrency primitives.
//!
//! Under `--cfg loom` every atomic and cell maps to loom's checked version so
//! the models in `loom-tests/` explore every interleaving of the real code;
//! otherwise they map to `std`. Nothing else in the crate imports
//! `std::sync::atomic` or `std::cell::UnsafeCell` directly.

#[cfg(loom)]
pub(crate) use loom::{
    cell::UnsafeCell,
    sync::atomic::{AtomicPtr, AtomicU32, Ordering},
};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

/// The store-load barrier of the mailbox's Dekker pairing (a push against
/// a release; `Mailbox::claim_after_push`, decision record 0019), under
/// loom only.
///
/// Outside loom the four accesses of that pairing are `SeqCst` themselves
/// (the swap that pushes, the load of the run-state word after it; the
/// release's `fetch_and` and its load of the queue's head): they all sit in
/// the single total order S, which forbids both loads reading the old
/// values, with no fence (on x86-64 a `SeqCst` load is a plain `mov` and the
/// RMWs are locked instructions anyway). loom does not model `SeqCst`
/// accesses (it treats them as `AcqRel`, and would report the lost wake-up
/// the pairing prevents), but it does model `SeqCst` fences: so under loom
/// the fence stands in, and the models check the protocol with it.
#[cfg(loom)]
#[inline(always)]
pub(crate) fn dekker_fence() {
    loom::sync::atomic::fence(Ordering::SeqCst);
}

/// See the loom version: outside loom, nothing.
#[cfg(not(loom))]
#[inline(always)]
pub(crate) fn dekker_fence() {}

#[cfg(not(loom))]
pub(crate) use self::std_cell::UnsafeCell;

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

        /// Runs `f` with a shared raw pointer to the contents.
        #[inline(always)]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        /// Runs `f` with an exclusive raw pointer to the contents.
        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}
