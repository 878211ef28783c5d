//! The server against a real Rust HTTP client (ureq, blocking): keep-alive
//! GETs on one pooled connection, POST bodies (sized and chunked), and a
//! termination as the client sees it: the in-flight request answered with
//! `Connection: close`, a request arriving during termination answered 503.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use proscenium_http::ServerBinding;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;
use support::{capture, entered, slow_server, system, Gate, PATIENCE};

const LONG: Duration = Duration::from_secs(3600);

/// An agent that returns 4xx/5xx as responses (not errors), and gives up
/// after [`PATIENCE`] instead of hanging a failed test.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(PATIENCE))
        .build()
        .into()
}

fn url(binding: &ServerBinding, path: &str) -> String {
    format!("http://{}{path}", binding.local_addr())
}

fn header(response: &http::Response<ureq::Body>, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
}

#[test]
fn keep_alive_gets_share_one_connection() {
    let system = system();
    let (binding, _) = slow_server(&system, Gate::default());
    let agent = agent();
    for i in 0..5 {
        let mut response = agent
            .get(url(&binding, &format!("/get/{i}")))
            .call()
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "connection"), None);
        assert_eq!(
            response.body_mut().read_to_string().unwrap(),
            format!("GET /get/{i} 0")
        );
    }
    let m = binding.metrics();
    assert_eq!(m.connections_accepted, 1);
    assert_eq!(m.requests, 5);
    assert_eq!(m.responses.success, 5);
    system.terminate().wait();
}

#[test]
fn posts_with_a_body_sized_and_chunked() {
    let system = system();
    let (binding, _) = slow_server(&system, Gate::default());
    let agent = agent();
    // Content-Length.
    let mut response = agent.post(url(&binding, "/echo")).send("hello").unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.body_mut().read_to_string().unwrap(),
        "POST /echo 5"
    );
    // From a reader of unknown size: Transfer-Encoding: chunked.
    let mut data: &[u8] = &[7u8; 100_000];
    let mut response = agent
        .post(url(&binding, "/upload"))
        .send(ureq::SendBody::from_reader(&mut data))
        .unwrap();
    assert_eq!(
        response.body_mut().read_to_string().unwrap(),
        "POST /upload 100000"
    );
    assert_eq!(binding.metrics().connections_accepted, 1);
    system.terminate().wait();
}

/// Akka: "if user code emits a response within the timeout, then this
/// response is sent to the client with a Connection: close header and
/// connection is closed."
#[test]
fn the_in_flight_request_is_answered_with_connection_close() {
    let system = system();
    let gate = Gate::default();
    let (binding, entered_rx) = slow_server(&system, gate.clone());
    let slow = url(&binding, "/slow");
    let call = thread::spawn(move || agent().get(&slow).call());
    entered(&entered_rx);
    let termination = binding.terminate(LONG);
    gate.open();
    let mut response = call.join().unwrap().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "connection").as_deref(), Some("close"));
    assert_eq!(response.body_mut().read_to_string().unwrap(), "GET /slow 0");
    assert_eq!(termination.wait().unwrap().forced_connections, 0);
    system.terminate().wait();
}

/// A one-connection TCP forwarder in front of the server that holds back
/// the last line break of the client's first request head until released:
/// the server has a request arriving (not an idle connection) when the
/// test terminates it.
struct HoldingProxy {
    addr: SocketAddr,
    /// The forwarder's own address towards the server (the server's peer).
    upstream: mpsc::Receiver<SocketAddr>,
    release: mpsc::Sender<()>,
}

fn holding_proxy(server: SocketAddr) -> HoldingProxy {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (upstream_tx, upstream) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    thread::spawn(move || {
        let (mut client, _) = listener.accept().unwrap();
        let mut up = TcpStream::connect(server).unwrap();
        upstream_tx.send(up.local_addr().unwrap()).unwrap();
        let (mut from_server, mut to_client) =
            (up.try_clone().unwrap(), client.try_clone().unwrap());
        thread::spawn(move || {
            let _ = std::io::copy(&mut from_server, &mut to_client);
            let _ = to_client.shutdown(Shutdown::Write);
        });
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let end = loop {
            let n = client.read(&mut chunk).unwrap();
            assert!(n > 0, "the client closed before its head was complete");
            buf.extend_from_slice(&chunk[..n]);
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
        };
        up.write_all(&buf[..end - 2]).unwrap();
        let _ = released.recv();
        let _ = up.write_all(&buf[end - 2..]);
        let _ = std::io::copy(&mut client, &mut up);
        let _ = up.shutdown(Shutdown::Write);
    });
    HoldingProxy {
        addr,
        upstream,
        release,
    }
}

/// Akka: "[terminate] also handles replying to new incoming requests with
/// (configurable) “terminating” HTTP responses", by default "503 Service
/// Unavailable, with an empty response entity".
#[test]
fn a_request_arriving_during_termination_is_answered_503() {
    let system = system();
    let (binding, entered_rx) = slow_server(&system, Gate::default());
    let proxy = holding_proxy(binding.local_addr());
    let capture = capture();
    let mark = capture.mark();
    let late = format!("http://{}/slow-late", proxy.addr);
    let call = thread::spawn(move || agent().get(&late).call());
    let upstream = proxy.upstream.recv_timeout(PATIENCE).unwrap();
    // The server has the first bytes of the request: not idle.
    capture.wait_event_on(mark, upstream, "receiving a request");

    let termination = binding.terminate(LONG);
    proxy.release.send(()).unwrap();
    let mut response = call.join().unwrap().unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(header(&response, "connection").as_deref(), Some("close"));
    assert_eq!(response.body_mut().read_to_string().unwrap(), "");
    // The handler never saw it.
    assert!(entered_rx.try_recv().is_err());
    assert_eq!(termination.wait().unwrap().forced_connections, 0);
    // And the port is closed to the client's next attempt.
    assert!(agent().get(url(&binding, "/after")).call().is_err());
    system.terminate().wait();
}
