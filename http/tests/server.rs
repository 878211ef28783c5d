//! The server against a real client: raw requests over `std::net::TcpStream`.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use http::{Request, Response};
use proscenium::ActorSystem;
use proscenium_http::{Body, Http, ServerBinding};
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;
use support::{assert_eof, connect, read_answer, slow_server, system, Gate};

fn echo(system: &ActorSystem) -> ServerBinding {
    Http::bind(
        system,
        "127.0.0.1:0".parse().unwrap(),
        |req: Request<Body>| async move {
            if req.uri().path() == "/panic" {
                panic!("handler panics (expected by the test)");
            }
            let text = format!("{} {} {}", req.method(), req.uri().path(), req.body().len());
            Response::new(Body::from(text))
        },
    )
    .expect("bind")
}

#[test]
fn hello() {
    let system = system();
    let binding = echo(&system);
    let mut c = connect(&binding);
    c.write_all(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let a = read_answer(&mut c);
    assert_eq!(a.status, 200);
    assert_eq!(a.body, "GET /hello 0");
    assert_eq!(a.header("connection"), None);
    system.terminate().wait();
}

#[test]
fn keep_alive_serves_two_requests_on_one_connection() {
    let system = system();
    let binding = echo(&system);
    let mut c = connect(&binding);
    c.write_all(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
        .unwrap();
    assert_eq!(read_answer(&mut c).body, "POST /a 5");
    c.write_all(b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    assert_eq!(read_answer(&mut c).body, "GET /b 0");
    assert_eq!(binding.open_connections(), 1);
    system.terminate().wait();
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let system = system();
    let binding = echo(&system);
    let mut c = connect(&binding);
    c.write_all(
        b"GET /1 HTTP/1.1\r\nHost: x\r\n\r\n\
          POST /2 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n\
          GET /3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    assert_eq!(read_answer(&mut c).body, "GET /1 0");
    assert_eq!(read_answer(&mut c).body, "POST /2 5");
    let third = read_answer(&mut c);
    assert_eq!(third.body, "GET /3 0");
    assert_eq!(third.header("connection"), Some("close"));
    assert_eof(&mut c);
    system.terminate().wait();
}

#[test]
fn garbage_is_answered_400_and_the_connection_closes() {
    let system = system();
    let binding = echo(&system);
    let mut c = connect(&binding);
    c.write_all(b"GARBAGE\x01 NOT HTTP\r\n\r\n").unwrap();
    let a = read_answer(&mut c);
    assert_eq!(a.status, 400);
    assert_eq!(a.header("connection"), Some("close"));
    assert_eof(&mut c);
    system.terminate().wait();
}

#[test]
fn a_head_too_large_is_answered_431() {
    let system = system();
    let binding = echo(&system);
    let mut c = connect(&binding);
    let big = format!("GET / HTTP/1.1\r\nX-Big: {}\r\n\r\n", "a".repeat(20 * 1024));
    // The server may close before reading all of it: ignore a reset.
    let _ = c.write_all(big.as_bytes());
    assert_eq!(read_answer(&mut c).status, 431);
    system.terminate().wait();
}

#[test]
fn a_panicking_handler_is_answered_500_and_the_server_goes_on() {
    let system = system();
    let binding = echo(&system);
    let mut c = connect(&binding);
    c.write_all(b"GET /panic HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert_eq!(read_answer(&mut c).status, 500);
    c.write_all(b"GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert_eq!(read_answer(&mut c).body, "GET /after 0");
    let mut other = connect(&binding);
    other
        .write_all(b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert_eq!(read_answer(&mut other).status, 200);
    system.terminate().wait();
}

/// Akka: "unbind() causes the server to stop accepting new connections,
/// however any existing connections that are still being used will remain
/// active until the client chooses to close them."
#[test]
fn unbind_refuses_new_connections_and_keeps_open_ones() {
    let system = system();
    let binding = echo(&system);
    let mut open = connect(&binding);
    open.write_all(b"GET /before HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert_eq!(read_answer(&mut open).status, 200);
    binding.unbind().wait().expect("unbound");
    assert!(TcpStream::connect(binding.local_addr()).is_err());
    open.write_all(b"GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert_eq!(read_answer(&mut open).body, "GET /after 0");
    system.terminate().wait();
}

/// Akka: "if a connection has no “in-flight” request, it is terminated
/// immediately"; "if user code emits a response within the timeout, then
/// this response is sent to the client with a Connection: close header and
/// connection is closed."; "First, the server port is unbound and no new
/// connections will be accepted".
#[test]
fn terminate_finishes_the_in_flight_request_and_closes_idle_connections() {
    let system = system();
    let gate = Gate::default();
    let (binding, entered) = slow_server(&system, gate.clone());

    let mut idle = connect(&binding);
    idle.write_all(b"GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert_eq!(read_answer(&mut idle).status, 200);

    let mut busy = connect(&binding);
    busy.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    support::entered(&entered);

    let termination = binding.terminate(Duration::from_secs(60));
    // Idle: closed at once, while the slow request is still in flight.
    assert_eof(&mut idle);

    gate.open();
    let a = read_answer(&mut busy);
    assert_eq!(a.status, 200);
    assert_eq!(a.body, "GET /slow 0");
    assert_eq!(a.header("connection"), Some("close"));
    assert_eof(&mut busy);

    let terminated = termination.wait().expect("terminated");
    assert_eq!(terminated.forced_connections, 0);
    assert_eq!(binding.open_connections(), 0);
    // The termination completes after the port closed.
    assert!(TcpStream::connect(binding.local_addr()).is_err());
    system.terminate().wait();
}

/// Akka: "Finally, all remaining alive connections are forcefully
/// terminated once the hardDeadline is exceeded." (The handler still
/// running is answered with the deadline-exceeded response first: see
/// tests/termination.rs.)
#[test]
fn terminate_force_closes_what_is_left_at_the_deadline() {
    let system = system();
    let gate = Gate::default();
    let (binding, entered) = slow_server(&system, gate);
    let mut busy = connect(&binding);
    busy.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    support::entered(&entered);
    let terminated = binding
        .terminate(Duration::from_millis(50))
        .wait()
        .expect("terminated");
    assert_eq!(terminated.forced_connections, 1);
    let a = read_answer(&mut busy);
    assert_eq!(a.status, 503);
    assert_eq!(a.header("connection"), Some("close"));
    assert_eof(&mut busy);
    system.terminate().wait();
}
