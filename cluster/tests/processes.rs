//! The sharded counter example (`examples/counter.rs`) as OS processes on
//! a real JetStream server: three nodes, 300 entities answered from any
//! node; SIGKILL of a node: its entities answer again on the others
//! within the lease timeout plus 2 s (the gap's percentiles printed);
//! SIGTERM of a node: it hands its shards off and leaves in order, and
//! every entity answers.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::{require_jetstream, NatsServer, GUARD};

/// The example binary, built by `cargo test` next to the test binaries.
fn counter_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let bin = dir.join("examples").join("counter");
    assert!(
        bin.is_file(),
        "{} is missing: `cargo test -p proscenium-cluster` builds it (with a `--test` filter, \
         build it first: `cargo build -p proscenium-cluster --example counter`)",
        bin.display()
    );
    bin
}

struct Node {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Node {
    fn start(url: &str, name: &str, lease_ms: u64) -> Node {
        let mut child = Command::new(counter_binary())
            .args([url, name, "--lease-ms", &lease_ms.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a node");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let stdin = child.stdin.take().expect("stdin");
        let mut node = Node {
            child,
            stdin,
            lines,
        };
        node.expect("ready");
        node
    }

    /// The next line starting with `prefix` (an `error` line fails).
    fn expect(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + GUARD * 4;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return l,
                Ok(l) if l.starts_with("error") => panic!("waiting for {prefix:?}: {l}"),
                Ok(_) => continue,
                Err(e) => panic!("no {prefix:?} line: {e:?}"),
            }
        }
    }

    fn run(&mut self, command: &str, answer: &str) -> String {
        writeln!(self.stdin, "{command}").expect("write");
        self.stdin.flush().expect("flush");
        self.expect(answer)
    }

    fn signal(&self, sig: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid");
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `key=value` of a result line.
fn field(line: &str, key: &str) -> f64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
}

#[test]
fn three_processes_share_the_entities_and_survive_a_kill_and_a_leave() {
    require_jetstream!();
    let server = NatsServer::start();
    let lease_ms = 2000;
    let mut a = Node::start(&server.url(), "a", lease_ms);
    let mut b = Node::start(&server.url(), "b", lease_ms);
    let c = Node::start(&server.url(), "c", lease_ms);
    let n = 300;
    a.run(&format!("fill {n}"), "filled");
    let checked = b.run(&format!("check {n}"), "checked");
    assert_eq!(field(&checked, "ok"), f64::from(n), "{checked}");
    eprintln!("from b: {checked}");
    let owners = a.run(&format!("owners {n}"), "owners");
    eprintln!("{owners}");
    for node in ["a", "b", "c"] {
        assert!(owners.contains(&format!("{node}=")), "{owners}");
    }

    // SIGKILL: c's entities answer again on a or b.
    c.signal(libc::SIGKILL);
    let recovered = a.run(&format!("recover {n} 250"), "recovered");
    eprintln!("after SIGKILL of c (lease {lease_ms} ms): {recovered}");
    assert!(
        field(&recovered, "last_ms") < f64::from(lease_ms as u32 + 2000),
        "{recovered}"
    );
    let owners = a.run(&format!("owners {n}"), "owners");
    assert!(!owners.contains("c="), "{owners}");
    drop(c);

    // SIGTERM: b hands its shards off and leaves in order.
    let left = Instant::now();
    b.signal(libc::SIGTERM);
    assert_eq!(b.expect("terminated"), "terminated clean=true");
    eprintln!("SIGTERM of b: terminated after {:?}", left.elapsed());
    assert!(left.elapsed() < Duration::from_secs(10));
    let checked = a.run(&format!("check {n}"), "checked");
    assert_eq!(field(&checked, "ok"), f64::from(n), "{checked}");
    let owners = a.run(&format!("owners {n}"), "owners");
    assert_eq!(owners, format!("owners a={n}"));
    a.run("exit", "terminated");
}
