//! The load test of the issue: wrk against the `server` example's slow
//! endpoint, SIGTERM (the coordinated shutdown's `terminate(2 s)`) mid-load.
//! A Lua script (tests/wrk/termination.lua) tallies the responses by status
//! and whether they carried `Connection: close`, with wrk's own counts.
//! Skipped, saying so, when wrk is not installed; a failure instead with
//! `PROSCENIUM_REQUIRE_PROGRAMS=1` (.ci/run installs wrk and sets it; see
//! tests/programs/mod.rs).
//!
//! How wrk 4.1 (Debian's) counts, from its source (src/wrk.c, src/net.c,
//! src/ae.c, src/ae_epoll.c at tag 4.1.0), which this test's accounting
//! rests on:
//!
//! * A response is counted (`summary.requests`, the script's `response()`)
//!   once parsed whole. If it says `Connection: close`, wrk reconnects at
//!   once (`response_complete`), before it reads the EOF: no error.
//! * A read error (`socket_readable`): `read` failing (a reset), bytes its
//!   parser rejects, or an EOF anywhere but at the end of a response; after
//!   a kept-alive response wrk re-initialises its parser, so an EOF
//!   *between* responses is one too. A response cut short is one.
//! * A reconnect to a closed port is a write error, never a read or
//!   connect error: a non-blocking connect on loopback returns EINPROGRESS
//!   (so no connect error), the refusal comes as EPOLLERR, which wrk's
//!   epoll glue reports as writable only, and `socket_connected` is
//!   followed in the same dispatch by `socket_writeable`, whose `write`
//!   fails. wrk then reconnects at once, so after the unbind every
//!   connection whose connection ended spins on refused reconnects: the
//!   write errors count those attempts and are not asserted.
//! * `timeout` counts responses slower than `--timeout`; a request never
//!   answered is not counted anywhere (wrk 4.1 has no request timer), which
//!   is why the test accounts for every connection instead.
//! * Each of the `-c` connections is made at the start and, as long as the
//!   server keeps it, kept: the server never closes a keep-alive
//!   connection before the termination here (idle timeout 60 s).
#![cfg(unix)]
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod programs;
mod server_process;

use server_process::{signal, ServerProcess, PATIENCE};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

/// `key=value` pairs of a line.
fn pairs(line: &str) -> HashMap<&str, u64> {
    line.split_whitespace()
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k, v.parse().ok()?))
        })
        .collect()
}

/// wrk, killed if the test fails before it ends.
struct Wrk(Child);

impl Drop for Wrk {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Akka: "If a request is “in-flight” (being handled by user code), it is
/// given hardDeadline time to complete", "if a connection has no
/// “in-flight” request, it is terminated immediately", "if user code emits
/// a response within the timeout, then this response is sent to the client
/// with a Connection: close header and connection is closed", "if user
/// code does not reply with a response within the deadline we produce a
/// special [...] terminationDeadlineExceededResponse HTTP response (e.g.
/// 503 Service Unavailable) with a Connection: close header and close
/// connection", and "Finally, all remaining alive connections are
/// forcefully terminated once the hardDeadline is exceeded."
#[test]
fn terminate_mid_load_answers_every_request_and_ends_at_the_hard_deadline() {
    if !programs::present("wrk") {
        return;
    }
    const DEADLINE_MS: u64 = 2000;
    const THREADS: u64 = 2;
    const CONNECTIONS: u64 = 16;
    // Requests the server has started when the signal is sent: three
    // rounds of the connections.
    const STARTED_BEFORE_SIGNAL: u64 = 3 * CONNECTIONS;
    let gone = std::env::temp_dir().join(format!(
        "proscenium-http-wrk-{}-server-gone",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&gone);
    let mut server = ServerProcess::start(&["--deadline-ms", &DEADLINE_MS.to_string()]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/wrk/termination.lua");
    // Short requests of 200 ms, and one in eight of 5 s: those are in
    // their handler at the deadline. The run ends when the script stops
    // wrk's threads (below); its duration only bounds a hang.
    let mut wrk = Wrk(Command::new("wrk")
        .args(["-t", &THREADS.to_string(), "-c", &CONNECTIONS.to_string()])
        .args(["-d300s", "--timeout", "20s", "-s", script])
        .arg(format!("http://{}/", server.addr))
        .env("WRK_SHORT_MS", "200")
        .env("WRK_LONG_MS", "5000")
        .env("WRK_SERVER_GONE", &gone)
        .env(
            "WRK_CONNECTIONS_PER_THREAD",
            (CONNECTIONS / THREADS).to_string(),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("wrk starts"));
    let output = BufReader::new(wrk.0.stdout.take().unwrap());
    let (line_tx, wrk_out) = mpsc::channel();
    std::thread::spawn(move || {
        for line in output.lines().map_while(Result::ok) {
            if line_tx.send(line).is_err() {
                break;
            }
        }
    });

    // Mid-load: the first rounds started (among them some long ones, in
    // their handler for 5 s).
    for _ in 0..STARTED_BEFORE_SIGNAL {
        server.expect_line(|l| l.starts_with("slow request started"));
    }
    signal(&server.child, libc::SIGTERM);
    let (code, lines) = server.finish();
    assert_eq!(code, Some(0), "{lines:#?}");

    // The server has exited: every byte and close it sent is in wrk's
    // sockets (loopback delivers a segment within the sender's system
    // call). The script stops each thread once it has seen this file in a
    // turn of its event loop that began after it was made (see the
    // script), so nothing is left unread; then SIGINT ends wrk's run and
    // it prints its summary.
    std::fs::File::create(&gone).expect("the marker file");
    let mut wrk_lines = Vec::new();
    let mut stopped = 0;
    while stopped < THREADS {
        let line = wrk_out
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|e| panic!("wrk's threads did not stop ({e}): {wrk_lines:#?}"));
        stopped += u64::from(line == "thread stopped");
        wrk_lines.push(line);
    }
    signal(&wrk.0, libc::SIGINT);
    let status = wrk.0.wait().unwrap();
    let _ = std::fs::remove_file(&gone);
    wrk_lines.extend(wrk_out.iter());
    assert!(status.success(), "wrk failed: {wrk_lines:#?}");
    eprintln!("wrk:\n{}", wrk_lines.join("\n"));

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
    let idle_closed = number_after("idle connections closed ");
    let forced = number_after("forced connections ");
    // Requests that reached the handler: those before the signal, and any
    // the server started before the termination reached their connection.
    let started = STARTED_BEFORE_SIGNAL
        + lines
            .iter()
            .filter(|l| l.starts_with("slow request started"))
            .count() as u64;
    let tally = wrk_lines
        .iter()
        .find(|l| l.starts_with("tally "))
        .unwrap_or_else(|| panic!("no tally: {wrk_lines:#?}"));
    let t = pairs(tally);
    let facts = format!("{tally}; {terminated}; {started} requests started");

    // The script saw every response wrk counted; only 200s and 503s, and
    // every 503 closes (wrk's status errors are the responses above 399).
    assert_eq!(
        t["requests"],
        t["ok"] + t["unavailable"] + t["other"],
        "{facts}"
    );
    assert_eq!(t["other"], 0, "{facts}");
    assert_eq!(t["status"], t["unavailable"], "{facts}");
    assert_eq!(t["unavailable"], t["unavailable_close"], "{facts}");
    // Before the termination: wrk sends a connection's next request only
    // once it has the response to the previous one, so of the requests
    // started before the signal all but the last of each connection were
    // answered by then, kept alive (no `Connection: close`).
    assert!(
        t["ok"] - t["ok_close"] >= STARTED_BEFORE_SIGNAL - CONNECTIONS,
        "{facts}"
    );
    // In flight at the termination and done within the deadline (the
    // 200 ms ones): their 200, with `Connection: close`.
    assert!(t["ok_close"] > 0, "{facts}");
    // Every request that reached the handler got its 200, except those
    // still in the handler at the hard deadline (the 5 s ones), whose
    // connections are the forced ones and got the deadline-exceeded 503.
    assert!(forced >= 1, "{facts}");
    assert_eq!(started, t["ok"] + forced, "{facts}");
    // Every connection ended exactly once after the unbind: with a whole
    // response that said `Connection: close` (a 200, the deadline-exceeded
    // 503, or the termination's 503 to a request that came after it), or
    // closed by the termination as idle, which wrk counts as a read error
    // (the module doc). A connection reset or closed while a response was
    // being written would be one more read error than the server closed
    // idle connections, and one response fewer.
    assert_eq!(
        t["ok_close"] + t["unavailable_close"] + t["read"],
        CONNECTIONS,
        "{facts}"
    );
    assert_eq!(t["read"], idle_closed, "{facts}");
    // No connect errors (refused reconnects are write errors, the module
    // doc) and no response slower than wrk's timeout.
    assert_eq!(t["connect"], 0, "{facts}");
    assert_eq!(t["timeout"], 0, "{facts}");
    // The long requests held the drain to the hard deadline, and no longer
    // than 100 ms past it (measured in the server from `terminate` to
    // `when_terminated`).
    assert!(elapsed_ms >= DEADLINE_MS, "{terminated}");
    assert!(elapsed_ms <= DEADLINE_MS + 100, "{terminated}");
}
