//! Budgets and the LIFO cap keep runnables from starving each other.
#![cfg(not(loom))] // the API is not built under loom (see src/sync.rs)
#![allow(clippy::unwrap_used)] // tests may unwrap
mod support;

use proscenium_scheduler::{Budget, Handle, RunOutcome, Runnable};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, OnceLock, Weak};

/// Endless work: spends its whole budget, then yields, until stopped.
struct Spinner {
    stop: Arc<AtomicBool>,
    units: AtomicU64,
}

impl Runnable for Spinner {
    fn run(self: Arc<Self>, budget: &mut Budget) -> RunOutcome {
        while budget.consume() {
            self.units.fetch_add(1, Ordering::Relaxed);
        }
        if self.stop.load(Ordering::Relaxed) {
            RunOutcome::Done
        } else {
            RunOutcome::Yield
        }
    }
}

#[test]
fn a_runnable_that_always_has_work_yields_to_others() {
    let s = proscenium_scheduler::Scheduler::builder()
        .workers(1)
        .pin_workers(false)
        .throughput(8)
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let spinner = Arc::new(Spinner {
        stop: stop.clone(),
        units: AtomicU64::new(0),
    });
    s.handle().submit(spinner.clone()).unwrap();
    let (tx, rx) = mpsc::channel();
    let stop2 = stop.clone();
    s.handle()
        .submit(support::job(move || {
            stop2.store(true, Ordering::Relaxed);
            tx.send(()).unwrap();
        }))
        .unwrap();
    rx.recv_timeout(support::FAILSAFE)
        .expect("the other runnable ran despite the spinner");
    // Every run of the spinner used exactly its budget. Quiescing joins the
    // worker, which orders its last increments before this read (waiting on
    // `Arc::strong_count`, a Relaxed load, did not: Miri's weak-memory
    // emulation read a stale count).
    let report = s.quiesce(std::time::Instant::now() + support::FAILSAFE);
    assert!(report.drained, "{report:?}");
    assert_eq!(Arc::strong_count(&spinner), 1);
    assert_eq!(spinner.units.load(Ordering::Relaxed) % 8, 0);
}

/// One of two runnables that wake each other forever from inside their runs
/// (so each lands in the LIFO slot), until stopped.
struct Player {
    /// Weak, so the pair is freed at the end (no reference cycle).
    peer: OnceLock<Weak<Player>>,
    handle: Handle,
    stop: Arc<AtomicBool>,
    runs: AtomicU64,
}

impl Runnable for Player {
    fn run(self: Arc<Self>, _budget: &mut Budget) -> RunOutcome {
        self.runs.fetch_add(1, Ordering::Relaxed);
        if !self.stop.load(Ordering::Relaxed) {
            if let Some(peer) = self.peer.get().and_then(Weak::upgrade) {
                self.handle.submit(peer).unwrap();
            }
        }
        RunOutcome::Done
    }
}

#[test]
fn two_runnables_waking_each_other_do_not_starve_the_queue() {
    let s = support::scheduler(1);
    let stop = Arc::new(AtomicBool::new(false));
    let make = || {
        Arc::new(Player {
            peer: OnceLock::new(),
            handle: s.handle().clone(),
            stop: stop.clone(),
            runs: AtomicU64::new(0),
        })
    };
    let (a, b) = (make(), make());
    a.peer.set(Arc::downgrade(&b)).ok().unwrap();
    b.peer.set(Arc::downgrade(&a)).ok().unwrap();
    let (tx, rx) = mpsc::channel();
    let h = s.handle().clone();
    let stop2 = stop.clone();
    let a2 = a.clone();
    s.handle()
        .submit(support::job(move || {
            // Queue a third runnable, then start the pair from inside the
            // worker: the pair takes the LIFO slot and pushes the third to
            // the local queue, behind it.
            h.submit(support::job(move || {
                stop2.store(true, Ordering::Relaxed);
                tx.send(()).unwrap();
            }))
            .unwrap();
            h.submit(a2).unwrap();
        }))
        .unwrap();
    // The third runnable was displaced into the local queue; the pair keeps
    // re-entering the LIFO slot; the cap sends the pair to the back.
    rx.recv_timeout(support::FAILSAFE)
        .expect("the queued runnable ran despite the ping-pong pair");
    support::wait_until("pair stopped", || s.handle().parked_workers() == 1);
    // The pair really did ping-pong through the LIFO slot meanwhile.
    assert!(a.runs.load(Ordering::Relaxed) + b.runs.load(Ordering::Relaxed) >= 3);
}
