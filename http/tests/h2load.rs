//! The HTTP/2 load test of issue 24, as tests/wrk.rs is for HTTP/1.1:
//! h2load (nghttp2's) against the `server` example over HTTP/2 (h2c, prior
//! knowledge; the default `http2` feature), SIGTERM (the coordinated shutdown's
//! `terminate(2 s)`) mid-load, and every stream accounted for. Skipped,
//! saying so, when h2load is not installed; a failure instead with
//! `PROSCENIUM_REQUIRE_PROGRAMS=1` (.ci/run installs nghttp2-client and
//! sets it; see tests/programs/mod.rs).
//!
//! How h2load counts (nghttp2's src/h2load.cc): a stream is `started`
//! once its HEADERS frame is submitted, `done` once it closes, whatever
//! the outcome; `succeeded` are the done ones with a 2xx or 3xx status,
//! `failed` the rest, among them the `errored` (reset or refused, with no
//! status, and every request never started when the run ends, which it
//! does once every client's connection has ended); the `status codes`
//! line counts the statuses received.
#![cfg(all(unix, feature = "http2"))]
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod programs;
mod server_process;

use server_process::{signal, ServerProcess, PATIENCE};
use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::mpsc;

/// The numbers of a line such as `requests: 10 total, 9 started, ...`,
/// keyed by the word after each.
fn counts(line: &str) -> HashMap<String, u64> {
    let (_, rest) = line.split_once(':').unwrap();
    rest.split(',')
        .filter_map(|part| {
            let mut words = part.split_whitespace();
            let n = words.next()?.parse().ok()?;
            Some((words.next()?.to_string(), n))
        })
        .collect()
}

/// Akka: "existing connections [...] are allowed to finish the in-flight
/// requests", "If a request is “in-flight” (being handled by user code),
/// it is given hardDeadline time to complete", on HTTP/2: at the
/// termination the server sends GOAWAY, the streams it has started finish
/// with their 200, the ones it had not are refused (or answered the
/// termination response if they reached it first), and the server exits
/// in order, with no connection forced.
#[test]
fn terminate_mid_load_over_http_2_finishes_every_stream_it_started() {
    if !programs::present("h2load") {
        return;
    }
    const DEADLINE_MS: u64 = 2000;
    const CLIENTS: u64 = 8;
    const STREAMS: u64 = 4;
    // Streams the server has started when the signal is sent: three
    // rounds of every client's streams.
    const STARTED_BEFORE_SIGNAL: u64 = 3 * CLIENTS * STREAMS;
    let mut server = ServerProcess::start(&["--deadline-ms", &DEADLINE_MS.to_string()]);
    // 200 ms requests, far more than the run will start: the run ends
    // with the server's connections.
    let h2load = Command::new("h2load")
        .args(["-n", "1000000", "-c", &CLIENTS.to_string()])
        .args(["-m", &STREAMS.to_string()])
        .arg(format!("http://{}/slow?ms=200", server.addr))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("h2load starts");
    for _ in 0..STARTED_BEFORE_SIGNAL {
        server.expect_line(|l| l.starts_with("slow request started"));
    }
    signal(&server.child, libc::SIGTERM);
    let (code, lines) = server.finish();
    assert_eq!(code, Some(0), "{lines:#?}");

    // The server has exited, so every connection has ended: h2load ends.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(h2load.wait_with_output()));
    let out = rx
        .recv_timeout(PATIENCE)
        .expect("h2load ended after the server")
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let summary: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("progress"))
        .collect();
    eprintln!("h2load:\n{}", summary.join("\n"));
    let line = |prefix: &str| {
        let line = summary
            .iter()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` line: {summary:#?}"));
        counts(line)
    };
    let requests = line("requests:");
    let statuses = line("status codes:");

    let terminated = lines
        .iter()
        .find(|l| l.starts_with("http terminated in "))
        .unwrap_or_else(|| panic!("no termination line: {lines:#?}"));
    eprintln!("server: {terminated}");
    let number_after = |label: &str| -> u64 {
        let at = terminated.find(label).unwrap() + label.len();
        let digits: String = terminated[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().unwrap()
    };
    let elapsed_ms = number_after("terminated in ");
    let forced = number_after("forced connections ");
    // Streams that reached the handler: those before the signal, and any
    // the server started before the termination reached their connection.
    let started = STARTED_BEFORE_SIGNAL
        + lines
            .iter()
            .filter(|l| l.starts_with("slow request started"))
            .count() as u64;
    let facts = format!("{summary:?}; {terminated}; {started} streams started");

    // Every stream the server started got its 200: the 200 ms handlers
    // all finish within the 2 s deadline, and the connections close only
    // after their last stream (GOAWAY, then the drain).
    assert_eq!(statuses["2xx"], started, "{facts}");
    assert_eq!(forced, 0, "{facts}");
    assert!(elapsed_ms < DEADLINE_MS, "{facts}");
    // No other answer than the 200s and the termination's 503 (to a
    // stream that reached the service after the termination signal and
    // before the GOAWAY); everything done is one of those or a stream
    // refused unstarted (errored: no status).
    assert_eq!(statuses["3xx"], 0, "{facts}");
    assert_eq!(statuses["4xx"], 0, "{facts}");
    assert_eq!(requests["succeeded"], statuses["2xx"], "{facts}");
    // h2load's own identity: every request is succeeded or failed, the
    // ones never started (the run ended with the connections) among the
    // failed and errored.
    assert_eq!(
        requests["total"],
        requests["succeeded"] + requests["failed"],
        "{facts}"
    );
    assert_eq!(
        requests["failed"],
        statuses["5xx"] + requests["errored"],
        "{facts}"
    );
    let never_started = requests["total"] - requests["started"];
    // Streams started and refused by the GOAWAY (no status): errored, and
    // done.
    let refused = requests["errored"]
        .checked_sub(never_started)
        .unwrap_or_else(|| panic!("fewer errored than never started: {facts}"));
    assert_eq!(
        requests["done"],
        requests["succeeded"] + statuses["5xx"] + refused,
        "{facts}"
    );
    assert_eq!(requests["timeout"], 0, "{facts}");
    // Nothing is left in flight: what h2load started is done.
    assert_eq!(requests["started"], requests["done"], "{facts}");
}
