//! The run-state word: one atomic that says whether the owner of a mailbox
//! is scheduled or closed. (The suspend count is the run holder's alone and
//! lives on its side of the mailbox.)
//!
//! Bits (low to high):
//!
//! | bit(s) | name        | written by                               | meaning |
//! |--------|-------------|------------------------------------------|---------|
//! | 0      | `SCHEDULED` | senders set it (`fetch_or`); the run holder clears it in `release` | the owner is queued on or running on a worker; whoever set it holds the right to consume |
//! | 1      | `CLOSED`    | the run holder, once (`close`)            | no new messages are accepted; what is left goes to dead letters |
//!
//! The consumer role is exactly "the holder of `SCHEDULED`": the queues'
//! `unsafe` consumer operations are only ever called by it.

use std::fmt;

/// The owner is scheduled or running: the holder of this bit is the consumer.
pub(crate) const SCHEDULED: u32 = 1 << 0;
/// The mailbox takes no new messages.
pub(crate) const CLOSED: u32 = 1 << 1;

/// A point-in-time reading of a mailbox's run-state word: a hint for anyone
/// but the run holder.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Snapshot(pub(crate) u32);

impl Snapshot {
    /// The owner is queued on a worker or running.
    pub fn is_scheduled(self) -> bool {
        self.0 & SCHEDULED != 0
    }

    /// The mailbox has been closed.
    pub fn is_closed(self) -> bool {
        self.0 & CLOSED != 0
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("scheduled", &self.is_scheduled())
            .field("closed", &self.is_closed())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_decode() {
        let s = Snapshot(SCHEDULED | CLOSED);
        assert!(s.is_scheduled());
        assert!(s.is_closed());
        assert!(!Snapshot(0).is_scheduled());
        assert!(!Snapshot(SCHEDULED).is_closed());
    }
}
