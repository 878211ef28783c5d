//! Two actor-like runnables sending each other `N` messages in total, on a
//! scheduler with `W` workers: `cargo run --release --example ping_pong -- N W`.
//!
//! Each "actor" has a message counter and a run-state word (idle or
//! scheduled); a send bumps the counter and, if it wins the idle-to-scheduled
//! flip, submits the receiver, as the engine's cells do. Used by
//! `perf/callgrind.sh` to count instructions per message.

// The scheduler's API is not built under loom (see src/sync.rs).
#[cfg(not(loom))]
mod ping_pong {
    use proscenium_scheduler::{Budget, RunOutcome, Runnable, Scheduler};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{mpsc, Arc, Mutex, OnceLock};
    use std::time::{Duration, Instant};

    struct Actor {
        inbox: AtomicU64,
        scheduled: AtomicBool,
        peer: OnceLock<Arc<Actor>>,
        /// Messages handled by both actors together (shared counter).
        handled: Arc<AtomicU64>,
        total: u64,
        done: Mutex<Option<mpsc::Sender<()>>>,
        handle: proscenium_scheduler::Handle,
    }

    impl Actor {
        fn send(self: &Arc<Self>) {
            self.inbox.fetch_add(1, Ordering::Release);
            if !self.scheduled.swap(true, Ordering::AcqRel) {
                self.handle.submit(self.clone()).expect("scheduler open");
            }
        }
    }

    impl Runnable for Actor {
        fn run(self: Arc<Self>, budget: &mut Budget) -> RunOutcome {
            let peer = self.peer.get().expect("peer set before start");
            loop {
                // Spend a unit only with a message in hand (Budget::consume).
                while !budget.is_exhausted() && self.inbox.load(Ordering::Acquire) > 0 {
                    let _ = budget.consume();
                    self.inbox.fetch_sub(1, Ordering::AcqRel);
                    let n = self.handled.fetch_add(1, Ordering::Relaxed) + 1;
                    if n == self.total {
                        if let Some(tx) = self.done.lock().expect("not poisoned").take() {
                            let _ = tx.send(());
                        }
                    } else if n < self.total {
                        peer.send();
                    }
                }
                if budget.is_exhausted() && self.inbox.load(Ordering::Acquire) > 0 {
                    return RunOutcome::Yield;
                }
                // Release, then re-check so no wake-up is lost.
                self.scheduled.store(false, Ordering::SeqCst);
                if self.inbox.load(Ordering::SeqCst) == 0
                    || self.scheduled.swap(true, Ordering::AcqRel)
                {
                    return RunOutcome::Done;
                }
            }
        }
    }

    pub(crate) fn main() {
        let mut args = std::env::args().skip(1);
        let n: u64 = args
            .next()
            .map_or(1_000_000, |a| a.parse().expect("N: a number"));
        let workers: usize = args.next().map_or(1, |a| a.parse().expect("W: a number"));
        let scheduler = Scheduler::builder()
            .workers(workers)
            .build()
            .expect("valid configuration");
        let handled = Arc::new(AtomicU64::new(0));
        let (tx, rx) = mpsc::channel();
        let make = |done: Option<mpsc::Sender<()>>| {
            Arc::new(Actor {
                inbox: AtomicU64::new(0),
                scheduled: AtomicBool::new(false),
                peer: OnceLock::new(),
                handled: handled.clone(),
                total: n,
                done: Mutex::new(done),
                handle: scheduler.handle().clone(),
            })
        };
        let a = make(Some(tx.clone()));
        let b = make(Some(tx));
        let _ = a.peer.set(b.clone());
        let _ = b.peer.set(a.clone());
        let start = Instant::now();
        a.send();
        rx.recv().expect("the last message signals");
        let elapsed = start.elapsed();
        let report = scheduler.quiesce(Instant::now() + Duration::from_secs(5));
        println!(
            "ping_pong: {n} messages, {workers} workers, {elapsed:?}, {:.1} ns/message, drained={}",
            elapsed.as_nanos() as f64 / n as f64,
            report.drained
        );
    }
}

fn main() {
    #[cfg(not(loom))]
    ping_pong::main();
}
