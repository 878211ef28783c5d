//! The shared test helpers' own checks: a helper that asserts must be able
//! to fail.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// A connected pair: the client's end and the "server's" (the test's).
fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    (client, server)
}

#[test]
fn assert_eof_passes_on_a_close_and_fails_on_an_open_connection_or_a_byte() {
    // Closed: passes.
    let (mut client, server) = pair();
    drop(server);
    support::assert_eof(&mut client);

    // Never closed: fails once the read times out (kept short here; the
    // helper sets PATIENCE only where no timeout is set).
    let (mut client, _server) = pair();
    client
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let open = std::panic::catch_unwind(move || support::assert_eof(&mut client));
    assert!(open.is_err(), "an open connection passed assert_eof");

    // A byte, then the close: fails.
    let (mut client, mut server) = pair();
    server.write_all(b"x").unwrap();
    drop(server);
    let byte = std::panic::catch_unwind(move || support::assert_eof(&mut client));
    assert!(byte.is_err(), "a byte before the close passed assert_eof");
}
