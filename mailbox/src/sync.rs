//! The one door through which this crate reaches concurrency primitives.
//!
//! Under `--cfg loom` every atomic and cell maps to loom's checked version so
//! the models in `loom-tests/` explore every interleaving of the real code;
//! otherwise they map to `std`. Nothing else in the crate imports
//! `std::sync::atomic` or `std::cell::UnsafeCell` directly.

#[cfg(loom)]
pub(crate) use loom::{
    cell::UnsafeCell,
    sync::atomic::{fence, AtomicPtr, AtomicUsize, Ordering},
};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicPtr, AtomicUsize, Ordering};

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
