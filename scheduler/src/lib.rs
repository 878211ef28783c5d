//! The M:N work-stealing scheduler of the proscenium actor engine: a fixed
//! pool of (optionally core-pinned) worker threads that run [`Runnable`]s —
//! actor cells and future tasks alike — plus timers, `block_on`, metrics and
//! a quiesce that drains and joins the pool.
//!
//! Each worker owns a crossbeam-deque queue and a LIFO slot for the runnable
//! its current run woke last (a request/reply pair stays on one core);
//! submissions from outside go to a global injector; idle workers steal
//! batches from the injector and from each other, spin briefly, then park.
//! A submit wakes a parked worker only when no worker is already searching,
//! and never loses a wake-up (the handshake has a loom model). A run gets a
//! [`Budget`] of `throughput` units and yields when it has used it.
//!
//! Futures wait for sockets through [`net`] (TCP on a mio reactor that a
//! parking worker polls instead of sleeping; decision 0010), and for time
//! through [`Handle::sleep`] and the timer thread.
//!
//! The scheduler knows nothing of actors; the engine implements
//! [`Runnable`] for its cells.
//!
//! With the cargo feature `metrics`, `Handle::publish_metrics` publishes
//! the per-worker counters ([`Handle::metrics`]) and the queue depths
//! through the [`metrics`](https://docs.rs/metrics) facade, sampled on the
//! calling thread (docs/metrics.md); the workers' loop is the same code
//! with or without it.
//!
//! ```
//! use proscenium_scheduler::{Budget, RunOutcome, Runnable, Scheduler};
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::sync::{mpsc, Arc, Mutex};
//! use std::time::{Duration, Instant};
//!
//! /// Counts down `left` units of work, `budget` at a time.
//! struct Countdown {
//!     left: AtomicU32,
//!     done: Mutex<mpsc::Sender<()>>,
//! }
//!
//! impl Runnable for Countdown {
//!     fn run(self: Arc<Self>, budget: &mut Budget) -> RunOutcome {
//!         while budget.consume() {
//!             if self.left.fetch_sub(1, Ordering::Relaxed) == 1 {
//!                 self.done.lock().unwrap().send(()).unwrap();
//!                 return RunOutcome::Done;
//!             }
//!         }
//!         RunOutcome::Yield // used its budget, still has work
//!     }
//! }
//!
//! let scheduler = Scheduler::builder().workers(2).pin_workers(false).build()?;
//! let handle = scheduler.handle().clone();
//!
//! // A runnable.
//! let (tx, rx) = mpsc::channel();
//! let work = Arc::new(Countdown { left: AtomicU32::new(1000), done: Mutex::new(tx) });
//! handle.submit(work).expect("scheduler is open");
//! rx.recv().unwrap();
//!
//! // A future, with a timer inside, joined from this plain thread.
//! let h = handle.clone();
//! let task = handle.spawn(async move {
//!     h.sleep(Duration::from_millis(1)).await;
//!     "slept"
//! });
//! assert_eq!(task.wait(), Ok("slept"));
//!
//! // Drain and join every worker.
//! let report = scheduler.quiesce(Instant::now() + Duration::from_secs(5));
//! assert!(report.drained);
//! assert_eq!(report.runnables_left, 0);
//! # Ok::<(), proscenium_scheduler::BuildError>(())
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![doc(test(attr(deny(warnings))))]

// Under loom the park/unpark handshake, the LIFO slot, the task state
// machine, a timer entry, the quiesce gate, the stall monitor's sleep
// handshake, an I/O source's readiness word
// (`scheduled_io`), the submit gate (`submit_gate`), `block_on` and the worker loop (with its queues
// replaced by a stand-in, see `deque`) compile (see
// `sync`). Their items are `pub` for the `__loom` re-export below, which
// exists only under loom; otherwise they are crate-internal.
#[cfg_attr(not(loom), allow(unreachable_pub))]
mod idle;
#[cfg_attr(not(loom), allow(unreachable_pub))]
mod lifo;
#[cfg_attr(not(loom), allow(unreachable_pub))]
mod monitor_sleep;
#[cfg_attr(not(loom), allow(unreachable_pub))]
mod park;
#[cfg_attr(not(loom), allow(unreachable_pub))]
mod quiesce;
#[cfg_attr(not(loom), allow(unreachable_pub))]
mod scheduled_io;
mod sync;
#[cfg_attr(not(loom), allow(unreachable_pub))]
mod task_state;
#[cfg_attr(not(loom), allow(unreachable_pub))]
mod timer_entry;
#[cfg_attr(not(loom), allow(unreachable_pub))]
mod timer_intake;

mod block_on;
#[cfg(not(loom))]
mod config;
mod deque;
mod metrics;
#[cfg(loom)]
mod model;
#[cfg(not(loom))]
pub mod net;
#[cfg(not(loom))]
mod pin;
#[cfg(not(loom))]
mod reactor;
mod runnable;
#[cfg_attr(not(loom), allow(unreachable_pub))]
mod scheduler;
#[cfg_attr(not(loom), allow(unreachable_pub))]
mod submit_gate;
#[cfg(not(loom))]
mod task;
#[cfg(not(loom))]
mod timer;
#[cfg(not(loom))]
mod wheel;
mod worker;

pub use crate::{
    block_on::block_on,
    runnable::{Budget, RunOutcome, Runnable},
    task_state::{JoinError, JoinHandle},
};

#[cfg(not(loom))]
pub use crate::{
    config::{BuildError, Builder, DEFAULT_THROUGHPUT, MIN_STACK_SIZE},
    metrics::{Metrics, WorkerMetrics},
    pin::{Pinning, UnpinnedReason},
    scheduler::{Handle, QuiesceReport, Scheduler, SubmitError},
    timer::{Sleep, TimerHandle},
    worker::{assert_not_on_worker, current_worker, WorkerId},
};

/// The park/unpark handshake, exposed for the loom models in `loom-tests/`.
/// Not part of the API.
#[cfg(loom)]
#[doc(hidden)]
pub mod __loom {
    pub use crate::idle::{Idle, IdleSnapshot, Unparked, MAX_WORKERS};
    pub use crate::lifo::LifoSlot;
    pub use crate::model::{ModelPool, ModelWorker};
    pub use crate::monitor_sleep::MonitorSleep;
    pub use crate::park::Parker;
    pub use crate::quiesce::QuiesceGate;
    pub use crate::scheduled_io::{
        Direction, ReadyEvent, ScheduledIo, SchedulerShutDown, READABLE, READ_CLOSED, SHUTDOWN,
        WRITABLE, WRITE_CLOSED,
    };
    pub use crate::scheduler::SubmitError;
    pub use crate::submit_gate::{Admitted, SubmitGate};
    pub use crate::task_state::{JoinState, TaskState};
    pub use crate::timer_entry::{Fired, TimerEntry};
    pub use crate::timer_intake::{Pushed, TimerIntake};
}

/// The README's example, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
