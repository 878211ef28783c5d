//! The accept loop when the process is out of file descriptors: the
//! pending connection stays in the listen backlog and every accept fails
//! with EMFILE at once. The loop must not retry at once (that spins the
//! worker it runs on for as long as the shortage lasts: with one worker,
//! nothing else runs), and it must serve the connection once descriptors
//! are free again.
//!
//! Its own test binary (its own process): it lowers the process's
//! descriptor limit and fills the descriptor table.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use http::Response;
use proscenium::{ActorSystem, ShutdownConfig};
use proscenium_http::{Body, Http};
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::Duration;

/// How long the test waits for an event before it fails.
const PATIENCE: Duration = Duration::from_secs(30);

fn nofile() -> libc::rlimit {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    assert_eq!(rc, 0, "getrlimit: {}", io::Error::last_os_error());
    limit
}

fn set_nofile(limit: libc::rlimit) {
    // SAFETY: `limit` is a valid rlimit; lowering the soft limit (or
    // raising it back up to the hard limit) needs no privilege.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    assert_eq!(rc, 0, "setrlimit: {}", io::Error::last_os_error());
}

#[test]
fn an_accept_failing_for_want_of_descriptors_neither_spins_nor_stops_the_server() {
    // Installed first: recording needs no descriptor.
    let capture = support::capture();
    // One worker: an accept loop that retried at once would keep it busy,
    // and the task below would never run.
    let system = ActorSystem::builder()
        .workers(1)
        .pin_workers(false)
        .coordinated_shutdown(ShutdownConfig::default().run_by_signals(false))
        .build()
        .unwrap();
    let binding = Http::bind(&system, "127.0.0.1:0".parse().unwrap(), |_| async {
        Response::new(Body::from("hello"))
    })
    .unwrap();

    // Fill the descriptor table under a lowered limit, then free exactly
    // one descriptor: the client's socket takes it, so the server's accept
    // finds none.
    let saved = nofile();
    let open_now = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
    set_nofile(libc::rlimit {
        rlim_cur: saved.rlim_cur.min(open_now + 64),
        rlim_max: saved.rlim_max,
    });
    let mut filler = Vec::new();
    loop {
        match File::open("/dev/null") {
            Ok(file) => filler.push(file),
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => break,
            Err(e) => panic!("opening /dev/null: {e}"),
        }
    }
    drop(filler.pop());
    let mut client = TcpStream::connect(binding.local_addr()).unwrap();
    client.set_read_timeout(Some(PATIENCE)).unwrap();
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();

    // The accept loop has met EMFILE (the connection is waiting in the
    // backlog); the only worker still runs other work.
    capture.wait_for(|r| {
        r.events()
            .iter()
            .any(|e| {
                e.fields
                    .get("message")
                    .is_some_and(|m| m.starts_with("accepting a connection failed"))
            })
            .then_some(())
    });
    let (tx, rx) = mpsc::channel();
    let task = system.scheduler_handle().spawn(async move {
        let _ = tx.send(());
    });
    assert_eq!(
        rx.recv_timeout(PATIENCE),
        Ok(()),
        "the worker never ran the task: the accept loop spins"
    );
    drop(task);

    // Descriptors come back: the connection waiting in the backlog is
    // accepted and served.
    drop(filler);
    set_nofile(saved);
    let mut response = String::new();
    client.read_to_string(&mut response).unwrap();
    assert!(
        response.starts_with("HTTP/1.1 200 OK\r\n"),
        "response: {response:?}"
    );
    assert!(
        response.ends_with("\r\n\r\nhello"),
        "response: {response:?}"
    );

    binding.terminate(Duration::from_secs(5)).wait().unwrap();
    system.terminate().wait();
}
