//! Regression tests for what a review tried as an attacker found the
//! server accepting (issue 24): request smuggling through a chunk
//! extension, chunked HTTP/1.0 kept alive, a missing or doubled Host, a
//! departed client holding its slot, CONNECT answered as a GET, a HEAD
//! response's length replaced, and a trickled body or a slow handler
//! holding a connection. Each failed before its fix; each test says how.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use futures_core::Stream;
use http::header::{CONTENT_LENGTH, HOST};
use http::{Request, Response};
use proscenium::ActorSystem;
use proscenium_http::{Body, Http, ServerBinding, ServerSettings};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use support::{assert_eof, connect, get, read_answer, system, Answer, PATIENCE};

/// Sends a name on a channel when dropped: a handler's future or a stream
/// holds one, so the test learns when the server let go of it.
struct DropFlag(mpsc::Sender<&'static str>, &'static str);

impl Drop for DropFlag {
    fn drop(&mut self) {
        // The receiver may be gone once the test has what it wanted.
        let _ = self.0.send(self.1);
    }
}

/// A server-sent stream that never yields (and never wakes its task).
struct Silent(#[allow(dead_code)] DropFlag);

impl Stream for Silent {
    type Item = Result<Vec<u8>, std::io::Error>;
    fn poll_next(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Pending
    }
}

/// What the test sees of the server: handler calls, what the handlers
/// reported (`entered`), and what the server dropped (`dropped`).
struct Served {
    binding: ServerBinding,
    calls: Arc<AtomicUsize>,
    entered: mpsc::Receiver<String>,
    dropped: mpsc::Receiver<&'static str>,
}

/// `/hang` reports and never answers (its future holds a flag);
/// `/events` answers with a silent stream (which holds a flag); `/head`
/// answers a HEAD with its own `Content-Length: 1234` and no body; every
/// other path answers `"<method> <path> <body length> <host>"` (the Host
/// header the handler got).
fn serve(system: &ActorSystem, settings: ServerSettings) -> Served {
    let calls = Arc::new(AtomicUsize::new(0));
    let (entered_tx, entered) = mpsc::channel();
    let (dropped_tx, dropped) = mpsc::channel();
    let entered_tx = Mutex::new(entered_tx);
    let dropped_tx = Mutex::new(dropped_tx);
    let counted = Arc::clone(&calls);
    let binding = Http::bind_with(
        system,
        "127.0.0.1:0".parse().unwrap(),
        settings,
        move |req: Request<Body>| {
            // SeqCst: a test counter, no hot path.
            counted.fetch_add(1, Ordering::SeqCst);
            let path = req.uri().path().to_string();
            let _ = entered_tx.lock().unwrap().send(path.clone());
            let dropped = dropped_tx.lock().unwrap().clone();
            async move {
                match path.as_str() {
                    "/hang" => {
                        let _flag = DropFlag(dropped, "handler");
                        std::future::pending::<()>().await;
                        unreachable!()
                    }
                    "/events" => {
                        Response::new(Body::from_stream(Silent(DropFlag(dropped, "stream"))))
                    }
                    "/head" => Response::builder()
                        .header(CONTENT_LENGTH, "1234")
                        .body(Body::empty())
                        .unwrap(),
                    _ => {
                        let host = req
                            .headers()
                            .get(HOST)
                            .map(|h| h.to_str().unwrap().to_string())
                            .unwrap_or_default();
                        let text = format!("{} {path} {} {host}", req.method(), req.body().len());
                        Response::new(Body::from(text))
                    }
                }
            }
        },
    )
    .unwrap();
    Served {
        binding,
        calls,
        entered,
        dropped,
    }
}

impl Served {
    fn calls(&self) -> usize {
        // SeqCst: a test counter, no hot path.
        self.calls.load(Ordering::SeqCst)
    }

    /// A new connection is served (`GET /next`).
    fn still_serves(&self) {
        let mut c = connect(&self.binding);
        get(&mut c, "/next");
        assert_eq!(read_answer(&mut c).body, "GET /next 0 x");
    }
}

/// Sends `request` on a new connection; the answer, then the rest until
/// the server closes (what a second, smuggled response would be).
fn exchange(served: &Served, request: &[u8]) -> (Answer, TcpStream) {
    let mut c = connect(&served.binding);
    c.write_all(request).unwrap();
    (read_answer(&mut c), c)
}

/// Finding 1. RFC 9112 §7.1.1: `chunk-ext = *( BWS ";" BWS chunk-ext-name
/// [ BWS "=" BWS chunk-ext-val ] )`, names are tokens and values tokens or
/// quoted strings: a bare LF is none of them. A front end that ends chunk
/// lines at LF reads `2;` as a line and `xx\r\n...` as data, and frames
/// the bytes differently from a server that skips to CRLF; the sender picks
/// the second request the server sees.
///
/// Before: answered 200 (`POST /c 2 x`), the LF taken as part of the
/// extension, and the connection kept alive.
#[test]
fn a_bare_lf_in_a_chunk_extension_is_refused() {
    let system = system();
    let served = serve(&system, ServerSettings::default());
    let head = "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    // A well-formed extension is still served.
    let (a, _c) = exchange(
        &served,
        format!("{head}2;name=value;q=\"quoted\"\r\nab\r\n0\r\n\r\n").as_bytes(),
    );
    assert_eq!((a.status, a.body.as_str()), (200, "POST /c 2 x"));
    let calls = served.calls();
    // The smuggling shape: a bare LF inside the extension.
    let smuggled =
        format!("{head}2;\nxx\r\nab\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n");
    let (a, mut c) = exchange(&served, smuggled.as_bytes());
    assert_eq!(a.status, 400, "{a:?}");
    assert_eq!(a.header("connection"), Some("close"));
    assert_eof(&mut c);
    // Other bytes outside the grammar: a control character, a bare CR.
    for ext in ["2;a\x01b\r\nab\r\n0\r\n\r\n", "2;a\rb\r\nab\r\n0\r\n\r\n"] {
        let (a, mut c) = exchange(&served, format!("{head}{ext}").as_bytes());
        assert_eq!(a.status, 400, "{ext:?}: {a:?}");
        assert_eof(&mut c);
    }
    assert_eq!(
        served.calls(),
        calls,
        "a refused request reached the handler"
    );
    served.still_serves();
    system.terminate().wait();
}

/// Finding 2. RFC 9112 §6.1: "A server or client that receives an
/// HTTP/1.0 message containing a Transfer-Encoding header field MUST
/// treat the message as if the framing is faulty, even if a
/// Content-Length is present, and close the connection after processing
/// the message."
///
/// Before: the body was decoded as chunked, the response said
/// `Connection: keep-alive`, and the request behind it was served too.
#[test]
fn chunked_http_10_is_not_kept_alive() {
    let system = system();
    let served = serve(&system, ServerSettings::default());
    let request =
        b"POST /a HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n\
        3\r\nabc\r\n0\r\n\r\nGET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
    let (a, mut c) = exchange(&served, request);
    assert!(a.status == 200 || a.status == 400, "{a:?}");
    assert_ne!(a.header("connection"), Some("keep-alive"), "{a:?}");
    // The connection closes after it: `/b` is never answered.
    assert_eof(&mut c);
    served.still_serves();
    system.terminate().wait();
}

/// Finding 3. RFC 9112 §3.2: "A server MUST respond with a 400 (Bad
/// Request) status code to any HTTP/1.1 request message that lacks a Host
/// header field and to any request message that contains more than one
/// Host header field line or a Host header field with an invalid field
/// value." §3.2.2: "When an origin server receives a request with an
/// absolute-form of request-target, the origin server MUST ignore the
/// received Host header field (if any) and instead use the host
/// information of the request-target."
///
/// Before: both refusals were served 200, and the handler of the
/// absolute-form request saw `Host: b.example`.
#[test]
fn host_is_required_once_and_reconciled_with_an_absolute_target() {
    let system = system();
    let served = serve(&system, ServerSettings::default());
    for request in [
        "GET /none HTTP/1.1\r\n\r\n",
        "GET /two HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "GET /two HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n",
        "GET /bad HTTP/1.1\r\nHost: a b\r\n\r\n",
    ] {
        let (a, mut c) = exchange(&served, request.as_bytes());
        assert_eq!(a.status, 400, "{request:?}: {a:?}");
        assert_eq!(a.header("connection"), Some("close"));
        assert_eof(&mut c);
    }
    assert_eq!(served.calls(), 0, "a refused request reached the handler");
    // HTTP/1.0 may leave Host out.
    let (a, _c) = exchange(&served, b"GET /old HTTP/1.0\r\n\r\n");
    assert_eq!((a.status, a.body.as_str()), (200, "GET /old 0 "));
    // The absolute-form target's host wins over the Host header.
    let (a, _c) = exchange(
        &served,
        b"GET http://a.example/abs HTTP/1.1\r\nHost: b.example\r\n\r\n",
    );
    assert_eq!((a.status, a.body.as_str()), (200, "GET /abs 0 a.example"));
    let (a, _c) = exchange(
        &served,
        b"GET http://a.example:8080/abs HTTP/1.1\r\nHost: a.example:8080\r\n\r\n",
    );
    assert_eq!(
        (a.status, a.body.as_str()),
        (200, "GET /abs 0 a.example:8080")
    );
    system.terminate().wait();
}

/// Finding 5, a long poll. A client that leaves while its handler runs is
/// noticed: the handler's future is dropped and the connection's slot
/// freed (as hyper does, a read that ends, EOF or a reset, while the
/// handler runs means the client left; a client that half-closes its
/// writing side to wait for the answer is taken for one that left).
///
/// Before: the handler's future, the socket and the slot stayed: with
/// `max_connections(1)` no other client was served (the test's wait for
/// the drop timed out).
#[test]
fn a_client_that_leaves_during_a_long_poll_frees_its_slot() {
    let system = system();
    let served = serve(&system, ServerSettings::default().max_connections(1));
    let mut gone = connect(&served.binding);
    get(&mut gone, "/hang");
    assert_eq!(served.entered.recv_timeout(PATIENCE).unwrap(), "/hang");
    drop(gone);
    assert_eq!(served.dropped.recv_timeout(PATIENCE), Ok("handler"));
    served.still_serves();
    system.terminate().wait();
}

/// Finding 5, server-sent events. A client that leaves while its streamed
/// response is silent is noticed: the stream is dropped and the slot
/// freed.
///
/// Before: the stream (never woken) and the connection stayed for good:
/// the test's wait for the drop timed out.
#[test]
fn a_client_that_leaves_a_silent_stream_frees_its_slot() {
    let system = system();
    let served = serve(&system, ServerSettings::default().max_connections(1));
    let mut gone = connect(&served.binding);
    get(&mut gone, "/events");
    // The head of the streamed response arrives; then nothing.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(gone.read(&mut byte).unwrap(), 1);
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 200 OK\r\n"));
    drop(gone);
    assert_eq!(served.dropped.recv_timeout(PATIENCE), Ok("stream"));
    served.still_serves();
    system.terminate().wait();
}

/// Finding 6. RFC 9110 §9.3.6: a 2xx answer to CONNECT turns the
/// connection into a tunnel, and "A server MUST NOT send any
/// Transfer-Encoding or Content-Length header fields in a 2xx
/// (Successful) response to CONNECT." The server has no tunnels: CONNECT
/// never reaches the handler and is answered `501 Not Implemented` ("the
/// server does not support the functionality required to fulfill the
/// request", RFC 9110 §15.6.2).
///
/// Before: the handler was called and its 200 went out with
/// `Content-Length` and a body.
#[test]
fn connect_is_refused_without_reaching_the_handler() {
    let system = system();
    let served = serve(&system, ServerSettings::default());
    let (a, _c) = exchange(
        &served,
        b"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n",
    );
    assert_eq!(a.status, 501, "{a:?}");
    assert!(a.body.is_empty());
    assert_eq!(served.calls(), 0, "CONNECT reached the handler");
    served.still_serves();
    system.terminate().wait();
}

/// Reads one response head (status and lowercase headers), no body.
fn read_head(c: &mut TcpStream) -> (u16, Vec<(String, String)>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(c.read(&mut byte).unwrap(), 1, "EOF in a head");
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap()[9..12].parse().unwrap();
    let headers = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    (status, headers)
}

/// Finding 7. RFC 9110 §8.6: "A server MAY send a Content-Length header
/// field in a response to a HEAD request; a server MUST NOT send
/// Content-Length in such a response unless its field value equals the
/// decimal number of octets that would have been sent in the content of a
/// response if the same request had used the GET method." The handler
/// knows that number; the server does not (the HEAD response has no
/// body), so the handler's own value is kept.
///
/// Before: the handler's `Content-Length: 1234` went out as `0`.
#[test]
fn a_handlers_content_length_on_a_head_response_is_kept() {
    let system = system();
    let served = serve(&system, ServerSettings::default());
    let mut c = connect(&served.binding);
    c.write_all(b"HEAD /head HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let (status, headers) = read_head(&mut c);
    assert_eq!(status, 200);
    let lengths: Vec<&str> = headers
        .iter()
        .filter(|(n, _)| n == "content-length")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(lengths, ["1234"]);
    // No body followed: the next response on the connection is whole.
    get(&mut c, "/next");
    assert_eq!(read_answer(&mut c).body, "GET /next 0 x");
    // A HEAD whose handler gives a body still gets the body's length.
    c.write_all(b"HEAD /other HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let (status, headers) = read_head(&mut c);
    assert_eq!(status, 200);
    let length = headers.iter().find(|(n, _)| n == "content-length");
    assert_eq!(length.map(|(_, v)| v.as_str()), Some("15")); // "HEAD /other 0 x"
    get(&mut c, "/next");
    assert_eq!(read_answer(&mut c).body, "GET /next 0 x");
    system.terminate().wait();
}

/// Finding 8, the body. A body trickled a byte at a time (each byte
/// within the idle timeout) is cut at the body read timeout, however
/// steadily it comes, and answered 408.
///
/// Before: there was no such bound; each byte reset the idle timeout and
/// the connection was held until the body ended (the test's read of the
/// answer timed out).
#[test]
fn a_trickled_body_is_cut_at_the_body_read_timeout() {
    let system = system();
    let served = serve(
        &system,
        ServerSettings::default()
            .idle_timeout(PATIENCE)
            .body_read_timeout(Duration::from_millis(300)),
    );
    let mut c = connect(&served.binding);
    c.write_all(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
        .unwrap();
    // The trickle: a byte every 20 ms, for as long as the server takes it
    // (the client's pace, not a wait for the server: the test waits on
    // the server's answer below).
    let mut trickle = c.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        for _ in 0..100_000 {
            if trickle.write_all(b"x").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let a = read_answer(&mut c);
    assert_eq!(a.status, 408, "{a:?}");
    assert_eq!(a.header("connection"), Some("close"));
    // Ends the trickle (its next write fails); the server lingers until
    // then.
    c.shutdown(Shutdown::Both).unwrap();
    sender.join().unwrap();
    assert_eq!(served.calls(), 0, "a body cut short reached the handler");
    served.still_serves();
    system.terminate().wait();
}

/// Finding 8, the handler. Akka's `request-timeout`: a handler that does
/// not produce its response within the request timeout, counted from the
/// end of the request, is dropped and the request answered `503 Service
/// Unavailable`; the connection goes on.
///
/// Before: there was no request timeout; the handler held the connection
/// until it answered (the test's read timed out).
#[test]
fn a_handler_slower_than_the_request_timeout_is_answered_503() {
    let system = system();
    let served = serve(
        &system,
        ServerSettings::default().request_timeout(Duration::from_millis(200)),
    );
    let mut c = connect(&served.binding);
    get(&mut c, "/hang");
    let a = read_answer(&mut c);
    assert_eq!(a.status, 503, "{a:?}");
    assert_eq!(served.dropped.recv_timeout(PATIENCE), Ok("handler"));
    // The connection goes on.
    get(&mut c, "/next");
    assert_eq!(read_answer(&mut c).body, "GET /next 0 x");
    system.terminate().wait();
}
