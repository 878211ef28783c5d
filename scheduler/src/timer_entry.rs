//! One timer: its deadline, its state word (`PENDING`, then `FIRED` or
//! `CANCELLED`, once) and what it does when due. The timer thread
//! ([`crate::timer`]) fires entries, handles cancel them, a [`Sleep`]
//! polls one; the races between the three are decided here, and this
//! module compiles under loom (`loom-tests/tests/timer.rs`).
//!
//! [`Sleep`]: crate::Sleep

use crate::sync::{lock, AtomicUsize, Mutex, Ordering};
use std::fmt;
use std::task::{Context, Poll, Waker};

/// Entry states.
const PENDING: usize = 0;
const FIRED: usize = 1;
const CANCELLED: usize = 2;

/// What a due timer does.
pub(crate) enum Action {
    /// Run this callback on a worker.
    Callback(Box<dyn FnOnce() + Send>),
    /// Run this callback on the timer thread itself (see
    /// [`Handle::schedule_inline`](crate::Handle::schedule_inline)).
    #[cfg_attr(loom, allow(dead_code))]
    Inline(Box<dyn FnOnce() + Send>),
    /// Wake this waker (a [`Sleep`](crate::Sleep)); `None` until first
    /// polled.
    Wake(Option<Waker>),
    /// Taken (fired or cancelled).
    Gone,
}

/// What [`TimerEntry::fire`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Fired {
    /// The entry was cancelled first: nothing.
    Cancelled,
    /// A sleep's waker was woken (or it was not polled yet: its first poll
    /// sees FIRED), or an inline callback ran.
    Done,
    /// A worker callback is due: the caller submits the entry, whose run
    /// takes the callback ([`TimerEntry::take_callback`]).
    Submit,
}

/// One timer (see the module docs).
pub struct TimerEntry {
    /// Deadline in ticks (milliseconds since the scheduler started).
    when: u64,
    /// `PENDING`, then `FIRED` or `CANCELLED`; written once, by whoever wins
    /// the compare-and-swap from `PENDING` (the timer thread or a canceller).
    state: AtomicUsize,
    /// Taken by the winner of `state`; a [`Sleep`](crate::Sleep) also
    /// updates its waker.
    action: Mutex<Action>,
}

impl fmt::Debug for TimerEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerEntry")
            .field("when", &self.when)
            .field("fired", &self.is_fired())
            .finish_non_exhaustive()
    }
}

impl TimerEntry {
    pub(crate) fn new(when: u64, action: Action) -> TimerEntry {
        TimerEntry {
            when,
            state: AtomicUsize::new(PENDING),
            action: Mutex::new(action),
        }
    }

    /// A pending entry whose due run calls `callback` (on a worker).
    #[cfg_attr(not(loom), allow(dead_code))]
    pub fn callback(when: u64, callback: impl FnOnce() + Send + 'static) -> TimerEntry {
        TimerEntry::new(when, Action::Callback(Box::new(callback)))
    }

    /// A pending entry for a [`Sleep`](crate::Sleep).
    #[cfg_attr(not(loom), allow(dead_code))]
    pub fn sleep(when: u64) -> TimerEntry {
        TimerEntry::new(when, Action::Wake(None))
    }

    /// The deadline, in ticks.
    pub fn when(&self) -> u64 {
        self.when
    }

    fn state(&self) -> usize {
        // Acquire: pairs with the AcqRel compare-and-swap in `transition`,
        // so a reader that sees FIRED sees what the firer did before.
        self.state.load(Ordering::Acquire)
    }

    /// Neither fired nor cancelled (Acquire: see `state`).
    pub fn is_pending(&self) -> bool {
        self.state() == PENDING
    }

    /// Whether the entry fired.
    pub fn is_fired(&self) -> bool {
        self.state() == FIRED
    }

    /// Fired or cancelled, as a hint for the wheel, which drops such an
    /// entry when its slot comes up.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn is_dead_hint(&self) -> bool {
        // Relaxed: a hint; dropping a cancelled entry reads nothing of it.
        self.state.load(Ordering::Relaxed) != PENDING
    }

    /// PENDING -> `to`; true for the one winner.
    fn transition(&self, to: usize) -> bool {
        // AcqRel: the winner acquires the scheduling thread's writes (the
        // action) and releases its own to later `state` readers.
        self.state
            .compare_exchange(PENDING, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// PENDING -> CANCELLED, dropping the action unrun. `true` for the
    /// winner (then `on_won` ran first: the pending count).
    pub fn cancel(&self, on_won: impl FnOnce()) -> bool {
        if !self.transition(CANCELLED) {
            return false;
        }
        on_won();
        let action = std::mem::replace(&mut *lock(&self.action), Action::Gone);
        drop(action);
        true
    }

    /// PENDING -> FIRED, then the action: wake a sleep's waker, run an
    /// inline callback here (a panic is caught and logged), or tell the
    /// caller to submit the entry. `on_won` runs right after the transition
    /// is won.
    pub fn fire(&self, on_won: impl FnOnce()) -> Fired {
        if !self.transition(FIRED) {
            return Fired::Cancelled;
        }
        on_won();
        let waker = {
            let mut action = lock(&self.action);
            match &mut *action {
                Action::Wake(w) => Some(w.take()),
                Action::Inline(_) => {
                    let Action::Inline(f) = std::mem::replace(&mut *action, Action::Gone) else {
                        unreachable!("matched Inline just above");
                    };
                    drop(action);
                    if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
                    {
                        tracing::error!(
                            panic = %crate::runnable::panic_message(payload.as_ref()),
                            "an inline timer callback panicked"
                        );
                    }
                    return Fired::Done;
                }
                _ => None,
            }
        };
        match waker {
            Some(Some(w)) => {
                w.wake();
                Fired::Done
            }
            Some(None) => Fired::Done, // a `Sleep` not polled yet; its first poll sees FIRED
            None => Fired::Submit,
        }
    }

    /// The worker callback, for the run of a submitted entry (once).
    pub fn take_callback(&self) -> Option<Box<dyn FnOnce() + Send>> {
        match std::mem::replace(&mut *lock(&self.action), Action::Gone) {
            Action::Callback(f) => Some(f),
            _ => None,
        }
    }

    /// A [`Sleep`](crate::Sleep)'s poll: ready once fired; otherwise
    /// registers `cx`'s waker for the firer.
    pub fn poll_sleep(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.is_fired() {
            return Poll::Ready(());
        }
        {
            let mut action = lock(&self.action);
            if let Action::Wake(w) = &mut *action {
                match w {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *w = Some(cx.waker().clone()),
                }
            }
        }
        // Re-check after registering: the firer sets FIRED before it takes
        // the waker under the same lock, so either it took ours or we see
        // FIRED here.
        if self.is_fired() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}
