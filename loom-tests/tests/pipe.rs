//! loom models of a piped future's state word and waker
//! (`engine/src/api/pipe_state.rs`, used by `PipeHandle` and the pipe's
//! task in `engine/src/api/pipe.rs`): a cancel that wins reaches a task
//! whose future is pending (the task is woken, or sees the cancel before
//! it polls), and exactly one of the cancel and the delivery wins.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release --test pipe`.
//!
//! The models drive the real `PipeShared`: `cancel` (all of
//! `PipeHandle::cancel`), `poll_gate` (the start of each poll of the
//! task), `finish` (the delivery's and a panic's claim) and `drop_waker`.
//! The future itself, the mapping and the `tell` are the model's.
//!
//! Mutations of `pipe_state.rs` checked to be caught (each applied alone,
//! seen to fail, reverted):
//! - `poll_gate` without its re-check after it stored the waker: "a cancel
//!   was lost" in `pipe_a_cancel_reaches_a_pending_task`;
//! - `cancel` taking the waker before it claims the state: the same
//!   failure;
//! - `finish` as a load and a store instead of a compare-and-swap: "both
//!   the cancel and the delivery won" in
//!   `pipe_cancel_and_delivery_have_one_winner`;
//! - `cancel` returning `true` whether or not it claimed the state: the
//!   same failure.
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::thread;
use proscenium::__loom::pipe::{PipeShared, CANCELLED, DELIVERED, PENDING};
use std::sync::Arc;
use std::task::{Wake, Waker};

/// The task's waker: records its wakes in a loom counter.
struct Wakes(AtomicUsize);

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // SeqCst: a model's counter, read after the joins.
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// The task polls its future (which stays pending) while the handle
/// cancels: once both are done, either the task's gate saw the cancel (it
/// stops and drops its future) or its waker was woken (its next poll's gate
/// sees it).
#[test]
fn pipe_a_cancel_reaches_a_pending_task() {
    loom::model(|| {
        let shared = Arc::new(PipeShared::new());
        let wakes = Arc::new(Wakes(AtomicUsize::new(0)));
        let task = {
            let shared = Arc::clone(&shared);
            let waker = Waker::from(Arc::clone(&wakes));
            // The poll: `false` is "over, drop the future"; `true` is "the
            // future was polled and is pending".
            thread::spawn(move || shared.poll_gate(&waker))
        };
        let cancelled = shared.cancel();
        assert!(cancelled, "nothing else finishes the pipe here");
        let pending = task.join().expect("task");
        assert!(
            !pending || wakes.0.load(Ordering::SeqCst) == 1,
            "a cancel was lost: the task's future is pending and nobody woke it"
        );
        assert_eq!(shared.state(), CANCELLED);
    });
}

/// The task's future completed: the task delivers (claims DELIVERED, then
/// tells) while the handle cancels. Exactly one wins; the message is told
/// only if the delivery won, and `cancel` returns `true` only if it did.
#[test]
fn pipe_cancel_and_delivery_have_one_winner() {
    loom::model(|| {
        let shared = Arc::new(PipeShared::new());
        let told = Arc::new(AtomicBool::new(false));
        let wakes = Arc::new(Wakes(AtomicUsize::new(0)));
        // The task's first poll ran before (its waker is stored).
        assert!(shared.poll_gate(&Waker::from(Arc::clone(&wakes))));
        let task = {
            let shared = Arc::clone(&shared);
            let told = Arc::clone(&told);
            thread::spawn(move || {
                // The poll loop is over: the task drops its waker, then
                // `deliver_here`: a message is made unless already over.
                shared.drop_waker();
                if shared.state() == PENDING && shared.finish(DELIVERED) {
                    // SeqCst: a model's flag, read after the join.
                    told.store(true, Ordering::SeqCst);
                }
            })
        };
        let cancelled = shared.cancel();
        task.join().expect("task");
        let told = told.load(Ordering::SeqCst);
        assert!(
            cancelled != told,
            "both the cancel and the delivery won, or neither"
        );
        assert_eq!(shared.state(), if told { DELIVERED } else { CANCELLED });
    });
}
