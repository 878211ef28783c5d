//! The `server` example as a child process (built once per test binary, as
//! engine/tests/signals.rs builds `graceful_shutdown`): started on a free
//! port, its stdout read line by line, signalled, reaped.
#![allow(dead_code)] // each test file uses a part
#![allow(unreachable_pub)] // a test module: `pub` is for the test files
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

/// Long enough never to fire unless something hangs.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// The example binary, next to this test's binary, (re)built once per run
/// of the test binary: a narrower `cargo test` does not build examples,
/// and a stale one would test old code.
pub fn example() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("the test binary's path");
            let profile_dir = exe
                .parent()
                .and_then(|deps| deps.parent())
                .expect("target/<profile>/deps/<test>");
            let mut build = Command::new(env!("CARGO"));
            // The features as the command that built this test resolved
            // them, so that the example and its dependencies are already
            // built: with none of the crate's optional features on, `cargo
            // test --workspace` (the README's command, which built the
            // example itself); with some, the `-p proscenium-http
            // --features ...` of .ci/run's feature steps. Any other command
            // builds what differs, once.
            let features: Vec<&str> = [
                (cfg!(feature = "tls"), "tls"),
                (cfg!(feature = "tower"), "tower"),
                (cfg!(feature = "websocket"), "websocket"),
                (cfg!(feature = "metrics"), "metrics"),
            ]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name))
            .collect();
            if features.is_empty() {
                build.args(["build", "--workspace", "--example", "server"]);
            } else {
                // The tests of the `tls` feature drive the server it builds.
                build.args(["build", "-p", "proscenium-http", "--example", "server"]);
                build.args(["--features", &features.join(",")]);
            }
            if profile_dir.ends_with("release") {
                build.arg("--release");
            }
            let status = build.status().expect("cargo runs");
            assert!(status.success(), "building the example failed");
            profile_dir.join("examples").join("server")
        })
        .clone()
}

/// A running example server.
pub struct ServerProcess {
    pub child: Child,
    pub addr: SocketAddr,
    lines: mpsc::Receiver<String>,
}

impl ServerProcess {
    /// Starts the example on a free port with `args` and waits for its
    /// `listening on ADDR` line.
    pub fn start(args: &[&str]) -> ServerProcess {
        let mut child = Command::new(example())
            .args(["--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
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
        let mut server = ServerProcess {
            child,
            addr: "0.0.0.0:0".parse().unwrap(),
            lines,
        };
        let line = server.expect_line(|l| l.starts_with("listening on "));
        server.addr = line["listening on ".len()..].parse().expect("an address");
        server
    }

    /// Waits for the next line that `wanted` accepts (skipping others);
    /// kills the child and fails if none comes.
    pub fn expect_line(&mut self, wanted: impl Fn(&str) -> bool) -> String {
        loop {
            match self.lines.recv_timeout(PATIENCE) {
                Ok(line) if wanted(&line) => return line,
                Ok(_) => {}
                Err(e) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    panic!("the example never printed the line waited for: {e}");
                }
            }
        }
    }

    /// Waits for the child to exit; its exit code and the lines it printed
    /// since the last one read.
    pub fn finish(mut self) -> (Option<i32>, Vec<String>) {
        let mut lines = Vec::new();
        // The reader thread ends at the child's end of output.
        while let Ok(line) = self.lines.recv_timeout(PATIENCE) {
            lines.push(line);
        }
        let status = self.child.wait().expect("the child is reaped");
        (status.code(), lines)
    }
}

pub fn signal(child: &Child, signal: i32) {
    let pid = i32::try_from(child.id()).expect("a pid fits an i32");
    // SAFETY: kill(2) with a pid of our own child and a valid signal number
    // has no memory-safety preconditions.
    let rc = unsafe { libc::kill(pid, signal) };
    assert_eq!(rc, 0, "kill failed: {}", std::io::Error::last_os_error());
}
