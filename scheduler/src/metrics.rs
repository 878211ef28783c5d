//! Per-worker counters, cheap to keep and readable at any time.

use crate::sync::{AtomicU64, Ordering};

/// One worker's counters. Every field is written only by the owning worker
/// (a Relaxed load + store, no read-modify-write), and read by anyone.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) runs: AtomicU64,
    pub(crate) steals: AtomicU64,
    pub(crate) injector_pulls: AtomicU64,
    pub(crate) parks: AtomicU64,
    pub(crate) panics: AtomicU64,
}

impl Counters {
    /// Adds one to `counter`. Must only be called by the owning worker.
    #[inline]
    pub(crate) fn bump(counter: &AtomicU64) {
        // Relaxed: a statistic; the owning worker is the only writer, so a
        // load + store loses nothing, and readers need no ordering with
        // other memory.
        counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> WorkerMetrics {
        // Relaxed: a statistic; see `bump`.
        WorkerMetrics {
            runs: self.runs.load(Ordering::Relaxed),
            steals: self.steals.load(Ordering::Relaxed),
            injector_pulls: self.injector_pulls.load(Ordering::Relaxed),
            parks: self.parks.load(Ordering::Relaxed),
            panics: self.panics.load(Ordering::Relaxed),
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
}

impl WorkerMetrics {
    fn add(self, other: WorkerMetrics) -> WorkerMetrics {
        WorkerMetrics {
            runs: self.runs + other.runs,
            steals: self.steals + other.steals,
            injector_pulls: self.injector_pulls + other.injector_pulls,
            parks: self.parks + other.parks,
            panics: self.panics + other.panics,
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
