//! loom models of the stall monitor's sleep handshake
//! (`scheduler/src/monitor_sleep.rs`, used by the timer thread's monitor
//! and `TimerShared::wake_monitor` in `scheduler/src/timer.rs`) with the
//! real `Idle`: the monitor never sleeps while a worker is awake unless
//! that worker wakes it.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release --test monitor_sleep`.
//!
//! A worker parks (the real `Idle::park`) and is woken by a submit (the
//! real `Idle::notify_one`), or finds the submit in its re-check; then, as
//! the worker loop does, it calls `MonitorSleep::wake` and unparks the
//! monitor if told to. The monitor, on its own thread, does what `tick`
//! does once it has seen every worker parked: `try_sleep`, and if that
//! says it sleeps, it waits (on a loom mutex and condvar, as
//! `thread::park` behaves) until a worker unparks it. A monitor asleep
//! with nobody left to wake it is a deadlock, which loom reports. The
//! timer thread's other work (the wheel, its timed sleeps) is not
//! modelled: with no timer set, its sleep is untimed, as here.
//!
//! The monitor's `pending` count of timers is not modelled here: it is
//! raised before an entry is published and lowered by the one winner of
//! the entry's fire/cancel race, which `timer.rs` (the loom model of
//! `TimerEntry`) checks ("the pending count is settled once").
//!
//! Mutations checked to be caught (each applied alone, seen to fail,
//! reverted):
//! - `try_sleep` without its look at the workers after it set the flag:
//!   deadlock in both models;
//! - `try_sleep` looking with `Idle::snapshot` (a `SeqCst` load, the code
//!   before this model): deadlock in both models (correct under the C++
//!   model's total order of `SeqCst` accesses, which loom does not model
//!   for loads and stores: why the look is a read-modify-write now);
//! - `Idle::unparked_latest`'s RMW `Relaxed`: deadlock in both models (the
//!   wake-up reads the look's write but acquires nothing);
//! - `wake` returning the flag without clearing it (the `swap` dropped):
//!   not a lost wake-up but a monitor woken for ever after: caught as
//!   "the monitor was woken twice" in
//!   `monitor_sleep_two_wake_ups_unpark_the_monitor_once`.
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Condvar, Mutex};
use loom::thread;
use proscenium_scheduler::__loom::{Idle, MonitorSleep, Unparked};
use std::sync::Arc;

/// The monitor's parking spot (`thread::park` / `Thread::unpark`): a
/// token under a lock, counted.
#[derive(Default)]
struct Token {
    unparks: Mutex<usize>,
    condvar: Condvar,
}

impl Token {
    fn unpark(&self) {
        *self.unparks.lock().expect("loom") += 1;
        self.condvar.notify_one();
    }

    fn park(&self) {
        let mut unparks = self.unparks.lock().expect("loom");
        while *unparks == 0 {
            unparks = self.condvar.wait(unparks).expect("loom");
        }
    }
}

struct Pool {
    idle: Idle,
    sleep: MonitorSleep,
    monitor: Token,
    /// Runnables submitted (Release push, AcqRel take).
    queued: AtomicUsize,
}

impl Pool {
    fn new(workers: usize) -> Arc<Pool> {
        Arc::new(Pool {
            idle: Idle::new(workers),
            sleep: MonitorSleep::new(),
            monitor: Token::default(),
            queued: AtomicUsize::new(0),
        })
    }

    fn has_work(&self) -> bool {
        self.queued.load(Ordering::Acquire) > 0
    }

    /// A worker with nothing to do parks until a submit, then wakes the
    /// monitor as the worker loop does, and finds the work (it then runs
    /// for ever, as far as the monitor knows: it does not park again),
    /// handing the search on if it was the last searcher.
    fn work(&self, index: usize) {
        let mut searching = false;
        loop {
            let outcome = self.idle.park(index, searching, || self.has_work(), |_| {});
            assert_ne!(outcome, Unparked::Shutdown);
            if self.sleep.wake() {
                self.monitor.unpark();
            }
            searching = true;
            if self.has_work() {
                if self.idle.transition_from_searching() {
                    self.idle.notify_one();
                }
                return;
            }
        }
    }

    /// A submit from outside.
    fn submit(&self) {
        self.queued.fetch_add(1, Ordering::Release);
        self.idle.notify_one();
    }

    /// The monitor's last look: it has seen every worker parked; it sleeps
    /// if `try_sleep` says so, until a worker wakes it.
    fn monitor(&self) {
        if self.idle.snapshot().unparked == 0 && self.sleep.try_sleep(&self.idle) {
            self.monitor.park();
        }
    }
}

/// One worker parks; the monitor goes to sleep while a submit wakes the
/// worker: the monitor is woken, or sees the worker awake and stays up.
#[test]
fn monitor_sleep_a_submit_wakes_a_sleeping_monitor() {
    proscenium_loom_tests::model("monitor_sleep_a_submit_wakes_a_sleeping_monitor", || {
        let pool = Pool::new(1);
        let worker = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.work(0))
        };
        let monitor = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.monitor())
        };
        pool.submit();
        worker.join().expect("worker");
        monitor.join().expect("monitor");
    });
}

/// Two workers wake (both parked; two submits) while the monitor goes to
/// sleep: it is woken at most once (the first wake-up clears the flag), and
/// at least once if it slept.
#[test]
fn monitor_sleep_two_wake_ups_unpark_the_monitor_once() {
    proscenium_loom_tests::model("monitor_sleep_two_wake_ups_unpark_the_monitor_once", || {
        let pool = Pool::new(2);
        let workers: Vec<_> = (0..2)
            .map(|i| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || pool.work(i))
            })
            .collect();
        let monitor = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.monitor())
        };
        pool.submit();
        pool.submit();
        for w in workers {
            w.join().expect("worker");
        }
        monitor.join().expect("monitor");
        assert!(
            *pool.monitor.unparks.lock().expect("loom") <= 1,
            "the monitor was woken twice"
        );
    });
}
