//! loom models of a task's state word and join state
//! (`scheduler/src/task_state.rs`, used by `scheduler/src/task.rs`): a
//! task is queued at most once, polled by one thread at a time, every
//! wake is followed by a poll that sees what the waker did before it, a
//! wake after completion does nothing, and the joiner gets the output.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release`.
//!
//! The models drive the real `TaskState` (the transitions `Task::run` and
//! `Task::wake_by_ref` make) and the real `JoinState`/`JoinHandle`. The
//! future is a loom `UnsafeCell` that a run writes while it holds RUNNING
//! (two runs that overlap, or one not ordered after the last, are a
//! causality violation); the run queue is a loom `Mutex<usize>` (a queue's
//! push and pop synchronise, as crossbeam's do); a waker first bumps a
//! Relaxed "messages" counter, which a run reads into the cell: only the
//! state word's orderings and the queue can make the bump visible.
//!
//! Mutations of `task_state.rs` checked to be caught:
//! - `end_pending` storing IDLE without its compare-and-swap (a wake during
//!   the poll is lost): "a wake was not followed by a poll" (the last poll
//!   saw 1 message, not 2);
//! - `wake` returning `true` (submit) for RUNNING -> NOTIFIED too: "queued
//!   twice";
//! - `end_pending`'s compare-and-swap with Relaxed success ordering: a
//!   causality violation on the future (a run on the main thread is not
//!   ordered after the one on the worker thread);
//! - `JoinHandle::wait` not setting `blocked` (so `complete` skips the
//!   notify): deadlock.
//!
//! - `wake`'s compare-and-swap with Relaxed orderings: "lost wake" in
//!   `task_a_wake_of_a_queued_task_is_not_lost`;
//! - `wake` returning after its load when it sees SCHEDULED (the code
//!   before the fix this model was written for): "lost wake".
//!
//! - `start_run`'s swap Relaxed: "lost wake" in the same model (the swap
//!   must acquire the waker's write-back).
//!
//! - `end_pending`'s NOTIFIED -> SCHEDULED swap replaced by a plain store
//!   (issue 28: the other models catch it only with 3 preemptions): "a
//!   task ran without being scheduled" in
//!   `task_wakes_during_a_run_leave_it_scheduled` at 2.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;
use proscenium_scheduler::__loom::{JoinState, TaskState};
use proscenium_scheduler::{JoinError, RunOutcome};

/// A task as the scheduler sees it, with a counter for a future.
struct Harness {
    state: TaskState,
    /// Submissions queued and not yet taken (a run queue of one task):
    /// Release pushes, Acquire pops, like crossbeam's deque and injector.
    queued: AtomicUsize,
    /// Messages sent to the task: a mailbox under a lock, as a channel is.
    messages: Mutex<usize>,
    /// The future: the messages its last poll saw.
    seen: UnsafeCell<usize>,
}

impl Harness {
    /// Spawned: SCHEDULED and in the queue.
    fn spawned() -> Arc<Harness> {
        Arc::new(Harness {
            state: TaskState::new_scheduled(),
            queued: AtomicUsize::new(1),
            messages: Mutex::new(0),
            seen: UnsafeCell::new(0),
        })
    }

    fn push(&self) {
        // Release: publishes the task to the worker that pops it.
        let before = self.queued.fetch_add(1, Ordering::Release);
        assert_eq!(before, 0, "queued twice");
    }

    fn pop(&self) -> bool {
        // Acquire: pairs with the push.
        let mut n = self.queued.load(Ordering::Acquire);
        while n > 0 {
            match self
                .queued
                .compare_exchange(n, n - 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(actual) => n = actual,
            }
        }
        false
    }

    /// `Task::wake_by_ref`, after sending a message.
    fn send_and_wake(&self) {
        *self.messages.lock().expect("loom") += 1;
        if self.state.wake() {
            self.push();
        }
    }

    /// `Task::run` for a future that stays pending: poll (read the
    /// messages into the future), then leave RUNNING; requeue on Yield.
    fn run(&self) {
        self.state.start_run();
        let messages = *self.messages.lock().expect("loom");
        // SAFETY: this thread holds RUNNING; loom checks the claim.
        self.seen.with_mut(|s| unsafe { *s = messages });
        if self.state.end_pending() == RunOutcome::Yield {
            self.push();
        }
    }

    fn run_queued(&self) {
        while self.pop() {
            self.run();
        }
    }
}

/// Two wakers wake the task while its run (on the main thread) polls and
/// ends pending; whatever was queued then runs: every run starts from
/// SCHEDULED (`start_run` asserts it), so a second wake's write-back of
/// NOTIFIED never lands after `end_pending` moved the state on. The wakers
/// only wake (no lock around it, unlike `send_and_wake`), so that the
/// schedule in which one wakes the run (NOTIFIED), the run's
/// compare-and-swap fails, the other writes NOTIFIED back and the run then
/// requeues, is within two preemptions (the other models need three for
/// it).
#[test]
fn task_wakes_during_a_run_leave_it_scheduled() {
    loom::model(|| {
        let h = Harness::spawned();
        assert!(h.pop());
        let wakers: Vec<_> = (0..2)
            .map(|_| {
                let h = Arc::clone(&h);
                thread::spawn(move || {
                    if h.state.wake() {
                        h.push();
                    }
                })
            })
            .collect();
        h.state.start_run();
        if h.state.end_pending() == RunOutcome::Yield {
            h.push();
        }
        for w in wakers {
            w.join().expect("waker");
        }
        h.run_queued();
    });
}

/// A worker thread runs the task while a waker thread and the main thread
/// wake it; the main thread runs what it finds queued too, and drains the
/// queue once the others are done. The last poll saw both
/// messages, and no submission was doubled or lost.
#[test]
fn task_every_wake_is_followed_by_a_poll() {
    loom::model(|| {
        let h = Harness::spawned();
        let waker = {
            let h = Arc::clone(&h);
            thread::spawn(move || h.send_and_wake())
        };
        let worker = {
            let h = Arc::clone(&h);
            thread::spawn(move || h.run_queued())
        };
        h.send_and_wake();
        // The main thread is a second worker: a run here may follow one on
        // the worker thread with only the state word and the queue between.
        h.run_queued();
        waker.join().expect("waker");
        worker.join().expect("worker");
        h.run_queued();
        // SAFETY: every other thread was joined.
        let seen = h.seen.with(|s| unsafe { *s });
        assert_eq!(seen, 2, "a wake was not followed by a poll");
    });
}

/// A run completes the task (as `Task::finish` does) while another thread
/// wakes it and the main thread waits on the join handle: the joiner gets
/// the output, and a wake after completion submits nothing.
#[test]
fn task_completion_races_a_wake_and_the_joiner() {
    loom::model(|| {
        let h = Harness::spawned();
        let join = JoinState::<u32>::new();
        let handle = join.handle();
        let worker = {
            let h = Arc::clone(&h);
            thread::spawn(move || {
                assert!(h.pop());
                h.state.start_run();
                h.state.complete();
                join.complete(Ok(7));
                // The task's `Drop` completes it again, as cancelled: the
                // first result stands.
                join.complete(Err(JoinError::Cancelled));
            })
        };
        let waker = {
            let h = Arc::clone(&h);
            thread::spawn(move || h.send_and_wake())
        };
        assert_eq!(handle.wait(), Ok(7));
        worker.join().expect("worker");
        waker.join().expect("waker");
        // The wake either came before the run (NOTIFIED? no: SCHEDULED,
        // nothing to do) or after it (DONE): never a submission.
        assert!(!h.pop(), "a finished task was queued");
    });
}

/// The joiner drops its handle while the task completes: the output is
/// dropped exactly once, by one of the two.
#[test]
fn task_a_detached_output_is_dropped_once() {
    /// Counts drops.
    struct Output(Arc<AtomicUsize>);
    impl Drop for Output {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let join = JoinState::<Output>::new();
        let handle = join.handle();
        let worker = {
            let drops = Arc::clone(&drops);
            thread::spawn(move || join.complete(Ok(Output(drops))))
        };
        drop(handle);
        worker.join().expect("worker");
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

/// A waker publishes readiness with a Release store (no lock, no RMW), as a
/// one-shot flag may, and wakes a task that is queued (SCHEDULED) while a
/// worker starts its run: either the poll sees the flag, or the wake leaves
/// a run behind (a submission or a Yield). Regression: `wake` returned after
/// its load when it saw SCHEDULED, and this model failed with "lost wake".
#[test]
fn task_a_wake_of_a_queued_task_is_not_lost() {
    loom::model(|| {
        let h = Harness::spawned();
        let ready = Arc::new(AtomicBool::new(false));
        let waker = {
            let h = Arc::clone(&h);
            let ready = Arc::clone(&ready);
            thread::spawn(move || {
                // Release: the waker's half; the orderings of the state word
                // must carry it to the poll.
                ready.store(true, Ordering::Release);
                if h.state.wake() {
                    h.push();
                }
            })
        };
        assert!(h.pop());
        h.state.start_run();
        // Acquire: pairs with the store above, through the state word.
        if ready.load(Ordering::Acquire) {
            h.state.complete();
        } else {
            let requeued = h.state.end_pending() == RunOutcome::Yield;
            waker.join().expect("waker");
            let submitted = h.queued.load(Ordering::Acquire) > 0;
            assert!(requeued || submitted, "lost wake");
        }
    });
}
