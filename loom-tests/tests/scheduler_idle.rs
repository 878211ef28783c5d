//! loom models of the scheduler's park/unpark handshake: no submitted work
//! is left behind while every worker sleeps (no lost wake-up).
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release`.
//!
//! The models drive the real `Idle` and `Parker` of `proscenium-scheduler`
//! (compiled against loom's atomics, mutex and condvar under `--cfg loom`).
//! The shared queues are replaced by one atomic counter of queued items with
//! Release pushes and Acquire/AcqRel pops, like a queue that is correct on
//! its own but adds no ordering of its own to the handshake: only the
//! handshake's fences and read-modify-writes can make the re-check see a
//! racing push. A worker follows the real worker loop: search (if allowed),
//! otherwise park, and treat the end of a park as "searching". Workers only
//! exit on shutdown, which the worker that runs the last item triggers; so a
//! lost wake-up leaves a worker parked forever, which loom reports as a
//! deadlock.
//!
//! Mutations of `scheduler/src/{idle,park}.rs` these models were checked to
//! catch (each reported as a deadlock by the one-worker model): skipping the
//! re-check of the queues after announcing the park; removing the SeqCst
//! fence in `notify_one`; removing the one in `park`; removing both and
//! reading the state Relaxed; a parker that checks its token and waits in two
//! separate critical sections; an unpark that never wakes the driver of a
//! worker parked in it (caught by the driver models). Not caught, by design, because they cost
//! parallelism, not liveness (a parking worker always re-checks): the last
//! searcher not handing the search on, and waking only when every worker is
//! parked.
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;
use proscenium_scheduler::__loom::{Idle, Parker, Unparked};

/// The I/O driver's poll as the handshake sees it: an eventfd that a wake
/// sets and a wait consumes (a write before the wait is still seen).
struct Eventfd {
    set: Mutex<bool>,
    condvar: Condvar,
}

impl Eventfd {
    fn wake(&self) {
        *self.set.lock().expect("loom") = true;
        self.condvar.notify_all();
    }

    fn wait(&self) {
        let mut set = self.set.lock().expect("loom");
        while !*set {
            set = self.condvar.wait(set).expect("loom");
        }
        *set = false;
    }
}

struct Pool {
    idle: Idle,
    /// If set, worker 0 parks in this "driver" instead of on its condvar
    /// (`Parker::park_driver`), and `Idle` wakes it through the eventfd.
    driver: Option<Arc<Eventfd>>,
    /// Items queued and not yet taken.
    queued: AtomicUsize,
    /// Items run.
    ran: AtomicUsize,
    total: usize,
}

impl Pool {
    fn new(workers: usize, total: usize) -> Arc<Pool> {
        Arc::new(Pool {
            idle: Idle::new(workers),
            driver: None,
            queued: AtomicUsize::new(0),
            ran: AtomicUsize::new(0),
            total,
        })
    }

    /// As `new`, with worker 0 parking in an I/O driver.
    fn with_driver(workers: usize, total: usize) -> Arc<Pool> {
        let driver = Arc::new(Eventfd {
            set: Mutex::new(false),
            condvar: Condvar::new(),
        });
        let wake = Arc::clone(&driver);
        Arc::new(Pool {
            idle: Idle::with_driver_wake(workers, move || wake.wake()),
            driver: Some(driver),
            queued: AtomicUsize::new(0),
            ran: AtomicUsize::new(0),
            total,
        })
    }

    /// A submit from outside the workers: push, then notify.
    fn submit(&self) {
        // Release: publishes the item, as a queue push does.
        self.queued.fetch_add(1, Ordering::Release);
        self.idle.notify_one();
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

    fn has_work(&self) -> bool {
        self.queued.load(Ordering::Acquire) > 0
    }

    /// The worker loop, minus the local queues.
    fn work(&self, index: usize) {
        let mut searching = false;
        loop {
            if self.idle.is_shutdown() {
                return;
            }
            if !searching {
                searching = self.idle.transition_to_searching();
            }
            if searching && self.try_take() {
                searching = false;
                if self.idle.transition_from_searching() {
                    self.idle.notify_one();
                }
                if self.ran.fetch_add(1, Ordering::AcqRel) + 1 == self.total {
                    self.idle.shutdown();
                }
                continue;
            }
            let block = |parker: &Parker| {
                match (&self.driver, index) {
                    (Some(driver), 0) => {
                        let _ = parker.park_driver(|| driver.wait());
                    }
                    _ => parker.park(),
                }
                // The model's driver has no I/O events to dispatch.
                false
            };
            match self
                .idle
                .park_with(index, searching, || self.has_work(), |_unparked| {}, block)
            {
                Unparked::Shutdown => return,
                Unparked::WorkFound | Unparked::Notified => searching = true,
                Unparked::Polled => unreachable!("no I/O driver in this model"),
            }
        }
    }
}

fn run_model(workers: usize, submitters: usize) {
    run_pool_model(workers, submitters, false);
}

fn run_pool_model(workers: usize, submitters: usize, driver: bool) {
    loom::model(move || {
        let pool = if driver {
            Pool::with_driver(workers, submitters)
        } else {
            Pool::new(workers, submitters)
        };
        let worker_threads: Vec<_> = (0..workers)
            .map(|i| {
                let pool = pool.clone();
                thread::spawn(move || pool.work(i))
            })
            .collect();
        let submit_threads: Vec<_> = (0..submitters)
            .map(|_| {
                let pool = pool.clone();
                thread::spawn(move || pool.submit())
            })
            .collect();
        for t in submit_threads {
            t.join().expect("submitter");
        }
        for t in worker_threads {
            t.join().expect("worker");
        }
        assert_eq!(pool.ran.load(Ordering::Acquire), submitters);
        assert_eq!(pool.queued.load(Ordering::Acquire), 0);
    });
}

/// One worker racing to park with one submit.
#[test]
fn scheduler_submit_races_park_one_worker() {
    run_model(1, 1);
}

/// Two workers (one may be searching while the other parks) and one submit:
/// the "a searcher exists, so do not wake" shortcut must not strand it.
#[test]
fn scheduler_submit_races_park_two_workers() {
    run_model(2, 1);
}

/// The worker parks in the I/O driver (the reactor's poll) instead of on
/// its condvar: the submit's unpark must wake the driver (the parker's
/// "in the driver" flag, read under the same lock as the token).
#[test]
fn scheduler_submit_races_park_in_driver() {
    run_pool_model(1, 1, true);
}

/// Two workers, worker 0 in the driver and worker 1 on its condvar.
#[test]
fn scheduler_submit_races_park_in_driver_two_workers() {
    run_pool_model(2, 1, true);
}

/// One worker, two submits racing with each other and with the park.
#[test]
fn scheduler_two_submits_race_park() {
    run_model(1, 2);
}

/// The submit comes from the worker side while the other worker parks: a
/// worker that runs an item submits a second one (as a run that wakes
/// another runnable into its local queue does).
#[test]
fn scheduler_submit_from_worker_wakes_parked_worker() {
    loom::model(|| {
        let pool = Pool::new(2, 2);
        let p0 = pool.clone();
        let w0 = thread::spawn(move || {
            // Worker 0 is busy running the first item, which submits the
            // second item to a shared queue before finishing.
            p0.submit();
            if p0.ran.fetch_add(1, Ordering::AcqRel) + 1 == p0.total {
                p0.idle.shutdown();
            }
            p0.work(0);
        });
        let p1 = pool.clone();
        let w1 = thread::spawn(move || p1.work(1));
        w0.join().expect("worker 0");
        w1.join().expect("worker 1");
        assert_eq!(pool.ran.load(Ordering::Acquire), 2);
    });
}
