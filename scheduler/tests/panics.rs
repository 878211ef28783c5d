//! A panicking runnable or future does not take its worker down.
#![cfg(not(loom))] // the API is not built under loom (see src/sync.rs)
#![allow(clippy::unwrap_used)] // tests may unwrap
mod support;

use proscenium_scheduler::JoinError;
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[test]
fn a_panicking_runnable_leaves_the_pool_working() {
    let s = support::scheduler(1);
    let handle = s.handle().clone();
    handle
        .submit(support::job(|| panic!("deliberate test panic")))
        .unwrap();
    let (tx, rx) = mpsc::channel();
    for i in 0..10 {
        let tx = tx.clone();
        handle
            .submit(support::job(move || tx.send(i).unwrap()))
            .unwrap();
    }
    let got: Vec<i32> = (0..10)
        .map(|_| rx.recv_timeout(support::FAILSAFE).unwrap())
        .collect();
    assert_eq!(got, (0..10).collect::<Vec<_>>());
    assert_eq!(handle.metrics().total().panics, 1);
    let report = s.quiesce(Instant::now() + Duration::from_secs(10));
    assert_eq!(report.panics, 1);
    assert_eq!(report.workers_joined, 1);
}

#[test]
fn a_panicking_future_fails_its_join_handle_and_is_counted() {
    let s = support::scheduler(2);
    let handle = s.handle().clone();
    let bad = handle.spawn(async {
        if true {
            panic!("deliberate future panic");
        }
        1
    });
    assert_eq!(
        bad.wait(),
        Err(JoinError::Panicked("deliberate future panic".into()))
    );
    assert_eq!(handle.spawn(async { 2 }).wait(), Ok(2));
    assert_eq!(handle.metrics().total().panics, 1);
}
