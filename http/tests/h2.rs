//! HTTP/2 (h2c, prior knowledge) and HTTP/1.1 on one port, served by
//! hyper's HTTP/2 server (feature `http2`, on by default) after the
//! hand-written layer saw the preface, driven by curl; the termination on
//! HTTP/2.
//! Skipped, saying so, when curl is not installed (a failure with
//! `PROSCENIUM_REQUIRE_PROGRAMS=1`, see tests/programs/mod.rs).
#![cfg(feature = "http2")]
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod programs;
mod server_process;
mod support;

use http::{Request, Response};
use proscenium_http::{Body, Http, ServerBinding, ServerSettings};
use server_process::{signal, ServerProcess};
use std::io::{Read, Write};
use std::process::{Command, Output};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;
use support::raw_h2::{
    request_head, Frame, RawH2, DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS,
    INITIAL_WINDOW_SIZE, PING, WINDOW_UPDATE,
};
use support::{
    capture, connect, entered, read_answer, slow_server, slow_server_with, system, Gate, Mark,
    PATIENCE,
};

const LONG: Duration = Duration::from_secs(3600);

fn curl(binding: &ServerBinding, args: &[&str], path: &str) -> Output {
    let url = format!("http://{}{path}", binding.local_addr());
    Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "30"])
        .args(["--write-out", "\n%{http_code} %{http_version}"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl runs")
}

/// curl's GET of `path` over HTTP/2 (prior knowledge).
fn h2_get(addr: std::net::SocketAddr, path: &str) -> Output {
    Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "30"])
        .args(["--write-out", "\n%{http_code} %{http_version}"])
        .arg("--http2-prior-knowledge")
        .arg(format!("http://{addr}{path}"))
        .output()
        .expect("curl runs")
}

fn text(out: &Output) -> String {
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn http_2_and_http_1_1_on_one_port() {
    if !programs::present("curl") {
        return;
    }
    let system = system();
    let (binding, _entered) = slow_server(&system, Gate::default());
    let h2 = text(&curl(&binding, &["--http2-prior-knowledge"], "/a"));
    assert_eq!(h2, "GET /a 0\n200 2");
    let h1 = text(&curl(&binding, &["--http1.1"], "/b"));
    assert_eq!(h1, "GET /b 0\n200 1.1");
    let post = text(&curl(
        &binding,
        &["--http2-prior-knowledge", "--data-binary", "hello"],
        "/c",
    ));
    assert_eq!(post, "POST /c 5\n200 2");
    let metrics = binding.metrics();
    let ok: Vec<_> = metrics.responses_by_status().collect();
    assert_eq!(ok, [(http::StatusCode::OK, 3)]);
    binding.terminate(LONG).wait().unwrap();
    system.terminate().wait();
}

/// Akka: "existing connections [...] are allowed to finish the in-flight
/// requests", on HTTP/2: the stream in flight when the termination starts
/// (GOAWAY) completes with the handler's response.
#[test]
fn an_http_2_stream_in_flight_finishes_during_a_termination() {
    if !programs::present("curl") {
        return;
    }
    let system = system();
    let gate = Gate::default();
    let (binding, entered_rx) = slow_server(&system, gate.clone());
    let addr = binding.local_addr();
    let client = thread::spawn(move || h2_get(addr, "/slow"));
    assert_eq!(entered(&entered_rx), "/slow");
    let termination = binding.terminate(LONG);
    gate.open();
    assert_eq!(text(&client.join().unwrap()), "GET /slow 0\n200 2");
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || tx.send(termination.wait()));
    let terminated = rx.recv_timeout(PATIENCE).unwrap().unwrap();
    assert_eq!(terminated.forced_connections, 0);
    system.terminate().wait();
}

/// Akka: "if user code does not reply with a response within the
/// deadline we produce a special [...] terminationDeadlineExceededResponse
/// HTTP response (e.g. 503 Service Unavailable)", on HTTP/2.
#[test]
fn an_http_2_handler_past_the_hard_deadline_gets_the_deadline_response() {
    if !programs::present("curl") {
        return;
    }
    let system = system();
    let (binding, entered_rx) = slow_server(&system, Gate::default());
    let addr = binding.local_addr();
    let client = thread::spawn(move || h2_get(addr, "/hang"));
    assert_eq!(entered(&entered_rx), "/hang");
    let termination = binding.terminate(Duration::from_millis(100));
    let out = client.join().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).ends_with("503 2"),
        "{out:?}"
    );
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || tx.send(termination.wait()));
    assert!(rx.recv_timeout(PATIENCE).unwrap().is_ok());
    system.terminate().wait();
}

/// The `server` example (built with the feature) over both protocols on
/// its one port, with curl; its SIGTERM still ends it in order, exit 0.
#[cfg(unix)]
#[test]
fn the_server_example_speaks_both_protocols_and_ends_in_order_on_sigterm() {
    if !programs::present("curl") {
        return;
    }
    let server = ServerProcess::start(&[]);
    let get = |args: &[&str]| {
        let out = Command::new("curl")
            .args(["--silent", "--show-error", "--max-time", "30"])
            .args(["--write-out", "\n%{http_code} %{http_version}"])
            .args(args)
            .arg(format!("http://{}/hello", server.addr))
            .output()
            .expect("curl runs");
        text(&out)
    };
    assert_eq!(get(&["--http2-prior-knowledge"]), "hello, world\n200 2");
    assert_eq!(get(&["--http1.1"]), "hello, world\n200 1.1");
    signal(&server.child, libc::SIGTERM);
    let (code, lines) = server.finish();
    assert_eq!(code, Some(0), "{lines:#?}");
    assert!(
        lines.iter().any(|l| l.starts_with("http terminated in ")),
        "{lines:#?}"
    );
}

/// The server's limits and its answers for a handler hold on HTTP/2 as on
/// HTTP/1.1: a body over `max_body_bytes` is 413 (before the handler), a
/// handler that panics is 500 and the connection's next stream is served,
/// a handler slower than the request timeout is 503 (Akka's
/// `request-timeout`: "the server was not able to produce a timely
/// response").
#[test]
fn limits_panics_and_the_request_timeout_on_http_2() {
    if !programs::present("curl") {
        return;
    }
    let system = system();
    let settings = ServerSettings::default()
        .max_body_bytes(8)
        .request_timeout(Duration::from_millis(200));
    let binding = Http::bind_with(
        &system,
        "127.0.0.1:0".parse().unwrap(),
        settings,
        |req: Request<Body>| async move {
            match req.uri().path() {
                "/panic" => panic!("the handler panics"),
                "/hang" => std::future::pending().await,
                _ => Response::new(Body::from(format!("{} bytes", req.body().len()))),
            }
        },
    )
    .unwrap();
    let h2 = ["--http2-prior-knowledge"];
    let small = text(&curl(&binding, &[h2[0], "--data-binary", "12345678"], "/"));
    assert_eq!(small, "8 bytes\n200 2");
    // nghttp for the rest: curl 7.88 does not reuse a prior-knowledge
    // connection, and when the 413 goes out before the client's END_STREAM
    // is in, the server's RST_STREAM(NO_ERROR) after it (RFC 9113 §8.1)
    // is a "stream error" to curl 7.88, which then drops the response.
    let multiplexed = programs::present("nghttp");
    if multiplexed {
        let url = |path: &str| format!("http://{}{path}", binding.local_addr());
        let dir = std::env::temp_dir().join(format!("proscenium-h2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let nine = dir.join("nine");
        std::fs::write(&nine, b"123456789").unwrap();
        let out = Command::new("nghttp")
            .arg("--verbose")
            .arg("--data")
            .arg(&nine)
            .arg(url("/"))
            .output()
            .expect("nghttp runs");
        let _ = std::fs::remove_dir_all(&dir);
        let trace = String::from_utf8_lossy(&out.stdout);
        assert!(trace.contains(":status: 413"), "{trace}");
        // One connection, three streams at once: the panic's 500 does not
        // disturb its neighbours.
        let out = Command::new("nghttp")
            .args(["--null-out", "--stat"])
            .args([url("/a"), url("/panic"), url("/b")])
            .output()
            .expect("nghttp runs");
        let stats = String::from_utf8_lossy(&out.stdout);
        let mut codes: Vec<(String, String)> = stats
            .lines()
            .filter_map(|line| {
                let words: Vec<&str> = line.split_whitespace().collect();
                // id, responseEnd, requestStart, process, code, size, path
                (words.len() == 7 && words[6].starts_with('/'))
                    .then(|| (words[6].to_string(), words[4].to_string()))
            })
            .collect();
        codes.sort();
        let expected = [("/a", "200"), ("/b", "200"), ("/panic", "500")];
        let expected: Vec<_> = expected
            .iter()
            .map(|(p, c)| (p.to_string(), c.to_string()))
            .collect();
        assert_eq!(codes, expected, "{stats}");
    }
    let late = text(&curl(&binding, &h2, "/hang"));
    assert!(late.ends_with("\n503 2"), "{late}");
    assert!(late.starts_with("The server was not able"), "{late}");
    let by_status: Vec<_> = binding.metrics().responses_by_status().collect();
    let mut expected = vec![
        (http::StatusCode::OK, if multiplexed { 3 } else { 1 }),
        (http::StatusCode::PAYLOAD_TOO_LARGE, 1),
        (http::StatusCode::INTERNAL_SERVER_ERROR, 1),
        (http::StatusCode::SERVICE_UNAVAILABLE, 1),
    ];
    // Without nghttp, only curl's requests: the 200 and the 503.
    expected.retain(|&(status, _)| {
        multiplexed || status == http::StatusCode::OK || status.as_u16() == 503
    });
    assert_eq!(by_status, expected);
    binding.terminate(LONG).wait().unwrap();
    system.terminate().wait();
}

/// An empty SETTINGS frame (RFC 9113 §6.5): the client's part of the
/// connection preface after the magic octets.
const EMPTY_SETTINGS: [u8; 9] = [0, 0, 0, 4, 0, 0, 0, 0, 0];

/// The frame type of the first frame in `bytes` (RFC 9113 §4.1).
fn first_frame_type(stream: &mut std::net::TcpStream) -> u8 {
    let mut header = [0u8; 9];
    stream.read_exact(&mut header).unwrap();
    header[3]
}

/// The preface in pieces: the hand-written layer reads on while the bytes
/// so far begin the preface, then hands the connection to HTTP/2, which
/// answers with its SETTINGS (RFC 9113 §3.4: "the server connection
/// preface consists of a potentially empty SETTINGS frame").
#[test]
fn a_preface_that_comes_in_pieces_is_served_as_http_2() {
    let system = system();
    let (binding, _entered) = slow_server(&system, Gate::default());
    let mut stream = connect(&binding);
    stream.set_nodelay(true).unwrap();
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    for piece in preface.chunks(5) {
        stream.write_all(piece).unwrap();
        stream.flush().unwrap();
    }
    stream.write_all(&EMPTY_SETTINGS).unwrap();
    assert_eq!(first_frame_type(&mut stream), 4, "a SETTINGS frame");
    drop(stream);
    // A request line that only begins like the preface is HTTP/1.1's.
    let mut stream = connect(&binding);
    stream
        .write_all(b"PRI * HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let answer = read_answer(&mut stream);
    assert_eq!(answer.status, 200, "{answer:?}");
    binding.terminate(LONG).wait().unwrap();
    system.terminate().wait();
}

/// The idle timeout holds on HTTP/2: a connection with no stream and no
/// byte moving for `idle_timeout` gets a GOAWAY (RFC 9113 §9.1: "An
/// endpoint that wishes to close the connection SHOULD send a GOAWAY
/// frame") and is closed (this client answers nothing, so at the next idle
/// timeout).
#[test]
fn an_idle_http_2_connection_gets_a_goaway_and_is_closed_at_the_idle_timeout() {
    let system = system();
    let settings = ServerSettings::default().idle_timeout(Duration::from_millis(200));
    let (binding, _entered) = slow_server_with(&system, settings, Gate::default());
    let mut stream = connect(&binding);
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .unwrap();
    stream.write_all(&EMPTY_SETTINGS).unwrap();
    // The server's SETTINGS, its acknowledgement of ours, its GOAWAY (and
    // the PING h2 sends with it), then EOF.
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).unwrap();
    let mut types = Vec::new();
    let mut at = 0;
    while at + 9 <= rest.len() {
        let len = usize::from(rest[at]) << 16
            | usize::from(rest[at + 1]) << 8
            | usize::from(rest[at + 2]);
        types.push(rest[at + 3]);
        at += 9 + len;
    }
    assert_eq!(
        types.first(),
        Some(&4),
        "the server's first frame is SETTINGS: {types:?}"
    );
    assert!(types.contains(&7), "a GOAWAY before the close: {types:?}");
    binding.terminate(LONG).wait().unwrap();
    system.terminate().wait();
}

// ---------------------------------------------------------------------------
// Issue 34: HTTP/2 that cannot be stalled or inflated (raw frames,
// tests/support/raw_h2.rs).

/// The connection span of `peer` (created after `mark`) has closed: its
/// task is over, the socket closed, its place in the server given back.
fn wait_connection_over(mark: Mark, peer: std::net::SocketAddr) {
    capture().wait_for(|r| {
        r.connection(mark, peer)
            .filter(|(_, span)| span.closed())
            .map(|_| ())
    });
}

/// A response body of one 1 MiB chunk that says when it is dropped.
struct Pending {
    chunk: Option<Vec<u8>>,
    dropped: mpsc::Sender<()>,
}

impl futures_core::Stream for Pending {
    type Item = Result<Vec<u8>, std::io::Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::task::Poll::Ready(self.chunk.take().map(Ok))
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let _ = self.dropped.send(());
    }
}

/// Issue 34, item 1: a live client that never opens its flow-control
/// window (SETTINGS_INITIAL_WINDOW_SIZE 0, answering SETTINGS and PINGs)
/// used to keep its connection, and the responses waiting for its window,
/// forever: the idle timeout was armed only while no response was in
/// flight. A connection whose responses make no progress for the idle
/// timeout is now sent GOAWAY and closed, and the responses' bodies are
/// dropped.
#[test]
fn a_client_that_never_opens_its_window_is_sent_goaway_and_closed() {
    const STREAMS: u32 = 16;
    let system = system();
    let (dropped_tx, dropped) = mpsc::channel();
    let dropped_tx = std::sync::Mutex::new(dropped_tx);
    let settings = ServerSettings::default().idle_timeout(Duration::from_millis(300));
    let binding = Http::bind_with(
        &system,
        "127.0.0.1:0".parse().unwrap(),
        settings,
        move |_: Request<Body>| {
            let body = Pending {
                chunk: Some(vec![b'x'; 1 << 20]),
                dropped: dropped_tx.lock().unwrap().clone(),
            };
            async move { Response::new(Body::from_stream(body)) }
        },
    )
    .unwrap();
    let mark = capture().mark();
    let mut client = RawH2::open(&binding, &[(INITIAL_WINDOW_SIZE, 0)]);
    let peer = client.stream.local_addr().unwrap();
    let head = request_head("GET", "/big", None);
    for i in 0..STREAMS {
        client.send(HEADERS, END_STREAM | END_HEADERS, 1 + 2 * i, &head);
    }
    // Fails here before the fix: no GOAWAY, no close.
    let frames = client.until_closed();
    let kinds: Vec<u8> = frames.iter().map(|f| f.kind).collect();
    let heads = frames.iter().filter(|f| f.kind == HEADERS).count();
    assert_eq!(
        heads, STREAMS as usize,
        "every response head is sent: {kinds:?}"
    );
    assert!(
        !frames
            .iter()
            .any(|f| f.kind == DATA && !f.payload.is_empty()),
        "no byte of a body fits in a window of 0: {kinds:?}"
    );
    assert!(
        kinds.contains(&GOAWAY),
        "a GOAWAY before the close: {kinds:?}"
    );
    wait_connection_over(mark, peer);
    assert_eq!(binding.open_connections(), 0);
    // The memory of the pending responses is freed: every body dropped.
    for _ in 0..STREAMS {
        dropped
            .recv_timeout(PATIENCE)
            .expect("every pending response body is dropped");
    }
    binding.terminate(LONG).wait().unwrap();
    system.terminate().wait();
}

/// Issue 34, item 2: the bodies read whole that one connection holds at
/// once are bounded (by default twice `max_body_bytes`): a stream whose
/// body does not fit is answered 503 (a declared length at once, before
/// its body; an undeclared one once its bytes pass the budget), and a
/// body's share comes back once its handler has answered. Before, every
/// one of up to 256 streams could hold `max_body_bytes`.
#[test]
fn whole_request_bodies_held_at_once_on_one_connection_are_bounded() {
    const MAX: usize = 16 * 1024;
    let system = system();
    let settings = ServerSettings::default().max_body_bytes(MAX);
    let (binding, _entered) = slow_server_with(&system, settings, Gate::default());
    let mark = capture().mark();
    let mut client = RawH2::open(&binding, &[]);
    let peer = client.stream.local_addr().unwrap();
    // The streams' tasks run in any order: each step waits until the
    // server has taken the bodies before it in.
    let reading = |n: usize| {
        capture().wait_for(|r| {
            let events = r.events_on(mark, peer);
            let reading = events.iter().filter(|e| {
                e.fields.get("message").map(String::as_str) == Some("reading the request body")
            });
            (reading.count() >= n).then_some(())
        })
    };
    let almost = vec![b'b'; MAX - 1];
    let response_on = |id: u32| move |f: &Frame| f.stream == id && f.kind == HEADERS;
    // Two bodies of `max_body_bytes - 1`, declared, not ended: held.
    for id in [1, 3] {
        client.send(
            HEADERS,
            END_HEADERS,
            id,
            &request_head("POST", "/held", Some(MAX - 1)),
        );
        client.send(DATA, 0, id, &almost);
    }
    reading(2);
    // A third does not fit: 503 at once (fails here before the fix: it
    // is read, and held).
    client.send(
        HEADERS,
        END_HEADERS,
        5,
        &request_head("POST", "/past", Some(MAX - 1)),
    );
    let (answer, before) = client.until(response_on(5));
    let answer = answer.expect("stream 5 is answered before the connection closes");
    assert!(
        answer.has(END_STREAM),
        "the refusal has no body: {answer:?}"
    );
    assert!(
        !before.iter().any(|f| f.kind == HEADERS),
        "the held streams are not answered: {before:?}"
    );
    assert_eq!(
        binding
            .metrics()
            .responses_with(http::StatusCode::SERVICE_UNAVAILABLE),
        1
    );
    // Undeclared: counted as it comes, refused once past the budget.
    client.send(
        HEADERS,
        END_HEADERS,
        7,
        &request_head("POST", "/past", None),
    );
    client.send(DATA, 0, 7, &almost);
    let (answer, _) = client.until(response_on(7));
    assert!(answer.expect("stream 7 is answered").has(END_STREAM));
    assert_eq!(
        binding
            .metrics()
            .responses_with(http::StatusCode::SERVICE_UNAVAILABLE),
        2
    );
    // Stream 1 ends: answered, and its share of the budget comes back.
    client.send(DATA, END_STREAM, 1, &[]);
    client
        .until(response_on(1))
        .0
        .expect("stream 1 is answered");
    let (data, _) = client.until(|f| f.stream == 1 && f.kind == DATA);
    let data = data.expect("stream 1's body");
    assert_eq!(data.payload, format!("POST /held {}", MAX - 1).as_bytes());
    client.send(
        HEADERS,
        END_HEADERS,
        9,
        &request_head("POST", "/after", None),
    );
    client.send(DATA, END_STREAM, 9, &almost);
    client
        .until(response_on(9))
        .0
        .expect("stream 9 is answered");
    let (data, _) = client.until(|f| f.stream == 9 && f.kind == DATA);
    assert_eq!(
        data.expect("stream 9's body").payload,
        format!("POST /after {}", MAX - 1).as_bytes()
    );
    assert_eq!(binding.metrics().responses_with(http::StatusCode::OK), 2);
    drop(client);
    binding.terminate(LONG).wait().unwrap();
    system.terminate().wait();
}

/// Issue 34, item 3: the header read timeout bounds an HTTP/2 request
/// head as it bounds an HTTP/1.1 one: a HEADERS frame whose header block
/// is trickled an octet at a time keeps bytes coming but does not hold
/// the connection past it (the idle timeout here is an hour). (Trickled
/// in CONTINUATION frames instead, h2 refuses the sixth frame of a block
/// as a CONTINUATION flood.)
#[test]
fn an_http_2_request_head_must_arrive_within_the_header_read_timeout() {
    const VALUE: usize = 4000;
    let system = system();
    let settings = ServerSettings::default()
        .idle_timeout(Duration::from_secs(3600))
        .header_read_timeout(Duration::from_millis(300));
    let (binding, entered) = slow_server_with(&system, settings, Gate::default());
    let mark = capture().mark();
    let mut client = RawH2::open(&binding, &[]);
    let peer = client.stream.local_addr().unwrap();
    // GET /slow and a field `x-slow` whose 4000-octet value comes later,
    // in one HEADERS frame.
    let mut block = request_head("GET", "/slow", None);
    block.extend_from_slice(&[0x00, 6]);
    block.extend_from_slice(b"x-slow");
    block.extend_from_slice(&[0x7f, 0xa1, 0x1e]); // 127 + 3873 (RFC 7541 §5.1)
    let len = u32::try_from(block.len() + VALUE).unwrap();
    let mut frame = len.to_be_bytes()[1..].to_vec();
    frame.extend_from_slice(&[HEADERS, END_STREAM | END_HEADERS, 0, 0, 0, 1]);
    frame.extend_from_slice(&block);
    client.stream.write_all(&frame).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writer = client.stream.try_clone().unwrap();
    let trickle = {
        let stop = std::sync::Arc::clone(&stop);
        thread::spawn(move || {
            // The pace of a slowloris, not a wait for an event.
            for _ in 0..VALUE {
                // SeqCst: a test flag.
                if stop.load(std::sync::atomic::Ordering::SeqCst) || writer.write_all(b"v").is_err()
                {
                    break;
                }
                thread::sleep(Duration::from_millis(20));
            }
        })
    };
    // Fails here before the fix: the connection stays open.
    wait_connection_over(mark, peer);
    // SeqCst: a test flag.
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    trickle.join().unwrap();
    // Not acknowledging anything (a frame inside the HEADERS frame would
    // be a protocol error of its own): what came, then the close.
    let mut kinds = Vec::new();
    while let Some(frame) = client.read() {
        kinds.push(frame.kind);
    }
    assert!(!kinds.contains(&HEADERS), "no response: {kinds:?}");
    assert!(entered.try_recv().is_err(), "the handler was not called");
    assert_eq!(binding.open_connections(), 0);
    binding.terminate(LONG).wait().unwrap();
    system.terminate().wait();
}

/// Issue 34, item 3: a client that acknowledges the idle timeout's
/// GOAWAY (it answers h2's PING) and then keeps its socket open, silent,
/// used to hold the connection for the whole linger timeout (here an
/// hour); the lingering close after HTTP/2's GOAWAY now ends once the
/// client is quiet.
#[test]
fn a_client_quiet_after_an_acknowledged_goaway_does_not_hold_the_connection() {
    let system = system();
    let settings = ServerSettings::default()
        .idle_timeout(Duration::from_millis(300))
        .linger_timeout(Duration::from_secs(3600));
    let (binding, _entered) = slow_server_with(&system, settings, Gate::default());
    let mark = capture().mark();
    let mut client = RawH2::open(&binding, &[]);
    let peer = client.stream.local_addr().unwrap();
    // GOAWAY and PING, the PING answered, the final GOAWAY, then EOF: the
    // server shut down its write half.
    let frames = client.until_closed();
    let kinds: Vec<u8> = frames.iter().map(|f| f.kind).collect();
    assert!(kinds.contains(&GOAWAY), "{kinds:?}");
    assert!(kinds.contains(&PING), "{kinds:?}");
    // The client still holds its socket. Fails here before the fix.
    wait_connection_over(mark, peer);
    assert_eq!(binding.open_connections(), 0);
    drop(client);
    binding.terminate(LONG).wait().unwrap();
    system.terminate().wait();
}

/// Issue 34, item 3: after a protocol error (h2 sends GOAWAY with
/// PROTOCOL_ERROR), a client that keeps its socket open, silent, used to
/// hold the connection for the whole linger timeout (here an hour).
#[test]
fn a_client_quiet_after_a_protocol_error_does_not_hold_the_connection() {
    let system = system();
    let settings = ServerSettings::default().linger_timeout(Duration::from_secs(3600));
    let (binding, _entered) = slow_server_with(&system, settings, Gate::default());
    let mark = capture().mark();
    let mut client = RawH2::open(&binding, &[]);
    let peer = client.stream.local_addr().unwrap();
    // RFC 9113 §6.9: a WINDOW_UPDATE of 0 on the connection is a
    // connection error of type PROTOCOL_ERROR.
    client.send(WINDOW_UPDATE, 0, 0, &[0, 0, 0, 0]);
    let frames = client.until_closed();
    let goaway = frames
        .iter()
        .find(|f| f.kind == GOAWAY)
        .expect("a GOAWAY before the close");
    assert_eq!(goaway.payload[4..8], [0, 0, 0, 1], "PROTOCOL_ERROR");
    // Fails here before the fix.
    wait_connection_over(mark, peer);
    assert_eq!(binding.open_connections(), 0);
    drop(client);
    binding.terminate(LONG).wait().unwrap();
    system.terminate().wait();
}
