//! loom models of the park/unpark handshake when a worker parks in the
//! I/O driver: no submitted work is left behind while every worker sleeps
//! (no lost wake-up), whether a sleeper blocks on its condvar or in the
//! driver's poll.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release --test scheduler_idle`.
//!
//! The models drive the real `Idle` and `Parker` of `proscenium-scheduler`
//! (compiled against loom's atomics, mutex and condvar under `--cfg loom`)
//! with a small copy of the worker loop: the real loop
//! (`scheduler/src/worker.rs`, modelled in `worker.rs`) parks through the
//! reactor, which loom builds leave out, so the driver's side of the
//! handshake is modelled here. (This file used to model the whole idle
//! handshake on that copy; `worker.rs` now does it on the real loop, see
//! docs/decisions/0018-loom-worker-loop.md.) The shared queues are one
//! atomic counter of queued items with Release pushes and Acquire/AcqRel
//! pops, like a queue that is correct on its own but adds no ordering of
//! its own to the handshake. A worker follows the real worker loop: search
//! (if allowed), otherwise park, and treat the end of a park as
//! "searching". Workers only exit on shutdown, which the worker that runs
//! the last item triggers; so a lost wake-up leaves a worker parked
//! forever, which loom reports as a deadlock.
//!
//! Since the reactor has a poll per worker (docs/decisions/0024), every
//! worker may block in a driver of its own: `scheduler_submit_races_park_in_own_drivers`
//! has both workers do so, each woken through the wake-up `Idle` is given,
//! which names the worker.
//!
//! Mutations of `scheduler/src/{idle,park}.rs` these models were checked to
//! catch (each reported as a deadlock): an unpark that never wakes the
//! driver of a worker parked in it; a parker whose `park_driver` checks the
//! token and sets the "in the driver" flag in two separate critical
//! sections; a driver wake-up that wakes worker 0's driver whatever the
//! worker (`Idle::unpark` calling the wake-up with `0`). (The fences and the re-check of `idle.rs` are also checked by
//! the models of the real loop in `worker.rs`.)
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
    /// Worker `i` parks in `drivers[i]`, if there is one, instead of on its
    /// condvar (`Parker::park_driver`), and `Idle` wakes it through that
    /// eventfd.
    drivers: Vec<Arc<Eventfd>>,
    /// Items queued and not yet taken.
    queued: AtomicUsize,
    /// Items run.
    ran: AtomicUsize,
    total: usize,
}

impl Pool {
    /// A pool of `workers`, the first `in_drivers` of them parking in an
    /// I/O driver of their own.
    fn with_drivers(workers: usize, in_drivers: usize, total: usize) -> Arc<Pool> {
        let drivers: Vec<Arc<Eventfd>> = (0..in_drivers)
            .map(|_| {
                Arc::new(Eventfd {
                    set: Mutex::new(false),
                    condvar: Condvar::new(),
                })
            })
            .collect();
        let wake = drivers.clone();
        Arc::new(Pool {
            idle: Idle::with_driver_wake(workers, move |worker| {
                if let Some(driver) = wake.get(worker) {
                    driver.wake();
                }
            }),
            drivers,
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
                match self.drivers.get(index) {
                    Some(driver) => {
                        let _ = parker.park_driver(|| driver.wait());
                    }
                    None => parker.park(),
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

fn run_pool_model(workers: usize, in_drivers: usize, submitters: usize) {
    loom::model(move || {
        let pool = Pool::with_drivers(workers, in_drivers, submitters);
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

/// The worker parks in the I/O driver (the reactor's poll) instead of on
/// its condvar: the submit's unpark must wake the driver (the parker's
/// "in the driver" flag, read under the same lock as the token).
#[test]
fn scheduler_submit_races_park_in_driver() {
    run_pool_model(1, 1, 1);
}

/// Two workers, worker 0 in the driver and worker 1 on its condvar.
#[test]
fn scheduler_submit_races_park_in_driver_two_workers() {
    run_pool_model(2, 1, 1);
}

/// Two workers, each in a driver of its own (the reactor's poll per
/// worker): the submit's wake-up must reach the driver of the worker it
/// unparks.
#[test]
fn scheduler_submit_races_park_in_own_drivers() {
    run_pool_model(2, 2, 1);
}
