//! The mailbox and the scheduler together: cells with real mailboxes run as
//! runnables on real workers. End-to-end checks of invariants 1 (no message
//! lost or handled twice), 2 (one run at a time, no lost wake-up) and 4
//! (per-sender order) of ARCHITECTURE.md.

mod support;

#[path = "support/cell.rs"]
mod cell;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, OnceLock, Weak};
use std::thread;

use cell::{Cell, Signal};

fn n(full: u64) -> u64 {
    if cfg!(miri) {
        100
    } else {
        full
    }
}

/// Two cells bounce one counter; every hop runs on some worker, wherever
/// the LIFO slot and stealing put it.
#[test]
fn ping_pong_between_cells_loses_nothing() {
    let s = support::scheduler(2);
    let total = n(200_000);
    let (done_tx, done_rx) = mpsc::channel();
    // Weak: ping holds pong, and pong reaches ping through this; a strong
    // reference made a cycle that leaked both cells and, through their
    // handles, the scheduler (LeakSanitizer, in .ci/run's ASan step).
    let peer: Arc<OnceLock<Weak<Cell<u64>>>> = Arc::new(OnceLock::new());
    let pong = {
        let peer = peer.clone();
        let done = done_tx.clone();
        Cell::new(s.handle(), move |k: u64| {
            if k >= total {
                done.send(k).expect("test alive");
            } else {
                let ping = peer.get().and_then(Weak::upgrade).expect("wired");
                let _ = ping.tell(k + 1);
            }
        })
    };
    let ping = {
        let pong = pong.clone();
        Cell::new(s.handle(), move |k: u64| {
            if k >= total {
                done_tx.send(k).expect("test alive");
            } else {
                let _ = pong.tell(k + 1);
            }
        })
    };
    assert!(peer.set(Arc::downgrade(&ping)).is_ok());
    ping.tell(0).expect("open");
    let last = done_rx
        .recv_timeout(support::FAILSAFE)
        .expect("the ball came back");
    assert_eq!(last, total, "every hop handled exactly once, in order");
    let report = s.quiesce(std::time::Instant::now() + support::FAILSAFE);
    assert!(report.drained);
}

/// Four threads flood one cell; a Stop arrives on the system lane midway.
/// Every message is handled once in per-sender order, or dead-lettered
/// once, or handed back to its sender.
#[test]
fn flood_and_stop_accounts_for_every_message() {
    let s = support::scheduler(2);
    let senders = 4u64;
    let per = n(100_000);
    let handled = Arc::new(AtomicU64::new(0));
    let next = Arc::new((0..senders).map(|_| AtomicU64::new(0)).collect::<Vec<_>>());
    let sink = {
        let (handled, next) = (handled.clone(), next.clone());
        Cell::new(s.handle(), move |(from, seq): (u64, u64)| {
            // Relaxed: only the run holder touches these; runs are ordered
            // by the mailbox hand-off.
            let expected = next[from as usize].fetch_add(1, Ordering::Relaxed);
            assert_eq!(seq, expected, "sender {from}: out of order or duplicate");
            handled.fetch_add(1, Ordering::Relaxed);
        })
    };
    let threads: Vec<_> = (0..senders)
        .map(|from| {
            let sink = sink.clone();
            thread::spawn(move || {
                let mut refused = 0u64;
                for seq in 0..per {
                    if sink.tell((from, seq)).is_err() {
                        refused += 1;
                    }
                }
                refused
            })
        })
        .collect();
    while handled.load(Ordering::Relaxed) < per {
        thread::yield_now();
    }
    sink.signal(Signal::Stop);
    let refused: u64 = threads.into_iter().map(|t| t.join().expect("sender")).sum();
    // Wait (on the event "the cell went idle") for the last run to finish.
    let report = s.quiesce(std::time::Instant::now() + support::FAILSAFE);
    assert!(report.drained);
    assert!(!sink.is_scheduled());
    let handled = handled.load(Ordering::Relaxed);
    assert!(handled >= per);
    assert_eq!(handled + sink.dead_letters() + refused, senders * per);
}
