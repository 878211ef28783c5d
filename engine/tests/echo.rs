//! The `echo` example as a real child process: a TCP echo server of actors
//! (an acceptor, one child per connection) on `proscenium::net`, echoing
//! std `TcpStream` clients, and shutting down in order on SIGTERM: unbind,
//! close the connections (the clients read EOF), terminate, exit with the
//! configured code (0).
#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

/// Long enough never to fire unless something hangs.
const PATIENCE: Duration = Duration::from_secs(60);

/// The example binary, next to this test's binary, (re)built once per run
/// of this test binary (a narrower `cargo test` does not build examples,
/// and a stale one would test old code).
fn example() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("the test binary's path");
            let profile_dir = exe
                .parent()
                .and_then(|deps| deps.parent())
                .expect("target/<profile>/deps/<test>");
            let mut build = Command::new(env!("CARGO"));
            // The workspace's features, as `cargo test --workspace` (the
            // README's test command) resolves them: the example it built is
            // fresh, and nothing is compiled again (`-p proscenium` would
            // resolve the features of its dependencies anew and build them
            // again: three minutes of the CI's run).
            build.args(["build", "--workspace", "--example", "echo"]);
            if profile_dir.ends_with("release") {
                build.arg("--release");
            }
            let status = build.status().expect("cargo runs");
            assert!(status.success(), "building the example failed");
            profile_dir.join("examples").join("echo")
        })
        .clone()
}

/// A running server: the child, its later lines, the address it listens on.
struct Server {
    child: Child,
    lines: mpsc::Receiver<String>,
    addr: SocketAddr,
}

impl Server {
    /// Starts the example on a free port and waits for its "ready" line.
    fn start() -> Server {
        let mut child = Command::new(example())
            .arg("127.0.0.1:0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the example starts");
        let stdout = child.stdout.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut addr = None;
        loop {
            match lines.recv_timeout(PATIENCE) {
                Ok(line) if line.starts_with("ready") => break,
                Ok(line) => {
                    if let Some(a) = line.strip_prefix("listening on ") {
                        addr = Some(a.parse().expect("an address"));
                    }
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("the example never said ready: {e}");
                }
            }
        }
        let addr = addr.expect("the example says where it listens before ready");
        Server { child, lines, addr }
    }

    /// Waits for a line that starts with `prefix`; returns it.
    fn expect_line(&mut self, prefix: &str) -> String {
        loop {
            match self.lines.recv_timeout(PATIENCE) {
                Ok(line) if line.starts_with(prefix) => return line,
                Ok(_) => {}
                Err(e) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    panic!("no line starting with {prefix:?}: {e}");
                }
            }
        }
    }

    fn sigterm(&self) {
        let pid = i32::try_from(self.child.id()).expect("a pid fits an i32");
        // SAFETY: kill(2) with a pid of our own child and a valid signal
        // number has no memory-safety preconditions.
        let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
        assert_eq!(rc, 0, "kill failed: {}", std::io::Error::last_os_error());
    }

    /// Waits for the child to exit; returns its code and remaining lines.
    fn finish(mut self) -> (Option<i32>, Vec<String>) {
        let mut lines = Vec::new();
        // The reader thread ends at the child's end of output.
        while let Ok(line) = self.lines.recv_timeout(PATIENCE) {
            lines.push(line);
        }
        let status = self.child.wait().expect("the child is reaped");
        (status.code(), lines)
    }
}

/// A connected client whose reads give up after `PATIENCE` (a hang fails
/// the test instead of blocking it).
fn client(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("the server accepts");
    stream
        .set_read_timeout(Some(PATIENCE))
        .expect("a read timeout");
    stream
}

/// Writes `text` and reads it back.
fn echo(stream: &mut TcpStream, text: &str) {
    stream.write_all(text.as_bytes()).expect("write");
    let mut back = vec![0u8; text.len()];
    stream.read_exact(&mut back).expect("the echo comes back");
    assert_eq!(back, text.as_bytes());
}

/// The steps of the shutdown, in the order the example prints them.
fn steps(lines: &[String]) -> Vec<&str> {
    lines
        .iter()
        .map(String::as_str)
        .filter(|l| l.starts_with("phase ") || l.starts_with("terminated"))
        .collect()
}

#[test]
fn clients_are_echoed_and_sigterm_unbinds_closes_them_and_exits_in_order() {
    let server = Server::start();
    let mut clients: Vec<TcpStream> = (0..3).map(|_| client(server.addr)).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        echo(c, &format!("hello from client {i}\n"));
    }
    // A connection serves more than one read, and a large write whole.
    let large = "x".repeat(64 * 1024);
    echo(&mut clients[0], &large);
    echo(&mut clients[1], "again\n");

    server.sigterm();
    // The connections are closed by the server: each client reads EOF (not
    // a reset, not the read timeout).
    for c in &mut clients {
        let mut rest = Vec::new();
        let n = c.read_to_end(&mut rest).expect("EOF");
        assert_eq!(n, 0, "nothing more after the echo");
    }
    let addr = server.addr;
    let (code, lines) = server.finish();
    assert_eq!(
        steps(&lines),
        [
            format!("phase service-unbind: stopped listening on {addr}").as_str(),
            "phase service-requests-done: closed 3 connections",
            "phase before-actor-system-terminate",
            "terminated: clean=true",
        ]
    );
    assert_eq!(code, Some(0), "the configured exit code");
}

/// A client that leaves ends its connection actor; the shutdown then has
/// only the others to close.
#[test]
fn a_client_that_leaves_ends_its_connection_actor() {
    let mut server = Server::start();
    let mut staying = client(server.addr);
    echo(&mut staying, "staying\n");
    let mut leaving = client(server.addr);
    echo(&mut leaving, "leaving\n");
    let peer = leaving.local_addr().expect("the client's address");
    drop(leaving);
    assert_eq!(
        server.expect_line("connection "),
        format!("connection {peer} closed by the client")
    );
    // The acceptor has seen its connection actor terminate.
    assert_eq!(
        server.expect_line("open connections"),
        "open connections: 1"
    );

    server.sigterm();
    let mut rest = Vec::new();
    assert_eq!(staying.read_to_end(&mut rest).expect("EOF"), 0);
    let (code, lines) = server.finish();
    assert!(
        steps(&lines).contains(&"phase service-requests-done: closed 1 connections"),
        "{lines:?}"
    );
    assert_eq!(code, Some(0));
}
