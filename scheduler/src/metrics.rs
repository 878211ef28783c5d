//! Per-worker counters, cheap to keep and readable at any time.
//!
//! Under `--cfg loom` the worker loop compiles (see `worker.rs`) but its
//! counters count nothing: they are statistics, not part of any protocol,
//! and every access would be one more step for loom to interleave.
// Under loom only `Counters` (and its no-op `bump`) is used.
#![cfg_attr(loom, allow(dead_code, unreachable_pub))]

use crate::sync::{AtomicU64, Ordering};

/// One worker's counters. Every field has one writer (a Relaxed load +
/// store, no read-modify-write) and is read by anyone: the owning worker,
/// except `lifo_rescued` and `io_rescued`, written only by the timer
/// thread's stall monitor.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) runs: AtomicU64,
    pub(crate) steals: AtomicU64,
    pub(crate) injector_pulls: AtomicU64,
    pub(crate) parks: AtomicU64,
    pub(crate) panics: AtomicU64,
    pub(crate) lifo_rescued: AtomicU64,
    pub(crate) io_rescued: AtomicU64,
}

impl Counters {
    /// Adds one to `counter`. Must only be called by the counter's one
    /// writer (see [`Counters`]).
    #[inline]
    pub(crate) fn bump(counter: &AtomicU64) {
        // Relaxed: a statistic; the owning worker is the only writer, so a
        // load + store loses nothing, and readers need no ordering with
        // other memory.
        #[cfg(not(loom))]
        counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        #[cfg(loom)]
        let _ = counter;
    }

    pub(crate) fn snapshot(&self) -> WorkerMetrics {
        // Relaxed: a statistic; see `bump`.
        WorkerMetrics {
            runs: self.runs.load(Ordering::Relaxed),
            steals: self.steals.load(Ordering::Relaxed),
            injector_pulls: self.injector_pulls.load(Ordering::Relaxed),
            parks: self.parks.load(Ordering::Relaxed),
            panics: self.panics.load(Ordering::Relaxed),
            lifo_rescued: self.lifo_rescued.load(Ordering::Relaxed),
            io_rescued: self.io_rescued.load(Ordering::Relaxed),
        }
    }
}

/// A snapshot of one worker's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerMetrics {
    /// Runnables run (each run is one call of [`crate::Runnable::run`]).
    pub runs: u64,
    /// Successful steals from another worker's queue.
    pub steals: u64,
    /// Successful pulls from the global injector.
    pub injector_pulls: u64,
    /// Times the worker parked (went to sleep or announced it would).
    pub parks: u64,
    /// Runnables or futures that panicked on this worker.
    pub panics: u64,
    /// Runnables taken from this worker's LIFO slot by the stall monitor,
    /// because the worker's run went on for a whole monitor tick while they
    /// waited (they were handed to the injector, for any worker to run).
    pub lifo_rescued: u64,
    /// Times the stall monitor polled this worker's shard of the I/O
    /// reactor and woke tasks, because the worker's run went on for a
    /// whole monitor tick while its sockets had events (the tasks were
    /// handed to the injector, for any worker to run).
    pub io_rescued: u64,
}

impl WorkerMetrics {
    fn add(self, other: WorkerMetrics) -> WorkerMetrics {
        WorkerMetrics {
            runs: self.runs + other.runs,
            steals: self.steals + other.steals,
            injector_pulls: self.injector_pulls + other.injector_pulls,
            parks: self.parks + other.parks,
            panics: self.panics + other.panics,
            lifo_rescued: self.lifo_rescued + other.lifo_rescued,
            io_rescued: self.io_rescued + other.io_rescued,
        }
    }
}

/// A snapshot of every worker's counters (see [`crate::Handle::metrics`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metrics {
    /// One entry per worker, by worker index.
    pub workers: Vec<WorkerMetrics>,
}

impl Metrics {
    /// The sum over all workers.
    pub fn total(&self) -> WorkerMetrics {
        self.workers
            .iter()
            .fold(WorkerMetrics::default(), |acc, w| acc.add(*w))
    }
}

/// A per-worker counter as the `metrics` feature names it: the metric, its
/// description, and the field it reads.
#[cfg(all(feature = "metrics", not(loom)))]
type WorkerCounter = (&'static str, &'static str, fn(&WorkerMetrics) -> u64);

/// The per-worker counters the `metrics` feature publishes.
#[cfg(all(feature = "metrics", not(loom)))]
const WORKER_COUNTERS: [WorkerCounter; 7] = [
    (
        "proscenium_scheduler_runs_total",
        "Runnables run (actor runs and future polls) by the worker.",
        |w| w.runs,
    ),
    (
        "proscenium_scheduler_steals_total",
        "Successful steals from another worker's queue.",
        |w| w.steals,
    ),
    (
        "proscenium_scheduler_injector_pulls_total",
        "Successful pulls from the global injector.",
        |w| w.injector_pulls,
    ),
    (
        "proscenium_scheduler_parks_total",
        "Times the worker parked.",
        |w| w.parks,
    ),
    (
        "proscenium_scheduler_panics_total",
        "Runnables or futures that panicked on the worker.",
        |w| w.panics,
    ),
    (
        "proscenium_scheduler_lifo_rescued_total",
        "Runnables the stall monitor took from the worker's LIFO slot.",
        |w| w.lifo_rescued,
    ),
    (
        "proscenium_scheduler_io_rescued_total",
        "Times the stall monitor polled the worker's sockets for it.",
        |w| w.io_rescued,
    ),
];

/// The queue depths a publication reads besides the counters.
#[cfg(all(feature = "metrics", not(loom)))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Depths {
    pub(crate) injector: usize,
    pub(crate) queued: usize,
    pub(crate) parked: usize,
}

/// Publishes a snapshot through the `metrics` facade's current recorder
/// (see [`crate::Handle::publish_metrics`]): each worker counter as an
/// absolute counter with a `worker` label, the depths as gauges, all with
/// `labels` too. Runs on the publishing thread only; the workers never
/// touch the facade.
#[cfg(all(feature = "metrics", not(loom)))]
pub(crate) fn publish(snapshot: &Metrics, depths: Depths, labels: &[::metrics::Label]) {
    use ::metrics::{describe_counter, describe_gauge, Label, Unit};
    for (name, help, _) in WORKER_COUNTERS {
        describe_counter!(name, Unit::Count, help);
    }
    for (worker, counters) in snapshot.workers.iter().enumerate() {
        let mut worker_labels = labels.to_vec();
        worker_labels.push(Label::new("worker", worker.to_string()));
        for (name, _, field) in WORKER_COUNTERS {
            ::metrics::counter!(name, worker_labels.clone()).absolute(field(counters));
        }
    }
    let gauges = [
        (
            "proscenium_scheduler_injector_depth",
            "Runnables waiting in the global injector.",
            depths.injector,
        ),
        (
            "proscenium_scheduler_queued_runnables",
            "Runnables waiting in any queue (injector, urgent, every worker's).",
            depths.queued,
        ),
        (
            "proscenium_scheduler_parked_workers",
            "Workers parked now.",
            depths.parked,
        ),
        (
            "proscenium_scheduler_workers",
            "Worker threads of the scheduler.",
            snapshot.workers.len(),
        ),
    ];
    for (name, help, value) in gauges {
        describe_gauge!(name, Unit::Count, help);
        // A depth is far below 2^53: exact as an f64.
        ::metrics::gauge!(name, labels.to_vec()).set(value as f64);
    }
}
