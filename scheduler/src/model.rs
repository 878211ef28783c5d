//! A scheduler without its threads, for the loom models of the worker
//! loop (`loom-tests/tests/worker.rs`; loom builds only): the model spawns
//! one loom thread per worker, each running the real `worker::run`, and
//! submits through the real `Shared::submit` and `Shared::submit_urgent`.
//! There is no reactor or timer thread; the model stops the workers with
//! [`ModelPool::shutdown`], or with [`ModelPool::quiesce`] (the real
//! close, wait and drain of `Scheduler::quiesce`).

use crate::deque::Worker as Deque;
use crate::runnable::Runnable;
use crate::scheduler::{Job, Shared, SubmitError};
use crate::sync::Arc;
use crate::worker;

/// The shared state of a modelled scheduler: submit to it from anywhere
/// (from a run on one of its workers, [`ModelPool::submit`] goes to that
/// worker's LIFO slot, as `Handle::submit` does).
#[derive(Clone)]
pub struct ModelPool {
    shared: Arc<Shared>,
}

/// One worker of a [`ModelPool`], to be run on its own loom thread.
pub struct ModelWorker {
    shared: Arc<Shared>,
    index: usize,
    deque: Deque<Job>,
}

impl ModelPool {
    /// A pool of `workers` workers giving each run a budget of `throughput`
    /// units, and its workers (by index).
    pub fn new(workers: usize, throughput: u32) -> (ModelPool, Vec<ModelWorker>) {
        let (shared, deques) = Shared::for_model(workers, throughput);
        let workers = deques
            .into_iter()
            .enumerate()
            .map(|(index, deque)| ModelWorker {
                shared: Arc::clone(&shared),
                index,
                deque,
            })
            .collect();
        (ModelPool { shared }, workers)
    }

    /// `Handle::submit`.
    pub fn submit(&self, job: Arc<dyn Runnable>) -> Result<(), SubmitError> {
        self.shared.submit(job)
    }

    /// `Handle::submit_urgent`.
    pub fn submit_urgent(&self, job: Arc<dyn Runnable>) -> Result<(), SubmitError> {
        self.shared.submit_urgent(job)
    }

    /// Tells the workers to stop (the last step of a quiesce).
    pub fn shutdown(&self) {
        self.shared.idle.shutdown();
    }

    /// `Scheduler::quiesce` without its reactor, timer thread and
    /// deadline: closes the pool to external submissions (waiting for the
    /// ones it admitted to push, `Shared::close`), waits until
    /// every worker parked with no shared work queued, and tells the
    /// workers to stop. The caller then joins the workers (adding what each
    /// reports left) and calls [`drop_shared_queues`](Self::drop_shared_queues).
    pub fn quiesce(&self) {
        let shared = &self.shared;
        shared.close();
        let drained = shared.quiesce.wait_until(
            || shared.is_quiescent(),
            |condvar, held| Some(crate::sync::wait(condvar, held)),
        );
        debug_assert!(drained, "an untimed wait ends drained");
        shared.idle.shutdown();
    }

    /// The last step of `Scheduler::quiesce`, after the workers were
    /// joined: the runnables left in the shared queues, dropped.
    pub fn drop_shared_queues(&self) -> usize {
        self.shared.drop_shared_queues()
    }

    /// Runnables in the shared queues and the workers' own queues (not
    /// their LIFO slots).
    pub fn queued(&self) -> usize {
        self.shared.queued()
    }

    /// The index of the worker this thread is, if it is one.
    pub fn current_worker() -> Option<usize> {
        worker::current_worker().map(worker::WorkerId::index)
    }
}

impl ModelWorker {
    /// The worker loop (`worker::run`), until [`ModelPool::shutdown`].
    /// Returns how many runnables were left in this worker's own queues.
    pub fn run(self) -> usize {
        worker::run(self.shared, self.index, self.deque)
    }
}

impl std::fmt::Debug for ModelPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelPool").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for ModelWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelWorker")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}
