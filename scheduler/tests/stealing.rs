//! Work stealing, injector and LIFO behaviour.
#![cfg(not(loom))] // the API is not built under loom (see src/sync.rs)
#![allow(clippy::unwrap_used)] // tests may unwrap
mod support;

use proscenium_scheduler::current_worker;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

#[test]
fn a_flooded_worker_is_stolen_from() {
    let s = support::scheduler(2);
    let handle = s.handle().clone();
    let n = if cfg!(miri) { 100 } else { 10_000 };
    let ran_elsewhere = Arc::new(AtomicUsize::new(0));
    let (stolen_tx, stolen_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let h = handle.clone();
    let flood = support::job(move || {
        let me = current_worker().expect("runs on a worker");
        for _ in 0..n {
            let ran_elsewhere = ran_elsewhere.clone();
            let stolen_tx = stolen_tx.clone();
            let done_tx = done_tx.clone();
            // From a worker: into its LIFO slot, the previous one to its
            // local queue.
            h.submit(support::job(move || {
                if current_worker() != Some(me)
                    && ran_elsewhere.fetch_add(1, Ordering::Relaxed) == 0
                {
                    let _ = stolen_tx.send(());
                }
                let _ = done_tx.send(());
            }))
            .unwrap();
        }
        // Keep this worker busy until another worker has run one of them:
        // the only way that happens is by stealing from this worker's queue.
        stolen_rx
            .recv_timeout(support::FAILSAFE)
            .expect("another worker stole");
    });
    handle.submit(flood).unwrap();
    for _ in 0..n {
        done_rx.recv_timeout(support::FAILSAFE).unwrap();
    }
    let metrics = handle.metrics();
    assert!(metrics.total().steals >= 1, "{metrics:?}");
    assert_eq!(metrics.total().runs, n as u64 + 1);
}

#[test]
fn external_submissions_come_through_the_injector() {
    let s = support::scheduler(2);
    let n = if cfg!(miri) { 100 } else { 10_000 };
    let (tx, rx) = mpsc::channel();
    for i in 0..n {
        let tx = tx.clone();
        s.handle()
            .submit(support::job(move || tx.send(i).unwrap()))
            .unwrap();
    }
    let mut seen: Vec<usize> = (0..n)
        .map(|_| rx.recv_timeout(support::FAILSAFE).unwrap())
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..n).collect::<Vec<_>>(), "each ran exactly once");
    assert!(s.handle().metrics().total().injector_pulls >= 1);
}

#[test]
fn a_submit_from_a_worker_runs_next_on_that_worker() {
    // One worker, so "next" is observable: the LIFO slot wins over the
    // local queue.
    let s = support::scheduler(1);
    let h = s.handle().clone();
    let (tx, rx) = mpsc::channel();
    let tx2 = tx.clone();
    s.handle()
        .submit(support::job(move || {
            let tx_a = tx2.clone();
            let tx_b = tx2.clone();
            h.submit(support::job(move || tx_a.send("first").unwrap()))
                .unwrap();
            // Displaces "first" to the back of the local queue.
            h.submit(support::job(move || tx_b.send("second").unwrap()))
                .unwrap();
        }))
        .unwrap();
    drop(tx);
    let order: Vec<&str> = rx.iter().take(2).collect();
    assert_eq!(order, ["second", "first"]);
}

/// Regression (issue 12, item 6): a runnable submitted from inside a run
/// goes to that worker's LIFO slot, which no other worker could steal from:
/// if the run then went on (a slow or blocking handler), the runnable
/// waited for all of it even with the other worker idle. The timer
/// thread's stall monitor now hands it to the injector after a tick. Here
/// the first run blocks until the second has run: it used to time out.
#[test]
fn a_runnable_woken_by_a_long_run_does_not_wait_for_it() {
    let s = support::scheduler(2);
    let handle = s.handle().clone();
    let (result_tx, result_rx) = mpsc::channel();
    s.handle()
        .submit(support::job(move || {
            let me = current_worker().expect("on a worker");
            let (ran_tx, ran_rx) = mpsc::channel();
            let submitted = std::time::Instant::now();
            handle
                .submit(support::job(move || {
                    ran_tx
                        .send((current_worker(), submitted.elapsed()))
                        .unwrap();
                }))
                .unwrap();
            // A long run: it waits for the runnable it woke.
            let outcome = ran_rx.recv_timeout(std::time::Duration::from_secs(10));
            result_tx.send((me, outcome)).unwrap();
        }))
        .unwrap();
    let (first, outcome) = result_rx.recv_timeout(support::FAILSAFE).unwrap();
    let (ran_on, waited) = outcome.expect("the woken runnable ran while the long run went on");
    assert_ne!(ran_on, Some(first), "it ran on the other worker");
    eprintln!("waited {waited:?} behind a blocked run");
    let rescued = s.handle().metrics().workers[first.index()].lifo_rescued;
    assert_eq!(rescued, 1, "taken from the blocked worker's LIFO slot once");
    let report = s.quiesce(std::time::Instant::now() + support::FAILSAFE);
    assert!(report.drained, "{report:?}");
}
