//! [`block_on`]: run a future to completion on the calling thread.

use crate::sync::{thread, Arc, AtomicBool, Ordering};
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Wake, Waker};

/// Wakes the blocked thread.
struct ThreadWaker {
    thread: thread::Thread,
    /// Set by wakers, consumed by the blocked thread.
    notified: AtomicBool,
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Release: pairs with the Acquire swap in `block_on`, so the blocked
        // thread sees what was done before the wake.
        if !self.notified.swap(true, Ordering::Release) {
            self.thread.unpark();
        }
    }
}

/// Runs `future` to completion on the calling thread, parking it while the
/// future is pending. For plain threads (`main`, tests): called on a
/// scheduler worker it blocks that worker.
///
/// ```
/// let scheduler = proscenium_scheduler::Scheduler::builder()
///     .workers(1)
///     .pin_workers(false)
///     .build()
///     .expect("valid configuration");
/// let task = scheduler.handle().spawn(async { 6 * 7 });
/// assert_eq!(proscenium_scheduler::block_on(task), Ok(42));
/// ```
///
/// # Panics
///
/// On a scheduler worker thread (see [`crate::assert_not_on_worker`]).
#[track_caller]
pub fn block_on<F: Future>(future: F) -> F::Output {
    #[cfg(not(loom))]
    crate::worker::assert_not_on_worker("block_on");
    let mut future = pin!(future);
    let parker = Arc::new(ThreadWaker {
        thread: thread::current(),
        notified: AtomicBool::new(false),
    });
    let waker = Waker::from(Arc::clone(&parker));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        // Acquire: pairs with the Release swap in `wake_by_ref`. `park` may
        // return spuriously; the flag decides.
        while !parker.notified.swap(false, Ordering::Acquire) {
            thread::park();
        }
    }
}
