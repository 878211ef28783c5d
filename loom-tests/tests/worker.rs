//! loom models of the real worker loop (`scheduler/src/worker.rs`) and its
//! submit paths (`Shared::submit`, `Shared::submit_urgent`), on two
//! workers (one in the urgent-order model): no runnable is stranded while
//! a worker sleeps, and urgent work overtakes ordinary work.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release --test worker`.
//!
//! Each worker is a loom thread running `worker::run` (through
//! `ModelPool`/`ModelWorker`): the LIFO slot, the find-work order, the
//! search, the searcher count and the park of `idle.rs`, the thread-local
//! current worker. The crossbeam queues are replaced by the stand-in of
//! `scheduler/src/deque.rs` (items under a mutex, their count in an atomic
//! that `is_empty` reads without the lock, so the park's re-check against a
//! push is ordered only by the handshake's fences, as with crossbeam); the
//! reactor, the timer thread and the counters are left out (see
//! docs/decisions/0018-loom-worker-loop.md).
//!
//! Several wake-ups of the worker loop are for parallelism: in production,
//! a runnable left in a queue while a worker sleeps is run later by the
//! worker that queued it. The models make them observable with runnables
//! that *meet*: each waits (on a loom condvar) until all of them run at
//! once, which needs both workers. A wake-up that the code forgets then
//! leaves one worker blocked in its run and the other parked, which loom
//! reports as a deadlock. (A runnable that waits in the LIFO slot of a
//! worker blocked in a run is rescued only by the timer thread's stall
//! monitor, which is not modelled; the models share the slot first, as a
//! run that goes on does through `Budget::consume`.) The last run to end
//! shuts the workers down; each worker then reports an empty queue.
//!
//! Mutations of the real code checked to be caught (none is left in the
//! code):
//! - `Local::push_local` not calling `notify_one` (the wake on the
//!   empty -> non-empty edge): deadlock in `worker_lifo_spill_wakes_a_parked_worker`
//!   and `worker_shared_lifo_wakes_a_parked_worker`;
//! - `push_local` computing `was_empty` after the push (so it never wakes):
//!   deadlock, the same two models;
//! - `Local::share_lifo` putting the occupant back in the LIFO slot
//!   instead of the local queue: deadlock in
//!   `worker_shared_lifo_wakes_a_parked_worker`;
//! - `run_job` not waking on `Yield` when others wait: deadlock in
//!   `worker_yield_with_others_waiting_wakes_a_worker`;
//! - `run_job` not waking after it took outside work on a `Yield`
//!   (`others_waiting` left false): deadlock in
//!   `worker_yield_takes_outside_work_and_wakes_a_worker` with
//!   `LOOM_MAX_PREEMPTIONS=3` (not at 2: the submitter's own wake covers
//!   every schedule with fewer preemptions; `.ci/run` runs this model at 3);
//! - `run_job` not handing the search on (no `notify_one` after the last
//!   searcher found work): deadlock in
//!   `worker_last_searcher_hands_the_search_on`;
//! - `Shared::has_shared_work` not looking at the urgent queue: deadlock in
//!   `worker_urgent_submit_races_park` and
//!   `worker_urgent_submit_from_a_run_wakes_a_worker`;
//! - `submit_urgent` not incrementing the hint: "urgent after ordinary" in
//!   `worker_urgent_overtakes_the_local_queue` (the next run is taken from
//!   the local queue, the urgent one only by the search after it);
//! - `next_local` looking at the local queue before the urgent queue: the
//!   same failure;
//! - `submit_urgent` not calling `notify_one`: deadlock in
//!   `worker_urgent_submit_from_a_run_wakes_a_worker` (not in
//!   `worker_urgent_submit_races_park`, where the ordinary submit's wake and
//!   the search hand-on cover for it);
//! - `Idle::notify_one` without its `SeqCst` fence, and `Idle::park_with`
//!   without its own: deadlock in every two-worker model (the stand-in
//!   queue's `is_empty` takes no lock, so only the fences order the park's
//!   re-check against a push);
//! - `Idle::park_with` skipping the re-check of the queues after it
//!   announced the park: deadlock in `worker_submit_races_park_two_workers`
//!   and `worker_two_submits_race_park_one_worker`;
//! - `Parker::park` reading the token and waiting in two separate critical
//!   sections: deadlock in `worker_submit_races_park_two_workers`,
//!   `worker_last_searcher_hands_the_search_on` and
//!   `worker_lifo_spill_wakes_a_parked_worker`.
//!
//! Not caught, by design: waking on every `Yield` (the model cannot see a
//! wake-up that only costs a futex call; the yielder runs either way), and
//! the urgent hint not being decremented (it only costs empty steals).
//!
//! Each model runs in a child process of this binary
//! (`proscenium_loom_tests::model`, issue 28): a deadlock aborts the
//! process while unwinding, which then fails only that model.
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Condvar, Mutex};
use loom::thread;
use proscenium_scheduler::__loom::{ModelPool, ModelWorker};
use proscenium_scheduler::{Budget, RunOutcome, Runnable};
use std::sync::Arc;

/// A runnable made of a closure.
struct Task(Box<dyn Fn(&mut Budget) -> RunOutcome + Send + Sync>);

impl Runnable for Task {
    fn run(self: Arc<Self>, budget: &mut Budget) -> RunOutcome {
        (self.0)(budget)
    }
}

fn task(f: impl Fn(&mut Budget) -> RunOutcome + Send + Sync + 'static) -> Arc<Task> {
    Arc::new(Task(Box::new(f)))
}

/// Where `n` runs meet: each `meet` returns once all `n` have arrived, so
/// they must run at the same time, on different workers.
struct Meeting {
    arrived: Mutex<usize>,
    all_here: Condvar,
    n: usize,
}

impl Meeting {
    fn new(n: usize) -> Arc<Meeting> {
        Arc::new(Meeting {
            arrived: Mutex::new(0),
            all_here: Condvar::new(),
            n,
        })
    }

    fn meet(&self) {
        let mut arrived = self.arrived.lock().expect("loom");
        *arrived += 1;
        if *arrived == self.n {
            self.all_here.notify_all();
        }
        while *arrived < self.n {
            arrived = self.all_here.wait(arrived).expect("loom");
        }
    }
}

/// Counts finished runnables; the last one stops the workers.
struct Finish {
    done: AtomicUsize,
    total: usize,
    pool: ModelPool,
}

impl Finish {
    fn new(pool: &ModelPool, total: usize) -> Arc<Finish> {
        Arc::new(Finish {
            done: AtomicUsize::new(0),
            total,
            pool: pool.clone(),
        })
    }

    /// Called at the end of a runnable's last run.
    fn one_done(&self) -> RunOutcome {
        // AcqRel: the last one sees every other run's end before it stops
        // the workers.
        if self.done.fetch_add(1, Ordering::AcqRel) + 1 == self.total {
            self.pool.shutdown();
        }
        RunOutcome::Done
    }

    fn all_done(&self) -> bool {
        self.done.load(Ordering::Acquire) == self.total
    }
}

/// Runs `workers` workers on loom threads while `main` (on this thread)
/// submits; joins them and checks that every runnable ran and nothing is
/// left in any queue.
fn with_workers(workers: usize, total: usize, main: impl FnOnce(&ModelPool, &Arc<Finish>)) {
    let (pool, ws) = ModelPool::new(workers, 64);
    let finish = Finish::new(&pool, total);
    let threads: Vec<_> = ws
        .into_iter()
        .map(|w: ModelWorker| thread::spawn(move || w.run()))
        .collect();
    main(&pool, &finish);
    for t in threads {
        assert_eq!(t.join().expect("worker"), 0, "runnables left in a worker");
    }
    assert!(finish.all_done(), "a runnable did not run");
    assert_eq!(pool.queued(), 0);
}

/// A runnable that meets the others, then ends.
fn meeter(meeting: &Arc<Meeting>, finish: &Arc<Finish>) -> Arc<Task> {
    let (meeting, finish) = (Arc::clone(meeting), Arc::clone(finish));
    task(move |_| {
        meeting.meet();
        finish.one_done()
    })
}

/// Plain runnables that end at once.
fn plain(finish: &Arc<Finish>) -> Arc<Task> {
    let finish = Arc::clone(finish);
    task(move |_| finish.one_done())
}

/// One worker, two external submits racing its first search and its park
/// (and each other): both run.
#[test]
fn worker_two_submits_race_park_one_worker() {
    proscenium_loom_tests::model("worker_two_submits_race_park_one_worker", || {
        with_workers(1, 2, |pool, finish| {
            pool.submit(plain(finish)).expect("open");
            pool.submit(plain(finish)).expect("open");
        });
    });
}

/// Two workers, one external submit: racing their searches and parks
/// (one may search while the other parks, and the submit then wakes no
/// one), it runs.
#[test]
fn worker_submit_races_park_two_workers() {
    proscenium_loom_tests::model("worker_submit_races_park_two_workers", || {
        with_workers(2, 1, |pool, finish| {
            pool.submit(plain(finish)).expect("open");
        });
    });
}

/// A run submits two runnables (the second displaces the first from the
/// LIFO slot to the local queue: `push_lifo`'s spill) and then waits for
/// the first to run: the spill's push onto an empty local queue must wake
/// the other worker if it is parked (or leave it to a searcher).
#[test]
fn worker_lifo_spill_wakes_a_parked_worker() {
    proscenium_loom_tests::model("worker_lifo_spill_wakes_a_parked_worker", || {
        with_workers(2, 3, |pool, finish| {
            let meeting = Meeting::new(2);
            let first = meeter(&meeting, finish);
            let (p, f) = (pool.clone(), Arc::clone(finish));
            let parent = task(move |_| {
                p.submit(first.clone()).expect("open");
                let f2 = Arc::clone(&f);
                // Ends at once; it only displaces `first`.
                p.submit(task(move |_| f2.one_done())).expect("open");
                meeting.meet();
                f.one_done()
            });
            pool.submit(parent).expect("open");
        });
    });
}

/// A run submits a runnable (into its LIFO slot), goes on
/// (`Budget::consume` shares the slot: `share_lifo` moves it to the local
/// queue) and waits for it to run: the move must wake the other worker.
#[test]
fn worker_shared_lifo_wakes_a_parked_worker() {
    proscenium_loom_tests::model("worker_shared_lifo_wakes_a_parked_worker", || {
        with_workers(2, 2, |pool, finish| {
            let meeting = Meeting::new(2);
            let child = meeter(&meeting, finish);
            let (p, f) = (pool.clone(), Arc::clone(finish));
            let parent = task(move |budget| {
                assert!(budget.consume());
                p.submit(child.clone()).expect("open");
                // The second unit: the run goes on, the slot is shared.
                assert!(budget.consume());
                meeting.meet();
                f.one_done()
            });
            pool.submit(parent).expect("open");
        });
    });
}

/// A run submits a runnable (LIFO slot) and yields: the yielder goes to the
/// local queue with another runnable waiting (in the slot), so the worker
/// wakes another. The runnable from the slot runs next on this worker and
/// waits for the yielder's second run, which only the other worker can
/// give it.
#[test]
fn worker_yield_with_others_waiting_wakes_a_worker() {
    proscenium_loom_tests::model("worker_yield_with_others_waiting_wakes_a_worker", || {
        with_workers(2, 2, |pool, finish| {
            let meeting = Meeting::new(2);
            let child = meeter(&meeting, finish);
            let runs = Arc::new(AtomicUsize::new(0));
            let (p, f) = (pool.clone(), Arc::clone(finish));
            let yielder = task(move |_| {
                // Relaxed: the runs of one runnable are ordered by the
                // queues that hand it from one to the next.
                if runs.fetch_add(1, Ordering::Relaxed) == 0 {
                    p.submit(child.clone()).expect("open");
                    return RunOutcome::Yield;
                }
                meeting.meet();
                f.one_done()
            });
            pool.submit(yielder).expect("open");
        });
    });
}

/// A runnable yields alone on its worker while a runnable submitted from
/// outside waits in the injector: the yield takes it into the local queue
/// ahead of the yielder (`run_job`), and must then wake a worker, since two
/// runnables now wait here. The outside one runs next on this worker and
/// waits for the yielder's second run, which only the other worker can
/// give it. (In the schedules where the other worker takes the outside
/// runnable itself, the model checks that nothing is stranded either.)
#[test]
fn worker_yield_takes_outside_work_and_wakes_a_worker() {
    proscenium_loom_tests::model("worker_yield_takes_outside_work_and_wakes_a_worker", || {
        with_workers(2, 2, |pool, finish| {
            let meeting = Meeting::new(2);
            let outside = meeter(&meeting, finish);
            let runs = Arc::new(AtomicUsize::new(0));
            let f = Arc::clone(finish);
            let m = Arc::clone(&meeting);
            let yielder = task(move |_| {
                // Relaxed: the runs of one runnable are ordered by the
                // queues that hand it from one to the next.
                if runs.fetch_add(1, Ordering::Relaxed) == 0 {
                    return RunOutcome::Yield;
                }
                m.meet();
                f.one_done()
            });
            pool.submit(yielder).expect("open");
            pool.submit(outside).expect("open");
        });
    });
}

/// Two external submits: the first wakes a worker (a searcher), the second
/// sees that searcher and wakes no one. The searcher takes both (the
/// injector's batch), runs the first, which waits for the second: the
/// searcher must hand the search on when it finds work.
#[test]
fn worker_last_searcher_hands_the_search_on() {
    proscenium_loom_tests::model("worker_last_searcher_hands_the_search_on", || {
        with_workers(2, 2, |pool, finish| {
            let meeting = Meeting::new(2);
            pool.submit(meeter(&meeting, finish)).expect("open");
            pool.submit(meeter(&meeting, finish)).expect("open");
        });
    });
}

/// An urgent and an ordinary submit from outside, racing the workers'
/// parks: neither is lost (the urgent queue is in the park's re-check and
/// its submit wakes a worker), and they run at the same time.
#[test]
fn worker_urgent_submit_races_park() {
    proscenium_loom_tests::model("worker_urgent_submit_races_park", || {
        with_workers(2, 2, |pool, finish| {
            let meeting = Meeting::new(2);
            pool.submit_urgent(meeter(&meeting, finish)).expect("open");
            pool.submit(meeter(&meeting, finish)).expect("open");
        });
    });
}

/// A run submits an urgent runnable and waits for it: the urgent submit
/// must wake the other worker (the runnable is in the shared urgent queue,
/// not in this worker's queues).
#[test]
fn worker_urgent_submit_from_a_run_wakes_a_worker() {
    proscenium_loom_tests::model("worker_urgent_submit_from_a_run_wakes_a_worker", || {
        with_workers(2, 2, |pool, finish| {
            let meeting = Meeting::new(2);
            let child = meeter(&meeting, finish);
            let (p, f) = (pool.clone(), Arc::clone(finish));
            let parent = task(move |_| {
                p.submit_urgent(child.clone()).expect("open");
                meeting.meet();
                f.one_done()
            });
            pool.submit(parent).expect("open");
        });
    });
}

/// One worker. A run queues an ordinary runnable on its worker (submit
/// into the LIFO slot, shared to the local queue by `Budget::consume`) and
/// then submits an urgent one: the worker's next run is the urgent one
/// (found through the hint), ahead of the local queue.
#[test]
fn worker_urgent_overtakes_the_local_queue() {
    proscenium_loom_tests::model("worker_urgent_overtakes_the_local_queue", || {
        let order = Arc::new(Mutex::new(Vec::new()));
        with_workers(1, 3, |pool, finish| {
            let logged = |name: &'static str| {
                let (order, finish) = (Arc::clone(&order), Arc::clone(finish));
                task(move |_| {
                    order.lock().expect("loom").push(name);
                    finish.one_done()
                })
            };
            let (ordinary, urgent) = (logged("ordinary"), logged("urgent"));
            let (p, f) = (pool.clone(), Arc::clone(finish));
            let parent = task(move |budget| {
                assert!(budget.consume());
                p.submit(ordinary.clone()).expect("open");
                assert!(budget.consume());
                p.submit_urgent(urgent.clone()).expect("open");
                f.one_done()
            });
            pool.submit(parent).expect("open");
        });
        assert_eq!(
            *order.lock().expect("loom"),
            ["urgent", "ordinary"],
            "urgent after ordinary"
        );
    });
}
