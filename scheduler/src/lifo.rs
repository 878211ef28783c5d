//! A worker's LIFO slot: the runnable its current run woke last, which the
//! same worker runs next (a request/reply pair stays on one core, with no
//! trip through a shared queue).
//!
//! Only the owning worker puts a runnable in. The owner takes it out, and
//! so may a *thief*: the timer thread's stall monitor takes the occupant of
//! a slot whose owner has been inside one run for a whole monitor tick (a
//! slow or blocking handler), so that a runnable never waits behind a long
//! run while another worker idles (see `timer.rs`, `monitor`).
//!
//! # The protocol
//!
//! One state word, [`LifoSlot::state`], guards the occupant:
//!
//! * `EMPTY -> FULL`: only the owner, after writing the occupant (Release).
//! * `FULL -> EMPTY`: the owner taking its own occupant (a CAS, so a thief
//!   cannot take it at the same time).
//! * `FULL -> TAKING -> EMPTY`: a thief; between the two it moves the
//!   occupant out. The owner never touches the occupant while the state is
//!   `TAKING`: a put that finds it so hands its runnable back (the caller
//!   pushes it to the stealable queue), so the owner never waits on a thief.
//!
//! Generic over the occupant so the loom model (`loom-tests/`) can run it
//! on a plain type (loom's `Arc` cannot hold a `dyn Runnable`).

use crate::sync::{AtomicU8, Ordering, UnsafeCell};

const EMPTY: u8 = 0;
const FULL: u8 = 1;
/// A thief is moving the occupant out.
const TAKING: u8 = 2;

/// A one-runnable slot owned by one worker; see the module docs.
pub struct LifoSlot<T> {
    /// `EMPTY`, `FULL` or `TAKING`. `EMPTY -> FULL` only by the owner;
    /// `FULL -> EMPTY` by the owner; `FULL -> TAKING -> EMPTY` by a thief.
    state: AtomicU8,
    /// Written (`Some`) only by the owner while the state is `EMPTY`;
    /// emptied by whoever moved the state out of `FULL`.
    occupant: UnsafeCell<Option<T>>,
}

// SAFETY: `occupant` is reached only by the thread that moved `state` into
// a value that excludes everyone else: the owner while it is `EMPTY` (only
// the owner leaves `EMPTY`, so no one else reaches the occupant) or right
// after its own `FULL -> EMPTY` CAS; a thief right after its
// `FULL -> TAKING` CAS, until its `TAKING -> EMPTY` store. The Release
// stores and Acquire CAS/loads order each hand-over (see the methods). `T`
// crosses threads (a thief takes it), hence `T: Send`.
unsafe impl<T: Send> Sync for LifoSlot<T> {}

impl<T> LifoSlot<T> {
    /// An empty slot.
    pub fn new() -> LifoSlot<T> {
        LifoSlot {
            state: AtomicU8::new(EMPTY),
            occupant: UnsafeCell::new(None),
        }
    }

    /// Owner only: puts `value` in the slot. Returns what the caller must
    /// push to its stealable queue instead: the previous occupant, or
    /// `value` itself if a thief is taking the occupant right now.
    ///
    /// # Safety
    ///
    /// Only the slot's owner may call `put` and `take`, and never
    /// concurrently with each other (one owner thread).
    #[inline]
    pub unsafe fn put(&self, value: T) -> Option<T> {
        // Acquire: pairs with a thief's Release store of EMPTY, so its move
        // of the old occupant happened before our write below.
        match self.state.load(Ordering::Acquire) {
            EMPTY => {
                self.write(value);
                None
            }
            FULL => {
                // Acquire on failure too: nothing is read then, but a
                // failure means a thief moved it; Relaxed would do.
                if self
                    .state
                    .compare_exchange(FULL, TAKING, Ordering::Acquire, Ordering::Relaxed)
                    .is_err()
                {
                    return Some(value);
                }
                // SAFETY: our CAS to TAKING excludes thieves (they need
                // FULL) until our store of FULL in `write`.
                let prev = self.occupant.with_mut(|p| unsafe { (*p).take() });
                self.write(value);
                prev
            }
            _ => Some(value),
        }
    }

    /// Writes the occupant and publishes it. The caller holds the slot
    /// (state `EMPTY` as the owner, or `TAKING` after its own CAS).
    #[inline]
    fn write(&self, value: T) {
        // SAFETY: see the callers: no thief touches the occupant until the
        // store of FULL below.
        self.occupant.with_mut(|p| unsafe { *p = Some(value) });
        // Release: publishes the occupant to the thief whose Acquire CAS
        // from FULL reads this store.
        self.state.store(FULL, Ordering::Release);
    }

    /// Owner only: takes the occupant, if any (a thief may have taken it).
    ///
    /// # Safety
    ///
    /// As [`put`](Self::put).
    #[inline]
    pub unsafe fn take(&self) -> Option<T> {
        // Relaxed: a filter for the common empty case; the CAS decides.
        if self.state.load(Ordering::Relaxed) != FULL {
            return None;
        }
        // Relaxed: the occupant was written by this thread (only the owner
        // writes it); the CAS only has to exclude a thief's, which needs
        // FULL.
        if self
            .state
            .compare_exchange(FULL, EMPTY, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return None;
        }
        // SAFETY: EMPTY excludes thieves; only this (owner) thread leaves
        // EMPTY, and it is here.
        self.occupant.with_mut(|p| unsafe { (*p).take() })
    }

    /// Any thread: takes the occupant if the slot is full and no one else
    /// is taking it.
    pub fn steal(&self) -> Option<T> {
        // Acquire: pairs with the owner's Release store of FULL, so the
        // occupant it wrote is visible.
        if self
            .state
            .compare_exchange(FULL, TAKING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return None;
        }
        // SAFETY: TAKING excludes the owner (it hands its runnable back
        // rather than touch the occupant) and other thieves (they need
        // FULL), until the store below.
        let value = self.occupant.with_mut(|p| unsafe { (*p).take() });
        // Release: pairs with the owner's Acquire load in `put`, so our
        // move of the occupant happens before its next write.
        self.state.store(EMPTY, Ordering::Release);
        value
    }

    /// Whether the slot holds a runnable (a snapshot; exact on the owner's
    /// thread except that a thief may empty it at any time).
    #[inline]
    pub fn is_full(&self) -> bool {
        // Relaxed: a hint; nothing is read on its strength.
        self.state.load(Ordering::Relaxed) == FULL
    }
}

impl<T> Default for LifoSlot<T> {
    fn default() -> LifoSlot<T> {
        LifoSlot::new()
    }
}

impl<T> std::fmt::Debug for LifoSlot<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LifoSlot")
            .field("full", &self.is_full())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn owner_put_take_and_displace() {
        let slot = LifoSlot::new();
        // SAFETY: this thread is the only owner.
        unsafe {
            assert_eq!(slot.take(), None);
            assert_eq!(slot.put(1), None);
            assert!(slot.is_full());
            assert_eq!(slot.put(2), Some(1));
            assert_eq!(slot.take(), Some(2));
            assert_eq!(slot.take(), None);
        }
    }

    #[test]
    fn a_thief_takes_the_occupant_once() {
        let slot = std::sync::Arc::new(LifoSlot::new());
        // SAFETY: this thread is the only owner.
        unsafe { assert_eq!(slot.put(String::from("job")), None) };
        let thief = std::sync::Arc::clone(&slot);
        let stolen = std::thread::spawn(move || thief.steal())
            .join()
            .expect("thief");
        assert_eq!(stolen.as_deref(), Some("job"));
        assert_eq!(slot.steal(), None);
        // SAFETY: this thread is the only owner.
        unsafe {
            assert_eq!(slot.take(), None);
            assert_eq!(slot.put(String::from("next")), None);
            assert_eq!(slot.take().as_deref(), Some("next"));
        }
    }
}
