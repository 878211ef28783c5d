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

/// Spends a budget kept past its run when its thread's locals are
/// destroyed, after the worker loop (and its frame) has returned.
struct Keeper(Budget);

impl Drop for Keeper {
    fn drop(&mut self) {
        let spent = self.0.consume() && self.0.consume();
        KEEPER_DROPPED.store(if spent { 1 } else { 2 }, Ordering::SeqCst);
    }
}

static KEEPER_DROPPED: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

thread_local! {
    static KEPT: std::cell::RefCell<Option<Keeper>> = const { std::cell::RefCell::new(None) };
}

/// Takes its budget out of the run (safe code can: `mem::replace`) and
/// keeps it in a thread-local.
struct Thief(std::sync::Mutex<mpsc::Sender<()>>);

impl Runnable for Thief {
    fn run(self: Arc<Self>, budget: &mut Budget) -> RunOutcome {
        let stolen = std::mem::replace(budget, Budget::new(1));
        KEPT.with(|k| *k.borrow_mut() = Some(Keeper(stolen)));
        self.0.lock().unwrap().send(()).unwrap();
        RunOutcome::Done
    }
}

/// Regression (issue 12, item 1): a `Budget` kept past its run, here until
/// its worker thread's locals are destroyed, is harmless. It used to hold a
/// raw pointer to the worker's stack-allocated state, which `consume`
/// dereferenced after that frame had returned: a stack use-after-return
/// (AddressSanitizer), a dangling-pointer dereference under Miri (this
/// suite runs under Miri in CI).
#[test]
fn a_budget_kept_past_its_run_is_harmless() {
    let s = support::scheduler(1);
    let (tx, rx) = mpsc::channel();
    s.handle()
        .submit(Arc::new(Thief(std::sync::Mutex::new(tx))))
        .unwrap();
    rx.recv_timeout(support::FAILSAFE).unwrap();
    // Joining the worker runs its thread-local destructors first.
    let report = s.quiesce(std::time::Instant::now() + support::FAILSAFE);
    assert_eq!(report.workers_joined, 1);
    assert_eq!(
        KEEPER_DROPPED.load(Ordering::SeqCst),
        1,
        "the kept budget was spent"
    );
}

/// A runnable that yields every run and, on the runs it is told to, has a
/// job submitted from a thread outside the pool (so to the injector) before
/// it returns; the job reports how many runs the busy one had made when it
/// was served.
struct Busy {
    runs: AtomicU64,
    handle: Handle,
    /// Run numbers (1-based) at which to submit from outside.
    submit_at: [u64; 2],
    served: mpsc::Sender<(u64, u64)>,
    stop: AtomicBool,
}

impl Runnable for Busy {
    fn run(self: Arc<Self>, budget: &mut Budget) -> RunOutcome {
        while budget.consume() {}
        let run = self.runs.fetch_add(1, Ordering::SeqCst) + 1;
        if self.submit_at.contains(&run) {
            let (me, served) = (self.clone(), self.served.clone());
            let job = support::job(move || {
                served.send((run, me.runs.load(Ordering::SeqCst))).unwrap();
            });
            let handle = self.handle.clone();
            std::thread::spawn(move || handle.submit(job).unwrap())
                .join()
                .unwrap();
        }
        if self.stop.load(Ordering::SeqCst) {
            RunOutcome::Done
        } else {
            RunOutcome::Yield
        }
    }
}

/// While a worker's only runnable keeps using its whole budget, work
/// submitted from outside the pool runs right after the current budget,
/// not after up to `INJECTOR_INTERVAL` (61) more: the worker a submitter
/// wakes may not get a core soon when every core is busy. Two submissions
/// at consecutive runs of the busy runnable: each must run before the busy
/// one's next run. (Before the worker looked at the injector on a yield,
/// the periodic look could serve at most one of two runs in a row.)
#[test]
fn work_from_outside_runs_after_the_current_budget_of_a_busy_runnable() {
    let s = proscenium_scheduler::Scheduler::builder()
        .workers(1)
        .pin_workers(false)
        .throughput(4)
        .build()
        .unwrap();
    let (served_tx, served_rx) = mpsc::channel();
    let busy = Arc::new(Busy {
        runs: AtomicU64::new(0),
        handle: s.handle().clone(),
        submit_at: [100, 101],
        served: served_tx,
        stop: AtomicBool::new(false),
    });
    s.handle().submit(busy.clone()).unwrap();
    for _ in 0..2 {
        let (submitted_in, runs_when_served) = served_rx.recv_timeout(support::FAILSAFE).unwrap();
        assert_eq!(
            runs_when_served,
            submitted_in,
            "the job submitted during run {submitted_in} waited behind {} more budgets",
            runs_when_served - submitted_in
        );
    }
    busy.stop.store(true, Ordering::SeqCst);
    let report = s.quiesce(std::time::Instant::now() + support::FAILSAFE);
    assert!(report.drained, "{report:?}");
}
