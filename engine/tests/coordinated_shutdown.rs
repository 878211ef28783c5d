//! The coordinated shutdown wired into the actor system, sentence by
//! sentence from akka-coordinated-shutdown.txt and
//! akka-net-coordinated-shutdown.txt: the system's termination as the last
//! phase, `ActorSystem::terminate` as a trigger, actor-termination tasks, the
//! switches for tests, and a shutdown of a big busy system.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use proscenium::prelude::*;
use proscenium::{
    ConfigError, CoordinatedShutdown, Phase, PhaseConfig, Reason, RunState, ShutdownConfig,
    ShutdownError, SystemError, TaskState,
};
use support::*;

fn system_with(config: ShutdownConfig) -> ActorSystem {
    ActorSystem::builder()
        .name("cs")
        .workers(2)
        .pin_workers(false)
        .dead_letter_logging(0, Duration::from_secs(1))
        .coordinated_shutdown(config.run_by_signals(false))
        .build()
        .expect("the test system starts")
}

/// Logs its messages and its `post_stop`, and can be told to stop itself.
struct Logger {
    name: &'static str,
    log: std::sync::mpsc::Sender<String>,
}

enum LoggerMsg {
    Note(u32),
    StopNow,
}

impl Actor for Logger {
    type Msg = LoggerMsg;
    fn receive(&mut self, ctx: &mut Context<Self>, msg: LoggerMsg) -> Outcome {
        match msg {
            LoggerMsg::Note(n) => {
                let _ = self.log.send(format!("{} note {n}", self.name));
            }
            LoggerMsg::StopNow => {
                let _ = self.log.send(format!("{} asked to stop", self.name));
                ctx.stop_self();
            }
        }
        Ok(())
    }
    fn post_stop(&mut self, _ctx: &mut Context<Self>) {
        let _ = self.log.send(format!("{} post_stop", self.name));
    }
}

fn logger(name: &'static str, log: &Probe<String>) -> Props<Logger> {
    let tx = log.tx();
    Props::new(move || Logger {
        name,
        log: tx.clone(),
    })
}

/// A task that logs its name.
fn note(cs: &CoordinatedShutdown, phase: &str, name: &'static str, log: &Probe<String>) {
    let tx = log.tx();
    cs.add_task(phase, name, move || async move {
        let _ = tx.send(format!("task {name}"));
        Ok(())
    })
    .expect("the task is added");
}

/// "The coordinated shutdown process can also be started by calling
/// ActorSystem.terminate()." and "That also means that the ActorSystem will
/// be terminated in the last phase." — tasks of earlier phases run while the
/// actors are still alive; the actors stop in the last phase.
#[test]
fn terminate_runs_every_phase_and_stops_the_actors_in_the_last() {
    let system = system_with(ShutdownConfig::default());
    let log = Probe::new();
    let a = system.spawn(logger("a", &log), "a").expect("a");
    let cs = system.coordinated_shutdown().clone();
    note(&cs, Phase::BEFORE_SERVICE_UNBIND, "first", &log);
    let alive = a.clone();
    let tx = log.tx();
    cs.add_task(Phase::BEFORE_ACTOR_SYSTEM_TERMINATE, "probe", move || {
        let _ = tx.send(format!("a alive: {}", !alive.is_terminated()));
        async { Ok(()) }
    })
    .expect("added");
    drop(a);
    let report = system
        .terminate()
        .wait_timeout(PATIENCE)
        .expect("terminated");
    assert!(report.clean(), "{report:?}");
    assert_eq!(
        log.take(3),
        ["task first", "a alive: true", "a post_stop"],
        "phases in order, the actor stopped last"
    );
    assert_eq!(cs.reason(), Some(Reason::ActorSystemTerminate));
    assert_eq!(cs.state().run, RunState::Done);
    let last = cs
        .state()
        .tasks
        .into_iter()
        .find(|t| t.phase == Phase::ACTOR_SYSTEM_TERMINATE)
        .expect("the system's own task");
    assert_eq!(last.state, TaskState::Done);
    assert_eq!(system.live_cells(), 0, "every cell freed");
}

/// "val done: Future[Done] = CoordinatedShutdown(system).run(...)" ends
/// with the system terminated: the run completes, then the workers are
/// joined, and `terminate` afterwards returns the same termination.
#[test]
fn a_run_started_by_the_user_terminates_the_system() {
    let system = system_with(ShutdownConfig::default());
    let log = Probe::new();
    drop(system.spawn(logger("b", &log), "b").expect("b"));
    let run = system
        .coordinated_shutdown()
        .run(Reason::User("deploy".into()));
    assert_eq!(run.wait_timeout(PATIENCE), Some(Ok(())));
    assert_eq!(log.until("b post_stop"), Vec::<String>::new());
    let report = system
        .when_terminated()
        .wait_timeout(PATIENCE)
        .expect("terminated");
    assert!(report.clean(), "{report:?}");
    assert_eq!(
        system.coordinated_shutdown().reason(),
        Some(Reason::User("deploy".into()))
    );
    // terminate() after the run: the same, completed termination.
    assert!(system.terminate().wait_timeout(PATIENCE).is_some());
}

/// "For some tests it might be undesired to terminate the ActorSystem via
/// CoordinatedShutdown. You can disable that ... terminate-actor-system =
/// off": the run completes and the system stays up.
#[test]
fn with_terminate_actor_system_off_the_system_outlives_the_run() {
    let system = system_with(ShutdownConfig::default().terminate_actor_system(false));
    let log = Probe::new();
    let c = system.spawn(logger("c", &log), "c").expect("c");
    let run = system.coordinated_shutdown().run(Reason::Unknown);
    assert_eq!(run.wait_timeout(PATIENCE), Some(Ok(())));
    assert!(!system.is_terminated());
    c.tell(LoggerMsg::Note(1));
    assert_eq!(log.next(), "c note 1", "the actor still works");
    assert!(system.spawn(logger("d", &log), "d").is_ok());
    drop(c);
    // terminate() still terminates (the run is over: it stops the actors).
    shutdown(system);
}

/// "... run-by-actor-system-terminate = off": terminate() stops the system
/// without running the phases.
#[test]
fn with_run_by_actor_system_terminate_off_terminate_skips_the_phases() {
    let system = system_with(ShutdownConfig::default().run_by_actor_system_terminate(false));
    let log = Probe::new();
    note(
        system.coordinated_shutdown(),
        Phase::BEFORE_SERVICE_UNBIND,
        "never",
        &log,
    );
    let cs = system.coordinated_shutdown().clone();
    shutdown(system);
    assert!(log.drain_now().is_empty(), "no task ran");
    assert_eq!(cs.state().run, RunState::NotStarted);
    assert_eq!(cs.state().tasks[0].state, TaskState::Pending);
}

/// "A convenience method is provided that adds a task that sends a message
/// to the actor and then watches its termination" — the next phase starts
/// only once the actor has terminated; with no message, the actor is
/// stopped; an actor that was already dead completes its task at once.
#[test]
fn actor_termination_tasks_complete_when_the_actor_has_terminated() {
    let system = system_with(ShutdownConfig::default().terminate_actor_system(false));
    let log = Probe::new();
    let polite = system.spawn(logger("polite", &log), "polite").expect("p");
    let blunt = system.spawn(logger("blunt", &log), "blunt").expect("b");
    let dead = system.spawn(logger("dead", &log), "dead").expect("d");
    assert!(dead.graceful_stop(PATIENCE).wait());
    assert_eq!(log.until("dead post_stop"), Vec::<String>::new());
    polite.tell(LoggerMsg::Note(1));
    let cs = system.coordinated_shutdown();
    cs.add_actor_termination_task(
        Phase::SERVICE_UNBIND,
        "polite",
        &polite,
        Some(LoggerMsg::StopNow),
    )
    .expect("added");
    cs.add_actor_termination_task::<LoggerMsg>(Phase::SERVICE_UNBIND, "blunt", &blunt, None)
        .expect("added");
    cs.add_actor_termination_task::<LoggerMsg>(Phase::SERVICE_UNBIND, "dead", &dead, None)
        .expect("added");
    note(cs, Phase::SERVICE_REQUESTS_DONE, "next phase", &log);
    assert_eq!(cs.run(Reason::Unknown).wait_timeout(PATIENCE), Some(Ok(())));
    let mut lines = log.drain_now();
    assert_eq!(
        lines.pop().as_deref(),
        Some("task next phase"),
        "the next phase ran last: {lines:?}"
    );
    lines.sort();
    assert_eq!(
        lines,
        [
            "blunt post_stop",
            "polite asked to stop",
            "polite note 1",
            "polite post_stop"
        ]
    );
    assert!(polite.is_terminated() && blunt.is_terminated());
    drop((polite, blunt, dead));
    shutdown(system);
}

/// An actor-termination task whose actor does not stop is held to its
/// phase's timeout ("If tasks are not completed within a configured timeout
/// ... the next phase will be started anyway").
#[test]
fn an_actor_that_ignores_its_stop_message_is_timed_out() {
    let config = ShutdownConfig::default()
        .terminate_actor_system(false)
        .phase(
            Phase::SERVICE_UNBIND,
            PhaseConfig::new()
                .depends_on(Phase::BEFORE_SERVICE_UNBIND)
                .timeout(Duration::from_millis(30)),
        );
    let system = system_with(config);
    let log = Probe::new();
    let stubborn = system
        .spawn(logger("stubborn", &log), "stubborn")
        .expect("s");
    let cs = system.coordinated_shutdown();
    cs.add_actor_termination_task(
        Phase::SERVICE_UNBIND,
        "stubborn",
        &stubborn,
        Some(LoggerMsg::Note(7)),
    )
    .expect("added");
    assert_eq!(cs.run(Reason::Unknown).wait_timeout(PATIENCE), Some(Ok(())));
    assert_eq!(log.next(), "stubborn note 7");
    let task = cs.state().tasks.into_iter().find(|t| t.name == "stubborn");
    assert!(
        matches!(
            task.as_ref().map(|t| &t.state),
            Some(TaskState::Failed(proscenium::TaskFailure::TimedOut(_)))
        ),
        "{task:?}"
    );
    assert!(!stubborn.is_terminated());
    drop(stubborn);
    shutdown(system);
}

/// "recover=off: If the phase fails the shutdown is aborted and depending
/// phases will not be executed." — the system is then not terminated by the
/// run, but `terminate()` still terminates it after the aborted run.
#[test]
fn an_aborted_run_leaves_the_system_up_and_terminate_still_ends_it() {
    let config = ShutdownConfig::default().phase(
        Phase::SERVICE_STOP,
        PhaseConfig::new()
            .depends_on(Phase::SERVICE_REQUESTS_DONE)
            .recover(false),
    );
    let system = system_with(config);
    let cs = system.coordinated_shutdown().clone();
    cs.add_task(Phase::SERVICE_STOP, "fails", || async {
        Err("socket stuck".into())
    })
    .expect("added");
    let run = cs.run(Reason::Unknown);
    assert!(matches!(
        run.wait_timeout(PATIENCE),
        Some(Err(ShutdownError::Aborted { ref task, .. })) if task == "fails"
    ));
    assert!(!system.is_terminated());
    assert_eq!(
        cs.state().run,
        RunState::Aborted(Phase::SERVICE_STOP.into())
    );
    shutdown(system);
}

/// Bad configuration fails at start-up with a typed error naming the
/// phases ("an unknown phase in depends-on or a cycle").
#[test]
fn a_bad_phase_graph_fails_the_build_and_names_the_phases() {
    let err = ActorSystem::builder()
        .workers(1)
        .pin_workers(false)
        .coordinated_shutdown(
            ShutdownConfig::default().phase("drain", PhaseConfig::new().depends_on("nope")),
        )
        .build()
        .expect_err("refused");
    let SystemError::Shutdown(ConfigError::UnknownPhase { phase, depends_on }) = &err else {
        panic!("{err:?}");
    };
    assert_eq!((phase.as_str(), depends_on.as_str()), ("drain", "nope"));
    assert!(err.to_string().contains("`drain`"), "{err}");
    let err = ActorSystem::builder()
        .workers(1)
        .pin_workers(false)
        .coordinated_shutdown(
            ShutdownConfig::default()
                .phase("x", PhaseConfig::new().depends_on("y"))
                .phase("y", PhaseConfig::new().depends_on("x")),
        )
        .build()
        .expect_err("refused");
    assert!(
        matches!(&err, SystemError::Shutdown(ConfigError::Cycle { phases }) if phases.len() == 2),
        "{err:?}"
    );
}

/// "Tasks should typically be registered as early as possible after system
/// startup. When running the coordinated shutdown tasks that have been
/// registered will be performed but tasks that are added too late will not
/// be run." — from inside the run itself, too.
#[test]
fn a_task_added_during_the_run_is_refused() {
    let system = system_with(ShutdownConfig::default());
    let cs = system.coordinated_shutdown().clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let inner = cs.clone();
    cs.add_task(Phase::SERVICE_UNBIND, "adds-late", move || {
        let refused = inner.add_task(Phase::SERVICE_STOP, "late", || async { Ok(()) });
        let _ = tx.send(refused);
        async { Ok(()) }
    })
    .expect("added");
    let report = system.terminate().wait_timeout(PATIENCE).expect("done");
    assert!(report.clean());
    assert!(matches!(
        rx.recv_timeout(PATIENCE),
        Ok(Err(proscenium::AddTaskError::RunStarted { .. }))
    ));
}

/// A busy actor: counts what it handles.
struct Busy {
    handled: Arc<AtomicU64>,
}

impl Actor for Busy {
    type Msg = u32;
    fn receive(&mut self, _ctx: &mut Context<Self>, hops: u32) -> Outcome {
        self.handled.fetch_add(1, Ordering::Relaxed);
        std::hint::black_box(hops);
        Ok(())
    }
}

/// A shutdown of a system with 100k actors and a million queued messages
/// ends inside its deadlines, drains the workers with nothing left (every
/// message handled or counted as a dead letter, exactly once) and frees
/// every actor cell.
#[test]
fn a_busy_system_of_100k_actors_shuts_down_inside_its_deadlines() {
    let actors: u32 = 100_000;
    let per_actor: u32 = 10;
    let config = ShutdownConfig::default().phase(
        Phase::ACTOR_SYSTEM_TERMINATE,
        PhaseConfig::new()
            .depends_on(Phase::BEFORE_ACTOR_SYSTEM_TERMINATE)
            .recover(false)
            .timeout(Duration::from_secs(60)),
    );
    let system = system_with(config);
    let handled = Arc::new(AtomicU64::new(0));
    let mut refs = Vec::with_capacity(actors as usize);
    for i in 0..actors {
        let handled = Arc::clone(&handled);
        let r = system
            .spawn(
                Props::new(move || Busy {
                    handled: Arc::clone(&handled),
                }),
                &format!("busy-{i}"),
            )
            .expect("spawned");
        refs.push(r);
    }
    for k in 0..per_actor {
        for r in &refs {
            r.tell(k);
        }
    }
    drop(refs);
    let report = system
        .terminate()
        .wait_timeout(PATIENCE * 3)
        .expect("the shutdown ends inside its deadlines");
    assert!(report.clean(), "{report:?}");
    assert_eq!(
        system.coordinated_shutdown().state().run,
        RunState::Done,
        "no phase timed out (recover = off would have aborted)"
    );
    let sent = u64::from(actors) * u64::from(per_actor);
    assert_eq!(
        handled.load(Ordering::Relaxed) + report.dead_letters,
        sent,
        "every message handled or a dead letter, once"
    );
    assert_eq!(system.live_cells(), 0, "every cell freed");
}

/// "Bad configuration fails at start-up with an error that names the key"
/// (ARCHITECTURE.md, Configuration): the system-level TOML, both sections.
#[test]
fn system_toml_names_the_bad_key() {
    let err = |text: &str| {
        ActorSystem::builder()
            .from_toml_str(text)
            .expect_err("refused")
            .to_string()
    };
    assert!(err("[scheduler]\nworkers = 0").contains("`scheduler.workers`"));
    assert!(err("[scheduler]\npin-workers = 3").contains("`scheduler.pin-workers`"));
    assert!(err("[scheduler]\nthroughput = -1").contains("`scheduler.throughput`"));
    assert!(err("[coordinated-shutdown]\nexit-code = \"x\"")
        .contains("`coordinated-shutdown.exit-code`"));
    assert!(err(
        "[coordinated-shutdown.phases.a]\ndepends-on = [\"b\"]\n[coordinated-shutdown.phases.b]\ndepends-on = [\"a\"]"
    )
    .contains("cycle"));
    assert!(err("[scheduler\n").contains("TOML"));
    // Good settings reach the system: the phase exists, terminate-actor-
    // system off keeps the system up after a run.
    let system = ActorSystem::builder()
        .from_toml_str(
            "[scheduler]\nworkers = 1\npin-workers = false\n\
             [coordinated-shutdown]\nrun-by-signals = \"off\"\nterminate-actor-system = \"off\"",
        )
        .expect("valid")
        .build()
        .expect("starts");
    let run = system.coordinated_shutdown().run(Reason::Unknown);
    assert_eq!(run.wait_timeout(PATIENCE), Some(Ok(())));
    assert!(!system.is_terminated());
    shutdown(system);
}

/// The state machine is visible in the logs too: a phase that waits logs,
/// every second, which of its tasks it is waiting for (the issue: "so a
/// user can see which task is holding up shutdown").
#[test]
fn a_waiting_phase_logs_the_task_holding_it_up() {
    let logs = Logs::capture();
    let system = system_with(ShutdownConfig::default());
    let cs = system.coordinated_shutdown();
    let (release, held) = std::sync::mpsc::channel::<()>();
    let held = std::sync::Mutex::new(held);
    // Waits on a plain thread (not a worker) until the test releases it.
    cs.add_task(Phase::SERVICE_REQUESTS_DONE, "slow-drain-7f3", move || {
        let (tx, rx) = futures_channel();
        std::thread::spawn(move || {
            let _ = held.lock().expect("lock").recv();
            tx();
        });
        rx
    })
    .expect("added");
    cs.add_task(Phase::SERVICE_REQUESTS_DONE, "fast-a91", || async {
        Ok(())
    })
    .expect("added");
    let termination = system.terminate();
    let line = logs.wait_for(&["still waiting for tasks", "slow-drain-7f3"]);
    assert!(!line.contains("fast-a91"), "{line}");
    release.send(()).expect("the task waits");
    assert!(termination
        .wait_timeout(PATIENCE)
        .expect("terminated")
        .clean());
}

/// A task's future.
type TaskFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), proscenium::TaskError>> + Send>>;

/// A one-shot completion: the sender half completes the future.
fn futures_channel() -> (impl FnOnce() + Send, TaskFuture) {
    let slot = Arc::new(std::sync::Mutex::new((false, None::<std::task::Waker>)));
    let done = Arc::clone(&slot);
    let complete = move || {
        let waker = {
            let mut s = done.lock().expect("lock");
            s.0 = true;
            s.1.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    };
    let fut = std::future::poll_fn(move |cx| {
        let mut s = slot.lock().expect("lock");
        if s.0 {
            std::task::Poll::Ready(Ok(()))
        } else {
            s.1 = Some(cx.waker().clone());
            std::task::Poll::Pending
        }
    });
    (complete, Box::pin(fut))
}
