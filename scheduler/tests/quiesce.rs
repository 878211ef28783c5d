//! Quiesce drains, joins every worker and reports what was left.
#![cfg(not(loom))] // the API is not built under loom (see src/sync.rs)
#![allow(clippy::unwrap_used)] // tests may unwrap
mod support;

use proscenium_scheduler::Scheduler;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

#[test]
fn quiesce_runs_queued_work_then_joins_every_worker() {
    let s = support::scheduler(2);
    let handle = s.handle().clone();
    let n = if cfg!(miri) { 100 } else { 10_000 };
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..n {
        let ran = ran.clone();
        handle
            .submit(support::job(move || {
                ran.fetch_add(1, Ordering::Relaxed);
            }))
            .unwrap();
    }
    let report = s.quiesce(Instant::now() + support::FAILSAFE);
    assert!(report.drained);
    assert_eq!(report.runnables_left, 0);
    assert_eq!(report.timers_pending, 0);
    assert_eq!(report.workers_joined, 2);
    assert_eq!(ran.load(Ordering::Relaxed), n);
    // Closed to external submissions from now on.
    assert!(handle.is_closed());
    assert!(handle.submit(support::job(|| {})).is_err());
}

#[test]
fn quiesce_past_its_deadline_reports_what_was_left() {
    let s = support::scheduler(1);
    let handle = s.handle().clone();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = mpsc::channel::<()>();
    // Keeps the only worker busy until released.
    handle
        .submit(support::job(move || {
            started_tx.send(()).unwrap();
            release_rx.recv_timeout(support::FAILSAFE).unwrap();
        }))
        .unwrap();
    started_rx.recv_timeout(support::FAILSAFE).unwrap();
    // Queued behind it, never to run.
    for _ in 0..5 {
        handle.submit(support::job(|| {})).unwrap();
    }
    let _timer = handle.schedule(Duration::from_secs(3600), || {});
    // Release the worker once quiesce has given up draining.
    let watcher = {
        let handle = handle.clone();
        std::thread::spawn(move || {
            support::wait_until("quiesce gave up", || handle.is_shut_down());
            release_tx.send(()).unwrap();
        })
    };
    let report = s.quiesce(Instant::now());
    watcher.join().unwrap();
    assert!(!report.drained);
    assert_eq!(report.runnables_left, 5);
    assert_eq!(report.timers_pending, 1);
    assert_eq!(report.workers_joined, 1);
}

#[test]
fn drop_shuts_down_and_joins() {
    let s = support::scheduler(2);
    let handle = s.handle().clone();
    let (tx, rx) = mpsc::channel();
    handle
        .submit(support::job(move || tx.send(()).unwrap()))
        .unwrap();
    rx.recv_timeout(support::FAILSAFE).unwrap();
    drop(s);
    assert!(handle.is_closed());
    assert!(handle.submit(support::job(|| {})).is_err());
}

#[test]
fn quiesce_with_internal_resubmissions_waits_for_them() {
    // A chain of runnables each submitting the next from inside a worker:
    // quiesce must let the chain finish (internal submits stay open).
    let s: Scheduler = support::scheduler(2);
    let handle = s.handle().clone();
    let left = Arc::new(AtomicUsize::new(if cfg!(miri) { 10 } else { 1_000 }));
    fn step(handle: proscenium_scheduler::Handle, left: Arc<AtomicUsize>) {
        if left.fetch_sub(1, Ordering::Relaxed) > 1 {
            let h = handle.clone();
            handle.submit(support::job(move || step(h, left))).unwrap();
        }
    }
    let (h, l) = (handle.clone(), left.clone());
    handle.submit(support::job(move || step(h, l))).unwrap();
    let report = s.quiesce(Instant::now() + support::FAILSAFE);
    assert!(report.drained);
    assert_eq!(left.load(Ordering::Relaxed), 0);
}
