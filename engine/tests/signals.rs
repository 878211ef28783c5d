//! SIGTERM and SIGINT on a real child process: the `graceful_shutdown`
//! example, configured from TOML with `exit-process = on` and
//! `exit-code = 3`, runs its process hook, every phase in order, stops its
//! actors (children before parents) and exits with the configured code.
#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

/// Long enough never to fire unless something hangs.
const PATIENCE: Duration = Duration::from_secs(60);

/// The example binary, next to this test's binary, (re)built once per run
/// of this test binary: a narrower `cargo test` does not build examples,
/// and a stale one would test old code.
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
            // fresh (`-p proscenium` would build the dependencies again).
            build.args(["build", "--workspace", "--example", "graceful_shutdown"]);
            if profile_dir.ends_with("release") {
                build.arg("--release");
            }
            let status = build.status().expect("cargo runs");
            assert!(status.success(), "building the example failed");
            profile_dir.join("examples").join("graceful_shutdown")
        })
        .clone()
}

/// Starts the example and waits for its "ready" line; returns the child
/// and a receiver of its later lines.
fn start(args: &[&str]) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(example())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the example starts");
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    loop {
        match rx.recv_timeout(PATIENCE) {
            Ok(line) if line.starts_with("ready") => return (child, rx),
            Ok(_) => {}
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the example never said ready: {e}");
            }
        }
    }
}

fn signal(child: &Child, signal: i32) {
    let pid = i32::try_from(child.id()).expect("a pid fits an i32");
    // SAFETY: kill(2) with a pid of our own child and a valid signal number
    // has no memory-safety preconditions.
    let rc = unsafe { libc::kill(pid, signal) };
    assert_eq!(rc, 0, "kill failed: {}", std::io::Error::last_os_error());
}

/// Waits for the child to exit and returns its code and remaining lines.
fn finish(mut child: Child, rx: mpsc::Receiver<String>) -> (Option<i32>, Vec<String>) {
    let mut lines = Vec::new();
    // The reader thread ends at the child's end of output.
    while let Ok(line) = rx.recv_timeout(PATIENCE) {
        lines.push(line);
    }
    let status = child.wait().expect("the child is reaped");
    (status.code(), lines)
}

const EXPECTED: [&str; 12] = [
    "process hook",
    "phase before-service-unbind",
    "phase service-unbind",
    "phase service-requests-done",
    "phase service-stop",
    "phase flush-caches",
    "actor queue drained; stopping",
    "post_stop queue",
    "phase before-actor-system-terminate",
    "post_stop pool-child",
    "post_stop pool",
    "terminated: clean=true dead_letters=0",
];

/// "By default, the CoordinatedShutdown will be run when the JVM process
/// exits, e.g. via kill SIGTERM signal", "If you have application specific
/// JVM shutdown hooks it's recommended that you register them via the
/// CoordinatedShutdown so that they are running before Akka internal
/// shutdown hooks", and "To enable a hard System.exit as a final action you
/// can configure: akka.coordinated-shutdown.exit-jvm = on" (ours:
/// `exit-process`, with `exit-code`).
#[test]
fn sigterm_runs_every_phase_in_order_and_exits_with_the_configured_code() {
    let (child, rx) = start(&[]);
    signal(&child, libc::SIGTERM);
    let (code, lines) = finish(child, rx);
    assert_eq!(lines, EXPECTED);
    assert_eq!(code, Some(3), "the configured exit code");
}

/// SIGINT (Ctrl-C) runs it too (the issue: "SIGTERM and SIGINT run it").
#[test]
fn sigint_runs_it_too() {
    let (child, rx) = start(&[]);
    signal(&child, libc::SIGINT);
    let (code, lines) = finish(child, rx);
    assert_eq!(lines, EXPECTED);
    assert_eq!(code, Some(3));
}

/// A hook that hangs does not make the process deaf: the signal thread
/// stays free, and a second signal, finding the shutdown already started,
/// gets the default action (the process is killed by it).
#[test]
fn a_second_signal_ends_a_process_whose_hook_hangs() {
    use std::os::unix::process::ExitStatusExt;
    let (mut child, rx) = start(&["--stuck-hook"]);
    signal(&child, libc::SIGTERM);
    loop {
        match rx.recv_timeout(PATIENCE) {
            Ok(line) if line == "process hook (stuck)" => break,
            Ok(_) => {}
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the hook never ran: {e}");
            }
        }
    }
    signal(&child, libc::SIGTERM);
    let status = child.wait().expect("the child is reaped");
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
}
