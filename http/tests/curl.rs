//! The server against curl (a real client): keep-alive, a chunked upload,
//! a chunked streamed response, Expect: 100-continue. Skipped, saying so,
//! when curl is not installed; a failure instead with
//! `PROSCENIUM_REQUIRE_PROGRAMS=1` (.ci/run installs curl and sets it; see
//! tests/programs/mod.rs).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;
mod programs;

use futures_core::Stream;
use http::header::TRANSFER_ENCODING;
use http::{Request, Response};
use proscenium_http::{Body, Http, ServerBinding};
use std::path::PathBuf;
use std::pin::Pin;
use std::process::{Command, Output};
use std::task::{Context, Poll};

fn curl(args: &[&str]) -> Output {
    let out = Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "30"])
        .args(args)
        .output()
        .expect("curl runs");
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `count` chunks of "chunk N\n".
struct Chunks {
    next: usize,
    count: usize,
}

impl Stream for Chunks {
    type Item = Result<String, std::io::Error>;
    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.next == self.count {
            return Poll::Ready(None);
        }
        self.next += 1;
        Poll::Ready(Some(Ok(format!("chunk {}\n", self.next))))
    }
}

fn expected_chunks(count: usize) -> String {
    (1..=count).map(|n| format!("chunk {n}\n")).collect()
}

/// `/stream`: 100 chunks; otherwise the request's body length, its
/// Transfer-Encoding and a checksum.
fn serve(system: &proscenium::ActorSystem) -> ServerBinding {
    Http::bind(
        system,
        "127.0.0.1:0".parse().unwrap(),
        |req: Request<Body>| async move {
            if req.uri().path() == "/stream" {
                return Response::new(Body::from_stream(Chunks {
                    next: 0,
                    count: 100,
                }));
            }
            let te = req
                .headers()
                .get(TRANSFER_ENCODING)
                .map(|v| v.to_str().unwrap_or("?").to_string())
                .unwrap_or_default();
            let sum: u64 = req.body().as_bytes().iter().map(|b| u64::from(*b)).sum();
            Response::new(Body::from(format!(
                "{} {} te={te} sum={sum}",
                req.uri().path(),
                req.body().len()
            )))
        },
    )
    .expect("bind")
}

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("proscenium-http-{}-{name}", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

fn upload() -> Vec<u8> {
    (0..200_000u32).map(|i| (i % 251) as u8).collect()
}

fn sum(bytes: &[u8]) -> u64 {
    bytes.iter().map(|b| u64::from(*b)).sum()
}

#[test]
fn curl_reuses_a_keep_alive_connection() {
    if !programs::present("curl") {
        return;
    }
    let system = common::system();
    let binding = serve(&system);
    let base = format!("http://{}", binding.local_addr());
    let out = curl(&[
        "-w",
        "%{num_connects}\n",
        "-o",
        "/dev/null",
        "-o",
        "/dev/null",
        &format!("{base}/one"),
        &format!("{base}/two"),
    ]);
    // One connect for the first transfer, none for the second: reused.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n0\n");
    system.terminate().wait();
}

#[test]
fn curl_uploads_a_chunked_body() {
    if !programs::present("curl") {
        return;
    }
    let system = common::system();
    let binding = serve(&system);
    let body = upload();
    let file = temp_file("chunked", &body);
    let out = curl(&[
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        &format!("@{}", file.display()),
        &format!("http://{}/up", binding.local_addr()),
    ]);
    std::fs::remove_file(&file).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("/up {} te=chunked sum={}", body.len(), sum(&body))
    );
    system.terminate().wait();
}

#[test]
fn curl_reads_a_chunked_streamed_response() {
    if !programs::present("curl") {
        return;
    }
    let system = common::system();
    let binding = serve(&system);
    let out = curl(&[
        "--dump-header",
        "-",
        &format!("http://{}/stream", binding.local_addr()),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(
        head.to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{head}"
    );
    assert_eq!(body, expected_chunks(100));
    system.terminate().wait();
}

#[test]
fn curl_gets_100_continue() {
    if !programs::present("curl") {
        return;
    }
    let system = common::system();
    let binding = serve(&system);
    let body = upload();
    let file = temp_file("continue", &body);
    let out = curl(&[
        "--verbose",
        "-H",
        "Expect: 100-continue",
        "--data-binary",
        &format!("@{}", file.display()),
        &format!("http://{}/up", binding.local_addr()),
    ]);
    std::fs::remove_file(&file).unwrap();
    let verbose = String::from_utf8_lossy(&out.stderr);
    assert!(
        verbose.contains("< HTTP/1.1 100 Continue"),
        "no 100 Continue:\n{verbose}"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("/up {} te= sum={}", body.len(), sum(&body))
    );
    system.terminate().wait();
}

/// The shared check of tests/programs/mod.rs (tested here, once): a
/// missing program skips the test unless programs are required, and then
/// fails it, naming the program.
#[test]
fn a_missing_program_skips_unless_required_and_then_fails_naming_it() {
    let missing = "proscenium-no-such-program";
    // Not `present_when`: its SKIPPED line would print in every passing run.
    let skipped = programs::availability(missing, false).expect_err("missing");
    assert!(skipped.starts_with("SKIPPED: "), "{skipped}");
    assert!(skipped.contains(missing), "{skipped}");
    let failed = std::panic::catch_unwind(|| programs::availability(missing, true))
        .expect_err("a required program that is missing fails the test");
    let message = failed
        .downcast_ref::<String>()
        .expect("a formatted panic message");
    assert!(message.contains(missing), "{message}");
    assert!(message.contains(programs::REQUIRE_PROGRAMS), "{message}");
}
