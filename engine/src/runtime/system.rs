//! [`ActorSystem`]: the scheduler, the guardians, dead letters and the
//! event stream, and termination.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use proscenium_scheduler::{Handle, JoinHandle, QuiesceReport, Scheduler};
use proscenium_shutdown::{CoordinatedShutdown, Reason, ShutdownConfig, SignalRegistration};

use crate::api::actor::{Actor, Props};
use crate::api::actor_ref::{ActorId, ActorRef};
use crate::api::context::{spawn, spawn_root};
use crate::api::promise::Slot;
use crate::runtime::claim::Claim;
use crate::error::{validate_system_name, SpawnError, SystemError};
use crate::observe::dead_letters::{DeadLetter, DeadLetters, Kill, PoisonPill};
use crate::observe::event_stream::EventStream;
use crate::observe::events::{LifecycleEvent, LifecycleKind};
use crate::runtime::coordinated;
use crate::runtime::guardian::Root;
use crate::runtime::signal::{AutoMsg, Envelope};
use crate::supervision::strategy::SupervisorStrategy;

/// An actor system: a scheduler with its workers, the guardian actors `/`,
/// `/user` and `/system`, dead letters and an event stream. Cheap to clone
/// (all clones are the same system).
///
/// # Lifetime
///
/// Like a tokio `Runtime`, the system lives as long as user code holds a
/// handle to it: when the last handle that [`SystemBuilder::build`]
/// returned (or a clone of it) is dropped, the system terminates as if
/// [`terminate`](Self::terminate) had been called, in the background: the
/// drop does not wait, and may happen on any thread, a worker of the system
/// included. Take a [`Termination`] first to wait for it:
///
/// ```
/// # use proscenium::ActorSystem;
/// let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
/// let terminated = system.when_terminated(); // does not keep it alive
/// drop(system);
/// assert!(terminated.wait().clean());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// What does not keep the system alive: an [`ActorRef`], a
/// [`Termination`], and the engine's own reference that
/// [`Context::system`](crate::Context::system) lends an actor, clones of it
/// included (as tokio's `Handle`); an actor may keep that clone without
/// keeping its system from terminating, and once it has terminated the
/// clone's spawns fail with [`SpawnError::SystemTerminated`]. What does: a
/// user handle wherever it is put, also inside the system, such as in an
/// actor's state, a message, an event-stream subscriber or a shutdown task.
/// A handle captured by an actor's [`Props`] factory lives as long as the
/// actor's cell, so that system ends only with `terminate`: give actors
/// `ctx.system()` instead.
///
/// ```
/// use proscenium::prelude::*;
/// use std::time::Duration;
///
/// struct Counter { n: u64 }
/// enum CounterMsg { Add(u64), Get(Reply<u64>) }
///
/// impl Actor for Counter {
///     type Msg = CounterMsg;
///     fn receive(&mut self, _ctx: &mut Context<Self>, msg: CounterMsg) -> Outcome {
///         match msg {
///             CounterMsg::Add(k) => self.n += k,
///             CounterMsg::Get(reply) => reply.send(self.n),
///         }
///         Ok(())
///     }
/// }
///
/// let system = ActorSystem::builder().name("demo").workers(2).pin_workers(false).build()?;
/// let counter = system.spawn(Props::new(|| Counter { n: 0 }), "counter")?;
/// counter.tell(CounterMsg::Add(1));
/// counter.tell(CounterMsg::Add(2));
/// assert_eq!(counter.ask(CounterMsg::Get, Duration::from_secs(1)).wait(), Ok(3));
/// assert!(counter.graceful_stop(Duration::from_secs(1)).wait());
/// let report = system.terminate().wait();
/// assert!(report.clean());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
#[must_use = "dropping the last handle user code holds terminates the system"]
pub struct ActorSystem {
    group: Arc<HandleGroup>,
}

/// What an [`ActorSystem`] handle points to: the system, and whether the
/// handle is one user code holds.
///
/// The handle [`SystemBuilder::build`] returns and its clones share one
/// user group, whose strong count is the number of user handles: when the
/// last of them is dropped, the group's drop terminates the system. The
/// engine's own references (every cell's, hence [`Context::system`] and
/// its clones; the reaper's; a shutdown task's) share internal groups,
/// which terminate nothing: they point back at the system from inside it,
/// and counting them would keep it alive forever (the system holds its
/// guardian cells, which hold the system). A clone stays in its group.
///
/// [`Context::system`]: crate::Context::system
struct HandleGroup {
    inner: Arc<SystemInner>,
    user: bool,
}

impl Drop for HandleGroup {
    fn drop(&mut self) {
        if self.user {
            self.inner.last_user_handle_dropped();
        }
    }
}

pub(crate) struct SystemInner {
    name: String,
    handle: Handle,
    /// Taken by the reaper, which quiesces it once the root has terminated.
    scheduler: Mutex<Option<Scheduler>>,
    /// Cleared at termination (guardian cells refer back to the system).
    guardians: Mutex<Option<Guardians>>,
    dead_letters: DeadLetters,
    events: EventStream,
    live_cells: AtomicUsize,
    /// Panics that escaped an actor's run (see `run_panicked`).
    run_panics: AtomicU64,
    /// Panics in piped futures and their mappings (see `pipe_panicked`).
    pipe_panics: AtomicU64,
    /// Claimed when the root guardian has terminated: the reaper starts.
    reaping: Claim,
    /// Set by the first `terminate` call.
    terminate_called: Claim,
    /// The thread that joins the workers; joined by the first `wait`.
    reaper: Mutex<Option<std::thread::JoinHandle<()>>>,
    termination: Slot<TerminationReport>,
    quiesce_timeout: Duration,
    /// The coordinated shutdown; its last phase terminates this system.
    shutdown: CoordinatedShutdown,
    /// Kept while signals should run the shutdown; dropped at termination.
    signals: Mutex<Option<SignalRegistration>>,
    /// Run by the reaper once the workers are joined, before the termination
    /// completes; `None` once they have run.
    on_termination: Mutex<Option<Vec<OnTermination>>>,
    /// The `metrics` feature's counters and sources.
    #[cfg(feature = "metrics")]
    metrics: crate::observe::metrics::SystemMetrics,
}

type OnTermination = Box<dyn FnOnce(&TerminationReport) + Send>;

impl SystemInner {
    /// The last handle user code held is gone (called from its drop, on
    /// whatever thread that was: a user thread, a worker in the middle of a
    /// run, the timer thread). Terminates the system in the background:
    /// `terminate` runs as a task on the system's own workers, so this
    /// thread neither waits nor takes any of the system's locks (it may be
    /// holding one: the handle could be dropped with a cell's state, or
    /// inside a callback the system runs).
    fn last_user_handle_dropped(self: &Arc<Self>) {
        // A shortcut only (termination asked for, or under way):
        // `terminate` claims the termination itself, so a stale `false`
        // only costs a task that finds it claimed.
        if self.terminate_called.is_claimed() || self.reaping.is_claimed() {
            return;
        }
        tracing::debug!(system = %self.name, "the last user handle was dropped: terminating");
        // Weak: if the system is gone by the time this runs, so is the work.
        let weak = Arc::downgrade(self);
        // On a closed scheduler (the system is being reaped) the task is
        // dropped, and nothing is left to do.
        self.handle.spawn_detached(async move {
            if let Some(inner) = weak.upgrade() {
                drop(ActorSystem::from_inner(inner).terminate());
            }
        });
    }
}

#[derive(Clone)]
struct Guardians {
    root: ActorId,
    user: ActorId,
    system: ActorId,
}

/// Unique actor ids across every system in the process.
static NEXT_UID: AtomicU64 = AtomicU64::new(1);

/// Builds an [`ActorSystem`].
///
/// The defaults are a server's: one worker per core, each pinned to its
/// core, and the coordinated shutdown run by SIGTERM and SIGINT. Signals
/// are per process: every system built with `run-by-signals` on is
/// registered, and a signal runs the coordinated shutdown of each of them
/// (a system registered while others are logs so, at info level). A test
/// (or any second system in a process) should set
/// [`pin_workers(false)`](Self::pin_workers) (tests share cores; pinned
/// workers of parallel tests pile onto the same ones), a small
/// [`workers`](Self::workers) count, and
/// `coordinated_shutdown(ShutdownConfig::default().run_by_signals(false))`
/// (a Ctrl-C of the test runner is not the system's); the testkit's
/// `TestSystem` (cargo feature `testkit`) is that preset.
#[derive(Debug)]
pub struct SystemBuilder {
    name: String,
    scheduler: proscenium_scheduler::Builder,
    user_strategy: SupervisorStrategy,
    dead_letter_log_limit: u32,
    dead_letter_log_suspend: Duration,
    quiesce_timeout: Duration,
    shutdown: ShutdownConfig,
}

impl SystemBuilder {
    /// The system's name (also the prefix of its threads' names). Not empty,
    /// and without a NUL byte: [`build`](Self::build) refuses either with
    /// [`SystemError::InvalidName`].
    pub fn name(mut self, name: impl Into<String>) -> SystemBuilder {
        self.name = name.into();
        self
    }

    /// Worker threads (default: one per core).
    pub fn workers(mut self, n: usize) -> SystemBuilder {
        self.scheduler = self.scheduler.workers(n);
        self
    }

    /// Pin each worker to its own core (default: on).
    pub fn pin_workers(mut self, pin: bool) -> SystemBuilder {
        self.scheduler = self.scheduler.pin_workers(pin);
        self
    }

    /// Messages an actor handles per run before its worker moves on
    /// (default [`DEFAULT_THROUGHPUT`](proscenium_scheduler::DEFAULT_THROUGHPUT)).
    pub fn throughput(mut self, n: u32) -> SystemBuilder {
        self.scheduler = self.scheduler.throughput(n);
        self
    }

    /// The stack size of each worker thread, in bytes (TOML
    /// `scheduler.stack-size`). Default: std's default for spawned threads,
    /// 2 MiB (or `RUST_MIN_STACK` if set); [`build`](Self::build) refuses
    /// less than [`MIN_STACK_SIZE`](proscenium_scheduler::MIN_STACK_SIZE)
    /// (64 KiB) with a [`SystemError::Scheduler`] naming the setting.
    ///
    /// Actors run on these stacks. Messages are moved by value through a
    /// few frames of the send and receive path, some keeping a copy each
    /// (for a 1 MiB message: 10–12 MiB of stack in an optimised build,
    /// 24–32 MiB in a debug build), but a message type over 8 KiB does not
    /// need this raised: its sends and its actors' runs go on a stack grown
    /// for them when the current one lacks the room (decision 0022). Raise
    /// it for deep recursion in handlers, or so that large messages find
    /// the room without a stack of their own.
    ///
    /// ```
    /// use proscenium::ActorSystem;
    ///
    /// let system = ActorSystem::builder()
    ///     .workers(1)
    ///     .pin_workers(false)
    ///     .worker_stack_size(8 << 20)
    ///     .build()?;
    /// system.terminate().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn worker_stack_size(mut self, bytes: usize) -> SystemBuilder {
        self.scheduler = self.scheduler.stack_size(bytes);
        self
    }

    /// How `/user` supervises the top-level actors (Akka's
    /// `guardian-supervisor-strategy`; default: the default strategy).
    /// When `/user` escalates, the system terminates.
    pub fn user_guardian_strategy(mut self, strategy: SupervisorStrategy) -> SystemBuilder {
        self.user_strategy = strategy;
        self
    }

    /// Dead letters logged before logging pauses (default 10; 0 turns the
    /// log off), and for how long it pauses (default 5 minutes). Counting
    /// and publishing never pause.
    pub fn dead_letter_logging(mut self, limit: u32, suspend: Duration) -> SystemBuilder {
        self.dead_letter_log_limit = limit;
        self.dead_letter_log_suspend = suspend;
        self
    }

    /// How long termination waits for the workers to drain once every actor
    /// has stopped (default 10 s).
    pub fn quiesce_timeout(mut self, timeout: Duration) -> SystemBuilder {
        self.quiesce_timeout = timeout;
        self
    }

    /// The coordinated shutdown's settings (default: Akka's, see
    /// [`ShutdownConfig::default`]); validated by [`build`](Self::build).
    /// For tests, `terminate_actor_system(false)`,
    /// `run_by_actor_system_terminate(false)` and `run_by_signals(false)`
    /// keep the shutdown from touching the system or the process.
    pub fn coordinated_shutdown(mut self, config: ShutdownConfig) -> SystemBuilder {
        self.shutdown = config;
        self
    }

    /// Starts the scheduler and the guardians (it returns once all three
    /// have started and published their [`LifecycleEvent`]s, so a
    /// subscriber added afterwards sees only the user's actors), and
    /// returns the first user handle: the system terminates when it and every clone of it are
    /// dropped (see [`ActorSystem`]'s lifetime), or when
    /// [`terminate`](ActorSystem::terminate) is called. Fails with a typed error
    /// naming what is wrong if the name is invalid, if the
    /// coordinated-shutdown phases do not form a valid DAG, if a scheduler
    /// setting is out of range (these are checked before any thread
    /// starts), or if the scheduler or the guardians do not start.
    pub fn build(self) -> Result<ActorSystem, SystemError> {
        // Before any thread starts: bad configuration fails first.
        validate_system_name(&self.name)?;
        self.shutdown.ordered_phases()?;
        let scheduler = self.scheduler.thread_name(self.name.clone()).build()?;
        let shutdown = CoordinatedShutdown::new(self.shutdown.clone(), scheduler.handle().clone())?;
        let inner = Arc::new(SystemInner {
            name: self.name,
            handle: scheduler.handle().clone(),
            scheduler: Mutex::new(Some(scheduler)),
            guardians: Mutex::new(None),
            dead_letters: DeadLetters::new(
                self.dead_letter_log_limit,
                self.dead_letter_log_suspend,
            ),
            events: EventStream::new(),
            live_cells: AtomicUsize::new(0),
            run_panics: AtomicU64::new(0),
            pipe_panics: AtomicU64::new(0),
            reaping: Claim::new(),
            terminate_called: Claim::new(),
            reaper: Mutex::new(None),
            termination: Slot::new(),
            quiesce_timeout: self.quiesce_timeout,
            shutdown,
            signals: Mutex::new(None),
            on_termination: Mutex::new(Some(Vec::new())),
            #[cfg(feature = "metrics")]
            metrics: Default::default(),
        });
        // The engine's reference (the root cell keeps it); the user's
        // handle is made once the guardians have started.
        let system = ActorSystem::from_inner(Arc::clone(&inner));
        // The builder returns once the three guardians have started and
        // published their Started events, so that a subscriber from then on
        // sees only what happens to the user's actors (the root reports
        // from its `pre_start`, before its own event, and `/user` and
        // `/system` are created on a worker after that: on a loaded machine
        // their events came after `build` had returned). Until then every
        // lifecycle event is a guardian's.
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let guardians_started = inner.events.subscribe(move |e: &LifecycleEvent| {
            if e.kind == LifecycleKind::Started {
                let _ = started_tx.send(());
            }
        });
        let patience = Instant::now() + Duration::from_secs(30);
        let (tx, rx) = mpsc::channel();
        let root = spawn_root(&system, Root::props(tx, self.user_strategy)).id();
        let started = rx.recv_timeout(Duration::from_secs(30)).and_then(|ids| {
            for _ in 0..3 {
                started_rx.recv_timeout(patience.saturating_duration_since(Instant::now()))?;
            }
            Ok(ids)
        });
        inner.events.unsubscribe(&guardians_started);
        match started {
            Ok((user, sys)) => {
                *system.guardians() = Some(Guardians {
                    root,
                    user,
                    system: sys,
                });
                let signals = coordinated::install(
                    &system,
                    Arc::downgrade(&inner),
                    &self.shutdown,
                    &inner.shutdown,
                );
                *inner.signals.lock().unwrap_or_else(|e| e.into_inner()) = signals;
                Ok(ActorSystem {
                    group: Arc::new(HandleGroup { inner, user: true }),
                })
            }
            Err(e) => Err(SystemError::Guardians(e.to_string())),
        }
    }
}

impl ActorSystem {
    /// A system with default settings, named `name`.
    pub fn new(name: impl Into<String>) -> Result<ActorSystem, SystemError> {
        ActorSystem::builder().name(name).build()
    }

    /// A builder with the defaults.
    pub fn builder() -> SystemBuilder {
        SystemBuilder {
            name: "proscenium".to_owned(),
            scheduler: Scheduler::builder(),
            user_strategy: SupervisorStrategy::default(),
            dead_letter_log_limit: 10,
            dead_letter_log_suspend: Duration::from_secs(300),
            quiesce_timeout: Duration::from_secs(10),
            shutdown: ShutdownConfig::default(),
        }
    }

    /// An engine-internal handle: it does not keep the system alive.
    pub(crate) fn from_inner(inner: Arc<SystemInner>) -> ActorSystem {
        ActorSystem {
            group: Arc::new(HandleGroup { inner, user: false }),
        }
    }

    /// This handle if it is internal, else an internal one: for references
    /// the engine keeps.
    pub(crate) fn internal(&self) -> ActorSystem {
        if self.group.user {
            ActorSystem::from_inner(Arc::clone(self.inner()))
        } else {
            self.clone()
        }
    }

    fn inner(&self) -> &Arc<SystemInner> {
        &self.group.inner
    }

    fn guardians(&self) -> MutexGuard<'_, Option<Guardians>> {
        self.inner()
            .guardians
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn user_guardian(&self) -> Result<ActorId, SpawnError> {
        self.guardians()
            .as_ref()
            .map(|g| g.user.clone())
            .ok_or(SpawnError::SystemTerminated)
    }

    /// The system's name.
    pub fn name(&self) -> &str {
        &self.inner().name
    }

    /// Creates a top-level actor (a child of `/user`) named `name`.
    pub fn spawn<A: Actor>(
        &self,
        props: Props<A>,
        name: &str,
    ) -> Result<ActorRef<A::Msg>, SpawnError> {
        spawn(&self.user_guardian()?, props, Some(name))
    }

    /// Creates a top-level actor with a generated name.
    pub fn spawn_anonymous<A: Actor>(
        &self,
        props: Props<A>,
    ) -> Result<ActorRef<A::Msg>, SpawnError> {
        spawn(&self.user_guardian()?, props, None)
    }

    /// Creates an engine-side actor under `/system` (for extensions: it
    /// outlives every user actor at termination).
    pub fn spawn_system_actor<A: Actor>(
        &self,
        props: Props<A>,
        name: &str,
    ) -> Result<ActorRef<A::Msg>, SpawnError> {
        let parent = self
            .guardians()
            .as_ref()
            .map(|g| g.system.clone())
            .ok_or(SpawnError::SystemTerminated)?;
        spawn(&parent, props, Some(name))
    }

    /// Records `message` as a dead letter for `recipient` (counted, logged
    /// with the rate limit, published on the event stream as a
    /// [`DeadLetter`](crate::DeadLetter)): for extensions that deliver
    /// messages from outside the engine, such as a remote message that
    /// could not be decoded (proscenium-remote).
    pub fn publish_dead_letter<T: std::any::Any + Send>(
        &self,
        recipient: Option<ActorId>,
        message: T,
    ) {
        self.publish_dead(DeadLetter::new(recipient, message));
    }

    /// The `/user` guardian's id (`None` once terminated).
    pub fn user_guardian_id(&self) -> Option<ActorId> {
        self.guardians().as_ref().map(|g| g.user.clone())
    }

    /// Terminates the system: with `run-by-actor-system-terminate` on (the
    /// default), runs the coordinated shutdown (reason
    /// [`Reason::ActorSystemTerminate`]), whose last phase stops `/user`
    /// (its actors first, children before parents), then `/system`, then
    /// `/`; then the workers are drained, parked and joined. If the run ends
    /// without terminating the system (aborted by a `recover = off` phase,
    /// or `terminate-actor-system` off), the actors are stopped right after
    /// it: `terminate` always terminates. Returns the future of the
    /// termination; calling it again returns the same outcome. Dropping the
    /// last user handle calls it (see [`ActorSystem`]'s lifetime).
    pub fn terminate(&self) -> Termination {
        let cs = &self.inner().shutdown;
        // Only the first call has anything to start; later ones wait on
        // the same termination.
        if !self.inner().terminate_called.claim() {
            return self.when_terminated();
        }
        if cs.config().run_by_actor_system_terminate {
            let run = cs.run(Reason::ActorSystemTerminate);
            let weak = Arc::downgrade(self.inner());
            self.inner().handle.spawn_detached(async move {
                let _ = run.await;
                if let Some(inner) = weak.upgrade() {
                    ActorSystem::from_inner(inner).stop_user_guardian();
                }
            });
        } else {
            self.stop_user_guardian();
        }
        self.when_terminated()
    }

    /// Runs `callback` with the termination report once the system has
    /// terminated (every actor stopped, the workers joined), on the thread
    /// that joined them and before any waiter of the termination — and so
    /// before the process exits with `exit-process` on. Callbacks run in the
    /// order registered; registered after the termination, it runs at once
    /// on this thread. A panic in it is logged.
    pub fn register_on_termination(
        &self,
        callback: impl FnOnce(&TerminationReport) + Send + 'static,
    ) {
        let mut pending = self
            .inner()
            .on_termination
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match pending.as_mut() {
            Some(list) => list.push(Box::new(callback)),
            None => {
                drop(pending);
                let report = self
                    .inner()
                    .termination
                    .wait_clone(None)
                    .expect("terminated, no deadline");
                run_on_termination(Box::new(callback), &report);
            }
        }
    }

    fn stop_user_guardian(&self) {
        if let Some(g) = self.guardians().as_ref() {
            if !g.user.is_terminated() {
                g.user.stop();
            }
        }
    }

    /// The coordinated shutdown of this system: add tasks to its phases,
    /// run it, read its state. See [`CoordinatedShutdownExt`] for
    /// actor-termination tasks.
    ///
    /// [`CoordinatedShutdownExt`]: crate::CoordinatedShutdownExt
    pub fn coordinated_shutdown(&self) -> &CoordinatedShutdown {
        &self.inner().shutdown
    }

    /// The root, `/user` and `/system` guardians (`None` once terminated).
    pub(crate) fn guardian_ids(&self) -> Option<(ActorId, ActorId, ActorId)> {
        self.guardians()
            .as_ref()
            .map(|g| (g.root.clone(), g.user.clone(), g.system.clone()))
    }

    pub(crate) fn quiesce_timeout(&self) -> Duration {
        self.inner().quiesce_timeout
    }

    /// Completes once the system has terminated and its workers are joined.
    ///
    /// The `Termination` does not keep the system alive: dropping every
    /// handle after taking it still terminates the system, and the
    /// `Termination` sees it.
    pub fn when_terminated(&self) -> Termination {
        Termination {
            inner: Arc::clone(self.inner()),
        }
    }

    /// Whether termination has completed.
    pub fn is_terminated(&self) -> bool {
        self.inner().termination.is_completed()
    }

    /// The event stream (dead letters are published here as [`DeadLetter`]).
    pub fn event_stream(&self) -> &EventStream {
        &self.inner().events
    }

    /// Dead letters so far.
    pub fn dead_letter_count(&self) -> u64 {
        self.inner().dead_letters.count()
    }

    /// Actor cells currently allocated, guardians included (zero once the
    /// system has terminated and every reference is dropped).
    pub fn live_cells(&self) -> usize {
        // Relaxed: a statistic, read after a synchronising event.
        self.inner().live_cells.load(Ordering::Relaxed)
    }

    /// Panics that escaped an actor's run so far: not from its handlers
    /// (those fail the actor) nor from the user code the engine contains
    /// (a `Drop` that panics: logged), but from elsewhere, such as a
    /// panicking `tracing` layer or a bug in the engine. Each was logged and
    /// the actor was run again; zero in a healthy system.
    pub fn escaped_panics(&self) -> u64 {
        // Relaxed: a statistic, read after a synchronising event.
        self.inner().run_panics.load(Ordering::Relaxed)
    }

    /// The scheduler handle: run futures and timers on the system's workers.
    pub fn scheduler_handle(&self) -> &Handle {
        &self.inner().handle
    }

    /// Runs `future` as a task on the system's workers and returns the
    /// handle of its output (a future itself, or `wait()` from a plain
    /// thread). Dropping the handle detaches the task. Once the system has
    /// terminated, the task is dropped and the handle resolves to
    /// [`JoinError::Cancelled`](crate::JoinError::Cancelled); a panic in
    /// the future is caught and resolves it to
    /// [`JoinError::Panicked`](crate::JoinError::Panicked).
    ///
    /// The task must not block its worker (see the crate docs, "Waiting
    /// without blocking"): `.await` there, never `wait()`.
    ///
    /// ```
    /// use proscenium::prelude::*;
    /// use std::time::Duration;
    ///
    /// # struct Echo;
    /// # impl Actor for Echo {
    /// #     type Msg = (u32, Reply<u32>);
    /// #     fn receive(&mut self, _: &mut Context<Self>, (n, r): Self::Msg) -> Outcome { r.send(n); Ok(()) }
    /// # }
    /// let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
    /// let echo = system.spawn(Props::new(|| Echo), "echo")?;
    /// let sum: JoinHandle<u32> = system.spawn_task(async move {
    ///     let a = echo.ask(|r| (1, r), Duration::from_secs(1)).await.unwrap_or(0);
    ///     let b = echo.ask(|r| (2, r), Duration::from_secs(1)).await.unwrap_or(0);
    ///     a + b
    /// });
    /// assert_eq!(sum.wait(), Ok(3));
    /// # system.terminate().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn_task<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.inner().handle.spawn(future)
    }

    /// Panics in piped futures and in their mapping closures so far
    /// ([`Context::pipe_to_self`](crate::Context::pipe_to_self),
    /// [`Context::ask_pipe`](crate::Context::ask_pipe)): each was logged,
    /// and its message was not delivered.
    pub fn pipe_panics(&self) -> u64 {
        // Relaxed: a statistic, read after a synchronising event.
        self.inner().pipe_panics.load(Ordering::Relaxed)
    }

    // ---- crate-internal ---------------------------------------------------

    pub(crate) fn next_uid(&self) -> u64 {
        // Relaxed: only uniqueness matters.
        NEXT_UID.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn cell_created(&self) {
        // Relaxed: a statistic.
        self.inner().live_cells.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.inner().metrics.spawned();
    }

    /// The `metrics` feature's counters and sources.
    #[cfg(feature = "metrics")]
    pub(crate) fn metrics_state(&self) -> &crate::observe::metrics::SystemMetrics {
        &self.inner().metrics
    }

    /// A piped future or its mapping panicked (`pipe` caught it).
    pub(crate) fn pipe_panicked(&self) {
        // Relaxed: a statistic.
        self.inner().pipe_panics.fetch_add(1, Ordering::Relaxed);
    }

    /// A panic escaped an actor's run (`Cell::run` caught it).
    pub(crate) fn run_panicked(&self) {
        // Relaxed: a statistic.
        self.inner().run_panics.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn cell_dropped(&self) {
        // Relaxed: a statistic.
        self.inner().live_cells.fetch_sub(1, Ordering::Relaxed);
    }

    fn publish_dead(&self, letter: DeadLetter) {
        self.inner().dead_letters.record(&letter);
        self.inner().events.publish(letter);
    }

    pub(crate) fn dead_envelope<M: Send + 'static>(&self, recipient: ActorId, e: Envelope<M>) {
        match e {
            Envelope::Msg(m) => self.publish_dead(DeadLetter::new(Some(recipient), m)),
            Envelope::PoisonPill => self.publish_dead(DeadLetter::new(Some(recipient), PoisonPill)),
            Envelope::Kill => self.publish_dead(DeadLetter::new(Some(recipient), Kill)),
            // The watcher is gone: nobody is left to tell.
            Envelope::Terminated(_) => {}
            // A wake-up for a future that is gone with its actor.
            Envelope::Wake => {}
            // Not handled: dropped uncalled (nothing to confirm).
            Envelope::Receipt(_) => {}
            // A scheduled message reaching a terminated actor: to dead
            // letters, unless its timer was cancelled.
            Envelope::Timer(slot) => {
                if let Some(m) = slot.take_for_dead_letter() {
                    self.publish_dead(DeadLetter::new(Some(recipient), m));
                }
            }
        }
    }

    pub(crate) fn dead_auto(&self, recipient: ActorId, msg: AutoMsg) {
        self.dead_envelope::<()>(recipient, Envelope::from(msg));
    }

    pub(crate) fn dead_reply<R: Send + 'static>(&self, reply: R) {
        self.publish_dead(DeadLetter::new(None, reply));
    }

    /// The root guardian has terminated (called on its worker): quiesce and
    /// join the workers from a thread of our own, then release what the
    /// system holds and complete the termination.
    pub(crate) fn root_terminated(&self) {
        if !self.inner().reaping.claim() {
            return;
        }
        let system = self.internal();
        // Held while spawning, so the handle is stored before the reaper
        // completes the termination (it takes this lock first).
        let mut reaper = self
            .inner()
            .reaper
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let spawned = std::thread::Builder::new()
            .name(format!("{}-reaper", self.inner().name))
            .spawn(move || system.reap());
        match spawned {
            Ok(handle) => *reaper = Some(handle),
            Err(e) => {
                tracing::error!(error = %e, "could not start the thread that joins the workers")
            }
        }
    }

    fn reap(self) {
        // The coordinated shutdown's last phase ends with the root's
        // termination: let the run finish on the workers (its phase timer
        // cancelled, its outcome set) before they are drained and joined.
        if let Some(run) = self.inner().shutdown.started_run() {
            if run.wait_timeout(self.inner().quiesce_timeout).is_none() {
                tracing::warn!("the coordinated shutdown run did not end before quiesce");
            }
        }
        drop(
            self.inner()
                .signals
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        let scheduler = self
            .inner()
            .scheduler
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let quiesce = scheduler.map(|s| s.quiesce(Instant::now() + self.inner().quiesce_timeout));
        drop(self.guardians().take());
        // Every actor has stopped: their event subscriptions go too.
        self.inner().events.remove_actor_subscribers();
        // Every worker has exited (returning its node cache); free the nodes
        // cached globally and by this thread.
        proscenium_mailbox::trim_node_cache();
        drop(
            self.inner()
                .reaper
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        let report = TerminationReport {
            quiesce,
            dead_letters: self.dead_letter_count(),
        };
        tracing::debug!(system = %self.inner().name, ?report, "actor system terminated");
        let callbacks = self
            .inner()
            .on_termination
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_default();
        for callback in callbacks {
            run_on_termination(callback, &report);
        }
        let _ = self.inner().termination.complete(report);
    }
}

fn run_on_termination(callback: OnTermination, report: &TerminationReport) {
    let call = std::panic::AssertUnwindSafe(|| callback(report));
    if let Err(payload) = std::panic::catch_unwind(call) {
        tracing::error!(
            panic = %crate::supervision::failure::panic_message(payload.as_ref()),
            "an on-termination callback panicked"
        );
    }
}

impl fmt::Debug for ActorSystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActorSystem")
            .field("name", &self.inner().name)
            .field("live_cells", &self.live_cells())
            .field("terminated", &self.is_terminated())
            .finish()
    }
}

/// How a system's termination went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminationReport {
    /// The scheduler's quiesce report (`None` if the scheduler was already
    /// gone).
    pub quiesce: Option<QuiesceReport>,
    /// Dead letters counted over the system's life.
    pub dead_letters: u64,
}

impl TerminationReport {
    /// Whether the workers drained and were joined with nothing left.
    pub fn clean(&self) -> bool {
        self.quiesce
            .as_ref()
            .is_some_and(|q| q.drained && q.runnables_left == 0 && q.timers_pending == 0)
    }
}

/// The future of a system's termination; also `wait()` for plain threads.
#[must_use = "termination happens anyway; this only waits for it"]
pub struct Termination {
    /// Not a handle: the termination does not keep the system alive.
    inner: Arc<SystemInner>,
}

impl Termination {
    /// Blocks this thread until the system has terminated and its workers
    /// are joined.
    ///
    /// # Panics
    ///
    /// On a scheduler worker thread (inside an actor's handler or a task):
    /// the termination waits for that very worker. `.await` it there.
    #[track_caller]
    pub fn wait(self) -> TerminationReport {
        proscenium_scheduler::assert_not_on_worker("Termination::wait");
        let report = self
            .inner
            .termination
            .wait_clone(None)
            .expect("no deadline");
        self.join_reaper();
        report
    }

    /// Joins the thread that quiesced the workers, so that everything it
    /// held is released when `wait` returns.
    fn join_reaper(&self) {
        let reaper = self
            .inner
            .reaper
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(handle) = reaper {
            let _ = handle.join();
        }
    }

    /// Like [`wait`](Self::wait), giving up after `timeout`.
    ///
    /// # Panics
    ///
    /// On a scheduler worker thread, as [`wait`](Self::wait).
    #[track_caller]
    pub fn wait_timeout(self, timeout: Duration) -> Option<TerminationReport> {
        proscenium_scheduler::assert_not_on_worker("Termination::wait_timeout");
        let report = self
            .inner
            .termination
            .wait_clone(Instant::now().checked_add(timeout))?;
        self.join_reaper();
        Some(report)
    }
}

impl Future for Termination {
    type Output = TerminationReport;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<TerminationReport> {
        self.inner.termination.poll_clone(cx)
    }
}

impl fmt::Debug for Termination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Termination")
            .field("system", &self.inner.name)
            .field("completed", &self.inner.termination.is_completed())
            .finish()
    }
}
