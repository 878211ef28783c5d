//! The demo: the mailbox and the scheduler together. Two cells with real
//! mailboxes bounce a counter `N` times, then four threads flood one cell
//! with `N` messages each and a Stop signal overtakes the rest on the system
//! lane. Prints times per message and what each worker did.
//!
//! `cargo run --release -p proscenium-scheduler --example cells -- [N]`

// The scheduler's API is not built under loom (see src/sync.rs).
#[cfg(not(loom))]
#[path = "../tests/support/cell.rs"]
mod cell;

#[cfg(not(loom))]
fn main() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{mpsc, Arc, OnceLock};
    use std::time::{Duration, Instant};

    use cell::{Cell, Signal};
    use proscenium_scheduler::Scheduler;

    let n: u64 = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("N must be a number"))
        .unwrap_or(1_000_000);
    let scheduler = Scheduler::new().expect("default configuration");
    let handle = scheduler.handle();
    println!(
        "scheduler: {} workers, pinning {:?}",
        handle.num_workers(),
        scheduler.pinning()
    );

    // Ping-pong: each hop is a tell that wins the peer's run and goes to the
    // current worker's LIFO slot.
    let (done_tx, done_rx) = mpsc::channel();
    let ping_slot: Arc<OnceLock<Arc<Cell<u64>>>> = Arc::new(OnceLock::new());
    let pong = {
        let (ping, done) = (ping_slot.clone(), done_tx.clone());
        Cell::new(handle, move |k: u64| {
            if k >= n {
                done.send(()).expect("main waits");
            } else {
                let _ = ping.get().expect("wired").tell(k + 1);
            }
        })
    };
    let ping = {
        let pong = pong.clone();
        Cell::new(handle, move |k: u64| {
            if k >= n {
                done_tx.send(()).expect("main waits");
            } else {
                let _ = pong.tell(k + 1);
            }
        })
    };
    assert!(ping_slot.set(ping.clone()).is_ok());
    let start = Instant::now();
    ping.tell(0).expect("open");
    done_rx.recv().expect("the ball comes back");
    let t = start.elapsed();
    println!(
        "ping-pong: {n} hops in {t:?}: {:.1} ns/hop",
        t.as_nanos() as f64 / n as f64
    );

    // Fan-in, then Stop: the Stop overtakes what is still queued.
    let handled = Arc::new(AtomicU64::new(0));
    let sink = {
        let handled = handled.clone();
        Cell::new(handle, move |_: u64| {
            handled.fetch_add(1, Ordering::Relaxed);
        })
    };
    let start = Instant::now();
    let senders: Vec<_> = (0..4)
        .map(|_| {
            let sink = sink.clone();
            std::thread::spawn(move || (0..n).filter(|&i| sink.tell(i).is_err()).count() as u64)
        })
        .collect();
    while handled.load(Ordering::Relaxed) < 2 * n {
        std::thread::yield_now();
    }
    sink.signal(Signal::Stop);
    let refused: u64 = senders.into_iter().map(|s| s.join().expect("sender")).sum();
    let report = scheduler.quiesce(Instant::now() + Duration::from_secs(10));
    let t = start.elapsed();
    let handled = handled.load(Ordering::Relaxed);
    println!(
        "fan-in: 4 x {n} sent in {t:?}; handled {handled}, dead letters {}, refused after stop {refused} (sum {})",
        sink.dead_letters(),
        handled + sink.dead_letters() + refused
    );
    println!(
        "quiesce: drained={} workers joined={} panics={}",
        report.drained, report.workers_joined, report.panics
    );
}

#[cfg(loom)]
fn main() {}
