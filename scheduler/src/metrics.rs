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
