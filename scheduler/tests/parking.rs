//! Idle workers park, and parked workers wake for new work.
#![cfg(not(loom))] // the API is not built under loom (see src/sync.rs)
#![allow(clippy::unwrap_used)] // tests may unwrap
mod support;

use std::sync::mpsc;

#[test]
fn parked_workers_wake_for_external_work() {
    let s = support::scheduler(2);
    let handle = s.handle().clone();
    let rounds = if cfg!(miri) { 10 } else { 1_000 };
    let (tx, rx) = mpsc::channel();
    for i in 0..rounds {
        // Every worker is asleep before each submit.
        support::wait_until("all workers parked", || handle.parked_workers() == 2);
        let tx = tx.clone();
        handle
            .submit(support::job(move || tx.send(i).unwrap()))
            .unwrap();
        assert_eq!(rx.recv_timeout(support::FAILSAFE).unwrap(), i);
    }
    assert!(handle.metrics().total().parks >= rounds as u64);
}

#[test]
fn work_submitted_from_a_worker_wakes_a_parked_one() {
    let s = support::scheduler(2);
    let handle = s.handle().clone();
    let rounds = if cfg!(miri) { 10 } else { 200 };
    for _ in 0..rounds {
        support::wait_until("all workers parked", || handle.parked_workers() == 2);
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (ran_tx, ran_rx) = mpsc::channel::<()>();
        let h = handle.clone();
        handle
            .submit(support::job(move || {
                // Two submits: the first is displaced from the LIFO slot into
                // the local queue, which must wake the other (parked) worker.
                let ran_tx2 = ran_tx.clone();
                h.submit(support::job(move || ran_tx.send(()).unwrap()))
                    .unwrap();
                h.submit(support::job(move || ran_tx2.send(()).unwrap()))
                    .unwrap();
                // This worker stays busy until one of them ran elsewhere.
                release_rx.recv_timeout(support::FAILSAFE).unwrap();
            }))
            .unwrap();
        ran_rx.recv_timeout(support::FAILSAFE).unwrap();
        release_tx.send(()).unwrap();
        ran_rx.recv_timeout(support::FAILSAFE).unwrap();
    }
}

#[test]
fn a_burst_of_submits_does_not_lose_work() {
    let s = support::scheduler(2);
    let n = if cfg!(miri) { 100 } else { 100_000 };
    let (tx, rx) = mpsc::channel();
    let senders: Vec<_> = (0..4)
        .map(|_| {
            let h = s.handle().clone();
            let tx = tx.clone();
            std::thread::spawn(move || {
                for _ in 0..n / 4 {
                    let tx = tx.clone();
                    h.submit(support::job(move || tx.send(()).unwrap()))
                        .unwrap();
                }
            })
        })
        .collect();
    for t in senders {
        t.join().unwrap();
    }
    for _ in 0..n {
        rx.recv_timeout(support::FAILSAFE).unwrap();
    }
}
