//! One worker's parking spot: a token guarded by a mutex, and a condvar;
//! or, for the one worker at a time that holds the I/O driver, the
//! driver's blocking poll instead of the condvar.
//!
//! An `unpark` that comes before the `park` it is meant for is not lost: it
//! leaves the token set, and the next `park` consumes it and returns at once.
//! A stale token can therefore make one later `park` return early; callers
//! treat every return from `park` as "maybe spurious" and re-check
//! [`crate::idle::Idle`]'s sleeper list (the one source of truth for whether a
//! worker was woken).

use crate::sync::{lock, wait, Condvar, Mutex};

/// What the mutex guards.
#[derive(Debug, Default)]
struct State {
    /// The wake-up token: set by any waker, consumed by the parked thread.
    token: bool,
    /// Whether the parked thread blocks in the I/O driver (then a waker
    /// must wake the driver, not the condvar). Written only by the parking
    /// thread.
    in_driver: bool,
}

/// A parking spot for one thread.
#[derive(Debug, Default)]
pub struct Parker {
    /// Token and driver flag, always read and written under the mutex, so
    /// no wake-up is lost between checking the token and blocking.
    state: Mutex<State>,
    condvar: Condvar,
}

impl Parker {
    /// A parker with no token.
    pub fn new() -> Parker {
        Parker {
            state: Mutex::new(State::default()),
            condvar: Condvar::new(),
        }
    }

    /// Blocks until a token is available, then consumes it.
    pub fn park(&self) {
        let mut state = lock(&self.state);
        while !state.token {
            state = wait(&self.condvar, state);
        }
        state.token = false;
    }

    /// Blocks in `block` (the I/O driver's poll) instead of the condvar:
    /// unless a token is already there (then consumes it and returns
    /// `None` without calling `block`), marks this thread as waiting in the
    /// driver, runs `block`, then consumes whatever token came meanwhile.
    ///
    /// No lost wake-up, as with the condvar: [`unpark`](Self::unpark) sets
    /// the token and reads the driver flag under the same lock that this
    /// checks the token and sets the flag under. If the unpark's lock comes
    /// first, this sees the token and does not block; if this lock comes
    /// first, the unpark sees the flag and its caller wakes the driver
    /// (a `mio::Waker`: an eventfd write, which a poll that starts later
    /// still sees), so `block` returns.
    pub fn park_driver<R>(&self, block: impl FnOnce() -> R) -> Option<R> {
        {
            let mut state = lock(&self.state);
            if state.token {
                state.token = false;
                return None;
            }
            state.in_driver = true;
        }
        let result = block();
        let mut state = lock(&self.state);
        state.in_driver = false;
        state.token = false;
        Some(result)
    }

    /// Makes a token available and wakes the parked thread if it waits on
    /// the condvar. Returns `true` if it waits in the I/O driver instead:
    /// the caller must then wake the driver.
    #[must_use]
    pub fn unpark(&self) -> bool {
        let in_driver = {
            let mut state = lock(&self.state);
            state.token = true;
            state.in_driver
        };
        if !in_driver {
            // Notifying after the unlock is fine: the token is already
            // visible to the parked thread's next check under the mutex.
            self.condvar.notify_one();
        }
        in_driver
    }
}
