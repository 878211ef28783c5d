//! [`CoordinatedShutdown`]: tasks registered by phase, and the state machine
//! that runs them on the scheduler, phase after phase.

use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::{Duration, Instant};

use proscenium_scheduler::{Handle, JoinError, JoinHandle};

use crate::config::{ConfigError, ShutdownConfig};
use crate::run::{Reason, RunSlot, ShutdownError, ShutdownRun, TaskError, TaskFailure};

/// How often a phase that waits for its tasks logs which ones it waits for.
const HOLD_UP_REPORT: Duration = Duration::from_secs(1);

type TaskFuture = Pin<Box<dyn Future<Output = Result<(), TaskError>> + Send>>;
type TaskFn = Box<dyn FnOnce() -> TaskFuture + Send>;
/// A started task: its id, its name, and its join handle.
type Started = (u64, String, JoinHandle<Result<(), TaskError>>);

/// Why a task was not added.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddTaskError {
    /// No phase has this name.
    #[error("unknown phase `{0}`")]
    UnknownPhase(String),
    /// The run has started: a task added now would not be run.
    #[error("task `{task}` not added to phase `{phase}`: the coordinated shutdown has started")]
    RunStarted {
        /// The phase.
        phase: String,
        /// The task.
        task: String,
    },
}

/// Where a task is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskState {
    /// Registered; its phase has not started.
    Pending,
    /// Started at the instant given.
    Running(Instant),
    /// Completed successfully.
    Done,
    /// Did not succeed (failed, panicked or timed out).
    Failed(TaskFailure),
    /// Its phase is disabled or was not reached (an aborted run, or a run
    /// from a later phase).
    Skipped,
    /// Cancelled before its phase started.
    Cancelled,
}

/// One task, as [`CoordinatedShutdown::state`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskReport {
    /// Its phase.
    pub phase: String,
    /// Its name.
    pub name: String,
    /// Where it is.
    pub state: TaskState,
    /// How long it ran (so far, while running).
    pub duration: Option<Duration>,
}

/// The run's progress.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunState {
    /// `run` has not been called.
    NotStarted,
    /// In this phase.
    InPhase(String),
    /// Every phase ran.
    Done,
    /// Ended early (see the run's error).
    Aborted(String),
}

/// A snapshot of the shutdown: the run's phase and every task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownState {
    /// The run's progress.
    pub run: RunState,
    /// The reason the run was started with.
    pub reason: Option<Reason>,
    /// Every task, in the order added.
    pub tasks: Vec<TaskReport>,
}

struct TaskEntry {
    id: u64,
    phase: String,
    name: String,
    f: Option<TaskFn>,
    state: TaskState,
    duration: Option<Duration>,
}

struct Shared {
    tasks: Vec<TaskEntry>,
    next_id: u64,
    run: Option<ShutdownRun>,
    reason: Option<Reason>,
    state: RunState,
}

type Hook = Box<dyn FnOnce() + Send>;

pub(crate) struct Inner {
    config: ShutdownConfig,
    order: Vec<String>,
    handle: Handle,
    shared: Mutex<Shared>,
    /// User hooks run at process-signal time, before the run starts
    /// (Akka's `addJvmShutdownHook`), in the order added.
    process_hooks: Mutex<Vec<(String, Hook)>>,
    /// Waited for on the exit thread after the last phase and before the
    /// process exits (the engine waits for its workers to be joined).
    before_exit: Mutex<Option<Hook>>,
    /// Set by the first signal that starts this shutdown (see
    /// `claim_signal`).
    signalled: AtomicBool,
}

/// A coordinated shutdown: phases in a validated DAG, tasks added to them,
/// and one run, started by [`run`](Self::run) however often it is called.
/// Cheap to clone.
///
/// ```
/// use proscenium_scheduler::Scheduler;
/// use proscenium_shutdown::{CoordinatedShutdown, Phase, Reason, ShutdownConfig};
///
/// let scheduler = Scheduler::builder().workers(1).pin_workers(false).build().unwrap();
/// let cs = CoordinatedShutdown::new(ShutdownConfig::default(), scheduler.handle().clone()).unwrap();
/// cs.add_task(Phase::BEFORE_SERVICE_UNBIND, "flush", || async { Ok(()) }).unwrap();
/// assert_eq!(cs.run(Reason::Unknown).wait(), Ok(()));
/// ```
#[derive(Clone)]
pub struct CoordinatedShutdown {
    inner: Arc<Inner>,
}

impl fmt::Debug for CoordinatedShutdown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoordinatedShutdown")
            .field("phases", &self.inner.order.len())
            .field("run", &self.lock().state)
            .finish()
    }
}

/// Cancels a task added by [`CoordinatedShutdown::add_cancellable_task`].
#[derive(Clone)]
pub struct CancellableTask {
    inner: Arc<Inner>,
    id: u64,
}

impl fmt::Debug for CancellableTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancellableTask")
            .field("id", &self.id)
            .finish()
    }
}

impl CancellableTask {
    /// Cancels the task: it will not run. `true` if it was pending; `false`
    /// if it had started, finished, or was already cancelled.
    pub fn cancel(&self) -> bool {
        let mut shared = lock(&self.inner.shared);
        let Some(task) = shared.tasks.iter_mut().find(|t| t.id == self.id) else {
            return false;
        };
        if task.state != TaskState::Pending || task.f.is_none() {
            return false;
        }
        task.f = None;
        task.state = TaskState::Cancelled;
        true
    }
}

fn take_lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only pushes, takes and replacements run under these locks.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    // No code that can panic runs under this lock (user closures run on the
    // scheduler, outside it).
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

impl CoordinatedShutdown {
    /// Validates `config` (unknown phases, cycles) and runs on `handle`'s
    /// scheduler when started.
    pub fn new(config: ShutdownConfig, handle: Handle) -> Result<CoordinatedShutdown, ConfigError> {
        let order = config.ordered_phases()?;
        Ok(CoordinatedShutdown {
            inner: Arc::new(Inner {
                config,
                order,
                handle,
                shared: Mutex::new(Shared {
                    tasks: Vec::new(),
                    next_id: 0,
                    run: None,
                    reason: None,
                    state: RunState::NotStarted,
                }),
                process_hooks: Mutex::new(Vec::new()),
                before_exit: Mutex::new(None),
                signalled: AtomicBool::new(false),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        lock(&self.inner.shared)
    }

    /// The configuration.
    pub fn config(&self) -> &ShutdownConfig {
        &self.inner.config
    }

    /// The phases in the order they run.
    pub fn phases(&self) -> &[String] {
        &self.inner.order
    }

    /// Adds a task to `phase`: when the phase starts, `f` is called on the
    /// scheduler and the future it returns is awaited, concurrently with
    /// the phase's other tasks. Refused for an unknown phase, and once the
    /// run has started (the task would not be run).
    pub fn add_task<F, Fut>(&self, phase: &str, name: &str, f: F) -> Result<(), AddTaskError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), TaskError>> + Send + 'static,
    {
        self.add(phase, name, f).map(|_| ())
    }

    /// [`add_task`](Self::add_task), returning a handle that cancels it.
    pub fn add_cancellable_task<F, Fut>(
        &self,
        phase: &str,
        name: &str,
        f: F,
    ) -> Result<CancellableTask, AddTaskError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), TaskError>> + Send + 'static,
    {
        let id = self.add(phase, name, f)?;
        Ok(CancellableTask {
            inner: Arc::clone(&self.inner),
            id,
        })
    }

    fn add<F, Fut>(&self, phase: &str, name: &str, f: F) -> Result<u64, AddTaskError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), TaskError>> + Send + 'static,
    {
        if !self.inner.order.iter().any(|p| p == phase) {
            return Err(AddTaskError::UnknownPhase(phase.to_owned()));
        }
        let mut shared = self.lock();
        if shared.run.is_some() {
            return Err(AddTaskError::RunStarted {
                phase: phase.to_owned(),
                task: name.to_owned(),
            });
        }
        let id = shared.next_id;
        shared.next_id += 1;
        let f: TaskFn = Box::new(move || Box::pin(f()) as TaskFuture);
        shared.tasks.push(TaskEntry {
            id,
            phase: phase.to_owned(),
            name: name.to_owned(),
            f: Some(f),
            state: TaskState::Pending,
            duration: None,
        });
        Ok(id)
    }

    /// Starts the run (once): every call, concurrent ones too, returns the
    /// same run, which completes when every phase has run, or when a task of
    /// a phase with `recover = off` failed. The first call's reason is kept.
    pub fn run(&self, reason: Reason) -> ShutdownRun {
        self.start(reason, 0)
    }

    /// [`run`](Self::run) from `phase` onward: the phases before it in the
    /// order are skipped. If the run had already started, that run is
    /// returned.
    pub fn run_from(&self, reason: Reason, phase: &str) -> Result<ShutdownRun, AddTaskError> {
        let Some(from) = self.inner.order.iter().position(|p| p == phase) else {
            return Err(AddTaskError::UnknownPhase(phase.to_owned()));
        };
        Ok(self.start(reason, from))
    }

    fn start(&self, reason: Reason, from: usize) -> ShutdownRun {
        let mut shared = self.lock();
        if let Some(run) = &shared.run {
            return run.clone();
        }
        let run = ShutdownRun {
            slot: RunSlot::new(),
        };
        shared.run = Some(run.clone());
        tracing::info!(?reason, "coordinated shutdown started");
        shared.reason = Some(reason);
        drop(shared);
        let guard = CompleteOnDrop {
            cs: self.clone(),
            slot: Arc::clone(&run.slot),
        };
        let cs = self.clone();
        // Urgent: the state machine starts ahead of any backlog of work, and
        // dropping the join handle detaches it.
        drop(
            self.inner
                .handle
                .spawn_urgent(async move { cs.drive(from, guard).await }),
        );
        run
    }

    /// The first run's reason.
    pub fn reason(&self) -> Option<Reason> {
        self.lock().reason.clone()
    }

    /// A snapshot: the current phase and every task's state and duration.
    pub fn state(&self) -> ShutdownState {
        let shared = self.lock();
        let now = Instant::now();
        ShutdownState {
            run: shared.state.clone(),
            reason: shared.reason.clone(),
            tasks: shared
                .tasks
                .iter()
                .map(|t| TaskReport {
                    phase: t.phase.clone(),
                    name: t.name.clone(),
                    state: t.state.clone(),
                    duration: match t.state {
                        TaskState::Running(since) => Some(now - since),
                        _ => t.duration,
                    },
                })
                .collect(),
        }
    }

    /// The state machine: phase after phase, on the scheduler.
    async fn drive(self, from: usize, guard: CompleteOnDrop) {
        let order = self.inner.order.clone();
        for (i, phase) in order.iter().enumerate() {
            if i < from {
                self.skip_phase(phase);
                continue;
            }
            if let Err(e) = self.run_phase(phase).await {
                for later in &order[i + 1..] {
                    self.skip_phase(later);
                }
                self.lock().state = RunState::Aborted(phase.clone());
                tracing::error!(error = %e, "coordinated shutdown aborted");
                guard.slot.complete(Err(e));
                return;
            }
        }
        self.lock().state = RunState::Done;
        tracing::info!("coordinated shutdown done");
        guard.slot.complete(Ok(()));
        if self.inner.config.exit_process {
            self.exit_process();
        }
    }

    /// Exits the process with the configured code, from a thread of its
    /// own (this runs on a worker, and the engine's before-exit hook waits
    /// for every worker to be joined).
    fn exit_process(&self) {
        let code = self.inner.config.exit_code;
        let before = take_lock(&self.inner.before_exit).take();
        let spawned = std::thread::Builder::new()
            .name("coordinated-shutdown-exit".to_owned())
            .spawn(move || {
                if let Some(wait) = before {
                    wait();
                }
                tracing::info!(code, "coordinated shutdown: exiting the process");
                std::process::exit(code);
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, code, "no thread for the exit; exiting from the worker");
            std::process::exit(code);
        }
    }

    /// Adds a hook run when a process signal (SIGTERM, SIGINT) arrives,
    /// before the run starts: the analogue of Akka's
    /// `addJvmShutdownHook`, so application hooks run before the system's
    /// own shutdown. Hooks run in the order added, on the signal thread; a
    /// panicking hook is logged and the others still run. Refused once the
    /// run has started.
    pub fn add_process_hook(
        &self,
        name: &str,
        hook: impl FnOnce() + Send + 'static,
    ) -> Result<(), AddTaskError> {
        let shared = self.lock();
        if shared.run.is_some() {
            return Err(AddTaskError::RunStarted {
                phase: "process-hook".to_owned(),
                task: name.to_owned(),
            });
        }
        take_lock(&self.inner.process_hooks).push((name.to_owned(), Box::new(hook)));
        Ok(())
    }

    /// Runs the process hooks (once: they are taken), catching panics.
    pub(crate) fn run_process_hooks(&self) {
        let hooks = std::mem::take(&mut *take_lock(&self.inner.process_hooks));
        for (name, hook) in hooks {
            tracing::debug!(hook = %name, "running process hook");
            if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(hook)) {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                tracing::error!(hook = %name, panic = %message, "a process hook panicked");
            }
        }
    }

    /// Sets what the exit thread waits for after the last phase and before
    /// it exits the process (with `exit_process` on). The engine waits there
    /// for its workers to be joined; replaces an earlier one.
    pub fn before_process_exit(&self, wait: impl FnOnce() + Send + 'static) {
        *take_lock(&self.inner.before_exit) = Some(Box::new(wait));
    }

    pub(crate) fn weak(&self) -> std::sync::Weak<Inner> {
        Arc::downgrade(&self.inner)
    }

    pub(crate) fn from_weak(weak: &std::sync::Weak<Inner>) -> Option<CoordinatedShutdown> {
        weak.upgrade().map(|inner| CoordinatedShutdown { inner })
    }

    /// For the signal dispatcher: true for the first signal that finds
    /// this shutdown neither started nor claimed by an earlier signal.
    pub(crate) fn claim_signal(&self) -> bool {
        // AcqRel: pairs with the same swap by a later signal, which then
        // sees this one's claim; only one claimer wins.
        !self.is_started() && !self.inner.signalled.swap(true, Ordering::AcqRel)
    }

    /// Whether the run has started.
    pub fn is_started(&self) -> bool {
        self.lock().run.is_some()
    }

    /// The run, if it has started.
    pub fn started_run(&self) -> Option<ShutdownRun> {
        self.lock().run.clone()
    }

    fn skip_phase(&self, phase: &str) {
        for t in self.lock().tasks.iter_mut().filter(|t| t.phase == phase) {
            if t.state == TaskState::Pending {
                t.f = None;
                t.state = TaskState::Skipped;
            }
        }
    }

    /// Sets a task's final state and duration, logs it, and hands back its
    /// failure.
    fn record(
        &self,
        phase: &str,
        id: u64,
        name: &str,
        result: Result<(), TaskFailure>,
        started: Instant,
    ) -> Result<(), TaskFailure> {
        let mut shared = self.lock();
        if let Some(t) = shared.tasks.iter_mut().find(|t| t.id == id) {
            t.duration = Some(started.elapsed());
            t.state = match &result {
                Ok(()) => TaskState::Done,
                Err(failure) => TaskState::Failed(failure.clone()),
            };
        }
        drop(shared);
        match &result {
            Ok(()) => tracing::debug!(phase, task = %name, took = ?started.elapsed(), "task done"),
            Err(failure) => {
                tracing::warn!(phase, task = %name, %failure, "shutdown task did not succeed")
            }
        }
        result
    }

    async fn run_phase(&self, phase: &str) -> Result<(), ShutdownError> {
        let config = self
            .inner
            .config
            .phase_config(phase)
            .cloned()
            .unwrap_or_default();
        let timeout = self.inner.config.phase_timeout(phase).unwrap_or_default();
        let started = Instant::now();
        let mut running: Vec<Started> = Vec::new();
        {
            let mut shared = self.lock();
            shared.state = RunState::InPhase(phase.to_owned());
            for t in shared.tasks.iter_mut().filter(|t| t.phase == phase) {
                let Some(f) = t.f.take() else { continue };
                if !config.enabled {
                    t.state = TaskState::Skipped;
                    tracing::info!(phase, task = %t.name, "phase disabled: task skipped");
                    continue;
                }
                t.state = TaskState::Running(started);
                // The call of `f` happens inside the task, so a panic in it
                // is caught like a panic in its future.
                let join = self.inner.handle.spawn(async move { f().await });
                running.push((t.id, t.name.clone(), join));
            }
        }
        if running.is_empty() {
            return Ok(());
        }
        tracing::info!(phase, tasks = running.len(), ?timeout, "phase started");
        let handle = &self.inner.handle;
        let mut sleep = handle.sleep(timeout);
        let mut nag = handle.sleep(HOLD_UP_REPORT);
        // Whether each task has ended; the first failure, by task name.
        let mut ended = vec![false; running.len()];
        let mut first_failure: Option<(String, TaskFailure)> = None;
        let timed_out = poll_fn(|cx| {
            let mut all = true;
            for (k, (id, name, join)) in running.iter_mut().enumerate() {
                if ended[k] {
                    continue;
                }
                match Pin::new(join).poll(cx) {
                    Poll::Ready(r) => {
                        let result = match r {
                            Ok(Ok(())) => Ok(()),
                            Ok(Err(e)) => Err(TaskFailure::Failed(e.to_string())),
                            Err(JoinError::Panicked(m)) => Err(TaskFailure::Panicked(m)),
                            Err(_) => Err(TaskFailure::Dropped),
                        };
                        ended[k] = true;
                        // Recorded at once: `state()` then shows exactly
                        // the tasks still holding the phase up.
                        if let Err(failure) = self.record(phase, *id, name, result, started) {
                            first_failure.get_or_insert((name.clone(), failure));
                        }
                    }
                    Poll::Pending => all = false,
                }
            }
            if all {
                return Poll::Ready(false);
            }
            while Pin::new(&mut nag).poll(cx).is_ready() {
                let holding: Vec<&str> = running
                    .iter()
                    .zip(&ended)
                    .filter(|(_, done)| !**done)
                    .map(|((_, name, _), _)| name.as_str())
                    .collect();
                tracing::info!(
                    phase,
                    waiting_for = ?holding,
                    elapsed = ?started.elapsed(),
                    ?timeout,
                    "shutdown phase still waiting for tasks"
                );
                nag = handle.sleep(HOLD_UP_REPORT);
            }
            Pin::new(&mut sleep).poll(cx).map(|()| true)
        })
        .await;
        for (k, (id, name, _)) in running.iter().enumerate() {
            if !ended[k] {
                let timed = Err(TaskFailure::TimedOut(timeout));
                if let Err(failure) = self.record(phase, *id, name, timed, started) {
                    first_failure.get_or_insert((name.clone(), failure));
                }
            }
        }
        tracing::info!(phase, took = ?started.elapsed(), timed_out, "phase done");
        match first_failure {
            Some((task, cause)) if !config.recover => Err(ShutdownError::Aborted {
                phase: phase.to_owned(),
                task,
                cause,
            }),
            _ => Ok(()),
        }
    }
}

/// Completes the run with an error if the driver is dropped before it
/// finished (its scheduler shut down under it).
struct CompleteOnDrop {
    cs: CoordinatedShutdown,
    slot: Arc<RunSlot>,
}

impl Drop for CompleteOnDrop {
    fn drop(&mut self) {
        if self.slot.is_complete() {
            return;
        }
        let phase = match &self.cs.lock().state {
            RunState::InPhase(p) => p.clone(),
            _ => String::new(),
        };
        self.slot
            .complete(Err(ShutdownError::SchedulerClosed { phase }));
    }
}
