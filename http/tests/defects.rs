//! Regression tests for defects a review found: chunk sizes and lengths
//! whose arithmetic overflowed (a remote panic), `Expect: 100-continue`
//! during a termination, the missing lingering close (a reset that
//! destroyed the last response), and a handler's 1xx answer written as if
//! it were final. Each failed before its fix.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use http::{Request, Response, StatusCode};
use proscenium::ActorSystem;
use proscenium_http::{Body, Http, HttpTermination, ServerBinding, ServerSettings};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
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

/// A request body larger than the socket buffers on both sides.
const BIG: usize = 16 * 1024 * 1024;

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

/// Writes all of `bytes`; fails the test if the server resets the
/// connection (or it breaks) before it took them all.
fn write_all_or_reset(c: &mut TcpStream, bytes: &[u8]) {
    if let Err(e) = c.write_all(bytes) {
        panic!("the server reset the connection while the client was still sending: {e}");
    }
}

/// Reads to EOF: the close must be an EOF after the response, not a reset.
fn assert_clean_eof(c: &mut TcpStream) {
    let mut rest = Vec::new();
    match c.read_to_end(&mut rest) {
        Ok(_) => assert!(rest.is_empty(), "more bytes: {}", rest.len()),
        Err(e) => panic!("not a clean close: {e}"),
    }
}

/// A body over the limit, sent in full (more than the socket buffers hold)
/// with requests pipelined behind it, by a client that reads only once it
/// has written everything (as simple clients do): it gets the whole 413,
/// then EOF. Before the lingering close the server closed with the unread
/// body in its socket, which sent a reset: the client's write failed and
/// the answer was lost to it.
#[test]
fn a_refused_body_sent_in_full_still_gets_the_whole_refusal() {
    let system = system();
    let binding = serve(&system, ServerSettings::default().max_body_bytes(16));
    let mut c = connect(&binding);
    let mut request =
        format!("POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: {BIG}\r\n\r\n").into_bytes();
    request.extend(std::iter::repeat_n(b'b', BIG));
    for _ in 0..3 {
        request.extend_from_slice(b"GET /pipelined HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    write_all_or_reset(&mut c, &request);
    let a = read_answer(&mut c);
    assert_eq!(a.status, 413);
    assert_eq!(a.header("connection"), Some("close"));
    assert_clean_eof(&mut c);
    drop(c);
    // The client closed: the linger is over and the connection gone.
    assert_eq!(
        terminated_within_patience(binding.terminate(LONG)).forced_connections,
        0
    );
    system.terminate().wait();
}

/// The same for a malformed request (400) followed by much more input.
#[test]
fn garbage_followed_by_much_more_still_gets_the_whole_400() {
    let system = system();
    let binding = serve(&system, ServerSettings::default());
    let mut c = connect(&binding);
    let mut request = b"NOT HTTP AT ALL\r\n\r\n".to_vec();
    request.extend(std::iter::repeat_n(b'g', BIG));
    write_all_or_reset(&mut c, &request);
    let a = read_answer(&mut c);
    assert_eq!(a.status, 400);
    assert_clean_eof(&mut c);
    system.terminate().wait();
}

/// A handler's response that closes the connection, with a request
/// pipelined behind it that the server has not read, to a client whose
/// small receive buffer leaves part of the response in the server's send
/// queue when the server is done writing: closing then (with unread bytes)
/// sent a reset, which discarded that part of the response; lingering
/// lets all of it arrive.
#[test]
fn a_closing_response_with_a_pipelined_request_behind_it_arrives_whole() {
    let system = system();
    let binding = Http::bind(
        &system,
        "127.0.0.1:0".parse().unwrap(),
        |_: Request<Body>| async move {
            let mut response = Response::new(Body::from(vec![b'x'; CLOSING]));
            response
                .headers_mut()
                .insert("connection", "close".parse().unwrap());
            response
        },
    )
    .unwrap();
    let capture = capture();
    let mark = capture.mark();
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    // The smallest the kernel allows (a few KiB).
    socket.set_recv_buffer_size(1).unwrap();
    socket.connect(&binding.local_addr().into()).unwrap();
    let mut c = TcpStream::from(socket);
    c.set_read_timeout(Some(PATIENCE)).unwrap();
    let peer = c.local_addr().unwrap();
    let mut requests = b"GET /close HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
    // More than the server reads at a time (8 KiB): most of it stays in
    // the socket, unread.
    let body = 64 * 1024;
    requests.extend_from_slice(
        format!("POST /after HTTP/1.1\r\nHost: x\r\nContent-Length: {body}\r\n\r\n").as_bytes(),
    );
    requests.extend(std::iter::repeat_n(b'p', body));
    write_all_or_reset(&mut c, &requests);
    // The server is done writing (it closed, or it lingers) before the
    // client reads a byte.
    capture.wait_for(|r| {
        let closed = r.connection(mark, peer).is_some_and(|(_, s)| s.closed());
        let lingering = r.events_on(mark, peer).into_iter().any(|e| {
            e.fields.get("message").map(String::as_str) == Some("lingering after the last response")
        });
        (closed || lingering).then_some(())
    });
    let a = read_answer(&mut c);
    assert_eq!(a.status, 200);
    assert_eq!(a.header("connection"), Some("close"));
    assert_eq!(a.body.len(), CLOSING);
    assert_clean_eof(&mut c);
    system.terminate().wait();
}

/// More than the client's smallest receive buffer holds, less than that
/// plus the server's initial send buffer (16 KiB, tcp_wmem).
const CLOSING: usize = 6 * 1024;

/// A client that neither sends nor closes after the last response: the
/// linger ends at the linger timeout and the connection is gone.
#[test]
fn lingering_ends_at_the_linger_timeout() {
    let system = system();
    let binding = serve(
        &system,
        ServerSettings::default().linger_timeout(Duration::from_millis(100)),
    );
    let capture = capture();
    let mark = capture.mark();
    let mut c = connect(&binding);
    let peer = c.local_addr().unwrap();
    c.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(read_answer(&mut c).body, "/a 0");
    assert_eof(&mut c);
    // The connection's span closes when its task is over: after the linger.
    capture.wait_for(|r| {
        r.connection(mark, peer)
            .filter(|(_, s)| s.closed())
            .map(|_| ())
    });
    assert_eq!(binding.open_connections(), 0);
    assert_eq!(binding.metrics().open_connections, 0);
    drop(c);
    system.terminate().wait();
}

/// A lingering connection holds its place in the server until the client
/// closes (it is still open); a termination closes it at once when it has
/// nothing to read (Akka: "if a connection has no “in-flight” request, it
/// is terminated immediately"), so the termination completes.
#[test]
fn a_termination_closes_a_quiet_lingering_connection() {
    let system = system();
    let binding = serve(&system, ServerSettings::default());
    let mut c = connect(&binding);
    c.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(read_answer(&mut c).body, "/a 0");
    assert_eof(&mut c);
    assert_eq!(binding.open_connections(), 1);
    let terminated = terminated_within_patience(binding.terminate(LONG));
    assert_eq!(terminated.forced_connections, 0);
    assert_eq!(binding.open_connections(), 0);
    drop(c);
    system.terminate().wait();
}

/// A client that keeps sending after its last response keeps the server
/// lingering (reading and discarding) until the hard deadline, which
/// closes it: the termination completes, and the client's writes fail.
#[test]
fn the_hard_deadline_cuts_a_lingering_connection() {
    let system = system();
    let binding = serve(&system, ServerSettings::default());
    let mut c = connect(&binding);
    c.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(read_answer(&mut c).body, "/a 0");
    let mut writer = c.try_clone().unwrap();
    let flood = std::thread::spawn(move || {
        let junk = vec![b'j'; 64 * 1024];
        loop {
            if let Err(e) = writer.write_all(&junk) {
                return e.kind();
            }
        }
    });
    // Whether the server sees a pause in the flood (and closes the quiet
    // connection) or the hard deadline comes first, the termination ends
    // and so does the flood.
    let terminated = terminated_within_patience(binding.terminate(Duration::from_millis(100)));
    assert!(terminated.forced_connections <= 1);
    let kind = flood.join().unwrap();
    assert!(
        matches!(kind, ErrorKind::ConnectionReset | ErrorKind::BrokenPipe),
        "{kind:?}"
    );
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
