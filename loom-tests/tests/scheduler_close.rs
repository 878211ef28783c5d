//! loom models of a quiesce against a concurrent external submit
//! (`Shared::close`, `Shared::submit`, `Shared::submit_urgent`,
//! `Shared::is_quiescent`, `Shared::drop_shared_queues`, with the real
//! worker loop): a submit refused by the close hands its runnable back and
//! it never runs; an accepted one runs, or is counted as left by the
//! quiesce (a worker's exit or the drop of the shared queues); the quiesce
//! ends.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release --test scheduler_close`.
//!
//! `ModelPool::quiesce` is `Scheduler::quiesce` without the reactor, the
//! timer thread and the deadline: `close`, the quiesce gate's wait for
//! `is_quiescent`, `Idle::shutdown`; the model then joins the workers
//! (each returns what it dropped from its own queues) and calls
//! `drop_shared_queues`, as `Scheduler::shutdown` does. The queues are the
//! stand-ins of `scheduler/src/deque.rs` (see
//! docs/decisions/0018-loom-worker-loop.md).
//!
//! The submitters are joined after the drop of the shared queues: a
//! submit may still be under way then. Before issue 35 one that read
//! `closed` before the close and pushed only after the quiesce dropped the
//! shared queues was accepted, yet neither ran nor was counted, and both
//! race models failed so ("an accepted runnable neither ran nor was
//! counted"; docs/decisions/0026-loom-issue-28.md). Now the close waits
//! for the submits it admitted (`SubmitGate`, `scheduler/src/submit_gate.rs`,
//! modelled alone in `submit_gate.rs`).
//!
//! Mutations checked to be caught (each applied alone, seen to fail,
//! reverted):
//! - `drop_shared_queues` counting after it emptied the queues (so it
//!   reports 0): "an accepted runnable neither ran nor was counted" in
//!   `close_races_an_external_submit` and `close_races_an_urgent_submit`;
//! - `drop_shared_queues` counting the injector and the workers' queues
//!   but not the urgent queue: the same failure in
//!   `close_races_an_urgent_submit`;
//! - `submit_external` not checking `closed` (now: not passing the gate):
//!   "accepted after the close" in `close_refuses_a_submit_after_it`;
//! - `submit_external` dropping its admission before the push: "neither
//!   ran nor was counted" in `close_races_an_external_submit` and
//!   `close_races_two_external_submits`;
//! - `submit_urgent` from outside not passing the gate: the same in
//!   `close_races_an_urgent_submit`;
//! - the gate's close not waiting, or admitting on its plain load alone:
//!   the same in the three race models;
//! - a refused submit keeping its unit in the gate's count: the close
//!   never returns ("Model exceeded maximum number of branches") in
//!   `close_races_two_external_submits`.
//!
//! The gate's memory orderings are not checked here: the park handshake
//! (the submitter's wake-up, the quiesce's wait for every worker to park)
//! orders most of what they order, and each of them weakened went unseen;
//! `submit_gate.rs` checks them.
//!
//! Not caught: `is_quiescent` not looking at the queues. The quiesce then
//! ends with the runnable queued, and the workers' exit or the drop of the
//! shared queues counts it: the accounting holds, only the report's
//! `drained` is wrong, which the model does not see.
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use proscenium_scheduler::__loom::{ModelPool, ModelWorker};
use proscenium_scheduler::{Budget, RunOutcome, Runnable};
use std::sync::Arc;

/// A runnable that counts its runs.
struct Counted {
    runs: AtomicUsize,
}

impl Runnable for Counted {
    fn run(self: Arc<Self>, _budget: &mut Budget) -> RunOutcome {
        // SeqCst: a model's count, read after the joins.
        self.runs.fetch_add(1, Ordering::SeqCst);
        RunOutcome::Done
    }
}

fn counted() -> Arc<Counted> {
    Arc::new(Counted {
        runs: AtomicUsize::new(0),
    })
}

/// How a racing submit is made.
#[derive(Clone, Copy)]
enum Submit {
    External,
    Urgent,
}

/// `workers` workers run while one submitter thread per entry of `how`
/// submits one runnable and the main thread quiesces; checks the
/// accounting described in the module docs. The submitters are joined
/// after the drop of the shared queues: a submit may still be under way
/// then (as one from a thread `Scheduler::shutdown` does not join).
fn race(workers: usize, how: &[Submit]) {
    let (pool, ws) = ModelPool::new(workers, 64);
    let threads: Vec<_> = ws
        .into_iter()
        .map(|w: ModelWorker| thread::spawn(move || w.run()))
        .collect();
    let submitters: Vec<_> = how
        .iter()
        .map(|&how| {
            let job = counted();
            let pool = pool.clone();
            let submitted = Arc::clone(&job);
            let submitter = thread::spawn(move || {
                let outcome = match how {
                    Submit::External => pool.submit(submitted),
                    Submit::Urgent => pool.submit_urgent(submitted),
                };
                outcome.is_ok()
            });
            (job, submitter)
        })
        .collect();
    pool.quiesce();
    let mut left = 0;
    for t in threads {
        left += t.join().expect("worker");
    }
    left += pool.drop_shared_queues();
    let mut accepted_total = 0;
    let mut runs_total = 0;
    for (job, submitter) in submitters {
        let accepted = submitter.join().expect("submitter");
        let runs = job.runs.load(Ordering::SeqCst);
        if accepted {
            accepted_total += 1;
            assert!(runs <= 1, "an accepted runnable ran twice");
        } else {
            assert_eq!(runs, 0, "a refused runnable ran");
            // The refusal handed it back (and the submitter dropped it).
            assert_eq!(Arc::strong_count(&job), 1, "a refused runnable was kept");
        }
        runs_total += runs;
    }
    assert_eq!(
        runs_total + left,
        accepted_total,
        "an accepted runnable neither ran nor was counted, or a refused one was counted"
    );
}

/// One worker; an external submit races the quiesce.
#[test]
fn close_races_an_external_submit() {
    proscenium_loom_tests::model("close_races_an_external_submit", || {
        race(1, &[Submit::External])
    });
}

/// One worker; an urgent submit from outside races the quiesce.
#[test]
fn close_races_an_urgent_submit() {
    proscenium_loom_tests::model("close_races_an_urgent_submit", || {
        race(1, &[Submit::Urgent])
    });
}

/// One worker; two external submits race the quiesce (two units in the
/// gate's count at once).
#[test]
fn close_races_two_external_submits() {
    proscenium_loom_tests::model("close_races_two_external_submits", || {
        race(1, &[Submit::External, Submit::External])
    });
}

/// A submit made after the quiesce returned (from a thread spawned then)
/// is refused, and its runnable never runs.
#[test]
fn close_refuses_a_submit_after_it() {
    proscenium_loom_tests::model("close_refuses_a_submit_after_it", || {
        let (pool, ws) = ModelPool::new(1, 64);
        let threads: Vec<_> = ws
            .into_iter()
            .map(|w: ModelWorker| thread::spawn(move || w.run()))
            .collect();
        let job = counted();
        pool.quiesce();
        let refused = {
            let pool = pool.clone();
            let job = Arc::clone(&job);
            thread::spawn(move || pool.submit(job).is_err())
        };
        assert!(
            refused.join().expect("submitter"),
            "accepted after the close"
        );
        for t in threads {
            assert_eq!(t.join().expect("worker"), 0);
        }
        assert_eq!(pool.drop_shared_queues(), 0);
        assert_eq!(job.runs.load(Ordering::SeqCst), 0);
    });
}
