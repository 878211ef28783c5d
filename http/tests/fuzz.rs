//! Whole connections fed random and mutated bytes, split into random
//! reads: never a panic, never a hang; the client gets well-formed
//! responses, then the connection closes.
//!
//! A panic in the server (a connection's task, the accept loop) is caught
//! and counted by the scheduler, and the client only sees its connection
//! close, which random input may well deserve: so each case also checks
//! that the scheduler caught no panic while it ran ([`no_panic_since`]).
//!
//! A failing case's seed is saved (proptest's `FileFailurePersistence::
//! WithSource("proptest-regressions")`: the file beside this one,
//! `tests/fuzz.proptest-regressions`) and replayed first by every later
//! run; commit the file with the fix, as the regression test.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use futures_core::Stream;
use http::{Request, Response};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, FileFailurePersistence, TestRunner};
use proscenium::ActorSystem;
use proscenium_http::{Body, Http, ServerBinding, ServerSettings};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// Two chunks.
struct Two(u8);

impl Stream for Two {
    type Item = Result<&'static [u8], std::io::Error>;
    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0 += 1;
        Poll::Ready(match self.0 {
            1 => Some(Ok(b"one ")),
            2 => Some(Ok(b"two")),
            _ => None,
        })
    }
}

/// The fuzzed servers' settings: small limits, and timeouts that bound
/// each case (no input may hold a connection).
fn settings() -> ServerSettings {
    ServerSettings::default()
        .max_body_bytes(4096)
        .max_head_bytes(2048)
        .idle_timeout(Duration::from_secs(5))
        .header_read_timeout(Duration::from_secs(5))
}

fn serve(system: &ActorSystem) -> ServerBinding {
    Http::bind_with(
        system,
        "127.0.0.1:0".parse().unwrap(),
        settings(),
        |req: Request<Body>| async move {
            if req.uri().path().starts_with("/s") {
                Response::new(Body::from_stream(Two(0)))
            } else {
                Response::new(Body::from(format!("got {}", req.body().len())))
            }
        },
    )
    .expect("bind")
}

/// A well-formed request (as in wire.rs's unit tests).
fn request() -> impl Strategy<Value = Vec<u8>> {
    let method = prop::sample::select(vec!["GET", "POST", "PUT", "DELETE"]);
    let header = ("[A-Za-z][A-Za-z0-9-]{0,11}", "[ -~]{0,24}");
    (
        method,
        "/[a-z0-9/?=&%.]{0,24}",
        prop::bool::ANY,
        prop::collection::vec(header, 0..4),
        0..4u8,
        prop::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(method, path, http_11, headers, framing, body)| {
            let version = if http_11 { "1.1" } else { "1.0" };
            let mut out = format!("{method} {path} HTTP/{version}\r\nHost: x\r\n");
            for (name, value) in headers {
                out.push_str(&format!("{name}: {value}\r\n"));
            }
            let mut out = out.into_bytes();
            match framing {
                0 => out.extend_from_slice(b"\r\n"),
                1 | 2 => {
                    if framing == 2 {
                        out.extend_from_slice(b"Expect: 100-continue\r\n");
                    }
                    out.extend_from_slice(
                        format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes(),
                    );
                    out.extend_from_slice(&body);
                }
                _ => {
                    out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                    for chunk in body.chunks(7) {
                        out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                        out.extend_from_slice(chunk);
                        out.extend_from_slice(b"\r\n");
                    }
                    out.extend_from_slice(b"0\r\n\r\n");
                }
            }
            out
        })
}

fn mutate(mut bytes: Vec<u8>, edits: &[(Index, u8, u8)]) -> Vec<u8> {
    for (at, kind, byte) in edits {
        if bytes.is_empty() {
            bytes.push(*byte);
            continue;
        }
        let i = at.index(bytes.len());
        match kind % 3 {
            0 => bytes[i] = *byte,
            1 => bytes.insert(i, *byte),
            _ => {
                bytes.remove(i);
            }
        }
    }
    bytes
}

/// Sends `input` in pieces split at `splits`, half-closes, reads all.
/// `Err(bytes)` if the connection was reset (bytes may then be missing).
fn exchange(binding: &ServerBinding, input: &[u8], splits: &[Index]) -> Result<Vec<u8>, Vec<u8>> {
    let mut stream = TcpStream::connect(binding.local_addr()).unwrap();
    // No hang: every case ends well within this (the server's timeouts are
    // 5 s); a read that waits longer fails the case.
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut cuts: Vec<usize> = splits.iter().map(|s| s.index(input.len() + 1)).collect();
    cuts.sort_unstable();
    let mut from = 0;
    for cut in cuts.into_iter().chain([input.len()]) {
        // The server may have closed already (a refusal): the rest is lost.
        if stream.write_all(&input[from..cut]).is_err() {
            break;
        }
        stream.flush().unwrap();
        from = cut;
    }
    let _ = stream.shutdown(Shutdown::Write);
    let mut out = Vec::new();
    match stream.read_to_end(&mut out) {
        Ok(_) => Ok(out),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            panic!(
                "the connection hung; got {:?}",
                String::from_utf8_lossy(&out)
            )
        }
        Err(_) => Err(out),
    }
}

/// Checks `bytes` is a sequence of well-formed responses; the last may be
/// cut short only if `reset`.
fn well_formed(bytes: &[u8], reset: bool) -> Result<usize, String> {
    let mut pos = 0;
    let mut responses = 0;
    while pos < bytes.len() {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut response = httparse::Response::new(&mut headers);
        let len = match response.parse(&bytes[pos..]) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) if reset => return Ok(responses),
            other => {
                return Err(format!(
                    "at {pos}: {other:?}: {:?}",
                    String::from_utf8_lossy(&bytes[pos..])
                ))
            }
        };
        let code = response.code.unwrap();
        let header = |name: &str| {
            response
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| String::from_utf8_lossy(h.value).into_owned())
        };
        let (length, chunked) = (header("content-length"), header("transfer-encoding"));
        pos += len;
        if (100..200).contains(&code) {
            continue;
        }
        responses += 1;
        if code == 204 || code == 304 {
            continue;
        }
        if let Some(length) = length {
            let n: usize = length.parse().map_err(|_| format!("length {length}"))?;
            if bytes.len() - pos < n {
                return if reset {
                    Ok(responses)
                } else {
                    Err("a body cut short".into())
                };
            }
            pos += n;
        } else if chunked.as_deref() == Some("chunked") {
            loop {
                let rest = &bytes[pos..];
                match httparse::parse_chunk_size(rest) {
                    Ok(httparse::Status::Complete((used, 0))) => {
                        if rest.len() < used + 2 {
                            return if reset {
                                Ok(responses)
                            } else {
                                Err("no end".into())
                            };
                        }
                        pos += used + 2;
                        break;
                    }
                    Ok(httparse::Status::Complete((used, size))) => pos += used + size as usize + 2,
                    Ok(httparse::Status::Partial) if reset => return Ok(responses),
                    other => return Err(format!("chunk: {other:?}")),
                }
                if pos > bytes.len() {
                    return if reset {
                        Ok(responses)
                    } else {
                        Err("a chunk cut short".into())
                    };
                }
            }
        } else {
            // Close-delimited (a stream to HTTP/1.0): the rest is the body.
            return Ok(responses);
        }
    }
    Ok(responses)
}

fn check(binding: &ServerBinding, input: &[u8], splits: &[Index]) -> Result<(), TestCaseError> {
    let (bytes, reset) = match exchange(binding, input, splits) {
        Ok(bytes) => (bytes, false),
        Err(bytes) => (bytes, true),
    };
    well_formed(&bytes, reset).map_err(TestCaseError::fail)?;
    Ok(())
}

/// Panics the system's scheduler caught so far (each was logged and
/// counted by the worker that caught it).
fn caught_panics(system: &ActorSystem) -> u64 {
    system.scheduler_handle().metrics().total().panics
}

/// Fails the case if the scheduler caught a panic since `before`. A
/// task counts its panic before its future, and with it the connection's
/// socket, is dropped, so the panic of a case's connection is counted by
/// the time the client has read to the end.
fn no_panic_since(system: &ActorSystem, before: u64) -> Result<(), TestCaseError> {
    let panics = caught_panics(system) - before;
    prop_assert_eq!(panics, 0, "the server panicked (see the log above)");
    Ok(())
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: 256,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        source_file: Some(file!()),
        ..Config::default()
    })
}

#[test]
fn connections_take_mutated_requests() {
    take_mutated_requests(serve);
}

/// Mutated well-formed requests, split into random reads, to the server
/// `serve` binds: never a panic, never a hang, well-formed responses.
fn take_mutated_requests(serve: fn(&ActorSystem) -> ServerBinding) {
    let system = common::system();
    let binding = serve(&system);
    let input = (
        prop::collection::vec(request(), 1..4),
        prop::collection::vec((any::<Index>(), any::<u8>(), any::<u8>()), 0..4),
        prop::collection::vec(any::<Index>(), 0..6),
    );
    runner()
        .run(&input, |(requests, edits, splits)| {
            let before = caught_panics(&system);
            let bytes = mutate(requests.concat(), &edits);
            check(&binding, &bytes, &splits)?;
            no_panic_since(&system, before)
        })
        .unwrap();
    system.terminate().wait();
}

#[test]
fn connections_take_well_formed_requests_in_any_split() {
    let system = common::system();
    let binding = serve(&system);
    let input = (
        prop::collection::vec(request(), 1..4),
        prop::collection::vec(any::<Index>(), 0..8),
    );
    runner()
        .run(&input, |(requests, splits)| {
            let before = caught_panics(&system);
            let bytes = requests.concat();
            let (out, reset) = match exchange(&binding, &bytes, &splits) {
                Ok(out) => (out, false),
                Err(out) => (out, true),
            };
            let responses = well_formed(&out, reset).map_err(TestCaseError::fail)?;
            prop_assert!(
                responses >= 1 || reset,
                "no response to {:?}",
                String::from_utf8_lossy(&bytes)
            );
            no_panic_since(&system, before)
        })
        .unwrap();
    system.terminate().wait();
}

#[test]
fn connections_take_random_bytes() {
    let system = common::system();
    let binding = serve(&system);
    let input = (
        prop::collection::vec(any::<u8>(), 0..600),
        prop::collection::vec(any::<Index>(), 0..4),
    );
    runner()
        .run(&input, |(bytes, splits)| {
            let before = caught_panics(&system);
            check(&binding, &bytes, &splits)?;
            no_panic_since(&system, before)
        })
        .unwrap();
    system.terminate().wait();
}

/// HTTP/1.1 requests with a body (by Content-Length or chunked) and no
/// other header: each is answered, in order, however the bytes are split.
#[test]
fn pipelined_requests_in_any_split_are_answered_in_order() {
    let system = common::system();
    let binding = serve(&system);
    let request =
        (prop::bool::ANY, prop::collection::vec(any::<u8>(), 0..40)).prop_map(|(chunked, body)| {
            let mut out = b"POST /e HTTP/1.1\r\nHost: x\r\n".to_vec();
            if chunked {
                out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                for chunk in body.chunks(5) {
                    out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                    out.extend_from_slice(chunk);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"0\r\n\r\n");
            } else {
                out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
                out.extend_from_slice(&body);
            }
            (out, body.len())
        });
    let input = (
        prop::collection::vec(request, 1..6),
        prop::collection::vec(any::<Index>(), 0..10),
    );
    runner()
        .run(&input, |(requests, splits)| {
            let before = caught_panics(&system);
            let bytes: Vec<u8> = requests.iter().flat_map(|(r, _)| r.clone()).collect();
            let out =
                exchange(&binding, &bytes, &splits).map_err(|_| TestCaseError::fail("reset"))?;
            let expected: String = requests
                .iter()
                .map(|(_, len)| {
                    let body = format!("got {len}");
                    format!("content-length: {}\r\n\r\n{body}", body.len())
                })
                .collect();
            // Each response ends with its length and body; strip the
            // status line and the Date (which varies) to compare.
            let text = String::from_utf8_lossy(&out);
            let got: String = text
                .split("HTTP/1.1 200 OK\r\n")
                .filter(|r| !r.is_empty())
                .map(|r| {
                    r.split_once("\r\n")
                        .map(|(_date, rest)| rest.to_string())
                        .unwrap_or_default()
                })
                .collect();
            prop_assert_eq!(got, expected);
            no_panic_since(&system, before)
        })
        .unwrap();
    system.terminate().wait();
}

/// Chunk sizes of up to 16 hex digits (httparse's limit: any u64, with or
/// without leading zeros), after a first chunk of a few bytes: beyond
/// `max_body_bytes` the answer is 413, within it the body is served; never
/// a panic nor a reset (sums with such sizes once overflowed).
#[test]
fn chunk_sizes_of_up_to_16_hex_digits() {
    let system = common::system();
    let binding = serve(&system);
    let size = prop_oneof![
        any::<u64>(),
        0u64..5000,
        (u64::MAX - 100)..=u64::MAX,
        Just(1u64 << 63),
        // The last chunk's size.
        Just(0u64),
    ];
    let input = (0usize..64, size, any::<bool>());
    runner()
        .run(&input, |(first, size, padded)| {
            let mut bytes =
                b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            if first > 0 {
                bytes.extend_from_slice(format!("{first:x}\r\n").as_bytes());
                bytes.extend(std::iter::repeat_n(b'a', first));
                bytes.extend_from_slice(b"\r\n");
            }
            let line = if padded {
                format!("{size:016x}\r\n")
            } else {
                format!("{size:x}\r\n")
            };
            bytes.extend_from_slice(line.as_bytes());
            let total = (first as u64).checked_add(size);
            let fits = total.is_some_and(|t| t <= 4096);
            if size == 0 {
                // The size line was the last chunk: the empty trailers.
                bytes.extend_from_slice(b"\r\n");
            } else if fits {
                bytes.extend(std::iter::repeat_n(b'b', size as usize));
                bytes.extend_from_slice(b"\r\n0\r\n\r\n");
            }
            let out = exchange(&binding, &bytes, &[]).map_err(|_| TestCaseError::fail("reset"))?;
            prop_assert_eq!(well_formed(&out, false).map_err(TestCaseError::fail)?, 1);
            let text = String::from_utf8_lossy(&out);
            if fits {
                prop_assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{}", text);
                let body = format!("got {}", total.unwrap_or_default());
                prop_assert!(text.ends_with(&body), "{}", text);
            } else {
                prop_assert!(
                    text.starts_with("HTTP/1.1 413 "),
                    "{}: {}",
                    line.trim(),
                    text
                );
            }
            Ok(())
        })
        .unwrap();
    system.terminate().wait();
}

/// A server whose handler reads the body with `Body::read_all` and answers
/// its length and a checksum (400 with the error if the body was cut):
/// with `stream` on, bodies are streamed to it
/// (`ServerSettings::stream_request_bodies`).
fn serve_bodies(system: &ActorSystem, stream: bool) -> ServerBinding {
    Http::bind_with(
        system,
        "127.0.0.1:0".parse().unwrap(),
        settings().stream_request_bodies(stream),
        |req: Request<Body>| async move {
            match req.into_body().read_all().await {
                Ok(bytes) => {
                    let sum = bytes.iter().fold(0u32, |sum, &b| {
                        sum.wrapping_mul(31).wrapping_add(u32::from(b))
                    });
                    Response::new(Body::from(format!("got {} {sum:08x}", bytes.len())))
                }
                Err(e) => {
                    let mut response = Response::new(Body::from(e.to_string()));
                    *response.status_mut() = http::StatusCode::BAD_REQUEST;
                    response
                }
            }
        },
    )
    .expect("bind")
}

/// The final responses in `bytes` (each with a Content-Length, as every
/// answer of [`serve_bodies`] is): status and body.
fn answers(bytes: &[u8]) -> Vec<(u16, Vec<u8>)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut response = httparse::Response::new(&mut headers);
        let Ok(httparse::Status::Complete(len)) = response.parse(&bytes[pos..]) else {
            break;
        };
        let code = response.code.unwrap();
        let length = response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .and_then(|h| std::str::from_utf8(h.value).ok()?.parse::<usize>().ok())
            .unwrap_or(0);
        pos += len;
        if (100..200).contains(&code) {
            continue;
        }
        let end = (pos + length).min(bytes.len());
        out.push((code, bytes[pos..end].to_vec()));
        pos = end;
    }
    out
}

/// Bodies streamed to the handler (the decoder feeding a bounded feed
/// while the handler runs) against bodies read whole (the same decoder
/// into a `Vec` before the handler runs): well formed requests (Content-Length, chunked, `100-continue`, HTTP/1.0 and
/// 1.1, pipelined), split into random reads, get the same answers from a
/// server that streams bodies to the handler as from one that reads them
/// whole.
#[test]
fn streamed_bodies_are_answered_as_whole_bodies_in_any_split() {
    let system = common::system();
    let whole = serve_bodies(&system, false);
    let streamed = serve_bodies(&system, true);
    let input = (
        prop::collection::vec(request(), 1..4),
        prop::collection::vec(any::<Index>(), 0..8),
    );
    runner()
        .run(&input, |(requests, splits)| {
            let before = caught_panics(&system);
            let bytes = requests.concat();
            let expected = exchange(&whole, &bytes, &splits)
                .map_err(|_| TestCaseError::fail("the whole-body server reset the connection"))?;
            let got = exchange(&streamed, &bytes, &splits)
                .map_err(|_| TestCaseError::fail("the streaming server reset the connection"))?;
            prop_assert_eq!(answers(&got), answers(&expected));
            prop_assert!(!answers(&got).is_empty());
            no_panic_since(&system, before)
        })
        .unwrap();
    system.terminate().wait();
}

/// Mutated and random requests to a server that streams bodies: never a
/// panic, never a hang, well-formed responses.
#[test]
fn streaming_connections_take_mutated_requests() {
    take_mutated_requests(|system| serve_bodies(system, true));
}
