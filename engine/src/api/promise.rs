//! A write-once slot that futures poll and plain threads wait on: the
//! machinery behind `ask`, `graceful_stop` and termination.
//!
//! Its lock and condvar come through `crate::sync`, so the loom models in
//! `loom-tests/tests/promise.rs` run this code; under loom the timeout
//! timer is the shim's `ModelTimer` (the scheduler's timer thread does not
//! compile there), and the items are `pub` for the crate's `__loom`
//! re-export.
#![cfg_attr(not(loom), allow(unreachable_pub))]

use std::task::{Context, Poll, Waker};
use std::time::Instant;

#[cfg(not(loom))]
use proscenium_scheduler::TimerHandle;

#[cfg(loom)]
use crate::sync::ModelTimer as TimerHandle;
use crate::sync::{Arc, Condvar, Mutex, MutexGuard};

/// A value that is set once (the first `complete` wins) and then taken or
/// cloned by its waiters.
pub struct Slot<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

struct State<T> {
    value: Option<T>,
    completed: bool,
    wakers: Vec<Waker>,
    /// Threads blocked on `ready`: `complete` notifies only if there are
    /// any (a `notify_all` is a futex syscall even with nobody waiting).
    blocked: usize,
    /// A timer that completes the slot with a fallback; cancelled when the
    /// slot completes first.
    timer: Option<TimerHandle>,
}

impl<T> Slot<T> {
    /// An empty slot.
    pub fn new() -> Slot<T> {
        Slot {
            state: Mutex::new(State {
                value: None,
                completed: false,
                wakers: Vec::new(),
                blocked: 0,
                timer: None,
            }),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // No code that can panic runs under this lock.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the value, or hands it back if the slot was already completed.
    pub fn complete(&self, value: T) -> Result<(), T> {
        let mut state = self.lock();
        if state.completed {
            return Err(value);
        }
        state.completed = true;
        state.value = Some(value);
        let wakers = std::mem::take(&mut state.wakers);
        let timer = state.timer.take();
        // Read under the lock: a thread that blocks later sees `completed`
        // first and does not block.
        let blocked = state.blocked > 0;
        drop(state);
        // The timeout timer goes first: a waiter that wakes and terminates
        // the system must not find it still pending.
        if let Some(t) = timer {
            t.cancel();
        }
        if blocked {
            self.ready.notify_all();
        }
        for w in wakers {
            w.wake();
        }
        Ok(())
    }

    /// Whether a value was set (taken or not).
    pub fn is_completed(&self) -> bool {
        self.lock().completed
    }

    /// Attaches the fallback timer (cancelled at once if already completed).
    pub fn set_timer(&self, timer: TimerHandle) {
        let mut state = self.lock();
        if state.completed {
            drop(state);
            timer.cancel();
        } else {
            state.timer = Some(timer);
        }
    }

    /// Cancels the fallback timer (the waiter lost interest).
    pub fn cancel_timer(&self) {
        let timer = self.lock().timer.take();
        if let Some(t) = timer {
            t.cancel();
        }
    }

    fn register(state: &mut State<T>, cx: &Context<'_>) {
        if !state.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            state.wakers.push(cx.waker().clone());
        }
    }

    /// Polls for the value, taking it (one consumer).
    pub fn poll_take(&self, cx: &Context<'_>) -> Poll<T> {
        let mut state = self.lock();
        match state.value.take() {
            Some(v) => Poll::Ready(v),
            None if state.completed => panic!("a slot's value was taken twice"),
            None => {
                Slot::register(&mut state, cx);
                Poll::Pending
            }
        }
    }

    /// Takes the value if it is there, without waiting (`None`: not yet
    /// completed, or already taken).
    pub fn try_take(&self) -> Option<T> {
        self.lock().value.take()
    }

    /// Whether a value is waiting to be taken (completed and not taken).
    pub fn has_value(&self) -> bool {
        self.lock().value.is_some()
    }

    /// Blocks this thread until the value is set, and takes it.
    pub fn wait_take(&self) -> T {
        self.wait_take_until(None)
            .expect("no deadline: only a value ends the wait")
    }

    /// Blocks this thread until the value is set (and takes it) or
    /// `deadline` passes (`None`).
    pub fn wait_take_until(&self, deadline: Option<Instant>) -> Option<T> {
        // No spin before blocking: a waiter that spins or yields takes the
        // core from the worker that would run the reply (2 cores, a pinned
        // worker on each): decision 0019, section 3.
        let mut state = self.lock();
        loop {
            if let Some(v) = state.value.take() {
                return Some(v);
            }
            assert!(!state.completed, "a slot's value was taken twice");
            state = self.block(state, deadline)?;
        }
    }

    /// Blocks on `ready` until notified or `deadline` (`None` once it has
    /// passed), counted in `blocked` meanwhile.
    fn block<'a>(
        &'a self,
        mut state: MutexGuard<'a, State<T>>,
        deadline: Option<Instant>,
    ) -> Option<MutexGuard<'a, State<T>>> {
        let wait = match deadline {
            None => None,
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return None;
                }
                Some(d - now)
            }
        };
        state.blocked += 1;
        let mut state = match wait {
            None => self.ready.wait(state).unwrap_or_else(|e| e.into_inner()),
            Some(wait) => self
                .ready
                .wait_timeout(state, wait)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0),
        };
        state.blocked -= 1;
        Some(state)
    }
}

/// The payload of a slot's timeout timer: completes the slot with `fired`
/// when the timer fires, and with `dropped` if the timer is dropped
/// unfired, which happens when the scheduler stops with the timer pending
/// (or after it stopped): so a waiter never outlives the timer thread
/// waiting. A timer cancelled because the slot completed, or because its
/// waiter gave up, finds the slot completed or abandoned: no harm.
pub struct Expiry<T> {
    slot: Arc<Slot<T>>,
    fired: Option<T>,
    dropped: Option<T>,
}

impl<T> Expiry<T> {
    /// An expiry that completes `slot` with `fired` when its timer fires,
    /// and with `dropped` when it is dropped unfired.
    pub fn new(slot: Arc<Slot<T>>, fired: T, dropped: T) -> Expiry<T> {
        Expiry {
            slot,
            fired: Some(fired),
            dropped: Some(dropped),
        }
    }

    /// The timer fired: complete with `fired` (a no-op if completed).
    pub fn fire(mut self) {
        if let Some(v) = self.fired.take() {
            self.dropped = None;
            let _ = self.slot.complete(v);
        }
    }
}

impl<T> Drop for Expiry<T> {
    fn drop(&mut self) {
        if let Some(v) = self.dropped.take() {
            let _ = self.slot.complete(v);
        }
    }
}

impl<T: Clone> Slot<T> {
    /// Polls for the value, cloning it (many consumers).
    pub fn poll_clone(&self, cx: &Context<'_>) -> Poll<T> {
        let mut state = self.lock();
        match &state.value {
            Some(v) => Poll::Ready(v.clone()),
            None => {
                Slot::register(&mut state, cx);
                Poll::Pending
            }
        }
    }

    /// Blocks until the value is set or `deadline` passes.
    pub fn wait_clone(&self, deadline: Option<Instant>) -> Option<T> {
        let mut state = self.lock();
        loop {
            if let Some(v) = &state.value {
                return Some(v.clone());
            }
            state = self.block(state, deadline)?;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn first_completion_wins_and_waiters_wake() {
        let slot = Arc::new(Slot::new());
        let s = Arc::clone(&slot);
        let waiter = std::thread::spawn(move || s.wait_take());
        assert_eq!(slot.complete(1), Ok(()));
        assert_eq!(slot.complete(2), Err(2));
        assert_eq!(waiter.join().expect("waiter"), 1);
        assert!(slot.is_completed());
    }

    #[test]
    fn clones_for_many_and_times_out() {
        let slot: Slot<u8> = Slot::new();
        let soon = Instant::now() + std::time::Duration::from_millis(1);
        assert_eq!(slot.wait_clone(Some(soon)), None);
        slot.complete(3).expect("first");
        assert_eq!(slot.wait_clone(None), Some(3));
        assert_eq!(slot.wait_clone(None), Some(3));
    }
}
