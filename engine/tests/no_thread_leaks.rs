//! A system dropped without `terminate()` leaves no thread behind: its
//! workers, timer and reaper are gone once its termination completes.
//!
//! One test in this binary, so no other test starts threads meanwhile.
#![cfg(target_os = "linux")]

mod support;

use std::time::Instant;

use proscenium::{Termination, TerminationReport};
use support::PATIENCE;

/// The threads of this process, as the kernel lists them.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task lists this process's threads")
        .count()
}

#[test]
fn systems_dropped_without_terminate_leave_no_threads() {
    // Warm-up: process-wide threads (the signal dispatcher) start with the
    // first system and stay.
    support::shutdown(support::system());
    let before = threads();
    let terminations: Vec<Termination> = (0..20)
        .map(|_| {
            let system = support::system();
            let terminated = system.when_terminated();
            drop(system);
            terminated
        })
        .collect();
    // One deadline for all, so a broken build fails in PATIENCE, not 20×.
    let deadline = Instant::now() + PATIENCE;
    let reports: Vec<Option<TerminationReport>> = terminations
        .into_iter()
        .map(|t| t.wait_timeout(deadline.saturating_duration_since(Instant::now())))
        .collect();
    // A joined thread can still be listed for a moment while the kernel
    // releases it: wait (bounded) for the count to settle.
    let mut now = threads();
    while now > before && Instant::now() < deadline + PATIENCE {
        std::thread::yield_now();
        now = threads();
    }
    assert_eq!(now, before, "threads left by 20 dropped systems");
    for report in reports {
        let report = report.expect("a dropped system terminates");
        assert!(report.clean(), "{report:?}");
    }
}
