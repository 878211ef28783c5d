//! The limits of ServerSettings: idle timeout, header read timeout
//! (slowloris), max connections, and a read side that stays bounded when a
//! client pipelines without reading.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;
mod support;

use common::{system, Client};
use http::{Request, Response};
use proscenium::ActorSystem;
use proscenium_http::{Body, Http, ServerBinding, ServerSettings};
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn serve(system: &ActorSystem, settings: ServerSettings) -> (ServerBinding, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let binding = Http::bind_with(
        system,
        "127.0.0.1:0".parse().unwrap(),
        settings,
        move |req: Request<Body>| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move {
                if req.uri().path() == "/big" {
                    Response::new(Body::from(vec![b'x'; 64 * 1024]))
                } else {
                    Response::new(Body::from(req.uri().path().to_string()))
                }
            }
        },
    )
    .expect("bind");
    (binding, calls)
}

const GET: &[u8] = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n";

#[test]
fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let system = system();
    let idle = Duration::from_millis(200);
    let (binding, _) = serve(&system, ServerSettings::default().idle_timeout(idle));
    let mut c = Client::connect(binding.local_addr());
    // Before the server can start waiting: the close comes at least
    // `idle` after this (the timer rounds up to the next millisecond).
    let sent = Instant::now();
    c.send(GET);
    assert_eq!(c.response().1, b"/a");
    // Akka's idle-timeout: the connection closes, silently.
    assert!(c.rest().is_empty());
    assert!(sent.elapsed() >= idle);
    system.terminate().wait();
}

/// The idle timeout runs from the last response, not from the first:
/// a connection keeps one idle timer across its requests (armed by the
/// first wait, armed again for the rest when it fires during a later one;
/// `connection.rs`'s `Deadline`), so requests that keep coming within the
/// timeout keep the connection, even when they span several timeouts.
#[test]
fn requests_within_the_idle_timeout_keep_the_connection_across_timeouts() {
    let system = system();
    let idle = Duration::from_millis(1000);
    let (binding, _) = serve(&system, ServerSettings::default().idle_timeout(idle));
    let mut c = Client::connect(binding.local_addr());
    let start = Instant::now();
    let mut last = start;
    // About 2.4 s of requests 300 ms apart: the first idle timer fires
    // during the 4th gap; the connection must still serve the 5th.
    for i in 0..8 {
        if i > 0 {
            // The client's own pacing, far inside the timeout (a gap would
            // have to stretch to 1 s under load to close the connection
            // legitimately).
            std::thread::sleep(Duration::from_millis(300));
        }
        c.send(GET);
        assert_eq!(
            c.response().1,
            b"/a",
            "request {i}, {:?} in",
            start.elapsed()
        );
        last = Instant::now();
    }
    assert!(
        start.elapsed() > 2 * idle,
        "the requests spanned two idle timeouts"
    );
    // Then idle: closed, and not before `idle` after the last response
    // (less the moment between the server's wait starting and this
    // client reading the response).
    assert!(c.rest().is_empty());
    assert!(
        last.elapsed() >= idle - Duration::from_millis(100),
        "closed {:?} after the last response",
        last.elapsed()
    );
    system.terminate().wait();
}

#[test]
fn a_head_not_complete_in_time_is_answered_408() {
    let system = system();
    let settings = ServerSettings::default().header_read_timeout(Duration::from_millis(200));
    let (binding, calls) = serve(&system, settings);
    let mut c = Client::connect(binding.local_addr());
    c.send(b"GET /a HTTP/1.1\r\nHost:");
    let head = c.head().unwrap();
    assert_eq!(head.status, 408);
    assert_eq!(head.header("connection"), Some("close"));
    assert!(c.rest().is_empty());
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    system.terminate().wait();
}

#[test]
fn a_slowloris_trickling_its_head_is_cut_by_the_head_timeout() {
    let system = system();
    // The idle timeout alone would never fire: a byte comes every 20 ms.
    // After the 408 the server lingers (reading and discarding the
    // trickle) until the linger timeout, which ends the trickle's writes.
    let settings = ServerSettings::default()
        .idle_timeout(Duration::from_secs(3600))
        .header_read_timeout(Duration::from_millis(300))
        .linger_timeout(Duration::from_millis(100));
    let (binding, _) = serve(&system, settings);
    let c = Client::connect(binding.local_addr());
    let mut writer = c.stream().try_clone().unwrap();
    let trickle = std::thread::spawn(move || {
        writer.write_all(b"GET /a HTTP/1.1\r\n").unwrap();
        // Header bytes, one at a time, until the server closes.
        for byte in b"X-Slow: ".iter().chain(std::iter::repeat(&b'a')) {
            if writer.write_all(&[*byte]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let mut c = c;
    let head = c.head().unwrap();
    assert_eq!(head.status, 408);
    assert!(c.rest().is_empty());
    drop(c);
    trickle.join().unwrap();
    system.terminate().wait();
}

#[test]
fn at_max_connections_the_next_one_waits_until_one_closes() {
    let system = system();
    let (binding, _) = serve(&system, ServerSettings::default().max_connections(2));
    let mut c1 = Client::connect(binding.local_addr());
    let mut c2 = Client::connect(binding.local_addr());
    for c in [&mut c1, &mut c2] {
        c.send(GET);
        assert_eq!(c.response().1, b"/a");
    }
    // The third connects (the kernel's backlog) but is not served.
    let mut c3 = Client::connect(binding.local_addr());
    c3.send(GET);
    c3.stream()
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut byte = [0u8; 1];
    let err = c3.reader.get_mut().read(&mut byte).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "{err}"
    );
    assert_eq!(binding.open_connections(), 2);
    // One closes: the third is accepted and served.
    drop(c1);
    c3.stream().set_read_timeout(None).unwrap();
    assert_eq!(c3.response().1, b"/a");
    c2.send(GET);
    assert_eq!(c2.response().1, b"/a");
    system.terminate().wait();
}

/// The largest buffer the kernel may grow a socket's to (`which`:
/// tcp_wmem or tcp_rmem).
fn max_buffer(which: &str) -> usize {
    std::fs::read_to_string(format!("/proc/sys/net/ipv4/{which}"))
        .ok()
        .and_then(|s| s.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or(8 * 1024 * 1024)
}

#[test]
fn pipelining_without_reading_is_bounded_by_the_socket_buffers() {
    let system = system();
    let (binding, calls) = serve(&system, ServerSettings::default());
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(16 * 1024).unwrap();
    socket.set_send_buffer_size(16 * 1024).unwrap();
    let mark = support::capture().mark();
    socket.connect(&binding.local_addr().into()).unwrap();
    let (recv_buffer, send_buffer) = (
        socket.recv_buffer_size().unwrap(),
        socket.send_buffer_size().unwrap(),
    );
    let mut stream = std::net::TcpStream::from(socket);
    let peer = stream.local_addr().unwrap();
    // Each request gets a 64 KiB response the client never reads: the
    // server's writes block, then its reads must stop.
    let request = b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n";
    let batch: Vec<u8> = request.repeat(1024);
    const TOTAL: usize = 64 * 1024 * 1024;
    stream
        .set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut written = 0;
    while written < TOTAL {
        match stream.write(&batch) {
            Ok(n) => written += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) => panic!("{e}"),
        }
    }
    // The server took what its socket buffers, its 16 KiB head limit plus
    // one read, and the requests it answered hold, no more. (On a starved
    // machine the write may have timed out before the server got to the
    // connection: wait for its first request to be answered, which the
    // request's span records after the handler was called.)
    support::capture().wait_for(|r| {
        r.requests_on(mark, peer)
            .iter()
            .any(|request| request.fields.contains_key("status"))
            .then_some(())
    });
    let answered = calls.load(Ordering::SeqCst);
    let response = 64 * 1024 + 200;
    assert!(
        answered * response <= max_buffer("tcp_wmem") + recv_buffer + 2 * response,
        "{answered} requests answered to a client that reads nothing"
    );
    let bound = max_buffer("tcp_rmem") + send_buffer + 24 * 1024 + (answered + 1) * request.len();
    assert!(
        written <= bound,
        "the client wrote {written} bytes without reading; bound {bound}"
    );
    let terminated = binding
        .terminate(Duration::from_millis(100))
        .wait()
        .unwrap();
    assert_eq!(terminated.forced_connections, 1);
    system.terminate().wait();
}

#[test]
fn a_body_that_stops_coming_is_answered_408_after_the_idle_timeout() {
    let system = system();
    let settings = ServerSettings::default().idle_timeout(Duration::from_millis(200));
    let (binding, calls) = serve(&system, settings);
    let mut c = Client::connect(binding.local_addr());
    c.send(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc");
    let head = c.head().unwrap();
    assert_eq!(head.status, 408);
    assert_eq!(head.header("connection"), Some("close"));
    assert!(c.rest().is_empty());
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    system.terminate().wait();
}

/// Waits until the server has ended the connection from `peer` (made
/// after `mark`): its span closes once the connection's task is over and
/// its socket dropped. Fails after `support::PATIENCE`.
fn wait_connection_closed(mark: support::Mark, peer: SocketAddr) {
    support::capture().wait_for(|r| {
        r.connection(mark, peer)
            .filter(|(_, span)| span.closed())
            .map(|_| ())
    });
}

#[test]
fn a_client_that_stops_reading_is_closed_after_the_idle_timeout() {
    let system = system();
    let settings = ServerSettings::default().idle_timeout(Duration::from_millis(200));
    let big = 64 * 1024 * 1024;
    let (called, handled) = std::sync::mpsc::channel();
    let called = std::sync::Mutex::new(called);
    let binding = Http::bind_with(
        &system,
        "127.0.0.1:0".parse().unwrap(),
        settings,
        move |_req: Request<Body>| {
            called.lock().unwrap().send(()).unwrap();
            async move { Response::new(Body::from(vec![b'x'; big])) }
        },
    )
    .expect("bind");
    let mark = support::capture().mark();
    let mut c = Client::connect(binding.local_addr());
    let peer = c.stream().local_addr().unwrap();
    c.send(GET);
    // The connection is open and its request is in the handler.
    handled.recv().unwrap();
    // The client reads nothing: the server's write stops making progress
    // and the idle timeout closes the connection.
    wait_connection_closed(mark, peer);
    assert_eq!(binding.open_connections(), 0);
    let head = c.head().unwrap();
    assert_eq!(
        head.header("content-length"),
        Some(big.to_string().as_str())
    );
    let rest = c.rest();
    assert!(rest.len() < big, "the whole body came: {}", rest.len());
    system.terminate().wait();
}

#[test]
fn trailers_longer_than_a_head_are_answered_431() {
    let system = system();
    let (binding, calls) = serve(&system, ServerSettings::default().max_head_bytes(1024));
    let mut c = Client::connect(binding.local_addr());
    let mut request =
        b"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n"
            .to_vec();
    request.extend_from_slice(b"X-Trailer: ");
    request.extend_from_slice(&[b'a'; 4096]);
    c.send(&request);
    let head = c.head().unwrap();
    assert_eq!(head.status, 431);
    assert_eq!(head.header("connection"), Some("close"));
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    system.terminate().wait();
}
