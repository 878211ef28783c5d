//! Streamed request bodies (`ServerSettings::stream_request_bodies`): the
//! handler runs once the head is in and reads the body as the client sends
//! it, on HTTP/1.1 (Content-Length and chunked) and HTTP/2, with the
//! limits, the timeouts, a client that leaves and a termination.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod programs;
mod support;

use http::{Request, Response, StatusCode};
use proscenium::ActorSystem;
use proscenium_http::{Body, Http, RequestBodyError, ServerBinding, ServerSettings};
use std::io::{Read, Write};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{connect, read_answer, system, Gate, PATIENCE};

const LONG: Duration = Duration::from_secs(3600);

/// What the handler saw of a body.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// Its first piece, as soon as it came.
    First(usize),
    /// Its end: the total, or the error it ended with.
    End(Result<usize, RequestBodyError>),
}

/// A streaming server whose handler reports the body's first piece and
/// its end on `seen`, waits for `gate` before reading on if the path is
/// `/gated`, answers at once without reading on `/early`, and otherwise
/// answers with the total (or 400 with the error).
fn streaming_server(
    system: &ActorSystem,
    settings: ServerSettings,
    gate: Gate,
) -> (ServerBinding, mpsc::Receiver<Seen>) {
    let (tx, rx) = mpsc::channel();
    let tx = Arc::new(Mutex::new(tx));
    let binding = Http::bind_with(
        system,
        "127.0.0.1:0".parse().unwrap(),
        settings.stream_request_bodies(true),
        move |req: Request<Body>| {
            let tx = Arc::clone(&tx);
            let gate = gate.clone();
            async move {
                let report = |seen: Seen| {
                    let _ = tx.lock().unwrap().send(seen);
                };
                let path = req.uri().path().to_string();
                let mut body = req.into_body();
                if path == "/early" {
                    return Response::new(Body::from("early"));
                }
                if path == "/gated" {
                    gate.await;
                }
                let mut total = 0;
                let mut first = true;
                let end = loop {
                    match body.next_chunk().await {
                        Some(Ok(piece)) => {
                            if first {
                                report(Seen::First(piece.len()));
                                first = false;
                            }
                            total += piece.len();
                        }
                        Some(Err(e)) => {
                            break Err(*e.downcast_ref::<RequestBodyError>().expect("typed"))
                        }
                        None => break Ok(total),
                    }
                };
                report(Seen::End(end));
                match end {
                    Ok(total) => Response::new(Body::from(total.to_string())),
                    Err(e) => {
                        let mut response = Response::new(Body::from(e.to_string()));
                        *response.status_mut() = StatusCode::BAD_REQUEST;
                        response
                    }
                }
            }
        },
    )
    .unwrap();
    (binding, rx)
}

fn seen(rx: &mpsc::Receiver<Seen>) -> Seen {
    rx.recv_timeout(PATIENCE).expect("the handler reported")
}

/// The handler reads the first piece while the rest is still with the
/// client (it is sent only once the handler said so), on Content-Length
/// and chunked bodies; a body read to its end keeps the connection.
#[test]
fn the_handler_reads_the_body_as_it_comes() {
    let system = system();
    let (binding, rx) = streaming_server(&system, ServerSettings::default(), Gate::default());
    let mut stream = connect(&binding);
    stream
        .write_all(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhello")
        .unwrap();
    assert_eq!(seen(&rx), Seen::First(5));
    stream.write_all(b"world").unwrap();
    assert_eq!(seen(&rx), Seen::End(Ok(10)));
    let answer = read_answer(&mut stream);
    assert_eq!((answer.status, answer.body.as_str()), (200, "10"));
    stream
        .write_all(
            b"POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n",
        )
        .unwrap();
    assert_eq!(seen(&rx), Seen::First(3));
    stream
        .write_all(b"4\r\ndefg\r\n0\r\nTrailer: t\r\n\r\n")
        .unwrap();
    assert_eq!(seen(&rx), Seen::End(Ok(7)));
    let answer = read_answer(&mut stream);
    assert_eq!((answer.status, answer.body.as_str()), (200, "7"));
    assert_eq!(answer.header("connection"), None, "kept alive");
    binding.terminate(LONG).wait().unwrap();
    system.terminate().wait();
}

/// A body far larger than what waits between the socket and the handler
/// (64 KiB): the handler, which reads only once the gate opens, gets every
/// byte, in order.
#[test]
fn a_large_body_streams_whole_and_in_order() {
    const LEN: usize = 8 * 1024 * 1024;
    let system = system();
    let gate = Gate::default();
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let opened = gate.clone();
    let binding = Http::bind_with(
        &system,
        "127.0.0.1:0".parse().unwrap(),
        ServerSettings::default()
            .max_body_bytes(LEN)
            .stream_request_bodies(true),
        move |req: Request<Body>| {
            let gate = opened.clone();
            let _ = tx.lock().unwrap().send(());
            async move {
                gate.await;
                let bytes = req.into_body().read_all().await.unwrap();
                let in_order = bytes.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8);
                Response::new(Body::from(format!("{} {in_order}", bytes.len())))
            }
        },
    )
    .unwrap();
    let mut stream = connect(&binding);
    let head = format!("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {LEN}\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    rx.recv_timeout(PATIENCE).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let body: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8).collect();
        writer.write_all(&body).unwrap();
    });
    gate.open();
    sender.join().unwrap();
    let answer = read_answer(&mut stream);
    assert_eq!((answer.status, answer.body), (200, format!("{LEN} true")));
    binding.terminate(LONG).wait().unwrap();
    system.terminate().wait();
}

/// `max_body_bytes` holds: a Content-Length over it is 413 without the
/// handler; a chunked body that grows past it ends, for the handler, with
/// `TooLarge`, and the connection closes after the handler's response.
#[test]
fn the_body_limit_holds_on_a_streamed_body() {
    let system = system();
    let settings = ServerSettings::default().max_body_bytes(8);
    let (binding, rx) = streaming_server(&system, settings, Gate::default());
    let mut stream = connect(&binding);
    stream
        .write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n123456789")
        .unwrap();
    assert_eq!(read_answer(&mut stream).status, 413);
    let mut stream = connect(&binding);
    stream
        .write_all(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n12345\r\n5\r\n67890\r\n0\r\n\r\n")
        .unwrap();
    assert_eq!(seen(&rx), Seen::First(5));
    assert_eq!(seen(&rx), Seen::End(Err(RequestBodyError::TooLarge)));
    let answer = read_answer(&mut stream);
    assert_eq!(answer.status, 400);
    assert_eq!(answer.header("connection"), Some("close"));
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{rest:?}");
    let by_status: Vec<_> = binding.metrics().responses_by_status().collect();
    assert_eq!(
        by_status,
        [
            (StatusCode::BAD_REQUEST, 1),
            (StatusCode::PAYLOAD_TOO_LARGE, 1)
        ]
    );
    binding.terminate(LONG).wait().unwrap();
    system.terminate().wait();
}

/// A malformed chunk line, a client that leaves mid-body and a body that
/// stalls past the body read timeout each end the handler's body with
/// their error.
#[test]
fn a_cut_body_ends_with_its_error() {
    let system = system();
    let settings = ServerSettings::default().body_read_timeout(Duration::from_millis(300));
    let (binding, rx) = streaming_server(&system, settings, Gate::default());
    let mut stream = connect(&binding);
    stream
        .write_all(
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n2;\nx\r\n",
        )
        .unwrap();
    assert_eq!(seen(&rx), Seen::First(2));
    assert_eq!(seen(&rx), Seen::End(Err(RequestBodyError::Malformed)));
    assert_eq!(read_answer(&mut stream).status, 400);
    let mut stream = connect(&binding);
    stream
        .write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        .unwrap();
    assert_eq!(seen(&rx), Seen::First(3));
    drop(stream);
    assert_eq!(seen(&rx), Seen::End(Err(RequestBodyError::ClientLeft)));
    let mut stream = connect(&binding);
    stream
        .write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        .unwrap();
    assert_eq!(seen(&rx), Seen::First(3));
    assert_eq!(seen(&rx), Seen::End(Err(RequestBodyError::TimedOut)));
    assert_eq!(read_answer(&mut stream).status, 400);
    binding.terminate(LONG).wait().unwrap();
    system.terminate().wait();
}

/// A handler that answers without reading the body: its response goes
/// out, with `Connection: close` (the rest of the body is not a next
/// request), and the connection closes.
#[test]
fn a_handler_that_answers_before_the_end_of_the_body_closes_the_connection() {
    let system = system();
    let (binding, _rx) = streaming_server(&system, ServerSettings::default(), Gate::default());
    let mut stream = connect(&binding);
    stream
        .write_all(b"POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
        .unwrap();
    let answer = read_answer(&mut stream);
    assert_eq!((answer.status, answer.body.as_str()), (200, "early"));
    assert_eq!(answer.header("connection"), Some("close"));
    binding.terminate(LONG).wait().unwrap();
    system.terminate().wait();
}

/// Akka: "existing connections [...] are allowed to finish the in-flight
/// requests": a request whose handler is reading its streamed body when
/// the termination starts is in flight, so its body is read on to its end
/// and its response sent (with `Connection: close`).
#[test]
fn a_streamed_body_in_flight_is_read_on_during_a_termination() {
    let system = system();
    let (binding, rx) = streaming_server(&system, ServerSettings::default(), Gate::default());
    let mut stream = connect(&binding);
    stream
        .write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nabc")
        .unwrap();
    assert_eq!(seen(&rx), Seen::First(3));
    let termination = binding.terminate(LONG);
    let signal = binding.when_termination_signal_issued();
    let (tx, issued) = mpsc::channel();
    std::thread::spawn(move || tx.send(signal.wait()));
    issued.recv_timeout(PATIENCE).unwrap().unwrap();
    stream.write_all(b"def").unwrap();
    assert_eq!(seen(&rx), Seen::End(Ok(6)));
    let answer = read_answer(&mut stream);
    assert_eq!((answer.status, answer.body.as_str()), (200, "6"));
    assert_eq!(answer.header("connection"), Some("close"));
    let terminated = termination.wait().unwrap();
    assert_eq!(terminated.forced_connections, 0);
    system.terminate().wait();
}

/// HTTP/2: a stream's DATA frames reach the handler as they come, and the
/// limit holds (curl sends the body; the handler counts it).
#[cfg(feature = "http2")]
#[test]
fn streamed_bodies_on_http_2() {
    use std::process::Command;
    if !programs::present("curl") {
        return;
    }
    let system = system();
    let settings = ServerSettings::default().max_body_bytes(1 << 20);
    let (binding, rx) = streaming_server(&system, settings, Gate::default());
    let dir =
        std::env::temp_dir().join(format!("proscenium-http-streaming-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let small = dir.join("small");
    std::fs::write(&small, vec![7u8; 200_000]).unwrap();
    let large = dir.join("large");
    std::fs::write(&large, vec![7u8; (1 << 20) + 1]).unwrap();
    let post = |file: &std::path::Path| {
        let out = Command::new("curl")
            .args(["--silent", "--show-error", "--max-time", "30"])
            .args([
                "--http2-prior-knowledge",
                "--write-out",
                " %{http_code} %{http_version}",
            ])
            .arg("--data-binary")
            .arg(format!("@{}", file.display()))
            .arg(format!("http://{}/", binding.local_addr()))
            .output()
            .expect("curl runs");
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(post(&small), "200000 200 2");
    assert!(matches!(seen(&rx), Seen::First(n) if n > 0));
    assert_eq!(seen(&rx), Seen::End(Ok(200_000)));
    // Over the limit with a Content-Length: 413 before the handler, then
    // RST_STREAM(NO_ERROR) for the rest of the body (RFC 9113 §8.1: "a
    // server MAY request that the client abort transmission of a request
    // without error by sending a RST_STREAM with an error code of NO_ERROR
    // after sending a complete response"). curl 7.88 reports that as a
    // stream error; nghttp reads the 413.
    if programs::present("nghttp") {
        let out = Command::new("nghttp")
            .arg("--verbose")
            .arg("--data")
            .arg(&large)
            .arg(format!("http://{}/", binding.local_addr()))
            .output()
            .expect("nghttp runs");
        let trace = String::from_utf8_lossy(&out.stdout);
        assert!(trace.contains(":status: 413"), "{trace}");
        assert!(trace.contains("error_code=NO_ERROR"), "{trace}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    binding.terminate(LONG).wait().unwrap();
    system.terminate().wait();
}

/// The TOML key turns it on.
#[test]
fn the_toml_key_turns_streaming_on() {
    let settings =
        ServerSettings::from_toml_str("[http.server]\nstream-request-bodies = true\n").unwrap();
    assert!(format!("{settings:?}").contains("stream_request_bodies: true"));
    let refused = ServerSettings::from_toml_str("[http.server]\nstream-request-bodies = 1\n");
    assert!(refused
        .unwrap_err()
        .to_string()
        .contains("stream-request-bodies"));
}
