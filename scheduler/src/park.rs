//! One worker's parking spot: a token guarded by a mutex, and a condvar.
//!
//! An `unpark` that comes before the `park` it is meant for is not lost: it
//! leaves the token set, and the next `park` consumes it and returns at once.
//! A stale token can therefore make one later `park` return early; callers
//! treat every return from `park` as "maybe spurious" and re-check
//! [`crate::idle::Idle`]'s sleeper list (the one source of truth for whether a
//! worker was woken).

use crate::sync::{lock, wait, Condvar, Mutex};

/// A parking spot for one thread.
#[derive(Debug, Default)]
pub struct Parker {
    /// The wake-up token. Written by the parked thread (consumes it) and by
    /// any waker (sets it), always under the mutex, so no wake-up is lost
    /// between checking the token and waiting on the condvar.
    token: Mutex<bool>,
    condvar: Condvar,
}

impl Parker {
    /// A parker with no token.
    pub fn new() -> Parker {
        Parker {
            token: Mutex::new(false),
            condvar: Condvar::new(),
        }
    }

    /// Blocks until a token is available, then consumes it.
    pub fn park(&self) {
        let mut token = lock(&self.token);
        while !*token {
            token = wait(&self.condvar, token);
        }
        *token = false;
    }

    /// Makes a token available and wakes the parked thread, if any.
    pub fn unpark(&self) {
        *lock(&self.token) = true;
        // Notifying after the unlock is fine: the token is already visible
        // to the parked thread's next check under the mutex.
        self.condvar.notify_one();
    }
}
