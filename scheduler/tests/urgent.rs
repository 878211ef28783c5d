//! The urgent queue: a runnable submitted with `submit_urgent` (or a task
//! spawned with `spawn_urgent`) runs ahead of everything already queued.
#![allow(clippy::unwrap_used)] // tests may unwrap

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};

use proscenium_scheduler::{Budget, RunOutcome, Runnable, Scheduler};

/// Records its tag when run.
struct Tagged {
    tag: u32,
    log: Mutex<Sender<u32>>,
}

impl Runnable for Tagged {
    fn run(self: Arc<Self>, _budget: &mut Budget) -> RunOutcome {
        self.log.lock().unwrap().send(self.tag).unwrap();
        RunOutcome::Done
    }
}

/// Blocks its worker until told to go on.
struct Blocker {
    started: Mutex<Sender<()>>,
    go: Mutex<mpsc::Receiver<()>>,
}

impl Runnable for Blocker {
    fn run(self: Arc<Self>, _budget: &mut Budget) -> RunOutcome {
        self.started.lock().unwrap().send(()).unwrap();
        self.go.lock().unwrap().recv().unwrap();
        RunOutcome::Done
    }
}

#[test]
fn urgent_work_overtakes_a_backlog() {
    let scheduler = Scheduler::builder()
        .workers(1)
        .pin_workers(false)
        .build()
        .unwrap();
    let handle = scheduler.handle().clone();
    let (started_tx, started) = mpsc::channel();
    let (go, go_rx) = mpsc::channel();
    handle
        .submit(Arc::new(Blocker {
            started: Mutex::new(started_tx),
            go: Mutex::new(go_rx),
        }))
        .unwrap();
    started.recv().unwrap(); // the only worker is busy from here on
    let (log_tx, log) = mpsc::channel();
    let tagged = |tag| {
        Arc::new(Tagged {
            tag,
            log: Mutex::new(log_tx.clone()),
        })
    };
    for tag in 0..100 {
        handle.submit(tagged(tag)).unwrap();
    }
    handle.submit_urgent(tagged(1000)).unwrap();
    let urgent_task = {
        let log = log_tx.clone();
        handle.spawn_urgent(async move { log.send(2000).unwrap() })
    };
    go.send(()).unwrap();
    let order: Vec<u32> = (0..102).map(|_| log.recv().unwrap()).collect();
    assert_eq!(
        &order[..2],
        [1000, 2000],
        "urgent first, in order: {order:?}"
    );
    // The backlog then runs, each runnable once (its own order is the
    // queues' business, not promised here).
    let mut rest = order[2..].to_vec();
    rest.sort_unstable();
    assert_eq!(rest, (0..100).collect::<Vec<_>>());
    assert_eq!(urgent_task.wait(), Ok(()));
    let report = scheduler.quiesce(std::time::Instant::now() + std::time::Duration::from_secs(10));
    assert!(report.drained && report.runnables_left == 0);
}

#[test]
fn urgent_submissions_are_refused_once_closed() {
    let scheduler = Scheduler::builder()
        .workers(1)
        .pin_workers(false)
        .build()
        .unwrap();
    let handle = scheduler.handle().clone();
    let _ = scheduler.quiesce(std::time::Instant::now());
    let (tx, _rx) = mpsc::channel();
    let refused = handle.submit_urgent(Arc::new(Tagged {
        tag: 1,
        log: Mutex::new(tx),
    }));
    assert!(refused.is_err());
}
