//! The server's counters (`ServerBinding::metrics`) and its tracing spans
//! (one per connection with its id and peer, one per request with method,
//! path and status, the handler running inside it), against a raw std
//! client and a recording subscriber.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use http::{Request, Response, StatusCode};
use proscenium_http::{Body, Http, ServerBinding, ServerMetrics};
use std::io::Write;
use std::time::Duration;
use support::{assert_eof, capture, connect, entered, get, read_answer, slow_server, system, Gate};

/// Answers by path: `/status/NNN` with that status, `/panic` panics,
/// `/traced` logs from inside the handler, anything else 200.
fn by_path(system: &proscenium::ActorSystem) -> ServerBinding {
    Http::bind(
        system,
        "127.0.0.1:0".parse().unwrap(),
        |req: Request<Body>| async move {
            let path = req.uri().path().to_string();
            if path == "/panic" {
                panic!("handler panics (expected by the test)");
            }
            if path == "/traced" {
                tracing::info!(target: "proscenium_http::test_handler", "inside the handler");
            }
            let status = path
                .strip_prefix("/status/")
                .map(|code| StatusCode::from_bytes(code.as_bytes()).unwrap())
                .unwrap_or(StatusCode::OK);
            let mut response = Response::new(Body::from(path));
            *response.status_mut() = status;
            response
        },
    )
    .unwrap()
}

#[test]
fn the_counters_count_connections_requests_and_responses_by_class_and_status() {
    let system = system();
    let binding = by_path(&system);
    assert_eq!(binding.metrics(), ServerMetrics::default());

    let mut c = connect(&binding);
    for path in [
        "/ok",
        "/status/204",
        "/status/302",
        "/status/404",
        "/status/418",
        "/status/503",
        "/panic",
    ] {
        get(&mut c, path);
        read_answer(&mut c);
    }
    c.write_all(b"POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody")
        .unwrap();
    assert_eq!(read_answer(&mut c).status, 200);
    let m = binding.metrics();
    assert_eq!(m.connections_accepted, 1);
    assert_eq!(m.open_connections, 1);
    assert_eq!(m.requests, 8);
    assert_eq!(m.in_flight_requests, 0);
    assert_eq!(m.responses.informational, 0);
    assert_eq!(m.responses.success, 3);
    assert_eq!(m.responses.redirection, 1);
    assert_eq!(m.responses.client_error, 2);
    // The 503 the handler chose and the 500 of its panic.
    assert_eq!(m.responses.server_error, 2);
    assert_eq!(m.responses.total(), 8);
    assert_eq!(m.responses.of_class(StatusCode::IM_A_TEAPOT), 2);
    // By exact status: each code on its own, the classes their sums.
    for (status, n) in [
        (StatusCode::OK, 2),
        (StatusCode::NO_CONTENT, 1),
        (StatusCode::FOUND, 1),
        (StatusCode::NOT_FOUND, 1),
        (StatusCode::IM_A_TEAPOT, 1),
        (StatusCode::SERVICE_UNAVAILABLE, 1),
        (StatusCode::INTERNAL_SERVER_ERROR, 1),
        (StatusCode::BAD_REQUEST, 0),
        (StatusCode::CONTINUE, 0),
    ] {
        assert_eq!(m.responses_with(status), n, "{status}");
    }
    let by_status: Vec<(u16, u64)> = m
        .responses_by_status()
        .map(|(s, n)| (s.as_u16(), n))
        .collect();
    assert_eq!(
        by_status,
        [
            (200, 2),
            (204, 1),
            (302, 1),
            (404, 1),
            (418, 1),
            (500, 1),
            (503, 1)
        ]
    );

    // The server's own answers count as responses, not as requests.
    let mut bad = connect(&binding);
    bad.write_all(b"NOT HTTP AT ALL\r\n\r\n").unwrap();
    assert_eq!(read_answer(&mut bad).status, 400);
    assert_eof(&mut bad);
    let m = binding.metrics();
    assert_eq!(m.connections_accepted, 2);
    assert_eq!(m.requests, 8);
    assert_eq!(m.responses.client_error, 3);
    assert_eq!(m.responses_with(StatusCode::BAD_REQUEST), 1);
    system.terminate().wait();
}

/// The interim `100 Continue` is a response written like any other, and
/// counted (as informational, and as 100) before its first byte.
#[test]
fn a_100_continue_is_counted() {
    let system = system();
    let binding = by_path(&system);
    let mut c = connect(&binding);
    c.write_all(
        b"POST /ok HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n",
    )
    .unwrap();
    assert_eq!(read_answer(&mut c).status, 100);
    let m = binding.metrics();
    assert_eq!(m.responses_with(StatusCode::CONTINUE), 1);
    assert_eq!(m.responses.informational, 1);
    assert_eq!(m.requests, 0);
    c.write_all(b"body").unwrap();
    assert_eq!(read_answer(&mut c).status, 200);
    let m = binding.metrics();
    assert_eq!(m.responses.total(), 2);
    assert_eq!(m.responses_with(StatusCode::OK), 1);
    assert_eq!(m.requests, 1);
    system.terminate().wait();
}

#[test]
fn in_flight_requests_count_the_handlers_running() {
    let system = system();
    let gate = Gate::default();
    let (binding, entered_rx) = slow_server(&system, gate.clone());
    let mut a = connect(&binding);
    let mut b = connect(&binding);
    get(&mut a, "/slow-a");
    get(&mut b, "/slow-b");
    entered(&entered_rx);
    entered(&entered_rx);
    let m = binding.metrics();
    assert_eq!(m.in_flight_requests, 2);
    assert_eq!(m.requests, 2);
    assert_eq!(m.responses.total(), 0);
    gate.open();
    read_answer(&mut a);
    read_answer(&mut b);
    let m = binding.metrics();
    assert_eq!(m.in_flight_requests, 0);
    assert_eq!(m.responses.success, 2);
    system.terminate().wait();
}

#[test]
fn open_connections_goes_down_when_a_connection_closes() {
    let system = system();
    let binding = by_path(&system);
    let capture = capture();
    let mark = capture.mark();
    let mut c = connect(&binding);
    let peer = c.local_addr().unwrap();
    get(&mut c, "/ok");
    read_answer(&mut c);
    let other = connect(&binding);
    let other_peer = other.local_addr().unwrap();
    capture.wait_for(|r| r.connection(mark, other_peer).map(|_| ()));
    assert_eq!(binding.metrics().open_connections, 2);

    drop(c);
    // The connection's span closes when its task is over, after the
    // connection left the server.
    capture.wait_for(|r| {
        r.connection(mark, peer)
            .filter(|(_, s)| s.closed())
            .map(|_| ())
    });
    let m = binding.metrics();
    assert_eq!(m.open_connections, 1);
    assert_eq!(m.connections_accepted, 2);
    assert_eq!(binding.open_connections(), 1);
    drop(other);
    let terminated = binding.terminate(Duration::from_secs(60)).wait().unwrap();
    assert_eq!(terminated.forced_connections, 0);
    assert_eq!(binding.metrics().open_connections, 0);
    system.terminate().wait();
}

#[test]
fn each_connection_and_each_request_has_a_span() {
    let system = system();
    let binding = by_path(&system);
    let capture = capture();
    let mark = capture.mark();
    let mut c = connect(&binding);
    let peer = c.local_addr().unwrap();
    get(&mut c, "/traced");
    read_answer(&mut c);
    c.write_all(b"DELETE /status/404 HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    read_answer(&mut c);

    let (conn, requests) = capture.wait_for(|r| {
        let (_, conn) = r.connection(mark, peer)?;
        let requests = r.requests_on(mark, peer);
        let done = requests.len() == 2 && requests.iter().all(|s| s.fields.contains_key("status"));
        done.then(|| {
            let requests: Vec<_> = requests.into_iter().cloned().collect();
            (conn.clone(), requests)
        })
    });
    assert_eq!(conn.fields.get("peer"), Some(&peer.to_string()));
    assert!(conn.fields.contains_key("id"));
    let fields = |i: usize, k: &str| requests[i].fields.get(k).cloned().unwrap_or_default();
    assert_eq!(
        (fields(0, "method"), fields(0, "path"), fields(0, "status")),
        ("GET".into(), "/traced".into(), "200".into())
    );
    assert_eq!(
        (fields(1, "method"), fields(1, "path"), fields(1, "status")),
        ("DELETE".into(), "/status/404".into(), "404".into())
    );
    // The handler ran inside its request's span (and so inside the
    // connection's).
    capture.wait_for(|r| {
        let event = r
            .events_on(mark, peer)
            .into_iter()
            .find(|e| e.fields.get("message").map(String::as_str) == Some("inside the handler"))?;
        let span = r.span(event.span?)?;
        (span.name == "http_request"
            && span.fields.get("path").map(String::as_str) == Some("/traced"))
        .then_some(())
    });
    system.terminate().wait();
}
