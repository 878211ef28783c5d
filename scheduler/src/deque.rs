//! The work queues: crossbeam-deque's `Injector`, `Worker` and `Stealer`,
//! or, under `--cfg loom`, a stand-in with the same API so that the loom
//! models (`loom-tests/tests/worker.rs`) run the real worker loop.
//!
//! crossbeam-deque is not loom-aware; its own tests check its internals.
//! What the models check is the scheduler's protocol around the queues
//! (the wake-ups, the searcher count, the re-check before a park), so the
//! stand-in must not order more than crossbeam does where that protocol
//! relies on ordering: the one place is the emptiness check a parking
//! worker makes after its fence (`Shared::has_shared_work`) against a push
//! followed by a submitter's fence (`Idle::notify_one`), a store-buffer
//! pattern. A mutex there would order the two by itself and hide a missing
//! fence, so the stand-in's `is_empty` and `len` read an atomic count, with
//! no lock: a push (under the queue's lock) increments it with Release, as
//! crossbeam's push publishes its slot with a Release store, and `is_empty`
//! loads it with Acquire, as crossbeam's do (loom treats the `SeqCst`
//! loads of crossbeam's `Injector::is_empty` as Acquire anyway).
//! `Injector::steal` that finds the count zero returns at once, without
//! the lock (as crossbeam's finds an empty queue in its index loads), so
//! an empty steal orders nothing either: the timer thread's stop drains
//! its intake with one, which `timer_intake.rs`'s handshake must order by
//! its fences. Other takes lock: a taker gets each item once and sees what
//! its pusher wrote, which is what crossbeam guarantees. (An empty
//! `steal_batch_and_pop` that locks orders more than crossbeam's; the
//! worker models do not rely on it, their park re-check is `is_empty`, and
//! a lock-free empty check there made them take minutes instead of
//! seconds.) Not modelled:
//! `Steal::Retry` (a lost race inside crossbeam; the callers loop or try the
//! next victim) and the exact batch size of a steal (crossbeam's is
//! unspecified: the stand-in takes all of an injector's items and half of
//! a worker queue's, roughly what crossbeam does with a few items).

#[cfg(not(loom))]
pub(crate) use crossbeam_deque::{Injector, Steal, Stealer, Worker};

#[cfg(loom)]
pub(crate) use self::stand_in::{Injector, Steal, Stealer, Worker};

#[cfg(loom)]
mod stand_in {
    use crate::sync::{lock, AtomicUsize, Mutex, Ordering};
    use std::collections::VecDeque;
    use std::sync::Arc;

    /// The result of a steal (crossbeam's, without `Retry` ever returned).
    #[derive(Debug)]
    #[allow(dead_code)]
    pub(crate) enum Steal<T> {
        /// The queue was empty.
        Empty,
        /// One item.
        Success(T),
        /// Never returned by the stand-in.
        Retry,
    }

    impl<T> Steal<T> {
        // Used by the scheduler's quiesce, which loom builds leave out.
        #[allow(dead_code)]
        pub(crate) fn is_empty(&self) -> bool {
            matches!(self, Steal::Empty)
        }
    }

    /// A FIFO queue: items under a loom mutex, their count in a loom
    /// atomic (see the module docs).
    struct Queue<T> {
        items: Mutex<VecDeque<T>>,
        len: AtomicUsize,
    }

    impl<T> Queue<T> {
        fn new() -> Queue<T> {
            Queue {
                items: Mutex::new(VecDeque::new()),
                len: AtomicUsize::new(0),
            }
        }

        fn push(&self, item: T) {
            let mut items = lock(&self.items);
            items.push_back(item);
            // Release: as crossbeam's push publishes the slot; pairs with
            // the Acquire load in `is_empty`.
            self.len.fetch_add(1, Ordering::Release);
        }

        /// Takes up to `max` items from the front.
        fn take(&self, max: usize) -> Vec<T> {
            let mut items = lock(&self.items);
            let n = max.min(items.len());
            if n > 0 {
                // Relaxed: the lock orders the items; the count is only
                // read as a hint of emptiness.
                self.len.fetch_sub(n, Ordering::Relaxed);
            }
            items.drain(..n).collect()
        }

        fn pop(&self) -> Option<T> {
            self.take(1).pop()
        }

        fn is_empty(&self) -> bool {
            // Acquire: pairs with the Release increment in `push`.
            self.len.load(Ordering::Acquire) == 0
        }

        fn len(&self) -> usize {
            // Acquire: as `is_empty`.
            self.len.load(Ordering::Acquire)
        }

        /// Moves a batch to `dest` and returns the first item: all of it
        /// (`all`, as an injector does with a few items) or half, rounded
        /// up, plus one (as a worker queue does).
        fn steal_batch_and_pop(&self, dest: &Worker<T>, all: bool) -> Steal<T> {
            let mut batch = {
                let mut items = lock(&self.items);
                let n = if all {
                    items.len()
                } else {
                    items.len().div_ceil(2)
                };
                if n > 0 {
                    // Relaxed: as in `take`.
                    self.len.fetch_sub(n, Ordering::Relaxed);
                }
                items.drain(..n).collect::<VecDeque<T>>()
            };
            match batch.pop_front() {
                None => Steal::Empty,
                Some(first) => {
                    for item in batch {
                        dest.push(item);
                    }
                    Steal::Success(first)
                }
            }
        }
    }

    /// The shared queue of external submissions.
    pub(crate) struct Injector<T>(Queue<T>);

    impl<T> Injector<T> {
        pub(crate) fn new() -> Injector<T> {
            Injector(Queue::new())
        }

        pub(crate) fn push(&self, item: T) {
            self.0.push(item);
        }

        pub(crate) fn steal(&self) -> Steal<T> {
            // An empty queue is seen without the lock, as crossbeam's steal
            // sees it in its index loads (see the module docs).
            if self.0.is_empty() {
                return Steal::Empty;
            }
            self.0.pop().map_or(Steal::Empty, Steal::Success)
        }

        pub(crate) fn steal_batch_and_pop(&self, dest: &Worker<T>) -> Steal<T> {
            self.0.steal_batch_and_pop(dest, true)
        }

        pub(crate) fn is_empty(&self) -> bool {
            self.0.is_empty()
        }

        pub(crate) fn len(&self) -> usize {
            self.0.len()
        }
    }

    /// A worker's own queue (FIFO, as the scheduler makes them).
    pub(crate) struct Worker<T>(Arc<Queue<T>>);

    impl<T> Worker<T> {
        pub(crate) fn new_fifo() -> Worker<T> {
            Worker(Arc::new(Queue::new()))
        }

        pub(crate) fn stealer(&self) -> Stealer<T> {
            Stealer(Arc::clone(&self.0))
        }

        pub(crate) fn push(&self, item: T) {
            self.0.push(item);
        }

        pub(crate) fn pop(&self) -> Option<T> {
            self.0.pop()
        }

        pub(crate) fn is_empty(&self) -> bool {
            self.0.is_empty()
        }
    }

    /// Another worker's view of a worker queue.
    pub(crate) struct Stealer<T>(Arc<Queue<T>>);

    impl<T> Stealer<T> {
        pub(crate) fn steal_batch_and_pop(&self, dest: &Worker<T>) -> Steal<T> {
            self.0.steal_batch_and_pop(dest, false)
        }

        pub(crate) fn is_empty(&self) -> bool {
            self.0.is_empty()
        }

        pub(crate) fn len(&self) -> usize {
            self.0.len()
        }
    }
}
