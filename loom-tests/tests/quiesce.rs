//! loom models of the quiesce handshake (`scheduler/src/quiesce.rs` with
//! the park announcement of `scheduler/src/idle.rs`): a quiesce that waits
//! for every worker to park is never left waiting once they all have.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release`.
//!
//! The models drive the real `QuiesceGate` (its `wait_until` is what
//! `Scheduler::quiesce` calls, with the same "state, queues, state again"
//! check; the model's `wait` blocks on the condvar without a deadline) and
//! the real `Idle::park` (announce, fence, `on_parked` calls
//! `all_parked` when no worker is left unparked). The workers park until
//! shutdown, which the quiesce sends once it saw them all parked; a missed
//! notify leaves the quiesce waiting and the workers parked: loom reports
//! a deadlock.
//!
//! loom treats `SeqCst` loads and stores as Acquire/Release and models only
//! `SeqCst` fences; the handshake is a fence on each side (the one in
//! `wait_until` and the one in `park_with`), so loom checks it.
//!
//! Mutations checked to be caught (each a deadlock):
//! - removing the fence in `QuiesceGate::wait_until`;
//! - removing the fence in `Idle::park_with` (it also serves the queue
//!   re-check);
//! - `all_parked` notifying without the gate's lock (the notify can fall
//!   between the quiesce's check and its wait).
//!
//! Each model runs in a child process of this binary
//! (`proscenium_loom_tests::model`, issue 28): a deadlock aborts the
//! process while unwinding, which then fails only that model.
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use proscenium_scheduler::__loom::{Idle, QuiesceGate, Unparked};

struct Pool {
    idle: Idle,
    gate: QuiesceGate,
    /// Runnables queued (Release push, AcqRel take).
    queued: AtomicUsize,
}

impl Pool {
    fn has_work(&self) -> bool {
        self.queued.load(Ordering::Acquire) > 0
    }

    fn try_take(&self) -> bool {
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

    /// Takes whatever is queued, then parks until shutdown; after a park
    /// that found work, takes it and parks again.
    fn work(&self, index: usize) {
        let mut searching = false;
        loop {
            while self.try_take() {}
            let outcome = self.idle.park(
                index,
                searching,
                || self.has_work(),
                |unparked| {
                    if unparked == 0 {
                        self.gate.all_parked();
                    }
                },
            );
            match outcome {
                Unparked::Shutdown => return,
                _ => {
                    searching = true;
                    if self.try_take() {
                        searching = false;
                        if self.idle.transition_from_searching() {
                            self.idle.notify_one();
                        }
                    }
                }
            }
        }
    }

    /// `Scheduler::quiesce`'s wait, without a deadline, then the shutdown.
    fn quiesce(&self) {
        let drained = self.gate.wait_until(
            || {
                self.idle.snapshot().unparked == 0
                    && !self.has_work()
                    && self.idle.snapshot().unparked == 0
            },
            |condvar, held| Some(condvar.wait(held).expect("loom")),
        );
        assert!(drained);
        assert!(!self.has_work(), "quiesced with work queued");
        self.idle.shutdown();
    }
}

fn pool(workers: usize) -> Arc<Pool> {
    Arc::new(Pool {
        idle: Idle::new(workers),
        gate: QuiesceGate::new(),
        queued: AtomicUsize::new(0),
    })
}

/// Two workers with nothing to do park while the main thread quiesces.
#[test]
fn quiesce_sees_the_last_worker_park() {
    proscenium_loom_tests::model("quiesce_sees_the_last_worker_park", || {
        let pool = pool(2);
        let workers: Vec<_> = (0..2)
            .map(|i| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || pool.work(i))
            })
            .collect();
        pool.quiesce();
        for w in workers {
            w.join().expect("worker");
        }
    });
}

/// One worker, one runnable queued before the quiesce: the quiesce ends
/// only once it was taken and the worker parked.
#[test]
fn quiesce_waits_for_queued_work() {
    proscenium_loom_tests::model("quiesce_waits_for_queued_work", || {
        let pool = pool(1);
        pool.queued.store(1, Ordering::Release);
        let worker = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.work(0))
        };
        pool.quiesce();
        worker.join().expect("worker");
    });
}
