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
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use support::{
    assert_eof, connect, entered, get, poll_once, read_answer, slow_server, Flag, Gate, PATIENCE,
};

const LONG: Duration = Duration::from_secs(3600);

fn config(requests_done_timeout: Duration) -> ShutdownConfig {
    ShutdownConfig::default().run_by_signals(false).phase(
        Phase::SERVICE_REQUESTS_DONE,
        PhaseConfig::new().timeout(requests_done_timeout),
    )
}

fn system_of(config: ShutdownConfig) -> ActorSystem {
    ActorSystem::builder()
        .workers(2)
        .pin_workers(false)
        .coordinated_shutdown(config)
        .build()
        .expect("system")
}

fn system_with(requests_done_timeout: Duration) -> ActorSystem {
    system_of(config(requests_done_timeout))
}

/// What an observer task saw when its phase started.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    phase: &'static str,
    /// A new connection was accepted.
    port_open: bool,
    /// `when_termination_signal_issued` had completed.
    signal_issued: bool,
    /// Connections open (the observers' own probes of the port included).
    open_connections: usize,
    /// Requests in the handler.
    in_flight: usize,
    /// `when_terminated`'s outcome: `Some(forced_connections)` once over.
    terminated: Option<usize>,
}

/// What the observers saw, in the order they ran.
#[derive(Default)]
struct Log {
    seen: Mutex<Vec<Seen>>,
    changed: Condvar,
}

impl Log {
    fn push(&self, seen: Seen) {
        self.seen.lock().unwrap().push(seen);
        self.changed.notify_all();
    }

    /// Waits until `n` observers have run.
    fn wait_len(&self, n: usize) {
        let seen = self.seen.lock().unwrap();
        let (seen, timeout) = self
            .changed
            .wait_timeout_while(seen, PATIENCE, |s| s.len() < n)
            .unwrap();
        drop(seen);
        assert!(!timeout.timed_out(), "the observers did not run");
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

const OBSERVED: [&str; 5] = [
    Phase::BEFORE_SERVICE_UNBIND,
    Phase::SERVICE_UNBIND,
    Phase::SERVICE_REQUESTS_DONE,
    Phase::SERVICE_STOP,
    Phase::BEFORE_CLUSTER_SHUTDOWN,
];

/// An observer task in each phase of [`OBSERVED`]. Each runs concurrently
/// with the server's task of its own phase, so what it sees is asserted of
/// the phases before it only (or of what its phase's task cannot change
/// before the test lets it).
fn observe(cs: &CoordinatedShutdown, binding: &ServerBinding) -> Arc<Log> {
    observe_phases(cs, binding, &OBSERVED)
}

fn observe_phases(
    cs: &CoordinatedShutdown,
    binding: &ServerBinding,
    phases: &[&'static str],
) -> Arc<Log> {
    let log = Arc::new(Log::default());
    for &phase in phases {
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
                in_flight: binding.metrics().in_flight_requests,
                terminated: binding
                    .when_terminated()
                    .try_outcome()
                    .map(|o| o.unwrap().forced_connections),
            };
            log.push(seen);
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
/// steps: - stop accepting new connections (ServerBinding.unbind [...]) -
/// try to finish handling of ongoing requests until the
/// hardTerminationDeadline hits [...] - close open connections
/// (ServerBinding.terminate [...]) This recommended sequence can be added
/// to Akka’s coordinated shutdown via
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
    // The phase's observer has looked before the request is let finish.
    log.wait_len(3);
    gate.open();
    let a = read_answer(&mut busy);
    assert_eq!((a.status, a.header("connection")), (200, Some("close")));
    assert_eof(&mut busy);

    run.wait().expect("the run completes");
    system.when_terminated().wait();
    for task in ["http-unbind-", "http-terminate-", "http-shutdown-"] {
        assert_eq!(task_state(cs, task), TaskState::Done, "{task}");
    }
    let seen = log.seen();
    let phases: Vec<&str> = seen.iter().map(|s| s.phase).collect();
    assert_eq!(phases, OBSERVED);
    // Before the unbind: serving, no signal.
    assert!(seen[0].port_open && !seen[0].signal_issued);
    // After `service-unbind`: the port is closed; the open connection is
    // still served.
    assert!(!seen[2].port_open);
    assert_eq!(seen[2].in_flight, 1);
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
    // An application phase between the drain and the stop, to look at what
    // the drain left.
    const BETWEEN: &str = "between-drain-and-stop";
    let timeout = Duration::from_millis(100);
    let system = system_of(
        config(timeout)
            .phase(
                BETWEEN,
                PhaseConfig::new().depends_on(Phase::SERVICE_REQUESTS_DONE),
            )
            .phase(Phase::SERVICE_STOP, PhaseConfig::new().depends_on(BETWEEN)),
    );
    let (binding, entered_rx) = slow_server(&system, Gate::default());
    let cs = system.coordinated_shutdown();
    let log = observe_phases(cs, &binding, &[BETWEEN, Phase::BEFORE_CLUSTER_SHUTDOWN]);
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
    // The connection was still open after the drain, and closed by
    // `service-stop` with the deadline-exceeded response.
    let seen = log.seen();
    assert_eq!(seen[0].phase, BETWEEN);
    assert_eq!(
        (
            seen[0].open_connections,
            seen[0].in_flight,
            seen[0].terminated
        ),
        (1, 1, None)
    );
    assert_eq!(seen[1].terminated, Some(1));
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
