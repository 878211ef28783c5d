//! Regression tests for defects a review found: chunk sizes and lengths
//! whose arithmetic overflowed (a remote panic), `Expect: 100-continue`
//! during a termination, and a handler's 1xx answer written as if it were
//! final. Each failed before its fix.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use http::{Request, Response, StatusCode};
use proscenium::ActorSystem;
use proscenium_http::{Body, Http, HttpTermination, ServerBinding, ServerSettings};
use std::io::Write;
use std::sync::mpsc;
use std::time::Duration;
use support::{
    assert_eof, capture, connect, get, read_answer, slow_server_with, system, Gate, PATIENCE,
};

const LONG: Duration = Duration::from_secs(3600);

/// Answers `"<path> <body length>"`; `/status/NNN` answers with that
/// status.
fn serve(system: &ActorSystem, settings: ServerSettings) -> ServerBinding {
    Http::bind_with(
        system,
        "127.0.0.1:0".parse().unwrap(),
        settings,
        |req: Request<Body>| async move {
            let path = req.uri().path().to_string();
            if let Some(code) = path.strip_prefix("/status/") {
                let mut response = Response::new(Body::from("informational?"));
                *response.status_mut() = StatusCode::from_bytes(code.as_bytes()).unwrap();
                return response;
            }
            Response::new(Body::from(format!("{path} {}", req.body().len())))
        },
    )
    .unwrap()
}

/// The server still serves a new connection (no panic took it down).
fn still_serves(binding: &ServerBinding) {
    let mut c = connect(binding);
    get(&mut c, "/next");
    assert_eq!(read_answer(&mut c).body, "/next 0");
}

/// Sends `request`, expects `status` with `Connection: close`, then EOF.
fn refused(binding: &ServerBinding, request: &[u8], status: u16) {
    let mut c = connect(binding);
    c.write_all(request).unwrap();
    let a = read_answer(&mut c);
    assert_eq!(a.status, status, "{:?}", String::from_utf8_lossy(request));
    assert_eq!(a.header("connection"), Some("close"));
    assert_eof(&mut c);
    still_serves(binding);
}

const CHUNKED: &[u8] = b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";

fn chunked(rest: &[u8]) -> Vec<u8> {
    [CHUNKED, rest].concat()
}

/// httparse takes chunk sizes of up to 16 hex digits (any u64): the sums
/// with them overflowed (a panic in a debug build; a wrapped length and a
/// panic on slicing in release). Each is refused with 413.
#[test]
fn chunk_sizes_of_16_hex_digits_are_answered_413() {
    let system = system();
    let binding = serve(&system, ServerSettings::default());
    // The largest size: beyond any limit.
    refused(&binding, &chunked(b"ffffffffffffffff\r\n"), 413);
    // Ten bytes in, then a size that brings the total to exactly 2^64
    // (`body.len() + size` wrapped to 0, under the limit).
    refused(
        &binding,
        &chunked(b"a\r\n0123456789\r\nfffffffffffffff6\r\n"),
        413,
    );
    refused(&binding, &chunked(b"8000000000000000\r\n"), 413);
    // Within 8 MiB by one byte too many, as a 16-digit size.
    refused(&binding, &chunked(b"0000000000800001\r\n"), 413);
    // A 17th digit is a malformed size.
    refused(&binding, &chunked(b"10000000000000000\r\n"), 400);

    // A limit as large as the caller likes: the size is within it, and the
    // end of the chunk in the buffer (`used + size + 2`) overflowed.
    let unlimited = serve(
        &system,
        ServerSettings::default().max_body_bytes(usize::MAX),
    );
    refused(&unlimited, &chunked(b"ffffffffffffffff\r\n"), 413);
    refused(&unlimited, &chunked(b"fffffffffffffffe\r\n"), 413);
    // ... and so did the head's length plus a Content-Length within it.
    refused(
        &unlimited,
        format!(
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
            usize::MAX
        )
        .as_bytes(),
        413,
    );
    // Small bodies are still served there.
    let mut c = connect(&unlimited);
    c.write_all(&chunked(b"3\r\nabc\r\n0\r\n\r\n")).unwrap();
    assert_eq!(read_answer(&mut c).body, "/c 3");
    system.terminate().wait();
}

/// Waits on a helper thread: fails the test after [`PATIENCE`] instead of
/// hanging it.
fn terminated_within_patience(termination: HttpTermination) -> proscenium_http::HttpTerminated {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(termination.wait());
    });
    rx.recv_timeout(PATIENCE)
        .expect("the termination completed in time")
        .unwrap()
}

/// Akka: "The existing connections will remain alive until the
/// hardDeadline is exceeded, yet no new requests will be delivered to the
/// user handler. All such drained responses will be replied to with an
/// termination response". A request whose head completes during the
/// termination and that waits for `100 Continue` gets the termination
/// response right after its head: before, no 100 was sent and the server
/// waited for the body the client was holding back (until the idle
/// timeout, then closed without a response).
#[test]
fn a_request_expecting_100_continue_during_termination_is_answered_at_once() {
    let system = system();
    let (binding, entered_rx) =
        slow_server_with(&system, ServerSettings::default(), Gate::default());
    let capture = capture();
    let mark = capture.mark();
    let mut c = connect(&binding);
    c.write_all(b"POST /slow HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n")
        .unwrap();
    capture.wait_event_on(mark, c.local_addr().unwrap(), "receiving a request");

    let termination = binding.terminate(LONG);
    c.write_all(b"\r\n").unwrap();
    // No 100 Continue, no wait for the body: the termination response.
    let a = read_answer(&mut c);
    assert_eq!(a.status, 503);
    assert_eq!(a.header("connection"), Some("close"));
    assert_eof(&mut c);
    assert!(entered_rx.try_recv().is_err());
    assert_eq!(
        terminated_within_patience(termination).forced_connections,
        0
    );
    let m = binding.metrics();
    assert_eq!(m.responses_with(StatusCode::SERVICE_UNAVAILABLE), 1);
    assert_eq!(m.responses_with(StatusCode::CONTINUE), 0);
    system.terminate().wait();
}

/// The same once the 100 was sent and the body is on its way: the request
/// has not reached the handler, so the termination answers it without
/// waiting for the rest of the body.
#[test]
fn a_body_still_coming_when_the_termination_starts_is_not_awaited() {
    let system = system();
    let (binding, entered_rx) =
        slow_server_with(&system, ServerSettings::default(), Gate::default());
    let mut c = connect(&binding);
    c.write_all(
        b"POST /slow HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
    )
    .unwrap();
    assert_eq!(read_answer(&mut c).status, 100);
    // Two bytes of five: the server, having sent the 100, waits for the
    // rest (whether or not these two are in yet).
    c.write_all(b"ab").unwrap();
    let termination = binding.terminate(LONG);
    let a = read_answer(&mut c);
    assert_eq!(a.status, 503);
    assert_eq!(a.header("connection"), Some("close"));
    assert_eof(&mut c);
    assert!(entered_rx.try_recv().is_err());
    assert_eq!(
        terminated_within_patience(termination).forced_connections,
        0
    );
    let m = binding.metrics();
    assert_eq!(m.responses_with(StatusCode::CONTINUE), 1);
    assert_eq!(m.responses_with(StatusCode::SERVICE_UNAVAILABLE), 1);
    assert_eq!(m.requests, 0);
    system.terminate().wait();
}

/// A 1xx from the handler is no final response: written as one, without
/// framing, it left the client waiting for the real answer on a
/// connection that carried on. It is answered 500, and the connection goes
/// on.
#[test]
fn a_handler_answering_1xx_is_answered_500() {
    let system = system();
    let binding = serve(&system, ServerSettings::default());
    let mut c = connect(&binding);
    for path in ["/status/101", "/status/100", "/status/199"] {
        get(&mut c, path);
        let a = read_answer(&mut c);
        assert_eq!(a.status, 500, "{path}");
        assert_eq!(a.header("content-length"), Some("0"));
        assert_eq!(a.header("connection"), None);
    }
    get(&mut c, "/after");
    assert_eq!(read_answer(&mut c).body, "/after 0");
    let m = binding.metrics();
    assert_eq!(m.responses_with(StatusCode::INTERNAL_SERVER_ERROR), 3);
    assert_eq!(m.responses_with(StatusCode::SWITCHING_PROTOCOLS), 0);
    assert_eq!(m.responses.informational, 0);
    system.terminate().wait();
}
