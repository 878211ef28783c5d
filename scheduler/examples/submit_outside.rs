//! `N` submits of a trivial runnable from the main thread, outside the
//! workers, while the one worker is held in a run (so no submit wakes
//! anyone and nothing interleaves); then the worker runs them:
//! `cargo run --release --example submit_outside -- N`.
//!
//! A fixed workload for instruction counts of the external submit path
//! (`Handle::submit` from outside: the submit gate, the injector's push,
//! the wake-up's check). The submits are made in `submit_all`, a function
//! of its own, so that callgrind can count them alone:
//!
//! ```text
//! cargo build --release -p proscenium-scheduler --example submit_outside
//! for n in 100000 200000; do
//!     valgrind --tool=callgrind --toggle-collect='*submit_all*' \
//!         --callgrind-out-file=cg.$n target/release/examples/submit_outside $n
//! done
//! # instructions per submit = (Ir(200000) - Ir(100000)) / 100000
//! ```

// The scheduler's API is not built under loom (see src/sync.rs).
#[cfg(not(loom))]
mod submit_outside {
    use proscenium_scheduler::{Budget, Handle, RunOutcome, Runnable, Scheduler};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{mpsc, Arc, Mutex};
    use std::time::{Duration, Instant};

    /// Counts its runs; the last expected one tells the main thread.
    struct Job {
        runs: AtomicU64,
        expected: u64,
        done: Mutex<Option<mpsc::Sender<()>>>,
    }

    impl Runnable for Job {
        fn run(self: Arc<Self>, _budget: &mut Budget) -> RunOutcome {
            // AcqRel: the last run sees every other run's count.
            if self.runs.fetch_add(1, Ordering::AcqRel) + 1 == self.expected {
                if let Some(done) = self.done.lock().expect("not poisoned").take() {
                    let _ = done.send(());
                }
            }
            RunOutcome::Done
        }
    }

    /// Holds the worker until the main thread is done submitting.
    struct Hold {
        started: Mutex<Option<mpsc::Sender<()>>>,
        release: Mutex<Option<mpsc::Receiver<()>>>,
    }

    impl Runnable for Hold {
        fn run(self: Arc<Self>, _budget: &mut Budget) -> RunOutcome {
            if let Some(started) = self.started.lock().expect("not poisoned").take() {
                let _ = started.send(());
            }
            if let Some(release) = self.release.lock().expect("not poisoned").take() {
                let _ = release.recv();
            }
            RunOutcome::Done
        }
    }

    /// The measured part: `n` external submits of the same runnable.
    #[inline(never)]
    fn submit_all(handle: &Handle, job: &Arc<Job>, n: u64) {
        for _ in 0..n {
            let job: Arc<dyn Runnable> = job.clone();
            if handle.submit(job).is_err() {
                panic!("the scheduler is open");
            }
        }
    }

    pub(crate) fn main() {
        let n: u64 = std::env::args()
            .nth(1)
            .map_or(100_000, |s| s.parse().expect("N: a whole number"));
        let scheduler = Scheduler::builder()
            .workers(1)
            .pin_workers(false)
            .build()
            .expect("valid configuration");
        let handle = scheduler.handle().clone();
        let (started_tx, started_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel();
        let hold: Arc<dyn Runnable> = Arc::new(Hold {
            started: Mutex::new(Some(started_tx)),
            release: Mutex::new(Some(release_rx)),
        });
        handle.submit(hold).expect("the scheduler is open");
        started_rx.recv().expect("the hold runs");
        let (done_tx, done_rx) = mpsc::channel();
        let job = Arc::new(Job {
            runs: AtomicU64::new(0),
            expected: n,
            done: Mutex::new(Some(done_tx)),
        });
        let start = Instant::now();
        submit_all(&handle, &job, n);
        let submitted = start.elapsed();
        release_tx.send(()).expect("the hold waits");
        done_rx.recv().expect("every job runs");
        println!(
            "{n} submits from outside: {:.1} ns each",
            submitted.as_nanos() as f64 / n as f64
        );
        let report = scheduler.quiesce(Instant::now() + Duration::from_secs(10));
        assert_eq!(report.runnables_left, 0);
    }
}

fn main() {
    #[cfg(not(loom))]
    submit_outside::main();
}
