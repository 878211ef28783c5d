//! The run-state word: one atomic that says whether the owner of a mailbox
//! is scheduled, suspended or closed.
//!
//! Bits (low to high):
//!
//! | bit(s) | name        | written by                               | meaning |
//! |--------|-------------|------------------------------------------|---------|
//! | 0      | `SCHEDULED` | senders set it (`fetch_or`); the run holder clears it in `release` | the owner is queued on or running on a worker; whoever set it holds the right to consume |
//! | 1      | `CLOSED`    | the run holder, once (`close`)            | no new messages are accepted; what is left goes to dead letters |
//! | 2..    | suspend count | the run holder (`suspend`/`resume`)    | while non-zero, the user lane is paused; the system lane is still served |
//!
//! The consumer role is exactly "the holder of `SCHEDULED`": the queues'
//! `unsafe` consumer operations are only ever called by it.

use std::fmt;

/// The owner is scheduled or running: the holder of this bit is the consumer.
pub(crate) const SCHEDULED: usize = 1 << 0;
/// The mailbox takes no new messages.
pub(crate) const CLOSED: usize = 1 << 1;
/// One unit of the suspend count.
pub(crate) const SUSPEND_ONE: usize = 1 << 2;
/// Mask of the suspend count.
pub(crate) const SUSPEND_MASK: usize = !(SUSPEND_ONE - 1);

/// A point-in-time reading of a mailbox's run-state word.
///
/// Only the run holder sees a stable `is_suspended` and `is_closed`; for
/// anyone else a snapshot is a hint that may already be stale.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Snapshot(pub(crate) usize);

impl Snapshot {
    /// The owner is queued on a worker or running.
    pub fn is_scheduled(self) -> bool {
        self.0 & SCHEDULED != 0
    }

    /// The mailbox has been closed.
    pub fn is_closed(self) -> bool {
        self.0 & CLOSED != 0
    }

    /// The user lane is paused (the suspend count is not zero).
    pub fn is_suspended(self) -> bool {
        self.0 & SUSPEND_MASK != 0
    }

    /// How many times the mailbox was suspended and not yet resumed.
    pub fn suspend_count(self) -> usize {
        self.0 >> SUSPEND_ONE.trailing_zeros()
    }

    /// Whether the run holder may take user messages: not suspended, or
    /// closed (a closed mailbox is drained whatever its suspend count).
    pub(crate) fn user_lane_open(self) -> bool {
        !self.is_suspended() || self.is_closed()
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("scheduled", &self.is_scheduled())
            .field("closed", &self.is_closed())
            .field("suspend_count", &self.suspend_count())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_decode() {
        let s = Snapshot(SCHEDULED | CLOSED | 3 * SUSPEND_ONE);
        assert!(s.is_scheduled());
        assert!(s.is_closed());
        assert!(s.is_suspended());
        assert_eq!(s.suspend_count(), 3);
        assert!(s.user_lane_open(), "closed drains whatever the suspension");
        let s = Snapshot(SUSPEND_ONE);
        assert!(!s.user_lane_open());
        assert!(Snapshot(0).user_lane_open());
    }
}
