//! The timer thread's intake: the queue new timers come in through, and
//! the two handshakes around it (issue 16; modelled by
//! `loom-tests/tests/timer_intake.rs`).
//!
//! * **Sleep**: the timer thread publishes the tick it is about to sleep
//!   until (`sleeping_until`), a `SeqCst` fence, and re-checks the queue
//!   ([`TimerIntake::may_sleep`]); a new timer is pushed, a `SeqCst` fence,
//!   then `sleeping_until` is read, and the timer thread is unparked if the
//!   new deadline comes before it ([`TimerIntake::push`]). The fences are
//!   totally ordered (store-buffer / Dekker): either the re-check sees the
//!   new timer, or the push reads the new sleep target and wakes the
//!   thread. So a timer registered while the timer thread decides to sleep
//!   is never slept past.
//! * **Stop**: the stopper stores `stopped`, a fence, and (after the timer
//!   thread has exited) drains the queue ([`TimerIntake::stop`],
//!   [`TimerIntake::pop`]); a push reads `stopped` after its fence and, if
//!   set, the caller cancels the timer itself. So a timer set while the
//!   scheduler stops is either drained or cancelled by its setter, never
//!   left pending in a queue nobody reads.
//!
//! Generic over the item (the timer thread queues `Arc<TimerEntry>`) so
//! the loom models can run it on plain values; under loom the queue is the
//! stand-in of `deque.rs`.

use crate::deque::{Injector, Steal};
use crate::sync::{fence, AtomicBool, AtomicU64, Ordering};

/// What [`TimerIntake::push`] asks of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Pushed {
    /// Nothing: the timer thread wakes by itself before the new deadline,
    /// or will see the item before it sleeps.
    Queued,
    /// Unpark the timer thread: it sleeps (or is about to) past the new
    /// deadline.
    WakeTimer,
    /// The intake was stopped: the item may never be read; cancel it.
    Stopped,
}

/// New timers on their way to the timer thread (see the module docs).
pub struct TimerIntake<T> {
    queue: Injector<T>,
    /// The tick the timer thread sleeps until (`u64::MAX`: indefinitely).
    /// Written only by the timer thread; read by `push`.
    sleeping_until: AtomicU64,
    /// Set once by `stop`.
    stopped: AtomicBool,
}

impl<T> TimerIntake<T> {
    /// An empty intake; its timer thread counts as sleeping indefinitely.
    pub fn new() -> TimerIntake<T> {
        TimerIntake {
            queue: Injector::new(),
            sleeping_until: AtomicU64::new(u64::MAX),
            stopped: AtomicBool::new(false),
        }
    }

    /// Any thread: queues `item`, due at tick `when`, and says what the
    /// caller must do next.
    #[inline]
    pub fn push(&self, item: T, when: u64) -> Pushed {
        self.queue.push(item);
        // SeqCst fence: Dekker pair with the timer thread, which stores
        // `sleeping_until`, fences, then re-checks the queue (`may_sleep`).
        // Either it sees this item, or the load below sees its new sleep
        // target. Also pairs with the fence in `stop` (store `stopped`,
        // fence, drain): either the drain finds this item, or this load
        // sees `stopped`.
        fence(Ordering::SeqCst);
        // SeqCst: ordered after the fence above (see there).
        if self.stopped.load(Ordering::SeqCst) {
            return Pushed::Stopped;
        }
        // SeqCst: as above.
        if when < self.sleeping_until.load(Ordering::SeqCst) {
            Pushed::WakeTimer
        } else {
            Pushed::Queued
        }
    }

    /// The timer thread (and the stopper, once the timer thread has
    /// exited): takes the oldest queued item.
    #[inline]
    pub fn pop(&self) -> Option<T> {
        loop {
            match self.queue.steal() {
                Steal::Success(item) => return Some(item),
                Steal::Empty => return None,
                Steal::Retry => {}
            }
        }
    }

    /// The timer thread, about to sleep until tick `until` (`u64::MAX`:
    /// until unparked): publishes the target and re-checks the queue.
    /// Returns `false` if something came meanwhile (take it first).
    #[inline]
    pub fn may_sleep(&self, until: u64) -> bool {
        // SeqCst store + fence: the timer thread's half of the Dekker pair
        // with `push` (publish the sleep target, then re-check the queue).
        self.sleeping_until.store(until, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        self.queue.is_empty()
    }

    /// Whether `stop` was called.
    #[inline]
    pub fn is_stopped(&self) -> bool {
        // Acquire: pairs with the SeqCst (Release) store in `stop`.
        self.stopped.load(Ordering::Acquire)
    }

    /// The stopper: from now on `push` answers [`Pushed::Stopped`]. Drain
    /// the queue with [`pop`](Self::pop) after this (once the timer thread
    /// no longer reads it).
    pub fn stop(&self) {
        // SeqCst, then a fence before the caller's drain: pairs with the
        // fence in `push` (see there); also with the Acquire load in
        // `is_stopped`.
        self.stopped.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }
}

impl<T> Default for TimerIntake<T> {
    fn default() -> TimerIntake<T> {
        TimerIntake::new()
    }
}

impl<T> std::fmt::Debug for TimerIntake<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimerIntake")
            .field("stopped", &self.is_stopped())
            .finish_non_exhaustive()
    }
}
