//! `ServerBinding::add_to_coordinated_shutdown` in a real coordinated
//! shutdown run: observer tasks in the phases around the server's record
//! what they see, so the phase order and what each phase left behind are
//! asserted; a request is in flight during the run.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use proscenium::{
    ActorSystem, AddTaskError, CoordinatedShutdown, Phase, PhaseConfig, Reason, RunState,
    ShutdownConfig, TaskFailure, TaskState,
};
use proscenium_http::ServerBinding;
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{assert_eof, connect, entered, get, poll_once, read_answer, slow_server, Flag, Gate};

const LONG: Duration = Duration::from_secs(3600);

fn system_with(requests_done_timeout: Duration) -> ActorSystem {
    ActorSystem::builder()
        .workers(2)
        .pin_workers(false)
        .coordinated_shutdown(ShutdownConfig::default().run_by_signals(false).phase(
            Phase::SERVICE_REQUESTS_DONE,
            PhaseConfig::new().timeout(requests_done_timeout),
        ))
        .build()
        .expect("system")
}

/// What an observer task saw when its phase started.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    phase: &'static str,
    /// A new connection was accepted.
    port_open: bool,
    /// `when_termination_signal_issued` had completed.
    signal_issued: bool,
    open_connections: usize,
    /// `when_terminated`'s outcome: `Some(forced_connections)` once over.
    terminated: Option<usize>,
}

type Log = Arc<Mutex<Vec<Seen>>>;

const OBSERVED: [&str; 5] = [
    Phase::BEFORE_SERVICE_UNBIND,
    Phase::SERVICE_UNBIND,
    Phase::SERVICE_REQUESTS_DONE,
    Phase::SERVICE_STOP,
    Phase::BEFORE_CLUSTER_SHUTDOWN,
];

/// An observer task in each phase of [`OBSERVED`]. Each runs concurrently
/// with the server's task of its own phase, so what it sees is asserted of
/// the phases before it only.
fn observe(cs: &CoordinatedShutdown, binding: &ServerBinding) -> Log {
    let log = Log::default();
    for phase in OBSERVED {
        let (log, binding) = (Arc::clone(&log), binding.clone());
        cs.add_task(phase, &format!("observe-{phase}"), move || {
            let seen = Seen {
                phase,
                port_open: port_open(binding.local_addr()),
                signal_issued: poll_once(
                    &mut binding.when_termination_signal_issued(),
                    &Arc::new(Flag::default()),
                )
                .is_ready(),
                open_connections: binding.open_connections(),
                terminated: binding
                    .when_terminated()
                    .try_outcome()
                    .map(|o| o.unwrap().forced_connections),
            };
            log.lock().unwrap().push(seen);
            async { Ok(()) }
        })
        .unwrap();
    }
    log
}

/// Whether the server accepts a connection: loopback connects and refusals
/// are immediate, so this does not hold the worker it runs on.
fn port_open(addr: SocketAddr) -> bool {
    TcpStream::connect(addr).is_ok()
}

fn task_state(cs: &CoordinatedShutdown, name: &str) -> TaskState {
    cs.state()
        .tasks
        .into_iter()
        .find(|t| t.name.starts_with(name))
        .map(|t| t.state)
        .unwrap_or_else(|| panic!("no task {name}"))
}

/// Akka: "The recommended Akka HTTP server shutdown consists of three
/// steps: stop accepting new connections (ServerBinding.unbind) - try to
/// finish handling of ongoing requests until the hardTerminationDeadline
/// hits [...] - close open connections (ServerBinding.terminate). This
/// recommended sequence can be added to Akka’s coordinated shutdown via
/// ServerBinding.addToCoordinatedShutdown".
#[test]
fn a_coordinated_shutdown_unbinds_drains_and_stops_the_server_in_phase_order() {
    let system = system_with(Duration::from_secs(60));
    let gate = Gate::default();
    let (binding, entered_rx) = slow_server(&system, gate.clone());
    let cs = system.coordinated_shutdown();
    let log = observe(cs, &binding);
    binding.add_to_coordinated_shutdown(cs, LONG).unwrap();

    let mut busy = connect(&binding);
    get(&mut busy, "/slow");
    entered(&entered_rx);
    let run = cs.run(Reason::User("test".into()));

    // The drain started in `service-requests-done`, and the phase waits for
    // the request in flight.
    binding.when_termination_signal_issued().wait().unwrap();
    assert_eq!(
        cs.state().run,
        RunState::InPhase(Phase::SERVICE_REQUESTS_DONE.to_string())
    );
    assert!(matches!(
        task_state(cs, "http-terminate-"),
        TaskState::Running(_)
    ));
    assert!(run.wait_timeout(Duration::ZERO).is_none());
    gate.open();
    let a = read_answer(&mut busy);
    assert_eq!((a.status, a.header("connection")), (200, Some("close")));
    assert_eof(&mut busy);

    run.wait().expect("the run completes");
    system.when_terminated().wait();
    for task in ["http-unbind-", "http-terminate-", "http-shutdown-"] {
        assert_eq!(task_state(cs, task), TaskState::Done, "{task}");
    }
    let seen = log.lock().unwrap().clone();
    let phases: Vec<&str> = seen.iter().map(|s| s.phase).collect();
    assert_eq!(phases, OBSERVED);
    // Before the unbind: serving, no signal.
    assert!(seen[0].port_open && !seen[0].signal_issued);
    // After `service-unbind`: the port is closed; the open connection is
    // still served.
    assert!(!seen[2].port_open);
    assert_eq!(seen[2].open_connections, 1);
    // After `service-requests-done`: the drain is over (the request was
    // answered, its connection closed).
    assert!(seen[3].signal_issued);
    assert_eq!(seen[3].open_connections, 0);
    // After `service-stop`: terminated, nothing forced.
    assert_eq!(seen[4].terminated, Some(0));
}

/// Akka (terminate): "if user code does not reply with a response within
/// the deadline we produce a special [...]
/// terminationDeadlineExceededResponse"; in a coordinated shutdown the
/// hard deadline given to addToCoordinatedShutdown applies.
#[test]
fn the_hard_deadline_applies_in_a_coordinated_shutdown() {
    let system = system_with(Duration::from_secs(60));
    let (binding, entered_rx) = slow_server(&system, Gate::default());
    let cs = system.coordinated_shutdown();
    binding
        .add_to_coordinated_shutdown(cs, Duration::from_millis(100))
        .unwrap();
    let mut hung = connect(&binding);
    get(&mut hung, "/hang");
    entered(&entered_rx);

    cs.run(Reason::User("test".into())).wait().unwrap();
    let a = read_answer(&mut hung);
    assert_eq!((a.status, a.header("connection")), (503, Some("close")));
    assert_eof(&mut hung);
    assert_eq!(
        binding.when_terminated().wait().unwrap().forced_connections,
        1
    );
    assert_eq!(task_state(cs, "http-terminate-"), TaskState::Done);
    system.when_terminated().wait();
}

/// When `service-requests-done` times out before the hard deadline, the
/// drain is cut there: `service-stop` closes what is left at once instead
/// of holding the shutdown up until the deadline.
#[test]
fn service_stop_closes_what_a_timed_out_drain_left() {
    let timeout = Duration::from_millis(100);
    let system = system_with(timeout);
    let (binding, entered_rx) = slow_server(&system, Gate::default());
    let cs = system.coordinated_shutdown();
    let log = observe(cs, &binding);
    binding.add_to_coordinated_shutdown(cs, LONG).unwrap();
    let mut hung = connect(&binding);
    get(&mut hung, "/hang");
    entered(&entered_rx);

    cs.run(Reason::User("test".into())).wait().unwrap();
    assert_eq!(
        task_state(cs, "http-terminate-"),
        TaskState::Failed(TaskFailure::TimedOut(timeout))
    );
    assert_eq!(task_state(cs, "http-shutdown-"), TaskState::Done);
    // The connection was still open when `service-stop` started, and closed
    // by it with the deadline-exceeded response.
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen[3].phase, Phase::SERVICE_STOP);
    assert_eq!(seen[3].open_connections, 1);
    assert_eq!(seen[4].terminated, Some(1));
    let a = read_answer(&mut hung);
    assert_eq!(a.status, 503);
    assert_eof(&mut hung);
    system.when_terminated().wait();
}

/// Akka: "You may initiate the Akka shutdown via ActorSystem.terminate()":
/// the server's tasks run in that shutdown too.
#[test]
fn system_terminate_runs_the_servers_shutdown() {
    let system = system_with(Duration::from_secs(60));
    let gate = Gate::default();
    let (binding, entered_rx) = slow_server(&system, gate.clone());
    binding
        .add_to_coordinated_shutdown(system.coordinated_shutdown(), LONG)
        .unwrap();
    let mut busy = connect(&binding);
    get(&mut busy, "/slow");
    entered(&entered_rx);

    let termination = system.terminate();
    binding.when_termination_signal_issued().wait().unwrap();
    gate.open();
    let a = read_answer(&mut busy);
    assert_eq!((a.status, a.header("connection")), (200, Some("close")));
    termination.wait();
    assert_eq!(
        binding.when_terminated().wait().unwrap().forced_connections,
        0
    );
}

/// Added once the run started, the tasks would never run: a typed error.
#[test]
fn adding_to_a_started_shutdown_is_refused() {
    let system = system_with(Duration::from_secs(5));
    let (binding, _) = slow_server(&system, Gate::default());
    let cs = system.coordinated_shutdown();
    // Holds the run in its first phase until the binding tries to add.
    let gate = Gate::default();
    let held = gate.clone();
    cs.add_task(Phase::BEFORE_SERVICE_UNBIND, "hold", move || async move {
        held.await;
        Ok(())
    })
    .unwrap();
    let run = cs.run(Reason::User("test".into()));
    assert!(matches!(
        binding.add_to_coordinated_shutdown(cs, LONG),
        Err(AddTaskError::RunStarted { .. })
    ));
    gate.open();
    run.wait().unwrap();
    system.when_terminated().wait();
}
