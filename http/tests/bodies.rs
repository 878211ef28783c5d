//! Response bodies on the wire: Content-Length, chunked streams, errors
//! and panics in streams, backpressure, the hard deadline, HEAD, 204/304,
//! HTTP/1.0, the Date header.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{system, Chunked, Client};
use futures_core::Stream;
use http::{Request, Response, StatusCode};
use proscenium::ActorSystem;
use proscenium_http::{Body, Http, ServerBinding};
use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Yields its items, then ends.
struct Items(VecDeque<Result<Vec<u8>, io::Error>>);

impl Stream for Items {
    type Item = Result<Vec<u8>, io::Error>;
    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Ready(self.0.pop_front())
    }
}

fn items(items: &[&str]) -> Items {
    Items(items.iter().map(|s| Ok(s.as_bytes().to_vec())).collect())
}

/// Yields `chunk` forever, counting the bytes it handed out.
struct Endless {
    chunk: Vec<u8>,
    yielded: Arc<AtomicUsize>,
}

impl Stream for Endless {
    type Item = Result<Vec<u8>, io::Error>;
    fn poll_next(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.yielded.fetch_add(self.chunk.len(), Ordering::SeqCst);
        Poll::Ready(Some(Ok(self.chunk.clone())))
    }
}

/// Yields one item, then never ends (and never wakes).
struct OneThenPending {
    first: Option<Vec<u8>>,
    polls: Arc<AtomicUsize>,
}

impl Stream for OneThenPending {
    type Item = Result<Vec<u8>, io::Error>;
    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        match self.first.take() {
            Some(first) => Poll::Ready(Some(Ok(first))),
            None => Poll::Pending,
        }
    }
}

/// Yields one item, then panics.
struct PanicsAfterOne(bool);

impl Stream for PanicsAfterOne {
    type Item = Result<Vec<u8>, io::Error>;
    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if std::mem::replace(&mut self.0, true) {
            panic!("a stream panics (expected by the test)");
        }
        Poll::Ready(Some(Ok(b"partial".to_vec())))
    }
}

/// The server of these tests; `polls` counts the polls of `/forever` and
/// `/head-stream`, `yielded` the bytes `/endless` handed out.
struct Server {
    binding: ServerBinding,
    polls: Arc<AtomicUsize>,
    yielded: Arc<AtomicUsize>,
}

fn serve(system: &ActorSystem) -> Server {
    let polls = Arc::new(AtomicUsize::new(0));
    let yielded = Arc::new(AtomicUsize::new(0));
    let (p, y) = (Arc::clone(&polls), Arc::clone(&yielded));
    let binding = Http::bind(
        system,
        "127.0.0.1:0".parse().unwrap(),
        move |req: Request<Body>| {
            let (polls, yielded) = (Arc::clone(&p), Arc::clone(&y));
            async move {
                let path = req.uri().path().to_string();
                let mut status = StatusCode::OK;
                let body = match path.as_str() {
                    "/full" => Body::from("full body"),
                    "/chunks" => Body::from_stream(items(&["hello ", "", "world"])),
                    "/error" => {
                        let mut it = items(&["partial"]);
                        it.0.push_back(Err(io::Error::other("the source failed")));
                        Body::from_stream(it)
                    }
                    "/panic" => Body::from_stream(PanicsAfterOne(false)),
                    "/endless" => Body::from_stream(Endless {
                        chunk: vec![b'x'; 64 * 1024],
                        yielded,
                    }),
                    "/forever" | "/head-stream" => Body::from_stream(OneThenPending {
                        first: Some(b"first".to_vec()),
                        polls,
                    }),
                    "/204" => {
                        status = StatusCode::NO_CONTENT;
                        Body::from("not sent")
                    }
                    "/304" => {
                        status = StatusCode::NOT_MODIFIED;
                        Body::from("not sent")
                    }
                    "/204-stream" => {
                        status = StatusCode::NO_CONTENT;
                        Body::from_stream(OneThenPending {
                            first: Some(b"first".to_vec()),
                            polls,
                        })
                    }
                    _ => Body::from(path),
                };
                let mut response = Response::new(body);
                *response.status_mut() = status;
                response
            }
        },
    )
    .expect("bind");
    Server {
        binding,
        polls,
        yielded,
    }
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes()
}

#[test]
fn full_body_has_content_length_and_date() {
    let system = system();
    let server = serve(&system);
    let mut c = Client::connect(server.binding.local_addr());
    c.send(&get("/full"));
    let (head, body) = c.response();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("9"));
    assert_eq!(head.header("transfer-encoding"), None);
    assert_eq!(body, b"full body");
    let date = head.header("date").expect("a Date header");
    // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
    assert_eq!(date.len(), 29, "{date}");
    assert!(
        date.ends_with(" GMT") && date.as_bytes()[3] == b',',
        "{date}"
    );
    system.terminate().wait();
}

#[test]
fn a_refusal_has_a_date_too() {
    let system = system();
    let server = serve(&system);
    let mut c = Client::connect(server.binding.local_addr());
    c.send(b"NOT A REQUEST\r\n\r\n");
    let head = c.head().unwrap();
    assert_eq!(head.status, 400);
    assert!(head.header("date").is_some());
    system.terminate().wait();
}

#[test]
fn a_stream_is_sent_chunked_and_the_connection_stays_open() {
    let system = system();
    let server = serve(&system);
    let mut c = Client::connect(server.binding.local_addr());
    c.send(&get("/chunks"));
    let head = c.head().unwrap();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("transfer-encoding"), Some("chunked"));
    assert_eq!(head.header("content-length"), None);
    // The empty item is skipped (an empty chunk would end the body).
    assert_eq!(c.chunked(), Chunked::Complete(b"hello world".to_vec()));
    c.send(&get("/full"));
    assert_eq!(c.response().1, b"full body");
    system.terminate().wait();
}

#[test]
fn a_stream_that_fails_truncates_the_body_and_closes() {
    let system = system();
    let server = serve(&system);
    let mut c = Client::connect(server.binding.local_addr());
    c.send(&get("/error"));
    assert_eq!(c.head().unwrap().status, 200);
    // Not a valid end: no last chunk, then EOF.
    assert_eq!(c.chunked(), Chunked::Truncated(b"partial".to_vec()));
    assert!(c.rest().is_empty());
    system.terminate().wait();
}

#[test]
fn a_stream_that_panics_truncates_the_body_and_the_server_goes_on() {
    let system = system();
    let server = serve(&system);
    let mut c = Client::connect(server.binding.local_addr());
    c.send(&get("/panic"));
    assert_eq!(c.head().unwrap().status, 200);
    assert_eq!(c.chunked(), Chunked::Truncated(b"partial".to_vec()));
    let mut c = Client::connect(server.binding.local_addr());
    c.send(&get("/full"));
    assert_eq!(c.response().1, b"full body");
    system.terminate().wait();
}

/// The largest send buffer the kernel may grow a socket's to.
fn max_send_buffer() -> usize {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem")
        .ok()
        .and_then(|s| s.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or(4 * 1024 * 1024)
}

#[test]
fn a_client_that_never_reads_stops_the_stream() {
    let system = system();
    let server = serve(&system);
    // A small, fixed receive buffer (no autotuning) on the client.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(16 * 1024).unwrap();
    socket.connect(&server.binding.local_addr().into()).unwrap();
    let recv_buffer = socket.recv_buffer_size().unwrap();
    let mut c = Client::from(std::net::TcpStream::from(socket));
    c.send(&get("/endless"));
    let chunk = 64 * 1024;
    // First the state under test: backpressure. The server polls an item
    // only once the previous one is written, so it has written at least
    // `yielded - chunk` bytes; once fewer than that wait unread in the
    // client's receive queue, the rest sit in the server's send queue
    // (loopback delivers at once what the receive window lets through): the
    // client's window is full. No event says so; polled, bounded.
    let client = c.stream().try_clone().unwrap();
    // A safety net for `peek` (the socket's, so `c` has it too).
    client
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut peek = vec![0u8; 4 * recv_buffer];
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        let yielded = server.yielded.load(Ordering::SeqCst);
        // `peek` returns what is queued (up to the buffer, larger than the
        // queue can be): bytes in, none consumed.
        let unread = if yielded > 0 {
            client.peek(&mut peek).unwrap()
        } else {
            0
        };
        if unread + chunk < yielded {
            break;
        }
        assert!(
            Instant::now() < give_up,
            "the client's receive window never filled: {yielded} bytes yielded, {unread} unread"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Then what must not happen: the stream polled on and on. It stops
    // (no change for 500 ms, which a server buffering the endless stream
    // never reaches: it would run out of memory first); the bound holds
    // however long we wait.
    let mut last = server.yielded.load(Ordering::SeqCst);
    let mut stable_since = Instant::now();
    let give_up = Instant::now() + Duration::from_secs(30);
    while stable_since.elapsed() < Duration::from_millis(500) {
        assert!(
            Instant::now() < give_up,
            "the stream never stopped being polled: {last} bytes"
        );
        std::thread::sleep(Duration::from_millis(20));
        let now = server.yielded.load(Ordering::SeqCst);
        if now != last {
            last = now;
            stable_since = Instant::now();
        }
    }
    // The server's send buffer, the client's receive buffer, the item being
    // written and the one polled before it blocked.
    let bound = max_send_buffer() + recv_buffer + 2 * chunk;
    assert!(
        last <= bound,
        "the stream handed out {last} bytes to a client that reads none; bound {bound}"
    );
    assert!(last >= chunk, "the stream was polled");
    // The client then reads: the stream goes on (backpressure, not a stall).
    let head = c.head().unwrap();
    assert_eq!(head.header("transfer-encoding"), Some("chunked"));
    let mut read = 0;
    while read < 4 * bound {
        read += c.body_len(chunk).len();
    }
    assert!(server.yielded.load(Ordering::SeqCst) > last);
    let terminated = server
        .binding
        .terminate(Duration::from_millis(100))
        .wait()
        .unwrap();
    assert_eq!(terminated.forced_connections, 1);
    system.terminate().wait();
}

#[test]
fn a_stream_that_never_ends_is_cut_at_the_hard_deadline() {
    let system = system();
    let server = serve(&system);
    let mut c = Client::connect(server.binding.local_addr());
    c.send(&get("/forever"));
    let head = c.head().unwrap();
    assert_eq!(head.header("transfer-encoding"), Some("chunked"));
    // The first chunk is through: the response is streaming.
    assert_eq!(c.reader.fill_buf_line(), "5\r\n");
    assert_eq!(c.reader.fill_buf_line(), "first\r\n");
    // Akka: "existing streaming responses must complete before the
    // deadline as well. When the deadline is reached the connection will
    // be terminated regardless of status of the streaming responses."
    let terminated = server
        .binding
        .terminate(Duration::from_millis(200))
        .wait()
        .unwrap();
    assert_eq!(terminated.forced_connections, 1);
    assert_eq!(c.chunked(), Chunked::Truncated(Vec::new()));
    assert!(c.rest().is_empty());
    system.terminate().wait();
}

#[test]
fn head_responses_carry_no_body() {
    let system = system();
    let server = serve(&system);
    let mut c = Client::connect(server.binding.local_addr());
    c.send(b"HEAD /full HTTP/1.1\r\nHost: x\r\n\r\n");
    let head = c.head().unwrap();
    assert_eq!(head.status, 200);
    // The length a GET would get.
    assert_eq!(head.header("content-length"), Some("9"));
    c.send(b"HEAD /head-stream HTTP/1.1\r\nHost: x\r\n\r\n");
    let head = c.head().unwrap();
    assert_eq!(head.header("transfer-encoding"), Some("chunked"));
    // No body bytes came: the next response follows the heads at once.
    c.send(&get("/full"));
    assert_eq!(c.response().1, b"full body");
    // The stream of a HEAD response is dropped unpolled.
    assert_eq!(server.polls.load(Ordering::SeqCst), 0);
    system.terminate().wait();
}

#[test]
fn no_body_on_204_and_304() {
    let system = system();
    let server = serve(&system);
    let mut c = Client::connect(server.binding.local_addr());
    for path in ["/204", "/304", "/204-stream"] {
        c.send(&get(path));
        let head = c.head().unwrap();
        assert_eq!(head.header("content-length"), None, "{path}");
        assert_eq!(head.header("transfer-encoding"), None, "{path}");
    }
    c.send(&get("/full"));
    let (head, body) = c.response();
    assert_eq!(head.status, 200);
    assert_eq!(body, b"full body");
    assert_eq!(server.polls.load(Ordering::SeqCst), 0);
    system.terminate().wait();
}

#[test]
fn http_10_gets_a_stream_unframed_and_a_close() {
    let system = system();
    let server = serve(&system);
    let mut c = Client::connect(server.binding.local_addr());
    c.send(b"GET /chunks HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let head = c.head().unwrap();
    assert_eq!(head.header("transfer-encoding"), None);
    assert_eq!(head.header("connection"), Some("close"));
    assert_eq!(c.rest(), b"hello world");
    system.terminate().wait();
}

/// Reads one line without the helpers' parsing.
trait LineExt {
    fn fill_buf_line(&mut self) -> String;
}

impl LineExt for std::io::BufReader<std::net::TcpStream> {
    fn fill_buf_line(&mut self) -> String {
        use std::io::BufRead;
        let mut line = String::new();
        self.read_line(&mut line).unwrap();
        line
    }
}

/// An echo of the request body's length, with a body limit of 16 bytes.
fn echo(system: &ActorSystem) -> ServerBinding {
    Http::bind_with(
        system,
        "127.0.0.1:0".parse().unwrap(),
        proscenium_http::ServerSettings::default().max_body_bytes(16),
        |req: Request<Body>| async move {
            Response::new(Body::from(format!("got {}", req.body().len())))
        },
    )
    .expect("bind")
}

#[test]
fn expect_100_continue_is_answered_before_the_body_is_read() {
    let system = system();
    let binding = echo(&system);
    let mut c = Client::connect(binding.local_addr());
    c.send(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    let interim = c.head().unwrap();
    assert_eq!(interim.status, 100);
    c.send(b"hello");
    let (head, body) = c.response();
    assert_eq!(head.status, 200);
    assert_eq!(body, b"got 5");
    // Chunked too.
    c.send(b"POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n");
    assert_eq!(c.head().unwrap().status, 100);
    c.send(b"3\r\nabc\r\n0\r\n\r\n");
    assert_eq!(c.response().1, b"got 3");
    system.terminate().wait();
}

#[test]
fn expect_100_continue_with_a_body_too_large_is_answered_413_without_the_100() {
    let system = system();
    let binding = echo(&system);
    let mut c = Client::connect(binding.local_addr());
    c.send(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\nExpect: 100-continue\r\n\r\n");
    let head = c.head().unwrap();
    assert_eq!(head.status, 413);
    assert_eq!(head.header("connection"), Some("close"));
    system.terminate().wait();
}

#[test]
fn no_100_continue_without_a_body_or_once_the_body_is_in_or_on_http_10() {
    let system = system();
    let binding = echo(&system);
    let mut c = Client::connect(binding.local_addr());
    for request in [
        &b"GET /up HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n"[..],
        b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\nhi",
        b"POST /up HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\nhi",
    ] {
        c.send(request);
        let (head, _) = c.response();
        assert_eq!(head.status, 200, "{:?}", String::from_utf8_lossy(request));
    }
    system.terminate().wait();
}

#[test]
fn an_unknown_expectation_is_answered_417() {
    let system = system();
    let binding = echo(&system);
    let mut c = Client::connect(binding.local_addr());
    c.send(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: something\r\n\r\nhi");
    assert_eq!(c.head().unwrap().status, 417);
    system.terminate().wait();
}

#[test]
fn http_10_head_of_a_stream_says_close_and_closes() {
    let system = system();
    let server = serve(&system);
    let mut c = Client::connect(server.binding.local_addr());
    c.send(b"HEAD /head-stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let head = c.head().unwrap();
    assert_eq!(head.header("connection"), Some("close"));
    // Closed at once (EOF), not kept until the idle timeout.
    c.stream()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut rest = Vec::new();
    std::io::Read::read_to_end(&mut c.reader, &mut rest).expect("EOF, not a timeout");
    assert!(rest.is_empty());
    assert_eq!(server.polls.load(Ordering::SeqCst), 0);
    system.terminate().wait();
}
