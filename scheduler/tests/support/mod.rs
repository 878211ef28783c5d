//! Helpers shared by the behaviour tests.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use proscenium_scheduler::{Budget, RunOutcome, Runnable, Scheduler};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A failsafe bound on waits: tests wait on events; this only stops a hung
/// test from hanging CI.
pub const FAILSAFE: Duration = Duration::from_secs(60);

/// An unpinned scheduler with `workers` workers.
pub fn scheduler(workers: usize) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .pin_workers(false)
        .build()
        .expect("valid configuration")
}

/// A runnable that runs `f` once.
pub struct Once(Mutex<Option<Box<dyn FnOnce() + Send>>>);

impl Runnable for Once {
    fn run(self: Arc<Self>, _budget: &mut Budget) -> RunOutcome {
        let f = self.0.lock().unwrap().take();
        if let Some(f) = f {
            f();
        }
        RunOutcome::Done
    }
}

/// A runnable that runs `f` once.
pub fn job(f: impl FnOnce() + Send + 'static) -> Arc<dyn Runnable> {
    Arc::new(Once(Mutex::new(Some(Box::new(f)))))
}

/// Waits (yielding, with a failsafe) until `cond` holds.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < FAILSAFE, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}
