//! One registered source's readiness: the word of readiness bits and tick
//! that the polling worker sets and an I/O future clears, and the source's
//! read and write wakers (tokio's `ScheduledIo` is the model). The reactor
//! (reactor.rs) owns the registrations; this file is the protocol between
//! the poll and the futures, which holds for whichever worker polls.
//!
//! Compiled under `--cfg loom` too (mio is not: the reactor is not), where
//! `loom-tests/tests/scheduled_io.rs` drives it: a poll of the future
//! against an edge ([`ScheduledIo::dispatch`]), a clear against a newer
//! edge, and a poll against shutdown.

use crate::sync::{lock, AtomicUsize, Mutex, Ordering};
use std::fmt;
use std::io;
use std::task::{Context, Poll, Waker};

/// Readiness bit: a read may make progress.
pub const READABLE: usize = 1;
/// Readiness bit: a write may make progress.
pub const WRITABLE: usize = 1 << 1;
/// The reactor shut down: every operation fails.
pub const SHUTDOWN: usize = 1 << 2;
/// The read half is closed by the peer (EOF) or an error is pending: a
/// read makes progress (it returns 0 or the error) for ever after. Never
/// cleared, so that a read that saw data and the EOF in one edge, and
/// cleared `READABLE` after a short read, still reaches the EOF.
pub const READ_CLOSED: usize = 1 << 3;
/// The write half is closed or an error is pending (as `READ_CLOSED`).
pub const WRITE_CLOSED: usize = 1 << 4;
/// The bits that stay set once set (`ScheduledIo::clear_readiness` keeps
/// them).
const FINAL: usize = READ_CLOSED | WRITE_CLOSED;
/// The readiness bits of [`ScheduledIo::readiness`]; the rest is the tick.
const READY_MASK: usize = READABLE | WRITABLE | SHUTDOWN | FINAL;
/// Shift of the tick (count of readiness updates, wrapping) in the word.
const TICK_SHIFT: u32 = 8;
/// Largest tick value.
const TICK_MAX: usize = usize::MAX >> TICK_SHIFT;

/// The inner error of the [`io::Error`] every I/O operation fails with once
/// the scheduler shut down (see [`crate::net::is_shut_down`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerShutDown;

impl fmt::Display for SchedulerShutDown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("scheduler shut down")
    }
}

impl std::error::Error for SchedulerShutDown {}

/// The error every I/O operation fails with once the scheduler shut down:
/// kind `Other` (as before it had a type), message "scheduler shut down",
/// inner error [`SchedulerShutDown`].
pub(crate) fn shut_down_error() -> io::Error {
    io::Error::other(SchedulerShutDown)
}

/// Which half of a source an operation waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The read half (`READABLE`, `READ_CLOSED`).
    Read,
    /// The write half (`WRITABLE`, `WRITE_CLOSED`).
    Write,
}

impl Direction {
    fn mask(self) -> usize {
        match self {
            Direction::Read => READABLE | READ_CLOSED,
            Direction::Write => WRITABLE | WRITE_CLOSED,
        }
    }
}

/// A readiness observed by [`ScheduledIo::poll_ready`]: what to clear if
/// the operation then hits `WouldBlock`, and at which tick it was seen.
#[derive(Debug, Clone, Copy)]
#[must_use]
pub struct ReadyEvent {
    tick: usize,
    ready: usize,
}

/// The wakers of one source's two directions.
#[derive(Default)]
struct Waiters {
    reader: Option<Waker>,
    writer: Option<Waker>,
}

/// One registered source's readiness and wakers.
pub struct ScheduledIo {
    /// `READABLE | WRITABLE | SHUTDOWN | READ_CLOSED | WRITE_CLOSED` plus
    /// a tick (bits `TICK_SHIFT..`) that every readiness update
    /// increments. Set by the polling worker and by shutdown; cleared
    /// (only `READABLE` or `WRITABLE`, only if the tick is unchanged) by
    /// the I/O future that hit `WouldBlock` or made a short read or write.
    readiness: AtomicUsize,
    /// Locked by the future that registers its waker and by the polling
    /// worker that takes it: the lock is what orders "set bit, take waker"
    /// against "store waker, re-check bit" (see `poll_ready`).
    waiters: Mutex<Waiters>,
}

impl fmt::Debug for ScheduledIo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScheduledIo").finish_non_exhaustive()
    }
}

impl Default for ScheduledIo {
    fn default() -> ScheduledIo {
        ScheduledIo::new()
    }
}

impl ScheduledIo {
    /// No readiness, no wakers.
    pub fn new() -> ScheduledIo {
        ScheduledIo {
            readiness: AtomicUsize::new(0),
            waiters: Mutex::new(Waiters::default()),
        }
    }

    /// An edge (or a failure) of the source: adds `bits` to the readiness,
    /// then moves the wakers interested in them into `out`, in that order
    /// (see [`poll_ready`](Self::poll_ready)); the caller wakes them once it
    /// released its locks. What the polling worker, the reactor's shutdown
    /// and a failed poll do for each source.
    #[inline]
    pub fn dispatch(&self, bits: usize, out: &mut Vec<Waker>) {
        self.set_readiness(bits);
        self.take_wakers(bits, out);
    }

    /// Adds `bits` to the readiness and bumps the tick.
    fn set_readiness(&self, bits: usize) {
        let mut current = self.readiness.load(Ordering::Acquire);
        loop {
            let tick = ((current >> TICK_SHIFT) + 1) & TICK_MAX;
            let next = (tick << TICK_SHIFT) | (current & READY_MASK) | bits;
            // AcqRel: the Release pairs with the Acquire loads in
            // `poll_ready` and `clear_readiness`; the Acquire with the
            // clearing compare-and-swap. (No lost wake-up rests on this
            // ordering: see `poll_ready`.)
            match self.readiness.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    /// Moves the wakers interested in `bits` into `out`.
    fn take_wakers(&self, bits: usize, out: &mut Vec<Waker>) {
        let mut waiters = lock(&self.waiters);
        if bits & (READABLE | READ_CLOSED | SHUTDOWN) != 0 {
            out.extend(waiters.reader.take());
        }
        if bits & (WRITABLE | WRITE_CLOSED | SHUTDOWN) != 0 {
            out.extend(waiters.writer.take());
        }
    }

    /// What `readiness` says for `direction`, if anything.
    fn check(current: usize, direction: Direction) -> Option<io::Result<ReadyEvent>> {
        if current & SHUTDOWN != 0 {
            return Some(Err(shut_down_error()));
        }
        let ready = current & direction.mask();
        (ready != 0).then_some(Ok(ReadyEvent {
            tick: current >> TICK_SHIFT,
            ready,
        }))
    }

    /// Ready when `direction` may make progress (or the reactor shut down:
    /// then an error); otherwise stores the waker and is pending.
    ///
    /// No lost wake-up: the polling worker sets the bit, then locks
    /// `waiters` to take the waker; this stores the waker under that lock,
    /// then loads the bits again. If the reactor's lock comes first, the
    /// re-check sees the bit; if this lock comes first, the reactor finds
    /// the waker.
    pub fn poll_ready(
        &self,
        cx: &mut Context<'_>,
        direction: Direction,
    ) -> Poll<io::Result<ReadyEvent>> {
        // Acquire: pairs with the AcqRel update in `set_readiness`.
        if let Some(ready) = Self::check(self.readiness.load(Ordering::Acquire), direction) {
            return Poll::Ready(ready);
        }
        let mut waiters = lock(&self.waiters);
        let slot = match direction {
            Direction::Read => &mut waiters.reader,
            Direction::Write => &mut waiters.writer,
        };
        match slot {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => *slot = Some(cx.waker().clone()),
        }
        // Acquire: as above; under the lock (see the doc comment).
        match Self::check(self.readiness.load(Ordering::Acquire), direction) {
            Some(Err(e)) => {
                // Shut down since the first check: the sweep may have run
                // already, so take the waker back (a stored waker keeps its
                // task, and the task this source, alive).
                *slot = None;
                Poll::Ready(Err(e))
            }
            Some(ready) => Poll::Ready(ready),
            None => Poll::Pending,
        }
    }

    /// Clears what `event` saw, unless an update came since (its tick
    /// moved on): that update may be a new edge, which must not be lost.
    /// The final bits (`READ_CLOSED`, `WRITE_CLOSED`) stay.
    pub fn clear_readiness(&self, event: ReadyEvent) {
        // Acquire: pairs with the AcqRel update in `set_readiness`.
        let mut current = self.readiness.load(Ordering::Acquire);
        loop {
            if current >> TICK_SHIFT != event.tick {
                return;
            }
            let next = current & !(event.ready & !FINAL);
            // AcqRel: pairs with `set_readiness` (the tick check above is
            // what keeps a newer edge).
            match self.readiness.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::Arc;
    use std::task::Wake;

    /// Counts its wakes.
    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            // Relaxed: a test counter, read after the wake on this thread.
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn counting_waker() -> (Arc<CountingWaker>, Waker) {
        let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
        (Arc::clone(&counter), Waker::from(counter))
    }

    fn ready(io: &ScheduledIo, waker: &Waker, direction: Direction) -> Option<ReadyEvent> {
        match io.poll_ready(&mut Context::from_waker(waker), direction) {
            Poll::Ready(Ok(event)) => Some(event),
            Poll::Ready(Err(e)) => panic!("unexpected error {e}"),
            Poll::Pending => None,
        }
    }

    #[test]
    fn a_pending_poll_is_woken_by_the_next_edge() {
        let io = ScheduledIo::new();
        let (count, waker) = counting_waker();
        assert!(ready(&io, &waker, Direction::Read).is_none());
        io.set_readiness(WRITABLE);
        let mut wakers = Vec::new();
        io.take_wakers(WRITABLE, &mut wakers);
        assert!(wakers.is_empty(), "a write edge does not wake the reader");
        io.set_readiness(READABLE);
        io.take_wakers(READABLE, &mut wakers);
        wakers.drain(..).for_each(Waker::wake);
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
        assert!(ready(&io, &waker, Direction::Read).is_some());
    }

    #[test]
    fn clearing_keeps_the_final_bits() {
        let io = ScheduledIo::new();
        let (_count, waker) = counting_waker();
        // Data and the peer's FIN in one edge; a short read clears what
        // it saw: the EOF must still be readable.
        io.set_readiness(READABLE | READ_CLOSED);
        let seen = ready(&io, &waker, Direction::Read).expect("readable");
        io.clear_readiness(seen);
        let eof = ready(&io, &waker, Direction::Read).expect("the EOF is still to be read");
        io.clear_readiness(eof);
        assert!(
            ready(&io, &waker, Direction::Read).is_some(),
            "closed for good"
        );
        // The write half is untouched by the read side's bits.
        assert!(ready(&io, &waker, Direction::Write).is_none());
        io.set_readiness(WRITE_CLOSED);
        assert!(ready(&io, &waker, Direction::Write).is_some());
    }

    #[test]
    fn clearing_keeps_an_edge_that_came_after_the_observed_one() {
        let io = ScheduledIo::new();
        let (_count, waker) = counting_waker();
        io.set_readiness(READABLE);
        let seen = ready(&io, &waker, Direction::Read).expect("readable");
        // A new edge between the read that hit WouldBlock and the clear.
        io.set_readiness(READABLE);
        io.clear_readiness(seen);
        let again = ready(&io, &waker, Direction::Read).expect("still readable");
        // With no edge in between, the clear takes effect.
        io.clear_readiness(again);
        assert!(ready(&io, &waker, Direction::Read).is_none());
    }

    #[test]
    fn clearing_one_direction_leaves_the_other() {
        let io = ScheduledIo::new();
        let (_count, waker) = counting_waker();
        io.set_readiness(READABLE | WRITABLE);
        let read = ready(&io, &waker, Direction::Read).expect("readable");
        io.clear_readiness(read);
        assert!(ready(&io, &waker, Direction::Write).is_some());
    }

    #[test]
    fn shutdown_fails_polls_and_takes_both_wakers() {
        let io = ScheduledIo::new();
        let (count, waker) = counting_waker();
        assert!(ready(&io, &waker, Direction::Read).is_none());
        assert!(ready(&io, &waker, Direction::Write).is_none());
        io.set_readiness(SHUTDOWN);
        let mut wakers = Vec::new();
        io.take_wakers(SHUTDOWN, &mut wakers);
        wakers.drain(..).for_each(Waker::wake);
        assert_eq!(count.0.load(Ordering::Relaxed), 2);
        let polled = io.poll_ready(&mut Context::from_waker(&waker), Direction::Read);
        assert!(matches!(polled, Poll::Ready(Err(e)) if e.to_string() == "scheduler shut down"));
    }

    #[test]
    fn only_the_shutdown_error_is_told_as_one() {
        let shut_down = shut_down_error();
        assert_eq!(shut_down.kind(), io::ErrorKind::Other);
        assert!(crate::net::is_shut_down(&shut_down));
        // The reactor's other `Other` errors are not.
        let full = io::Error::other("too many sources registered with the reactor");
        assert!(!crate::net::is_shut_down(&full));
        assert!(!crate::net::is_shut_down(&io::Error::other(
            "scheduler shut down"
        )));
        assert!(!crate::net::is_shut_down(&io::ErrorKind::Other.into()));
    }
}
