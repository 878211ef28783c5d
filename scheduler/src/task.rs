//! Futures on the scheduler: [`Handle::spawn`] wraps a future in a task (a
//! [`Runnable`] whose waker re-submits it) and returns a [`JoinHandle`].
//!
//! A task's state word ([`TaskState`], in `task_state.rs`) decides who may
//! poll and who must submit; its join state ([`JoinState`]) where the
//! output goes. Both compile under loom and have models
//! (`loom-tests/tests/task.rs`).

use crate::runnable::{Budget, RunOutcome, Runnable};
use crate::scheduler::{Handle, Shared};
use crate::sync::{Arc, UnsafeCell};
use crate::task_state::{JoinError, JoinHandle, JoinState, TaskState};
use crate::worker::{panic_message, report_panic};
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};

struct Task<F: Future> {
    /// IDLE/SCHEDULED/RUNNING/NOTIFIED/DONE (see `task_state.rs`).
    state: TaskState,
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
        self.state.start_run();
        // `self` outlives `waker` (a local), and `Waker::clone` increments
        // the count as for any `Arc` waker.
        // SAFETY: `Arc::from_raw` on a live `Arc`'s pointer makes a second
        // owner without a count; `ManuallyDrop` never drops it.
        let waker = ManuallyDrop::new(Waker::from(unsafe { Arc::from_raw(Arc::as_ptr(&self)) }));
        let mut cx = Context::from_waker(&waker);
        match catch_unwind(AssertUnwindSafe(|| self.poll_future(&mut cx))) {
            Ok(Poll::Pending) => self.state.end_pending(),
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
        self.state.complete();
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
        if self.state.wake() && self.shared.submit(self.clone()).is_err() {
            tracing::debug!("task woken on a closed scheduler; dropped");
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
        join.handle()
    }

    /// Like [`spawn`](Self::spawn), but the task's first run is submitted
    /// with [`submit_urgent`](Self::submit_urgent): it starts ahead of
    /// everything queued (later wake-ups queue as usual). For control-plane
    /// work such as a shutdown's state machine; dropping the handle detaches
    /// the task.
    ///
    /// Hidden from the docs: the engine's plumbing, not part of the API an
    /// application uses (`proscenium::Handle` is this type); it may change
    /// in any release.
    #[doc(hidden)]
    pub fn spawn_urgent<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let join = JoinState::new();
        self.spawn_task(future, Some(Arc::clone(&join)), true);
        join.handle()
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
            state: TaskState::new_scheduled(),
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
