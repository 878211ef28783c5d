//! Futures on the scheduler: [`Handle::spawn`] wraps a future in a task (a
//! [`Runnable`] whose waker re-submits it) and returns a [`JoinHandle`].
//!
//! A task's state word decides who may poll and who must submit:
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

use crate::runnable::{Budget, RunOutcome, Runnable};
use crate::scheduler::{Handle, Shared};
use crate::sync::{lock, wait, Arc, AtomicUsize, Condvar, Mutex, Ordering, UnsafeCell};
use crate::worker::{panic_message, report_panic};
use std::fmt;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};

/// Not queued, not running; the next wake submits it.
const IDLE: usize = 0;
/// Queued (or about to be); wakes do nothing.
const SCHEDULED: usize = 1;
/// Being polled; a wake sets NOTIFIED.
const RUNNING: usize = 2;
/// Woken while being polled; the run will requeue it.
const NOTIFIED: usize = 3;
/// Completed, panicked or cancelled; wakes do nothing.
const DONE: usize = 4;

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

struct Task<F: Future> {
    /// IDLE/SCHEDULED/RUNNING/NOTIFIED/DONE. Written by wakers (IDLE ->
    /// SCHEDULED, RUNNING -> NOTIFIED) and by the worker running it (the
    /// other transitions).
    state: AtomicUsize,
    /// `Some` until the future completes. Accessed only by the worker that
    /// moved `state` from SCHEDULED to RUNNING, until it leaves RUNNING.
    future: UnsafeCell<Option<F>>,
    /// Where the output goes; `None` for [`Handle::spawn_detached`].
    join: Option<Arc<JoinState<F::Output>>>,
    shared: Arc<Shared>,
}

// SAFETY: `Task` is shared between threads through `Arc` (queues, wakers).
// Its only non-`Sync` field, `future`, is touched only by the single worker
// that holds the RUNNING state (the state machine above admits one holder
// at a time), or by `Drop`, which has exclusive access. `F: Send` because
// the future moves between workers; `F::Output: Send` because the output
// moves to the joiner.
unsafe impl<F: Future + Send> Sync for Task<F> where F::Output: Send {}

impl<F> Task<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn poll_future(&self, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.future.with_mut(|f| {
            // The future is never moved out of the cell while `Some` (it is
            // dropped in place by `drop_future`), so pinning it is sound.
            // SAFETY: the caller holds RUNNING (see `future`'s invariant), so
            // no other reference to the contents exists.
            let fut = unsafe { &mut *f };
            match fut.as_mut() {
                // SAFETY: see above; the `Option`'s contents stay put.
                Some(fut) => unsafe { Pin::new_unchecked(fut) }.poll(cx),
                None => Poll::Pending,
            }
        })
    }

    fn drop_future(&self) {
        self.future.with_mut(|f| {
            // SAFETY: the caller holds RUNNING, so access is exclusive;
            // dropping in place keeps the pinning promise.
            unsafe { *f = None };
        });
    }
}

impl<F> Runnable for Task<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn run(self: Arc<Self>, _budget: &mut Budget) -> RunOutcome {
        // AcqRel: acquires the previous run's writes to the future (released
        // by its SCHEDULED/IDLE transition) and orders this RUNNING before
        // the poll's registrations of the waker.
        let prev = self.state.swap(RUNNING, Ordering::AcqRel);
        debug_assert_eq!(prev, SCHEDULED, "a task ran without being scheduled");
        // `self` outlives `waker` (a local), and `Waker::clone` increments
        // the count as for any `Arc` waker.
        // SAFETY: `Arc::from_raw` on a live `Arc`'s pointer makes a second
        // owner without a count; `ManuallyDrop` never drops it.
        let waker = ManuallyDrop::new(Waker::from(unsafe { Arc::from_raw(Arc::as_ptr(&self)) }));
        let mut cx = Context::from_waker(&waker);
        match catch_unwind(AssertUnwindSafe(|| self.poll_future(&mut cx))) {
            Ok(Poll::Pending) => {
                // AcqRel: releases the poll's writes to the next run;
                // acquires a waker's NOTIFIED.
                match self.state.compare_exchange(
                    RUNNING,
                    IDLE,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => RunOutcome::Done,
                    Err(_) => {
                        // NOTIFIED: still ours; requeue. Relaxed: the queue
                        // push that follows publishes it to the next run.
                        self.state.store(SCHEDULED, Ordering::Relaxed);
                        RunOutcome::Yield
                    }
                }
            }
            Ok(Poll::Ready(output)) => {
                self.finish(Ok(output));
                RunOutcome::Done
            }
            Err(payload) => {
                report_panic(&*payload, "future");
                let message = panic_message(&*payload);
                self.finish(Err(JoinError::Panicked(message)));
                RunOutcome::Done
            }
        }
    }
}

impl<F> Task<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn finish(&self, result: Result<F::Output, JoinError>) {
        if catch_unwind(AssertUnwindSafe(|| self.drop_future())).is_err() {
            tracing::error!("a completed future panicked while being dropped");
        }
        // Release: pairs with Acquire loads of wakers, which then do nothing.
        self.state.store(DONE, Ordering::Release);
        if let Some(join) = &self.join {
            join.complete(result);
        }
    }
}

impl<F> Wake for Task<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Acquire (and AcqRel on success): pairs with the run's transitions.
        let mut current = self.state.load(Ordering::Acquire);
        loop {
            let next = match current {
                IDLE => SCHEDULED,
                RUNNING => NOTIFIED,
                _ => return,
            };
            // AcqRel: acquires the run's release of IDLE/RUNNING (so the
            // submit below hands on its writes) and releases the waker's
            // own writes to the run that sees SCHEDULED or NOTIFIED.
            match self.state.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    if current == IDLE && self.shared.submit(self.clone()).is_err() {
                        tracing::debug!("task woken on a closed scheduler; dropped");
                    }
                    return;
                }
                Err(actual) => current = actual,
            }
        }
    }
}

impl<F: Future> Drop for Task<F> {
    fn drop(&mut self) {
        // Exclusive access; the future (if any) is dropped with the cell.
        // A task dropped before DONE never completes: tell the joiner.
        if let Some(join) = &self.join {
            join.complete(Err(JoinError::Cancelled));
        }
    }
}

impl Handle {
    /// Spawns `future` as a task on this scheduler. From a worker the task
    /// goes to that worker's LIFO slot, from elsewhere to the injector.
    ///
    /// If the scheduler is closed, the task is dropped and the handle
    /// resolves to [`JoinError::Cancelled`].
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let join = JoinState::new();
        self.spawn_task(future, Some(Arc::clone(&join)), false);
        JoinHandle { join }
    }

    /// Like [`spawn`](Self::spawn), but the task's first run is submitted
    /// with [`submit_urgent`](Self::submit_urgent): it starts ahead of
    /// everything queued (later wake-ups queue as usual). For control-plane
    /// work such as a shutdown's state machine; dropping the handle detaches
    /// the task.
    pub fn spawn_urgent<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let join = JoinState::new();
        self.spawn_task(future, Some(Arc::clone(&join)), true);
        JoinHandle { join }
    }

    /// Spawns `future` with no [`JoinHandle`]: its output is dropped. One
    /// allocation instead of two (the join state is not needed), for
    /// fire-and-forget tasks.
    pub fn spawn_detached<F>(&self, future: F)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_task(future, None, false);
    }

    fn spawn_task<F>(&self, future: F, join: Option<Arc<JoinState<F::Output>>>, urgent: bool)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let task = Arc::new(Task {
            state: AtomicUsize::new(SCHEDULED),
            future: UnsafeCell::new(Some(future)),
            join,
            shared: Arc::clone(&self.shared),
        });
        let submitted = if urgent {
            self.shared.submit_urgent(task)
        } else {
            self.shared.submit(task)
        };
        if submitted.is_err() {
            tracing::debug!("spawn on a closed scheduler; task dropped");
        }
    }
}

struct JoinState<T> {
    slot: Mutex<JoinSlot<T>>,
    condvar: Condvar,
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
    fn new() -> Arc<JoinState<T>> {
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

    fn complete(&self, result: Result<T, JoinError>) {
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
