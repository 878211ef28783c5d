//! Running a coordinated shutdown: tasks, phases, timeouts, recover,
//! enabled, idempotence, cancellation (akka-coordinated-shutdown.txt).
#![allow(clippy::unwrap_used)] // tests may unwrap

use std::future::poll_fn;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Barrier, Mutex};
use std::task::{Poll, Waker};
use std::time::Duration;

use proscenium_scheduler::Scheduler;
use proscenium_shutdown::{
    AddTaskError, CoordinatedShutdown, Phase, PhaseConfig, Reason, RunState, ShutdownConfig,
    ShutdownError, TaskFailure, TaskState,
};

/// Long enough never to fire unless something hangs.
const PATIENCE: Duration = Duration::from_secs(30);

fn scheduler() -> Scheduler {
    Scheduler::builder()
        .workers(2)
        .pin_workers(false)
        .build()
        .unwrap()
}

fn config() -> ShutdownConfig {
    ShutdownConfig::default().default_phase_timeout(PATIENCE)
}

fn shutdown(scheduler: &Scheduler, config: ShutdownConfig) -> CoordinatedShutdown {
    CoordinatedShutdown::new(config, scheduler.handle().clone()).unwrap()
}

/// A task that logs "<name> start" and "<name> end".
fn logging(cs: &CoordinatedShutdown, phase: &str, name: &'static str, log: &Sender<String>) {
    let log = log.clone();
    cs.add_task(phase, name, move || async move {
        log.send(format!("{name} start")).unwrap();
        log.send(format!("{name} end")).unwrap();
        Ok(())
    })
    .unwrap();
}

fn drain(rx: &Receiver<String>) -> Vec<String> {
    rx.try_iter().collect()
}

/// An async gate: futures wait until it is opened.
#[derive(Clone, Default)]
struct Gate(Arc<Mutex<(bool, Vec<Waker>)>>);

impl Gate {
    fn open(&self) {
        let wakers = {
            let mut g = self.0.lock().unwrap();
            g.0 = true;
            std::mem::take(&mut g.1)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    async fn passed(&self) {
        poll_fn(|cx| {
            let mut g = self.0.lock().unwrap();
            if g.0 {
                Poll::Ready(())
            } else {
                g.1.push(cx.waker().clone());
                Poll::Pending
            }
        })
        .await;
    }
}

/// A task that waits for `gate` (the test keeps the gate, so the task's
/// waker stays held, like a task stuck on real I/O).
fn stuck(cs: &CoordinatedShutdown, phase: &str, name: &str, gate: &Gate) {
    let gate = gate.clone();
    cs.add_task(phase, name, move || async move {
        gate.passed().await;
        Ok(())
    })
    .unwrap();
}

fn state_of(cs: &CoordinatedShutdown, name: &str) -> TaskState {
    let state = cs.state();
    state
        .tasks
        .into_iter()
        .find(|t| t.name == name)
        .unwrap()
        .state
}

/// "Tasks added to the same phase are executed in parallel without any
/// ordering assumptions. Next phase will not start until all tasks of
/// previous phase have been completed." — on a diamond: d runs after both
/// b and c, which both run after a.
#[test]
fn phases_of_a_diamond_run_after_everything_they_depend_on() {
    let s = scheduler();
    let config = config()
        .phase(
            "a",
            PhaseConfig::new().depends_on(Phase::BEFORE_SERVICE_UNBIND),
        )
        .phase("b", PhaseConfig::new().depends_on("a"))
        .phase("c", PhaseConfig::new().depends_on("a"))
        .phase("d", PhaseConfig::new().depends_on("b").depends_on("c"));
    let cs = shutdown(&s, config);
    let (tx, rx) = mpsc::channel();
    logging(&cs, "d", "d1", &tx);
    logging(&cs, "c", "c1", &tx);
    logging(&cs, "b", "b1", &tx);
    logging(&cs, "a", "a1", &tx);
    logging(&cs, Phase::BEFORE_SERVICE_UNBIND, "first", &tx);
    logging(&cs, Phase::ACTOR_SYSTEM_TERMINATE, "last", &tx);
    cs.run(Reason::Unknown)
        .wait_timeout(PATIENCE)
        .unwrap()
        .unwrap();
    let log = drain(&rx);
    let at = |e: &str| log.iter().position(|l| l == e).unwrap();
    assert!(at("first end") < at("a1 start"), "{log:?}");
    assert!(
        at("a1 end") < at("b1 start") && at("a1 end") < at("c1 start"),
        "{log:?}"
    );
    assert!(
        at("b1 end") < at("d1 start") && at("c1 end") < at("d1 start"),
        "{log:?}"
    );
    assert!(at("d1 end") < at("last start"), "{log:?}");
    assert_eq!(cs.state().run, RunState::Done);
}

/// "Tasks added to the same phase are executed in parallel without any
/// ordering assumptions." Two tasks that each wait for the other to have
/// started: run one after the other, the first would never finish.
#[test]
fn tasks_of_one_phase_run_concurrently() {
    let s = scheduler();
    let cs = shutdown(&s, config());
    let started = Arc::new(AtomicUsize::new(0));
    let both = Gate::default();
    for name in ["left", "right"] {
        let started = started.clone();
        let both = both.clone();
        cs.add_task(Phase::SERVICE_UNBIND, name, move || async move {
            if started.fetch_add(1, Ordering::SeqCst) == 1 {
                both.open();
            }
            both.passed().await;
            Ok(())
        })
        .unwrap();
    }
    cs.run(Reason::Unknown)
        .wait_timeout(PATIENCE)
        .unwrap()
        .unwrap();
    assert_eq!(state_of(&cs, "left"), TaskState::Done);
    assert_eq!(state_of(&cs, "right"), TaskState::Done);
}

/// "If tasks are not completed within a configured timeout (see
/// reference.conf) the next phase will be started anyway."
#[test]
fn a_phase_that_times_out_moves_on_to_the_next() {
    let s = scheduler();
    let config = config().phase(
        Phase::SERVICE_UNBIND,
        PhaseConfig::new()
            .depends_on(Phase::BEFORE_SERVICE_UNBIND)
            .timeout(Duration::from_millis(50)),
    );
    let cs = shutdown(&s, config);
    let (tx, rx) = mpsc::channel();
    let never = Gate::default();
    stuck(&cs, Phase::SERVICE_UNBIND, "stuck", &never);
    logging(&cs, Phase::SERVICE_STOP, "after", &tx);
    cs.run(Reason::Unknown)
        .wait_timeout(PATIENCE)
        .unwrap()
        .unwrap();
    assert_eq!(drain(&rx), ["after start", "after end"]);
    assert_eq!(
        state_of(&cs, "stuck"),
        TaskState::Failed(TaskFailure::TimedOut(Duration::from_millis(50)))
    );
    never.open();
}

/// A task whose future is dropped unfinished (nothing held its waker, so
/// nothing could ever wake it) is reported as such at once: the phase does
/// not sit out its timeout for it.
#[test]
fn a_task_that_can_never_be_woken_is_reported_dropped() {
    let s = scheduler();
    let cs = shutdown(&s, config());
    cs.add_task(Phase::SERVICE_UNBIND, "orphan", std::future::pending)
        .unwrap();
    cs.run(Reason::Unknown)
        .wait_timeout(PATIENCE)
        .unwrap()
        .unwrap();
    assert_eq!(
        state_of(&cs, "orphan"),
        TaskState::Failed(TaskFailure::Dropped)
    );
}

/// "It is possible to configure recover=off for a phase to abort the rest
/// of the shutdown process if a task fails or is not completed within the
/// timeout."
#[test]
fn recover_off_aborts_the_rest_and_names_phase_and_task() {
    let s = scheduler();
    let config = config().phase(
        Phase::SERVICE_UNBIND,
        PhaseConfig::new()
            .depends_on(Phase::BEFORE_SERVICE_UNBIND)
            .recover(false),
    );
    let cs = shutdown(&s, config);
    let (tx, rx) = mpsc::channel();
    cs.add_task(Phase::SERVICE_UNBIND, "unbind", || async {
        Err("port still bound".into())
    })
    .unwrap();
    logging(&cs, Phase::SERVICE_STOP, "after", &tx);
    let result = cs.run(Reason::Unknown).wait_timeout(PATIENCE).unwrap();
    assert_eq!(
        result,
        Err(ShutdownError::Aborted {
            phase: Phase::SERVICE_UNBIND.to_owned(),
            task: "unbind".to_owned(),
            cause: TaskFailure::Failed("port still bound".to_owned()),
        })
    );
    assert!(drain(&rx).is_empty(), "a later phase ran");
    assert_eq!(state_of(&cs, "after"), TaskState::Skipped);
    assert_eq!(
        cs.state().run,
        RunState::Aborted(Phase::SERVICE_UNBIND.to_owned())
    );
}

/// recover = off also aborts on a time-out ("...or is not completed within
/// the timeout").
#[test]
fn recover_off_aborts_on_a_timeout_too() {
    let s = scheduler();
    let config = config().phase(
        Phase::SERVICE_UNBIND,
        PhaseConfig::new()
            .depends_on(Phase::BEFORE_SERVICE_UNBIND)
            .recover(false)
            .timeout(Duration::from_millis(20)),
    );
    let cs = shutdown(&s, config);
    let never = Gate::default();
    stuck(&cs, Phase::SERVICE_UNBIND, "stuck", &never);
    let result = cs.run(Reason::Unknown).wait_timeout(PATIENCE).unwrap();
    assert!(
        matches!(&result, Err(ShutdownError::Aborted { task, cause: TaskFailure::TimedOut(_), .. }) if task == "stuck"),
        "{result:?}"
    );
    never.open();
}

/// "recover=off: If the phase fails the shutdown is aborted..."; with the
/// default (recover on), a failed or panicking task is logged and the
/// shutdown goes on.
#[test]
fn with_recover_on_failed_and_panicking_tasks_do_not_stop_the_run() {
    let s = scheduler();
    let cs = shutdown(&s, config());
    let (tx, rx) = mpsc::channel();
    cs.add_task(Phase::SERVICE_UNBIND, "fails", || async {
        Err("nope".into())
    })
    .unwrap();
    cs.add_task(Phase::SERVICE_UNBIND, "panics", || async {
        panic!("boom");
    })
    .unwrap();
    logging(&cs, Phase::SERVICE_STOP, "after", &tx);
    cs.run(Reason::Unknown)
        .wait_timeout(PATIENCE)
        .unwrap()
        .unwrap();
    assert_eq!(drain(&rx), ["after start", "after end"]);
    assert_eq!(
        state_of(&cs, "fails"),
        TaskState::Failed(TaskFailure::Failed("nope".to_owned()))
    );
    assert_eq!(
        state_of(&cs, "panics"),
        TaskState::Failed(TaskFailure::Panicked("boom".to_owned()))
    );
}

/// "enabled=off: Skip all tasks registered in this phase."
#[test]
fn a_disabled_phase_skips_its_tasks() {
    let s = scheduler();
    let config = config().phase(
        Phase::SERVICE_UNBIND,
        PhaseConfig::new()
            .depends_on(Phase::BEFORE_SERVICE_UNBIND)
            .enabled(false),
    );
    let cs = shutdown(&s, config);
    let (tx, rx) = mpsc::channel();
    logging(&cs, Phase::SERVICE_UNBIND, "skipped", &tx);
    logging(&cs, Phase::SERVICE_STOP, "after", &tx);
    cs.run(Reason::Unknown)
        .wait_timeout(PATIENCE)
        .unwrap()
        .unwrap();
    assert_eq!(drain(&rx), ["after start", "after end"]);
    assert_eq!(state_of(&cs, "skipped"), TaskState::Skipped);
}

/// "It's safe to call the run runAll method multiple times. It will only
/// run once." From 8 threads at once: one run, one execution of the task,
/// the same outcome for all, one reason.
#[test]
fn run_from_many_threads_runs_once() {
    let s = scheduler();
    let cs = shutdown(&s, config());
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    cs.add_task(Phase::BEFORE_SERVICE_UNBIND, "once", move || async move {
        counted.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })
    .unwrap();
    let barrier = Arc::new(Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let cs = cs.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let run = cs.run(Reason::User(format!("caller {i}").into()));
                run.wait_timeout(PATIENCE).unwrap()
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), Ok(()));
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(matches!(cs.reason(), Some(Reason::User(_))));
    // Later calls get the same, completed run, and the first reason stays.
    let first = cs.reason();
    assert_eq!(cs.run(Reason::Unknown).wait(), Ok(()));
    assert_eq!(cs.reason(), first);
}

/// "Tasks should typically be registered as early as possible after system
/// startup. When running the coordinated shutdown tasks that have been
/// registered will be performed but tasks that are added too late will not
/// be run." Here, add_task also says so.
#[test]
fn a_task_added_after_the_run_started_is_refused() {
    let s = scheduler();
    let cs = shutdown(&s, config());
    let gate = Gate::default();
    let held = gate.clone();
    cs.add_task(Phase::SERVICE_UNBIND, "holding", move || async move {
        held.passed().await;
        Ok(())
    })
    .unwrap();
    let run = cs.run(Reason::Unknown);
    assert_eq!(
        cs.add_task(Phase::ACTOR_SYSTEM_TERMINATE, "late", || async { Ok(()) }),
        Err(AddTaskError::RunStarted {
            phase: Phase::ACTOR_SYSTEM_TERMINATE.to_owned(),
            task: "late".to_owned()
        })
    );
    gate.open();
    run.wait_timeout(PATIENCE).unwrap().unwrap();
    assert!(cs.state().tasks.iter().all(|t| t.name != "late"));
}

#[test]
fn a_task_for_an_unknown_phase_is_refused() {
    let s = scheduler();
    let cs = shutdown(&s, config());
    assert_eq!(
        cs.add_task("no-such-phase", "t", || async { Ok(()) }),
        Err(AddTaskError::UnknownPhase("no-such-phase".to_owned()))
    );
}

/// "If cancellation of previously added tasks is required: ...
/// addCancellableTask ... c.cancel()": a cancelled task is not run;
/// cancelling after it ran does nothing.
#[test]
fn a_cancelled_task_is_not_run_and_cancel_after_the_run_is_a_no_op() {
    let s = scheduler();
    let cs = shutdown(&s, config());
    let (tx, rx) = mpsc::channel::<String>();
    let t1 = tx.clone();
    let cancelled = cs
        .add_cancellable_task(
            Phase::BEFORE_SERVICE_UNBIND,
            "cleanup",
            move || async move {
                t1.send("cleanup ran".to_owned()).unwrap();
                Ok(())
            },
        )
        .unwrap();
    let t2 = tx.clone();
    let kept = cs
        .add_cancellable_task(Phase::BEFORE_SERVICE_UNBIND, "kept", move || async move {
            t2.send("kept ran".to_owned()).unwrap();
            Ok(())
        })
        .unwrap();
    assert!(cancelled.cancel());
    assert!(!cancelled.cancel(), "second cancel");
    cs.run(Reason::Unknown)
        .wait_timeout(PATIENCE)
        .unwrap()
        .unwrap();
    assert_eq!(drain(&rx), ["kept ran"]);
    assert!(!kept.cancel(), "cancel after it ran");
    assert_eq!(state_of(&cs, "cleanup"), TaskState::Cancelled);
    assert_eq!(state_of(&cs, "kept"), TaskState::Done);
}

/// Running from a given phase onward skips the phases before it.
#[test]
fn run_from_a_phase_skips_the_earlier_ones() {
    let s = scheduler();
    let cs = shutdown(&s, config());
    let (tx, rx) = mpsc::channel();
    logging(&cs, Phase::SERVICE_UNBIND, "early", &tx);
    logging(&cs, Phase::SERVICE_STOP, "from", &tx);
    logging(&cs, Phase::ACTOR_SYSTEM_TERMINATE, "late", &tx);
    let run = cs.run_from(Reason::Unknown, Phase::SERVICE_STOP).unwrap();
    run.wait_timeout(PATIENCE).unwrap().unwrap();
    assert_eq!(
        drain(&rx),
        ["from start", "from end", "late start", "late end"]
    );
    assert_eq!(state_of(&cs, "early"), TaskState::Skipped);
    assert!(matches!(
        cs.run_from(Reason::Unknown, "nope"),
        Err(AddTaskError::UnknownPhase(_))
    ));
}

/// The state machine is visible: while a task holds a phase up, `state`
/// names the phase and shows the task running, with its duration so far.
#[test]
fn state_shows_the_phase_and_the_task_holding_it_up() {
    let s = scheduler();
    let cs = shutdown(&s, config());
    assert_eq!(cs.state().run, RunState::NotStarted);
    let gate = Gate::default();
    let held = gate.clone();
    let (tx, rx) = mpsc::channel();
    cs.add_task(Phase::SERVICE_REQUESTS_DONE, "drain", move || async move {
        tx.send(()).unwrap();
        held.passed().await;
        Ok(())
    })
    .unwrap();
    cs.add_task(Phase::SERVICE_REQUESTS_DONE, "quick", || async { Ok(()) })
        .unwrap();
    let run = cs.run(Reason::Signal(15));
    rx.recv_timeout(PATIENCE).unwrap();
    // A task is recorded as it ends, not when its phase ends: "quick"
    // shows Done while "drain" still holds the phase up.
    let deadline = std::time::Instant::now() + PATIENCE;
    while state_of(&cs, "quick") != TaskState::Done {
        assert!(std::time::Instant::now() < deadline, "{:?}", cs.state());
        std::thread::yield_now();
    }
    let state = cs.state();
    assert_eq!(
        state.run,
        RunState::InPhase(Phase::SERVICE_REQUESTS_DONE.to_owned())
    );
    assert_eq!(state.reason, Some(Reason::Signal(15)));
    let drain = state.tasks.iter().find(|t| t.name == "drain").unwrap();
    assert!(matches!(drain.state, TaskState::Running(_)), "{drain:?}");
    assert!(drain.duration.is_some());
    gate.open();
    run.wait_timeout(PATIENCE).unwrap().unwrap();
    let state = cs.state();
    assert_eq!(state.run, RunState::Done);
    assert_eq!(state_of(&cs, "drain"), TaskState::Done);
}

/// The run is a future as well: awaited on the scheduler's own `block_on`.
#[test]
fn the_run_can_be_awaited() {
    let s = scheduler();
    let cs = shutdown(&s, config());
    cs.add_task(Phase::SERVICE_STOP, "t", || async { Ok(()) })
        .unwrap();
    let run = cs.run(Reason::Unknown);
    assert_eq!(proscenium_scheduler::block_on(run.clone()), Ok(()));
    assert!(run.is_complete());
}
