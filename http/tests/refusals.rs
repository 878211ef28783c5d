//! The server's own answers that tests/server.rs does not cover: 413 for a
//! body over `max_body_bytes` (by `Content-Length` and by chunks) and 501
//! for a transfer coding other than `chunked`; each closes the connection,
//! the handler is not called, and the server goes on.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use http::{Request, Response};
use proscenium_http::{Body, Http, ServerBinding, ServerSettings};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use support::{assert_eof, connect, get, read_answer, system};

/// A server whose bodies may be 16 bytes at most, counting handler calls.
fn small_bodies(system: &proscenium::ActorSystem) -> (ServerBinding, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let binding = Http::bind_with(
        system,
        "127.0.0.1:0".parse().unwrap(),
        ServerSettings::default().max_body_bytes(16),
        move |req: Request<Body>| {
            // SeqCst: a test counter.
            counted.fetch_add(1, Ordering::SeqCst);
            async move { Response::new(Body::from(format!("{}", req.body().len()))) }
        },
    )
    .unwrap();
    (binding, calls)
}

/// Refused, closed, not handled; and the server still serves others.
fn assert_refused(binding: &ServerBinding, calls: &AtomicUsize, request: &[u8], status: u16) {
    let mut c = connect(binding);
    c.write_all(request).unwrap();
    let a = read_answer(&mut c);
    assert_eq!(a.status, status);
    assert_eq!(a.header("connection"), Some("close"));
    assert_eof(&mut c);
    // SeqCst: a test counter.
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let mut next = connect(binding);
    get(&mut next, "/next");
    assert_eq!(read_answer(&mut next).status, 200);
    // SeqCst: a test counter.
    calls.store(0, Ordering::SeqCst);
}

#[test]
fn a_content_length_over_the_limit_is_answered_413() {
    let system = system();
    let (binding, calls) = small_bodies(&system);
    // The body is not sent: the length alone is refused.
    assert_refused(
        &binding,
        &calls,
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n\r\n",
        413,
    );
    // At the limit it is served.
    let mut c = connect(&binding);
    c.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\n\r\n0123456789abcdef")
        .unwrap();
    assert_eq!(read_answer(&mut c).body, "16");
    let m = binding.metrics();
    assert_eq!(m.responses.client_error, 1);
    system.terminate().wait();
}

#[test]
fn chunks_adding_up_over_the_limit_are_answered_413() {
    let system = system();
    let (binding, calls) = small_bodies(&system);
    // 10 bytes, then a chunk of 7 announced: 17 > 16 (its bytes are not
    // sent: the announced size is refused).
    assert_refused(
        &binding,
        &calls,
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n7\r\n",
        413,
    );
    system.terminate().wait();
}

#[test]
fn a_transfer_coding_other_than_chunked_is_answered_501() {
    let system = system();
    let (binding, calls) = small_bodies(&system);
    assert_refused(
        &binding,
        &calls,
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        501,
    );
    assert_refused(
        &binding,
        &calls,
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
        501,
    );
    assert_eq!(binding.metrics().responses.server_error, 2);
    system.terminate().wait();
}
