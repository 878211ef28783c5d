//! A task's state word and its join state: the parts of [`crate::task`]
//! that decide who polls, who submits and who gets the output. They know
//! nothing of futures or queues, so they also compile under loom, where
//! `loom-tests/tests/task.rs` drives them.
//!
//! ```text
//!  IDLE --wake--> SCHEDULED --run--> RUNNING --Pending--> IDLE
//!                                     |   \--wake--> NOTIFIED --Pending--> SCHEDULED (yield)
//!                                     \--Ready / panic--> DONE
//! ```
//!
//! Only the waker that moves IDLE to SCHEDULED submits, so a task is queued
//! at most once and polled by one worker at a time. A wake during the poll
//! (NOTIFIED) makes the run return [`RunOutcome::Yield`]: the task goes to
//! the back of the local queue, like tokio's `yield_now`.

use crate::runnable::RunOutcome;
use crate::sync::{lock, wait, Arc, AtomicUsize, Condvar, Mutex, Ordering};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Not queued, not running; the next wake submits it.
const IDLE: usize = 0;
/// Queued (or about to be); a wake only writes the state back (see `wake`).
const SCHEDULED: usize = 1;
/// Being polled; a wake sets NOTIFIED.
const RUNNING: usize = 2;
/// Woken while being polled; the run will requeue it (a further wake
/// writes the state back, see `wake`).
const NOTIFIED: usize = 3;
/// Completed, panicked or cancelled; wakes do nothing.
const DONE: usize = 4;

/// A task's state word (see the module docs). Written by wakers (IDLE ->
/// SCHEDULED, RUNNING -> NOTIFIED) and by the worker running it (the other
/// transitions).
#[derive(Debug)]
pub struct TaskState(AtomicUsize);

impl TaskState {
    /// A task about to be submitted for its first run.
    pub fn new_scheduled() -> TaskState {
        TaskState(AtomicUsize::new(SCHEDULED))
    }

    /// SCHEDULED -> RUNNING, at the start of a run: from here until
    /// [`end_pending`](Self::end_pending) or [`complete`](Self::complete)
    /// the caller alone may touch the future.
    #[inline]
    pub fn start_run(&self) {
        // AcqRel: acquires the previous run's writes to the future (released
        // by its SCHEDULED/IDLE transition) and orders this RUNNING before
        // the poll's registrations of the waker.
        let prev = self.0.swap(RUNNING, Ordering::AcqRel);
        debug_assert_eq!(prev, SCHEDULED, "a task ran without being scheduled");
    }

    /// The poll returned `Pending`: RUNNING -> IDLE ([`RunOutcome::Done`]:
    /// the next wake submits it), or NOTIFIED -> SCHEDULED
    /// ([`RunOutcome::Yield`]: the caller requeues it).
    #[inline]
    pub fn end_pending(&self) -> RunOutcome {
        // AcqRel: releases the poll's writes to the next run; acquires a
        // waker's NOTIFIED.
        match self
            .0
            .compare_exchange(RUNNING, IDLE, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => RunOutcome::Done,
            Err(_) => {
                // NOTIFIED: still ours; requeue. A swap, not a store: a
                // waker that saw NOTIFIED writes it back (see `wake`), and
                // the two must be read-modify-writes of one order, or that
                // write-back could land after this and leave a queued task
                // NOTIFIED (loom found it with 3 preemptions). AcqRel:
                // acquires such a write-back; the queue push that follows
                // publishes the rest to the next run.
                let prev = self.0.swap(SCHEDULED, Ordering::AcqRel);
                debug_assert_eq!(prev, NOTIFIED, "a running task's state changed under it");
                RunOutcome::Yield
            }
        }
    }

    /// RUNNING -> DONE: the future completed (or panicked) and was dropped.
    #[inline]
    pub fn complete(&self) {
        // Release: pairs with Acquire loads of wakers, which then do nothing.
        self.0.store(DONE, Ordering::Release);
    }

    /// A wake. Returns `true` if it moved IDLE -> SCHEDULED: the caller
    /// must then submit the task (no one else will).
    #[inline]
    pub fn wake(&self) -> bool {
        // Acquire (and AcqRel on success): pairs with the run's transitions.
        let mut current = self.0.load(Ordering::Acquire);
        loop {
            let next = match current {
                IDLE => SCHEDULED,
                RUNNING => NOTIFIED,
                // Already queued, or woken during this poll: write the same
                // value back rather than return after the load. The run's
                // swap (or `end_pending`'s compare-and-swap) then reads this
                // write and acquires what the waker did before waking. With
                // a plain load, a waker that published readiness with a
                // Release store (not a lock or an RMW) and a run that
                // started just then formed a store-buffer pattern: the poll
                // could miss the readiness while the wake saw SCHEDULED and
                // did nothing, and the task went IDLE with the wake lost
                // (loom-tests/tests/task.rs,
                // `task_a_wake_of_a_queued_task_is_not_lost`).
                SCHEDULED | NOTIFIED => current,
                _ => return false,
            };
            // AcqRel: acquires the run's release of IDLE/RUNNING (so the
            // submit that follows hands on its writes) and releases the
            // waker's own writes to the run that reads this write.
            match self
                .0
                .compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return current == IDLE,
                Err(actual) => current = actual,
            }
        }
    }
}

/// Why a task produced no output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JoinError {
    /// The future panicked; the message, when the payload was a string.
    #[error("task panicked: {0}")]
    Panicked(String),
    /// The task was dropped before it completed (the scheduler quiesced
    /// or shut down, or its submission was refused).
    #[error("task cancelled before it completed")]
    Cancelled,
}

/// Where a task's output goes, shared by the task and its [`JoinHandle`].
pub struct JoinState<T> {
    slot: Mutex<JoinSlot<T>>,
    condvar: Condvar,
}

impl<T> fmt::Debug for JoinState<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JoinState(..)")
    }
}

struct JoinSlot<T> {
    result: Option<Result<T, JoinError>>,
    /// Set once, by the first `complete`.
    done: bool,
    /// The `JoinHandle` was dropped: nobody will take the output.
    detached: bool,
    /// A thread blocks in `JoinHandle::wait` (a condvar notify is a syscall
    /// on Linux, so it is only done for a waiter).
    blocked: bool,
    waker: Option<Waker>,
}

impl<T> JoinState<T> {
    /// An empty join state.
    pub fn new() -> Arc<JoinState<T>> {
        Arc::new(JoinState {
            slot: Mutex::new(JoinSlot {
                result: None,
                done: false,
                detached: false,
                blocked: false,
                waker: None,
            }),
            condvar: Condvar::new(),
        })
    }

    /// Hands over the task's result; only the first call counts. Called by
    /// the task when it completes, and by its `Drop` (as cancelled).
    pub fn complete(&self, result: Result<T, JoinError>) {
        let (waker, unwanted, blocked) = {
            let mut slot = lock(&self.slot);
            if slot.done {
                return;
            }
            slot.done = true;
            if slot.detached {
                (None, Some(result), false)
            } else {
                slot.result = Some(result);
                (slot.waker.take(), None, slot.blocked)
            }
        };
        // The output of a detached task is dropped outside the lock.
        drop(unwanted);
        if blocked {
            self.condvar.notify_all();
        }
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The handle that takes the result.
    pub fn handle(self: &Arc<Self>) -> JoinHandle<T> {
        JoinHandle {
            join: Arc::clone(self),
        }
    }
}

/// The output of a spawned task: a [`Future`] usable from any executor, or
/// [`JoinHandle::wait`] from a plain thread. Dropping it detaches the task
/// (it still runs; its output is dropped).
#[must_use = "dropping a JoinHandle detaches the task"]
pub struct JoinHandle<T> {
    join: Arc<JoinState<T>>,
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl<T> JoinHandle<T> {
    /// Whether the task has completed (or panicked, or was cancelled).
    pub fn is_finished(&self) -> bool {
        lock(&self.join.slot).done
    }

    /// Blocks the calling thread until the task completes.
    ///
    /// # Panics
    ///
    /// On a scheduler worker thread, where it would block the worker (see
    /// [`crate::assert_not_on_worker`]): `.await` the handle there.
    #[track_caller]
    pub fn wait(self) -> Result<T, JoinError> {
        #[cfg(not(loom))]
        crate::worker::assert_not_on_worker("JoinHandle::wait");
        let mut slot = lock(&self.join.slot);
        while !slot.done {
            slot.blocked = true;
            slot = wait(&self.join.condvar, slot);
        }
        slot.result.take().unwrap_or(Err(JoinError::Cancelled))
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = lock(&self.join.slot);
        if slot.done {
            return Poll::Ready(slot.result.take().unwrap_or(Err(JoinError::Cancelled)));
        }
        match &slot.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => slot.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        let unwanted = {
            let mut slot = lock(&self.join.slot);
            slot.detached = true;
            slot.waker = None;
            slot.result.take()
        };
        drop(unwanted);
    }
}
