//! Each sentence of the Akka HTTP graceful-termination document
//! (shared/seeds/akka-http-graceful-termination.txt) about `unbind` and
//! `terminate`, as a test against a raw std client. The slow handler waits
//! on a gate the test opens; "in flight" is known from the handler's own
//! report; a request "arriving" is known from the connection's trace
//! event. No test sleeps: the short hard deadlines below are what is
//! tested, and every wait ends on an event.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use http::{Response, StatusCode};
use proscenium_http::{Body, HttpTermination, InvalidResponse, ServerSettings, TerminateError};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use support::{
    assert_eof, capture, connect, entered, get, poll_once, read_answer, slow_server,
    slow_server_with, system, Flag, Gate, PATIENCE,
};

const LONG: Duration = Duration::from_secs(3600);

/// Waits for a termination on a helper thread: fails the test after
/// [`PATIENCE`] instead of hanging it.
fn wait_within_patience(
    termination: HttpTermination,
) -> Result<proscenium_http::HttpTerminated, TerminateError> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(termination.wait());
    });
    rx.recv_timeout(PATIENCE)
        .expect("the termination completed in time")
}

/// Akka: "The first method, called unbind() causes the server to stop
/// accepting new connections, however any existing connections that are
/// still being used will remain active until the client chooses to close
/// them. It only unbinds the port on which the http server has been
/// listening."
#[test]
fn unbind_stops_accepting_and_leaves_existing_connections_served() {
    let system = system();
    let gate = Gate::default();
    let (binding, entered_rx) = slow_server(&system, gate.clone());
    let mut busy = connect(&binding);
    get(&mut busy, "/slow");
    assert_eq!(entered(&entered_rx), "/slow");
    let mut idle = connect(&binding);
    get(&mut idle, "/fast");
    assert_eq!(read_answer(&mut idle).status, 200);

    binding.unbind().wait().expect("unbound");
    assert!(TcpStream::connect(binding.local_addr()).is_err());
    // Only the port: no termination signal, the in-flight request is
    // answered as usual (no `Connection: close`) and both connections
    // keep serving.
    let mut signal = binding.when_termination_signal_issued();
    assert!(poll_once(&mut signal, &Arc::new(Flag::default())).is_pending());
    gate.open();
    let a = read_answer(&mut busy);
    assert_eq!((a.status, a.body.as_str()), (200, "GET /slow 0"));
    assert_eq!(a.header("connection"), None);
    for c in [&mut busy, &mut idle] {
        get(c, "/after");
        let a = read_answer(c);
        assert_eq!(a.body, "GET /after 0");
        assert_eq!(a.header("connection"), None);
    }
    assert_eq!(binding.open_connections(), 2);
    // Until the client closes them.
    drop(idle);
    drop(busy);
    let terminated = binding.terminate(LONG);
    assert_eq!(
        wait_within_patience(terminated).unwrap().forced_connections,
        0
    );
    system.terminate().wait();
}

/// Akka: "First, the server port is unbound and no new connections will be
/// accepted (same as invoking unbind()). Immediately the
/// ServerBinding#whenTerminationSignalIssued [...] Future is completed."
#[test]
fn terminate_unbinds_and_completes_the_termination_signal_at_once() {
    let system = system();
    let gate = Gate::default();
    let (binding, entered_rx) = slow_server(&system, gate.clone());
    let mut busy = connect(&binding);
    get(&mut busy, "/slow");
    entered(&entered_rx);

    let flag = Arc::new(Flag::default());
    let mut signal = binding.when_termination_signal_issued();
    assert!(poll_once(&mut signal, &flag).is_pending());

    let termination = binding.terminate(LONG);
    // Completed by the call itself, while a request is still in flight:
    // the waker has been woken and the deadline is the one given.
    assert!(flag.woken());
    let Poll::Ready(deadline) = poll_once(&mut signal, &flag) else {
        panic!("the termination signal is not issued");
    };
    assert!(!deadline.is_overdue());
    assert!(deadline.time_left() <= LONG);
    assert!(deadline.time_left() > LONG - PATIENCE);
    // A signal future made now is complete too, and the termination is not.
    assert_eq!(
        binding.when_termination_signal_issued().wait().unwrap(),
        deadline
    );
    assert!(termination.try_outcome().is_none());

    // No new connections: the port is closed (the unbind's future completes
    // once the listener is dropped).
    binding.unbind().wait().expect("unbound");
    assert!(TcpStream::connect(binding.local_addr()).is_err());

    gate.open();
    assert_eq!(read_answer(&mut busy).status, 200);
    assert_eq!(
        wait_within_patience(termination)
            .unwrap()
            .forced_connections,
        0
    );
    system.terminate().wait();
}

/// Akka: "if a connection has no “in-flight” request, it is terminated
/// immediately"
#[test]
fn connections_without_a_request_in_flight_are_closed_at_once() {
    let system = system();
    let gate = Gate::default();
    let (binding, entered_rx) = slow_server(&system, gate.clone());
    // Never used, and used once: both idle.
    let capture = capture();
    let mark = capture.mark();
    let mut fresh = connect(&binding);
    let mut used = connect(&binding);
    get(&mut used, "/fast");
    assert_eq!(read_answer(&mut used).status, 200);
    let mut busy = connect(&binding);
    get(&mut busy, "/slow");
    entered(&entered_rx);
    // `fresh` is accepted once its connection span exists.
    let fresh_peer = fresh.local_addr().unwrap();
    capture.wait_for(|r| r.connection(mark, fresh_peer).map(|_| ()));
    assert_eq!(binding.open_connections(), 3);

    let termination = binding.terminate(LONG);
    // Both idle connections close while the slow request is still in the
    // handler.
    assert_eof(&mut fresh);
    assert_eof(&mut used);
    assert!(termination.try_outcome().is_none());
    assert_eq!(binding.metrics().in_flight_requests, 1);
    // Counted (before the close the clients saw).
    assert_eq!(binding.metrics().idle_closed_by_termination, 2);

    gate.open();
    assert_eq!(read_answer(&mut busy).status, 200);
    assert_eq!(
        wait_within_patience(termination)
            .unwrap()
            .forced_connections,
        0
    );
    // The busy one was not idle.
    assert_eq!(binding.metrics().idle_closed_by_termination, 2);
    system.terminate().wait();
}

/// Akka: "Next, all in flight requests will be handled. If a request is
/// “in-flight” (being handled by user code), it is given hardDeadline time
/// to complete." and "if user code emits a response within the timeout,
/// then this response is sent to the client with a Connection: close
/// header and connection is closed."
#[test]
fn an_in_flight_response_is_sent_with_connection_close() {
    let system = system();
    let gate = Gate::default();
    let (binding, entered_rx) = slow_server(&system, gate.clone());
    let mut busy = connect(&binding);
    busy.write_all(b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
        .unwrap();
    entered(&entered_rx);

    let termination = binding.terminate(LONG);
    gate.open();
    let a = read_answer(&mut busy);
    assert_eq!(a.status, 200);
    assert_eq!(a.body, "POST /slow 3");
    assert_eq!(a.header("connection"), Some("close"));
    assert_eof(&mut busy);
    let terminated = wait_within_patience(termination).unwrap();
    assert_eq!(terminated.forced_connections, 0);
    system.terminate().wait();
}

/// Sends the head of a request but its last line, waits until the server
/// has received those bytes (the connection is then no longer idle), and
/// returns the connection.
fn half_a_request(binding: &proscenium_http::ServerBinding, path: &str) -> TcpStream {
    let capture = capture();
    let mark = capture.mark();
    let mut c = connect(binding);
    write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n").unwrap();
    capture.wait_event_on(mark, c.local_addr().unwrap(), "receiving a request");
    c
}

/// Akka: "During that time incoming requests continue to be served. The
/// existing connections will remain alive until the hardDeadline is
/// exceeded, yet no new requests will be delivered to the user handler.
/// All such drained responses will be replied to with an termination
/// response (as explained in step 2)." and "Note that the termination
/// response is configurable in ServerSettings, and by default is an 503
/// Service Unavailable, with an empty response entity."
#[test]
fn a_request_arriving_during_termination_gets_the_default_503() {
    let system = system();
    let (binding, entered_rx) = slow_server(&system, Gate::default());
    let mut late = half_a_request(&binding, "/slow-late");

    let termination = binding.terminate(LONG);
    // The connection is alive (not idle: part of a request came).
    late.write_all(b"\r\n").unwrap();
    let a = read_answer(&mut late);
    assert_eq!(a.status, 503);
    assert_eq!(a.body, "");
    assert_eq!(a.header("content-length"), Some("0"));
    assert_eq!(a.header("connection"), Some("close"));
    assert_eof(&mut late);
    // Not delivered to the handler.
    assert!(entered_rx.try_recv().is_err());
    let metrics = binding.metrics();
    assert_eq!(metrics.requests, 0);
    assert_eq!(metrics.responses.server_error, 1);
    assert_eq!(
        wait_within_patience(termination)
            .unwrap()
            .forced_connections,
        0
    );
    system.terminate().wait();
}

/// Akka: "[terminate] not only performs the unbinding, but also handles
/// replying to new incoming requests with (configurable) “terminating”
/// HTTP responses." and "Note that the termination response is
/// configurable in ServerSettings".
#[test]
fn the_termination_response_is_configurable() {
    let system = system();
    let mut goodbye = Response::new(Body::from("gone fishing"));
    *goodbye.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    goodbye
        .headers_mut()
        .insert("retry-after", "7".parse().unwrap());
    // The server's own `Connection: close` wins over the response's.
    goodbye
        .headers_mut()
        .insert("connection", "keep-alive".parse().unwrap());
    let settings = ServerSettings::default()
        .termination_response(goodbye)
        .unwrap();
    let (binding, entered_rx) = slow_server_with(&system, settings, Gate::default());
    let mut late = half_a_request(&binding, "/slow-late");

    let termination = binding.terminate(LONG);
    late.write_all(b"\r\n").unwrap();
    let a = read_answer(&mut late);
    assert_eq!(a.status, 503);
    assert_eq!(a.body, "gone fishing");
    assert_eq!(a.header("retry-after"), Some("7"));
    assert_eq!(a.header("connection"), Some("close"));
    assert_eof(&mut late);
    assert!(entered_rx.try_recv().is_err());
    wait_within_patience(termination).unwrap();
    system.terminate().wait();
}

/// A 1xx termination response would not be a final answer: refused with a
/// typed error.
#[test]
fn an_informational_termination_response_is_refused() {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::CONTINUE;
    let err = ServerSettings::default()
        .termination_response(response)
        .unwrap_err();
    assert_eq!(err, InvalidResponse::Informational(StatusCode::CONTINUE));
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    assert!(ServerSettings::default()
        .termination_deadline_exceeded_response(response)
        .is_err());
}

/// The termination response is sent to every late request, and a streamed
/// body could be sent only once: refused with a typed error.
#[test]
fn a_streamed_termination_response_is_refused() {
    struct Never;
    impl futures_core::Stream for Never {
        type Item = Result<Vec<u8>, std::io::Error>;
        fn poll_next(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            std::task::Poll::Pending
        }
    }
    let response = Response::new(Body::from_stream(Never));
    let err = ServerSettings::default()
        .termination_response(response)
        .unwrap_err();
    assert_eq!(err, InvalidResponse::Streamed);
    let response = Response::new(Body::from_stream(Never));
    assert_eq!(
        ServerSettings::default()
            .termination_deadline_exceeded_response(response)
            .unwrap_err(),
        InvalidResponse::Streamed
    );
}

/// Akka: "if user code does not reply with a response within the deadline
/// we produce a special [...] terminationDeadlineExceededResponse HTTP
/// response (e.g. 503 Service Unavailable) with a Connection: close header
/// and close connection."
#[test]
fn a_handler_missing_the_deadline_gets_the_deadline_exceeded_response() {
    let system = system();
    let (binding, entered_rx) = slow_server(&system, Gate::default());
    let mut hung = connect(&binding);
    get(&mut hung, "/hang");
    entered(&entered_rx);

    let terminated = wait_within_patience(binding.terminate(Duration::from_millis(100))).unwrap();
    assert_eq!(terminated.forced_connections, 1);
    let a = read_answer(&mut hung);
    assert_eq!(a.status, 503);
    assert_eq!(a.body, "");
    assert_eq!(a.header("connection"), Some("close"));
    assert_eof(&mut hung);
    let metrics = binding.metrics();
    assert_eq!(metrics.requests, 1);
    assert_eq!(metrics.in_flight_requests, 0);
    assert_eq!(metrics.responses.server_error, 1);
    system.terminate().wait();
}

/// The deadline-exceeded response is configurable (Akka's
/// `termination-deadline-exceeded-response`).
#[test]
fn the_deadline_exceeded_response_is_configurable() {
    let system = system();
    let mut late = Response::new(Body::from("too slow"));
    *late.status_mut() = StatusCode::GATEWAY_TIMEOUT;
    let settings = ServerSettings::default()
        .termination_deadline_exceeded_response(late)
        .unwrap();
    let (binding, entered_rx) = slow_server_with(&system, settings, Gate::default());
    let mut hung = connect(&binding);
    get(&mut hung, "/hang");
    entered(&entered_rx);

    wait_within_patience(binding.terminate(Duration::from_millis(50))).unwrap();
    let a = read_answer(&mut hung);
    assert_eq!(a.status, 504);
    assert_eq!(a.body, "too slow");
    assert_eq!(a.header("connection"), Some("close"));
    assert_eof(&mut hung);
    system.terminate().wait();
}

/// Akka: "existing streaming responses must complete before the deadline
/// as well. When the deadline is reached the connection will be terminated
/// regardless of status of the streaming responses." Here the response
/// being written is one large body to a client that does not read: at the
/// deadline it is cut and the connection closed.
#[test]
fn a_response_still_being_written_at_the_deadline_is_cut() {
    const BIG: usize = 64 * 1024 * 1024; // more than any socket buffer
    let system = system();
    let binding = proscenium_http::Http::bind(
        &system,
        "127.0.0.1:0".parse().unwrap(),
        |_: http::Request<Body>| async { Response::new(Body::from(vec![b'x'; BIG])) },
    )
    .unwrap();
    let capture = capture();
    let mark = capture.mark();
    let mut reader = connect(&binding);
    get(&mut reader, "/big");
    let peer = reader.local_addr().unwrap();
    // The handler has answered (its span has a status): the server is
    // writing the body, which the client does not read.
    capture.wait_for(|r| {
        r.requests_on(mark, peer)
            .first()
            .and_then(|s| s.fields.get("status").cloned())
    });

    let terminated = wait_within_patience(binding.terminate(Duration::from_millis(50))).unwrap();
    assert_eq!(terminated.forced_connections, 1);
    let mut received = Vec::new();
    // EOF or a reset; a read timeout means the connection stayed open.
    match reader.read_to_end(&mut received) {
        Ok(_) => {}
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
            ) => {}
        Err(e) => panic!("the connection was not closed at the deadline: {e}"),
    }
    assert!(received.len() < BIG, "the whole body arrived");
    system.terminate().wait();
}

/// Akka: "Finally, all remaining alive connections are forcefully
/// terminated once the hardDeadline is exceeded. The whenTerminated
/// (exposed by ServerBinding) [...] future is completed as well, so the
/// graceful termination (of the ActorSystem or entire JVM itself can be
/// safely performed, as by then it is known that no connections remain
/// alive to this server)."
#[test]
fn when_terminated_completes_with_http_terminated_after_the_forced_close() {
    let system = system();
    let (binding, entered_rx) = slow_server(&system, Gate::default());
    // Taken before the termination starts: pending until it is over.
    let flag = Arc::new(Flag::default());
    let mut when_terminated = binding.when_terminated();
    assert!(poll_once(&mut when_terminated, &flag).is_pending());
    let mut hung = [connect(&binding), connect(&binding)];
    for c in &mut hung {
        get(c, "/hang");
        entered(&entered_rx);
    }

    drop(binding.terminate(Duration::from_millis(50)));
    let terminated = wait_within_patience(when_terminated).unwrap();
    assert_eq!(terminated.forced_connections, 2);
    assert!(flag.woken());
    // No connection remains alive, and the port is closed.
    assert_eq!(binding.open_connections(), 0);
    assert_eq!(binding.metrics().open_connections, 0);
    assert!(TcpStream::connect(binding.local_addr()).is_err());
    for c in &mut hung {
        assert_eq!(read_answer(c).status, 503);
        assert_eof(c);
    }
    system.terminate().wait();
}

/// `terminate` is idempotent: a second call starts no second termination
/// (its longer deadline is not used) and completes with the same outcome,
/// also once the termination is over.
#[test]
fn terminate_twice_gives_the_same_outcome() {
    let system = system();
    let (binding, entered_rx) = slow_server(&system, Gate::default());
    let mut hung = connect(&binding);
    get(&mut hung, "/hang");
    entered(&entered_rx);

    let first = binding.terminate(Duration::from_millis(50));
    let second = binding.terminate(LONG);
    let deadline = binding.when_termination_signal_issued().wait().unwrap();
    assert!(deadline.time_left() <= Duration::from_millis(50));
    let second = wait_within_patience(second).unwrap();
    assert_eq!(second.forced_connections, 1);
    assert_eq!(wait_within_patience(first).unwrap(), second);
    // Over: a third call answers at once, with the same outcome.
    let third = binding.terminate(LONG);
    assert_eq!(third.try_outcome(), Some(Ok(second)));
    assert_eq!(read_answer(&mut hung).status, 503);
    system.terminate().wait();
}

/// A termination the actor system outlives not: its task is dropped with
/// the workers, and its futures fail with `SystemTerminated` instead of
/// hanging.
#[test]
fn a_termination_cut_by_the_system_terminating_fails_its_futures() {
    let system = system();
    let (binding, entered_rx) = slow_server(&system, Gate::default());
    let mut hung = connect(&binding);
    get(&mut hung, "/hang");
    entered(&entered_rx);
    let termination = binding.terminate(LONG);
    system.terminate().wait();
    assert_eq!(
        wait_within_patience(termination),
        Err(TerminateError::SystemTerminated)
    );
    assert_eq!(
        binding.when_terminated().wait(),
        Err(TerminateError::SystemTerminated)
    );
}

/// A hard deadline beyond the clock's range is no error: it never passes,
/// and a server with nothing to drain terminates at once.
#[test]
fn an_absurd_deadline_never_passes() {
    let system = system();
    let (binding, _) = slow_server(&system, Gate::default());
    let termination = binding.terminate(Duration::MAX);
    let deadline = binding.when_termination_signal_issued().wait().unwrap();
    assert!(!deadline.is_overdue());
    assert_eq!(deadline.time_left(), Duration::MAX);
    assert_eq!(deadline.instant(), None);
    assert_eq!(
        wait_within_patience(termination)
            .unwrap()
            .forced_connections,
        0
    );
    system.terminate().wait();
}

/// The termination's futures awaited in tasks on the system's own workers
/// (where `wait` must not be used): woken by the termination.
#[test]
fn the_termination_futures_can_be_awaited_on_the_workers() {
    let system = system();
    let gate = Gate::default();
    let (binding, entered_rx) = slow_server(&system, gate.clone());
    let mut busy = connect(&binding);
    get(&mut busy, "/slow");
    entered(&entered_rx);
    let (signal, terminated) = (
        binding.when_termination_signal_issued(),
        binding.when_terminated(),
    );
    let (tx, rx) = mpsc::channel();
    let signalled = system.spawn_task(async move {
        let deadline = signal.await;
        tx.send(()).unwrap();
        deadline
    });
    let over = system.spawn_task(terminated);
    drop(binding.terminate(LONG));
    rx.recv_timeout(PATIENCE).expect("the signal task ran");
    assert!(!signalled.wait().unwrap().is_overdue());
    gate.open();
    assert_eq!(read_answer(&mut busy).status, 200);
    let outcome = over.wait().unwrap().unwrap();
    assert_eq!(outcome.forced_connections, 0);
    system.terminate().wait();
}

/// A termination started after the system terminated completes at once
/// with `SystemTerminated` (its task is never run), also for a future
/// polled on another executor, which has no system task to lose.
#[test]
fn a_termination_started_after_the_system_terminated_fails_at_once() {
    let system = system();
    let (binding, _) = slow_server(&system, Gate::default());
    system.terminate().wait();
    let mut termination = binding.terminate(LONG);
    assert_eq!(
        poll_once(&mut termination, &Arc::new(Flag::default())),
        Poll::Ready(Err(TerminateError::SystemTerminated))
    );
    assert_eq!(termination.wait(), Err(TerminateError::SystemTerminated));
}

/// A streamed body: `"first "`, then (once `gate` opens) `"second"`.
struct Gated {
    gate: Gate,
    step: u8,
}

impl futures_core::Stream for Gated {
    type Item = Result<&'static [u8], std::io::Error>;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        match self.step {
            0 => {
                self.step = 1;
                Poll::Ready(Some(Ok(b"first ")))
            }
            1 => {
                std::task::ready!(std::future::Future::poll(
                    std::pin::Pin::new(&mut self.gate),
                    cx
                ));
                self.step = 2;
                Poll::Ready(Some(Ok(b"second")))
            }
            _ => Poll::Ready(None),
        }
    }
}

/// Reads a response head (up to its empty line) off `c`.
fn read_head(c: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(c.read(&mut byte).unwrap(), 1, "EOF in a response head");
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap().to_ascii_lowercase()
}

/// Reads exactly `expected.len()` bytes off `c` and compares them.
fn read_exactly(c: &mut TcpStream, expected: &[u8]) {
    let mut got = vec![0u8; expected.len()];
    c.read_exact(&mut got).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expected)
    );
}

/// Akka: "It only unbinds the port on which the http server has been
/// listening. This allows HTTP server to finish streaming any responses
/// that might be still in flight and eventually terminate the entire
/// system." A streamed response half written when `unbind()` is called
/// completes in full, with its last chunk and without `Connection: close`,
/// and its connection goes on serving.
#[test]
fn a_response_streaming_across_unbind_completes_in_full() {
    let system = system();
    let gate = Gate::default();
    let stream_gate = gate.clone();
    let binding = proscenium_http::Http::bind(
        &system,
        "127.0.0.1:0".parse().unwrap(),
        move |_: http::Request<Body>| {
            let gate = stream_gate.clone();
            async move { Response::new(Body::from_stream(Gated { gate, step: 0 })) }
        },
    )
    .unwrap();
    let mut c = connect(&binding);
    get(&mut c, "/stream");
    let head = read_head(&mut c);
    assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
    assert!(head.contains("transfer-encoding: chunked\r\n"), "{head}");
    assert!(!head.contains("connection:"), "{head}");
    // The first piece is out; the stream waits on the gate: in flight.
    read_exactly(&mut c, b"6\r\nfirst \r\n");

    binding.unbind().wait().expect("unbound");
    assert!(TcpStream::connect(binding.local_addr()).is_err());
    gate.open();
    // The rest of the body, and its end.
    read_exactly(&mut c, b"6\r\nsecond\r\n0\r\n\r\n");
    // The connection is untouched: it serves the next request.
    get(&mut c, "/again");
    let head = read_head(&mut c);
    assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
    read_exactly(&mut c, b"6\r\nfirst \r\n6\r\nsecond\r\n0\r\n\r\n");
    assert_eq!(binding.metrics().responses_with(StatusCode::OK), 2);
    drop(c);
    assert_eq!(
        wait_within_patience(binding.terminate(LONG))
            .unwrap()
            .forced_connections,
        0
    );
    system.terminate().wait();
}
