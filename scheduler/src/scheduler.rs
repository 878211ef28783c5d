//! The pool: [`Scheduler`] (owns the threads), [`Handle`] (submits from
//! anywhere), and quiesce.
//!
//! Under `--cfg loom` only [`Shared`] compiles (without the reactor and the
//! timer thread), for the models of the worker loop (see `worker.rs` and
//! `model.rs`).

#[cfg(not(loom))]
use crate::config::{BuildError, Builder};
#[cfg(not(loom))]
use crate::deque::Worker as Deque;
use crate::deque::{Injector, Stealer};
use crate::idle::Idle;
use crate::lifo::LifoSlot;
use crate::metrics::Counters;
#[cfg(not(loom))]
use crate::metrics::Metrics;
use crate::park::Parker;
#[cfg(not(loom))]
use crate::pin::{self, Pinning};
use crate::quiesce::QuiesceGate;
#[cfg(not(loom))]
use crate::reactor::Reactor;
use crate::runnable::Runnable;
use crate::submit_gate::SubmitGate;
#[cfg(not(loom))]
use crate::sync::thread;
use crate::sync::{Arc, AtomicUsize, Ordering};
#[cfg(not(loom))]
use crate::timer::{TimerShared, TimerThread};
use crate::worker;
use crossbeam_utils::CachePadded;
use std::fmt;
#[cfg(not(loom))]
use std::time::Instant;

#[cfg(all(test, not(loom)))]
mod tests;

/// A submission, as the queues hold it.
pub(crate) type Job = Arc<dyn Runnable>;

/// State shared by the workers, the timer thread and every [`Handle`].
pub(crate) struct Shared {
    /// Submissions from outside the workers. Lock-free (crossbeam).
    pub(crate) injector: Injector<Job>,
    /// Urgent submissions (lifecycle and supervision signals, shutdown
    /// steps), from anywhere: every worker looks here before each run and
    /// takes one at a time, so they overtake everything queued.
    pub(crate) urgent: Injector<Job>,
    /// Urgent runnables pushed and not yet taken: a hint that lets a worker
    /// skip the urgent queue with one load of a line nobody writes in the
    /// steady state. Incremented by submitters after the push, decremented
    /// by the worker that took one.
    pub(crate) urgent_hint: CachePadded<AtomicUsize>,
    /// One per worker, by index; worker `i` steals from the others.
    pub(crate) stealers: Box<[Stealer<Job>]>,
    /// Each worker's LIFO slot, by index: filled and emptied by its worker,
    /// rescued by the timer thread's stall monitor (see `timer.rs`). Each
    /// on cache lines of its own: its worker writes it about once per
    /// message, and unpadded the slots (40-byte allocations made one after
    /// the other) shared lines two by two, so every message of one worker
    /// invalidated its neighbour's slot: independent pairs of actors ran
    /// 6.9x faster on 16 workers than on one, 11.5-13.2x once padded
    /// (docs/decisions/0024-per-core-scaling.md).
    pub(crate) lifos: Box<[Arc<CachePadded<LifoSlot<Job>>>]>,
    pub(crate) idle: Idle,
    /// One per worker, by index; each written only by its worker.
    pub(crate) counters: Box<[CachePadded<Counters>]>,
    pub(crate) throughput: u32,
    /// Admits submits from outside the workers until a quiesce closes it;
    /// the close waits for the admitted ones to finish their push (see
    /// `submit_gate.rs`).
    pub(crate) submits: SubmitGate,
    /// Where a quiesce waits for the workers to park (see `quiesce.rs`).
    pub(crate) quiesce: QuiesceGate,
    #[cfg(not(loom))]
    pub(crate) timers: Arc<TimerShared>,
    /// The I/O reactor (`net`); its poll is created on the first
    /// registration and polled by parking workers.
    #[cfg(not(loom))]
    pub(crate) reactor: Reactor,
}

impl Shared {
    /// Whether any queue other workers can take from holds work (the
    /// re-check a worker does after announcing that it parks).
    pub(crate) fn has_shared_work(&self) -> bool {
        !self.urgent.is_empty()
            || !self.injector.is_empty()
            || self.stealers.iter().any(|s| !s.is_empty())
    }

    /// Called by a worker that parked and saw that no worker is unparked.
    pub(crate) fn all_parked(&self) {
        self.quiesce.all_parked();
    }

    /// Running worker `worker`'s look at its shard of the I/O reactor
    /// (every `INJECTOR_INTERVAL` runs, and when its queues are empty; see
    /// `Reactor::poll_now`). Returns whether I/O events woke tasks (into
    /// this worker's queues). Nothing under loom, which has no reactor.
    #[inline]
    pub(crate) fn poll_io_now(&self, worker: usize) -> bool {
        #[cfg(not(loom))]
        return self.reactor.poll_now(worker);
        #[cfg(loom)]
        {
            let _ = worker;
            false
        }
    }

    /// How worker `worker`, having announced its park and found no work,
    /// blocks: in its shard's poll once the reactor runs, on its parker
    /// before (`Reactor::park`); under loom, on its parker. Returns
    /// whether I/O events woke tasks (see `Idle::park_with`).
    #[inline]
    pub(crate) fn park_worker(&self, parker: &Parker, worker: usize) -> bool {
        #[cfg(not(loom))]
        return self.reactor.park(parker, worker);
        #[cfg(loom)]
        {
            let _ = worker;
            parker.park();
            false
        }
    }

    /// The index of the worker of this scheduler that the calling thread
    /// is, if it is one.
    #[cfg(not(loom))]
    pub(crate) fn current_index(self: &Arc<Self>) -> Option<usize> {
        worker::with_current(|local| {
            local
                .filter(|l| Arc::ptr_eq(&l.shared, self))
                .map(|l| l.index)
        })
    }

    /// A worker left a park: restarts the timer thread's stall monitor
    /// (see `TimerShared::wake_monitor`). Nothing under loom, which has no
    /// timer thread.
    #[inline]
    pub(crate) fn wake_monitor(&self) {
        #[cfg(not(loom))]
        self.timers.wake_monitor();
    }

    /// Submits from outside the workers of this scheduler: admitted by the
    /// gate (refused, the runnable handed back, once a quiesce closed it),
    /// pushed, and the gate told the push is done before the wake-up.
    fn submit_external(&self, job: Job) -> Result<(), SubmitError> {
        let Some(admitted) = self.submits.enter() else {
            return Err(SubmitError(job));
        };
        #[cfg(all(test, not(loom)))]
        tests::pause_if_asked();
        self.injector.push(job);
        // The push is done: a close waiting for this submit may go on (and
        // its drain sees the runnable). The wake-up needs no admission: the
        // handshake with a parking worker does not depend on the gate.
        drop(admitted);
        self.idle.notify_one();
        Ok(())
    }

    #[inline]
    pub(crate) fn submit(self: &Arc<Self>, job: Job) -> Result<(), SubmitError> {
        worker::with_current(|local| match local {
            Some(local) if Arc::ptr_eq(&local.shared, self) => {
                local.push_lifo(job);
                Ok(())
            }
            _ => self.submit_external(job),
        })
    }

    /// Submits ahead of everything queued. From one of this scheduler's
    /// workers it is accepted also while a quiesce drains (like a local
    /// push: the workers still look at the urgent queue before they park).
    pub(crate) fn submit_urgent(self: &Arc<Self>, job: Job) -> Result<(), SubmitError> {
        let on_worker =
            worker::with_current(|local| local.is_some_and(|l| Arc::ptr_eq(&l.shared, self)));
        // From outside, admitted by the gate as in `submit_external`; a
        // worker's own submit is not (the quiesce joins the workers before
        // it drops the shared queues).
        let admitted = if on_worker {
            None
        } else {
            match self.submits.enter() {
                Some(admitted) => Some(admitted),
                None => return Err(SubmitError(job)),
            }
        };
        #[cfg(all(test, not(loom)))]
        if !on_worker {
            tests::pause_if_asked();
        }
        self.urgent.push(job);
        // Relaxed: a hint only; the job itself is handed over by the
        // injector's own synchronisation, and a worker that misses the
        // increment finds the job in its next run's check, in a search, or
        // through `has_shared_work` before it parks.
        self.urgent_hint.fetch_add(1, Ordering::Relaxed);
        drop(admitted);
        self.idle.notify_one();
        Ok(())
    }

    /// A scheduler's shared state without its threads, reactor and timer
    /// thread, and each worker's queue, for the loom models (`model.rs`).
    #[cfg(loom)]
    pub(crate) fn for_model(
        workers: usize,
        throughput: u32,
    ) -> (Arc<Shared>, Vec<crate::deque::Worker<Job>>) {
        use crate::deque::Worker as Deque;
        let deques: Vec<Deque<Job>> = (0..workers).map(|_| Deque::new_fifo()).collect();
        let shared = Arc::new(Shared {
            injector: Injector::new(),
            urgent: Injector::new(),
            urgent_hint: CachePadded::new(AtomicUsize::new(0)),
            stealers: deques.iter().map(Deque::stealer).collect(),
            lifos: (0..workers)
                .map(|_| Arc::new(CachePadded::new(LifoSlot::new())))
                .collect(),
            idle: Idle::new(workers),
            counters: (0..workers).map(|_| CachePadded::default()).collect(),
            throughput,
            submits: SubmitGate::new(),
            quiesce: QuiesceGate::new(),
        });
        (shared, deques)
    }

    /// The start of a quiesce: external submissions are refused from now
    /// on, and the ones admitted before have pushed when this returns (it
    /// waits for them: `SubmitGate::close`), so the quiesce's emptiness
    /// checks and its drop of the shared queues see every accepted one.
    pub(crate) fn close(&self) {
        self.submits.close();
    }

    /// Whether every worker is parked and no queue other workers can take
    /// from holds work: the condition a quiesce waits for (see
    /// `QuiesceGate::wait_until`). State, queues, state again: a worker
    /// that announced its park, then found work in its re-check, takes
    /// itself off the sleepers (state) before it takes the work (queues),
    /// so it cannot slip between the two state reads unseen.
    pub(crate) fn is_quiescent(&self) -> bool {
        self.idle.snapshot().unparked == 0
            && !self.has_shared_work()
            && self.idle.snapshot().unparked == 0
    }

    /// The end of a quiesce, once the workers were joined (each emptied
    /// its own queues and counted what it dropped): counts the runnables
    /// left in the shared queues, then drops them. Returns the count.
    pub(crate) fn drop_shared_queues(&self) -> usize {
        let left = self.queued();
        while !self.injector.steal().is_empty() {}
        while !self.urgent.steal().is_empty() {}
        left
    }

    pub(crate) fn queued(&self) -> usize {
        self.urgent.len()
            + self.injector.len()
            + self.stealers.iter().map(Stealer::len).sum::<usize>()
    }
}

/// The submission was refused because the scheduler is quiescing or shut
/// down; the runnable is handed back.
pub struct SubmitError(pub Arc<dyn Runnable>);

impl SubmitError {
    /// The refused runnable.
    pub fn into_inner(self) -> Arc<dyn Runnable> {
        self.0
    }
}

impl fmt::Debug for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SubmitError(..)")
    }
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("submitting on a closed scheduler")
    }
}

impl std::error::Error for SubmitError {}

#[cfg(not(loom))]
/// A cheap, cloneable, `Send + Sync` handle to a [`Scheduler`]: submit
/// runnables, spawn futures, set timers, read metrics, from any thread
/// (including from inside runnables).
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

#[cfg(not(loom))]
impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("workers", &self.num_workers())
            .finish_non_exhaustive()
    }
}

#[cfg(not(loom))]
impl Handle {
    /// The handle of the scheduler whose worker is running this code, if
    /// any.
    pub fn current() -> Option<Handle> {
        worker::with_current(|local| {
            local.map(|l| Handle {
                shared: Arc::clone(&l.shared),
            })
        })
    }

    /// Submits a runnable. From one of this scheduler's workers it goes to
    /// that worker's LIFO slot (displacing the previous occupant to the
    /// local queue); from anywhere else to the global injector. No lock and
    /// no allocation, except that waking a parked worker takes the sleeper
    /// lock.
    ///
    /// Refused (the runnable is handed back) from outside the workers once
    /// [`Scheduler::quiesce`] has started. Accepted, it runs, or a quiesce
    /// counts it in [`QuiesceReport::runnables_left`]: the quiesce waits
    /// for the submits it did not refuse to finish their push.
    ///
    /// Hidden from the docs: the engine's plumbing, not part of the API an
    /// application uses (`proscenium::Handle` is this type); it may change
    /// in any release.
    #[doc(hidden)]
    #[inline]
    pub fn submit(&self, runnable: Arc<dyn Runnable>) -> Result<(), SubmitError> {
        self.shared.submit(runnable)
    }

    /// Submits a runnable ahead of everything queued: the next worker to
    /// finish its current run takes it (the engine uses this for actors that
    /// a lifecycle or supervision signal woke, so a stop overtakes a backlog
    /// of user work). Meant for rare control-plane work: urgent runnables
    /// are taken one at a time from one shared queue.
    ///
    /// Refused (the runnable is handed back) from outside the workers once
    /// [`Scheduler::quiesce`] has started; accepted, it runs or is counted,
    /// as with [`submit`](Self::submit).
    ///
    /// Hidden from the docs: the engine's plumbing, not part of the API an
    /// application uses (`proscenium::Handle` is this type); it may change
    /// in any release.
    #[doc(hidden)]
    pub fn submit_urgent(&self, runnable: Arc<dyn Runnable>) -> Result<(), SubmitError> {
        self.shared.submit_urgent(runnable)
    }

    /// The number of workers.
    pub fn num_workers(&self) -> usize {
        self.shared.stealers.len()
    }

    /// Workers parked right now (a racy snapshot).
    pub fn parked_workers(&self) -> usize {
        self.num_workers() - self.shared.idle.snapshot().unparked
    }

    /// Whether the scheduler refuses external submissions (it is quiescing
    /// or shut down).
    pub fn is_closed(&self) -> bool {
        self.shared.submits.is_closed()
    }

    /// Whether the workers have been told to stop (the last step of a
    /// quiesce, or a drop): each exits once its current run returns, as soon
    /// as it next looks at the shutdown flag (before it looks for more work,
    /// and every few dozen runs while it has local work).
    pub fn is_shut_down(&self) -> bool {
        self.shared.idle.is_shutdown()
    }

    /// A snapshot of every worker's counters.
    pub fn metrics(&self) -> Metrics {
        Metrics {
            workers: self.shared.counters.iter().map(|c| c.snapshot()).collect(),
        }
    }

    /// Runnables waiting in the global injector now (submissions from
    /// outside the workers not yet taken; a racy snapshot).
    pub fn injector_depth(&self) -> usize {
        self.shared.injector.len()
    }

    /// Publishes [`metrics`](Self::metrics) and the queue depths through
    /// the [`metrics`](::metrics) facade's recorder, each with `labels`
    /// (the engine adds `system`): one absolute counter per worker counter
    /// and worker (label `worker`), and the gauges
    /// `proscenium_scheduler_injector_depth`,
    /// `proscenium_scheduler_queued_runnables`,
    /// `proscenium_scheduler_parked_workers` and
    /// `proscenium_scheduler_workers` (docs/metrics.md lists them all).
    ///
    /// A sampler: it reads the counters the workers keep anyway (relaxed
    /// loads) on the calling thread; the workers never call the facade.
    /// Call it before each scrape, or from a periodic task.
    #[cfg(feature = "metrics")]
    pub fn publish_metrics(&self, labels: &[::metrics::Label]) {
        let depths = crate::metrics::Depths {
            injector: self.injector_depth(),
            queued: self.shared.queued(),
            parked: self.parked_workers(),
        };
        crate::metrics::publish(&self.metrics(), depths, labels);
    }
}

#[cfg(not(loom))]
/// What [`Scheduler::quiesce`] left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuiesceReport {
    /// Whether every queue was empty and every worker parked before the
    /// deadline.
    pub drained: bool,
    /// Runnables still queued when the workers stopped (they were dropped;
    /// a dropped future task completes its join handle as cancelled). With
    /// the runs, this accounts for every submission that was accepted.
    pub runnables_left: usize,
    /// Timers neither fired nor cancelled (dropped without firing).
    pub timers_pending: usize,
    /// Worker threads joined.
    pub workers_joined: usize,
    /// Panics caught over the scheduler's life.
    pub panics: u64,
}

#[cfg(not(loom))]
/// A pool of worker threads running [`Runnable`]s, plus a timer thread
/// (the workers also poll the I/O reactor once a socket is registered, see
/// [`crate::net`]).
///
/// Dropping it shuts it down at once (like a quiesce whose deadline has
/// passed) and joins every thread.
pub struct Scheduler {
    handle: Handle,
    workers: Vec<thread::JoinHandle<usize>>,
    timer: Option<TimerThread>,
    pinning: Vec<Pinning>,
}

#[cfg(not(loom))]
impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("workers", &self.workers.len())
            .field("pinning", &self.pinning)
            .finish_non_exhaustive()
    }
}

#[cfg(not(loom))]
impl Scheduler {
    /// A builder with the defaults.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// A scheduler with the defaults (see [`Builder::new`]).
    pub fn new() -> Result<Scheduler, BuildError> {
        Builder::new().build()
    }

    pub(crate) fn start(config: Builder, workers: usize) -> Result<Scheduler, BuildError> {
        let deques: Vec<Deque<Job>> = (0..workers).map(|_| Deque::new_fifo()).collect();
        let reactor = Reactor::new(workers);
        // A parked worker may block in its shard's poll: `Idle` wakes it
        // through that poll's waker.
        let driver = reactor.clone();
        let shared = Arc::new(Shared {
            injector: Injector::new(),
            urgent: Injector::new(),
            urgent_hint: CachePadded::new(AtomicUsize::new(0)),
            stealers: deques.iter().map(Deque::stealer).collect(),
            lifos: (0..workers)
                .map(|_| Arc::new(CachePadded::new(LifoSlot::new())))
                .collect(),
            idle: Idle::with_driver_wake(workers, move |worker| driver.unpark_driver(worker)),
            counters: (0..workers).map(|_| CachePadded::default()).collect(),
            throughput: config.throughput,
            submits: SubmitGate::new(),
            quiesce: QuiesceGate::new(),
            timers: Arc::new(TimerShared::new()),
            reactor,
        });
        let handle = Handle {
            shared: Arc::clone(&shared),
        };
        let mut scheduler = Scheduler {
            handle,
            workers: Vec::with_capacity(workers),
            timer: None,
            pinning: Vec::with_capacity(workers),
        };
        let timer_name = format!("{}-timer", config.thread_name);
        scheduler.timer = Some(
            TimerThread::spawn(Arc::clone(&shared), timer_name.clone()).map_err(|source| {
                BuildError::Spawn {
                    name: timer_name,
                    source,
                }
            })?,
        );
        let cores = if config.pin_workers {
            core_affinity::get_core_ids()
        } else {
            None
        };
        let (pin_tx, pin_rx) = std::sync::mpsc::channel::<(usize, Pinning)>();
        for (index, deque) in deques.into_iter().enumerate() {
            let shared = Arc::clone(&shared);
            let pin_tx = pin_tx.clone();
            let pin = config.pin_workers;
            let cores = cores.clone();
            let name = format!("{}-{index}", config.thread_name);
            let mut builder = thread::Builder::new().name(name.clone());
            if let Some(bytes) = config.stack_size {
                builder = builder.stack_size(bytes);
            }
            let spawned = builder.spawn(move || {
                let pinning = pin::pin_current(index, pin, cores.as_deref());
                // The builder waits for this; if it is gone, nobody cares.
                let _ = pin_tx.send((index, pinning));
                drop(pin_tx);
                worker::run(shared, index, deque)
            });
            match spawned {
                Ok(join) => scheduler.workers.push(join),
                // Dropping `scheduler` shuts down the workers started so far.
                Err(source) => return Err(BuildError::Spawn { name, source }),
            }
        }
        drop(pin_tx);
        let mut pinning = vec![None; workers];
        for (index, p) in pin_rx.iter() {
            pinning[index] = Some(p);
        }
        scheduler.pinning = pinning
            .into_iter()
            .map(|p| p.expect("every worker reports its pinning before it runs"))
            .collect();
        pin::report(&scheduler.pinning);
        Ok(scheduler)
    }

    /// The handle to submit, spawn and set timers with.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Where each worker runs, by worker index.
    pub fn pinning(&self) -> &[Pinning] {
        &self.pinning
    }

    /// Shuts down the I/O reactor (pending and later I/O on this
    /// scheduler's sockets fails with an error "scheduler shut down"),
    /// stops taking external submissions (after those already accepted on
    /// other threads have pushed) and timers, runs until every queue
    /// is empty and every worker parked or until `deadline`, then stops and
    /// joins every worker thread and reports what was left.
    ///
    /// Runs already under way are not interrupted: a runnable that never
    /// returns keeps its worker (and this call) waiting. Do not call this on
    /// one of the scheduler's own workers: that worker is not joined (it
    /// exits after the current run) and is not counted in the report.
    pub fn quiesce(mut self, deadline: Instant) -> QuiesceReport {
        self.shutdown(deadline)
    }

    fn shutdown(&mut self, deadline: Instant) -> QuiesceReport {
        let shared = Arc::clone(&self.handle.shared);
        // First, while external submissions are still taken: the reactor
        // wakes every future waiting for I/O, and their tasks (submitted
        // from this thread) run in the drain below and see the error
        // "scheduler shut down" instead of being dropped unrun.
        shared.reactor.shutdown();
        shared.close();
        let timers_pending = self.timer.take().map_or(0, TimerThread::stop);
        let drained = shared.quiesce.wait_until(
            || shared.is_quiescent(),
            |condvar, held| {
                let now = Instant::now();
                if now >= deadline {
                    return None;
                }
                Some(
                    condvar
                        .wait_timeout(held, deadline - now)
                        .map(|(g, _)| g)
                        .unwrap_or_else(|e| e.into_inner().0),
                )
            },
        );
        shared.idle.shutdown();
        let me = thread::current().id();
        let mut runnables_left = 0;
        let mut workers_joined = 0;
        for join in self.workers.drain(..) {
            if join.thread().id() == me {
                continue;
            }
            match join.join() {
                Ok(left) => runnables_left += left,
                Err(_) => tracing::error!("a scheduler worker thread panicked outside a run"),
            }
            workers_joined += 1;
        }
        // No worker polls any more: close the polls' descriptors.
        shared.reactor.close();
        // Only the injector is left to empty; the deques were emptied by
        // their workers on exit.
        runnables_left += shared.drop_shared_queues();
        let report = QuiesceReport {
            drained,
            runnables_left,
            timers_pending,
            workers_joined,
            panics: self.handle.metrics().total().panics,
        };
        if !drained || runnables_left > 0 || timers_pending > 0 {
            tracing::warn!(?report, "scheduler quiesced with work left");
        }
        report
    }
}

#[cfg(not(loom))]
impl Drop for Scheduler {
    fn drop(&mut self) {
        if !self.workers.is_empty() || self.timer.is_some() {
            let _ = self.shutdown(Instant::now());
        }
    }
}
