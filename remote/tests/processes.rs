//! Nodes in their own OS processes (examples/node.rs), on real NATS: two
//! processes tell and ask each other, also through two routed servers;
//! SIGKILL of a node reaches its watchers through the failure detector;
//! SIGTERM runs the cluster phases and in-flight asks complete.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use proscenium::testkit::TestProbe;
use proscenium_remote::{Remote, RemoteReply, RemoteSettings, RemoteTerminated, TerminatedReason};
use serde::{Deserialize, Serialize};
use support::{require_nats, system, NatsServer, GUARD};

/// examples/node.rs's protocol (same variants, same order).
#[derive(Debug, Serialize, Deserialize)]
enum NodeCmd {
    Add(u64),
    Get(RemoteReply<u64>),
    Slow(u64, RemoteReply<u64>),
}

/// The example binary, built by `cargo test` next to the test binaries.
fn node_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let bin = dir.join("examples").join("node");
    assert!(
        bin.is_file(),
        "{} is missing: `cargo test -p proscenium-remote` builds it (with a `--test` filter, \
         build it first: `cargo build -p proscenium-remote --example node`)",
        bin.display()
    );
    bin
}

struct Node {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl Node {
    fn start(url: &str, name: &str, timing: Option<(u64, u64)>) -> Node {
        let mut args = vec![url.to_owned(), "p".to_owned(), name.to_owned()];
        if let Some((hb, fd)) = timing {
            args.extend([hb.to_string(), fd.to_string()]);
        }
        Node::start_with_args(&args)
    }

    /// The node with the settings of a `[remote]` TOML file.
    fn start_with_config(path: &std::path::Path) -> Node {
        Node::start_with_args(&["--config".to_owned(), path.display().to_string()])
    }

    fn start_with_args(args: &[String]) -> Node {
        let mut cmd = Command::new(node_binary());
        cmd.args(args);
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the node");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        let err = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap_or_else(|e| e.into_inner());
                s.push_str(&line);
                s.push('\n');
            }
        });
        let stdin = child.stdin.take();
        let mut node = Node {
            child,
            stdin,
            lines,
            stderr,
        };
        node.expect_line("ready");
        node
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").expect("write to the node");
        stdin.flush().expect("flush");
    }

    /// The next stdout line starting with `prefix` (others are skipped).
    /// Panics with the node's `error ...` line as soon as it prints one,
    /// or with its stderr if no such line comes.
    fn expect_line(&mut self, prefix: &str) -> String {
        self.next_line(prefix).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The next stdout line starting with `prefix`; `Err` with what
    /// happened instead: the node's `error ...` line (at once), or its exit
    /// or the guard passing, with its stderr.
    fn next_line(&mut self, prefix: &str) -> Result<String, String> {
        let deadline = Instant::now() + GUARD;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return Ok(line),
                Ok(line) if line.starts_with("error") => {
                    return Err(format!("waiting for {prefix:?}, the node said: {line}"));
                }
                Ok(_) => continue,
                Err(e) => {
                    let why = match e {
                        mpsc::RecvTimeoutError::Timeout => format!("not within {GUARD:?}"),
                        mpsc::RecvTimeoutError::Disconnected => "the node exited".to_owned(),
                    };
                    return Err(format!(
                        "no line starting with {prefix:?} ({why}); stderr:\n{}",
                        self.stderr()
                    ));
                }
            }
        }
    }

    fn signal(&self, sig: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid");
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let rc = unsafe { libc::kill(pid, sig) };
        assert_eq!(rc, 0, "kill({pid}, {sig})");
    }

    /// Waits for the process to exit (its stdout closing, within the
    /// guard) and returns whether it exited with success.
    fn wait_exit(&mut self) -> bool {
        let deadline = Instant::now() + GUARD;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(_) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => panic!("the node did not exit"),
            }
        }
        self.child.wait().expect("wait").success()
    }

    fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn two_processes_tell_and_ask_each_other() {
    require_nats!();
    let server = NatsServer::start();
    let mut a = Node::start(&server.url(), "a", None);
    let mut b = Node::start(&server.url(), "b", None);
    a.send("talk b");
    b.send("talk a");
    // Each counter got exactly the other's 100 adds, in order before the ask.
    assert_eq!(a.expect_line("got"), "got 100");
    assert_eq!(b.expect_line("got"), "got 100");
    a.send("exit");
    b.send("exit");
    assert_eq!(a.expect_line("terminated"), "terminated clean=true");
    assert_eq!(b.expect_line("terminated"), "terminated clean=true");
    assert!(a.wait_exit() && b.wait_exit());
}

/// A `talk` that cannot reach its peer says what happened, and the test
/// hears it at once (not a "no line" after the guard).
#[test]
fn a_talk_to_a_missing_peer_says_what_happened() {
    require_nats!();
    let server = NatsServer::start();
    let mut a = Node::start(&server.url(), "a", None);
    a.send("talk nobody 300");
    let err = a
        .next_line("got")
        .expect_err("nobody serves counter-nobody");
    assert!(
        err.contains("error talk nobody: no node serves `counter-nobody`")
            && err.contains("found no responders")
            && err.contains("cluster p"),
        "{err}"
    );
    // The node still works.
    let _b = Node::start(&server.url(), "b", None);
    a.send("talk b");
    assert_eq!(a.expect_line("got"), "got 100");
    a.send("exit");
    assert!(a.wait_exit());
}

/// The example node, with its settings from TOML (an nkey seed in a file,
/// mutual TLS with its own CA, the cluster key in a file), against the
/// trust model's example server configuration: two nodes tell and ask
/// each other.
#[test]
fn the_example_node_connects_with_credentials_and_tls() {
    require_nats!();
    let shop = support::shop::shop();
    let mut a = Node::start_with_config(&shop.node_toml("a"));
    let mut b = Node::start_with_config(&shop.node_toml("b"));
    a.send("talk b");
    b.send("talk a");
    assert_eq!(a.expect_line("got"), "got 100");
    assert_eq!(b.expect_line("got"), "got 100");
    a.send("exit");
    b.send("exit");
    assert_eq!(a.expect_line("terminated"), "terminated clean=true");
    assert_eq!(b.expect_line("terminated"), "terminated clean=true");
    assert!(a.wait_exit() && b.wait_exit());
}

#[test]
fn nodes_on_two_routed_servers_still_talk() {
    require_nats!();
    let mut s1 = NatsServer::start_routed(None);
    let mut s2 = NatsServer::start_routed(s1.cluster_port);
    // Both ends of the route are up.
    assert!(s1.wait_for_log("Route connection created").is_some());
    assert!(s2.wait_for_log("Route connection created").is_some());
    let mut a = Node::start(&s1.url(), "a", None);
    let mut b = Node::start(&s2.url(), "b", None);
    a.send("talk b");
    b.send("talk a");
    assert_eq!(a.expect_line("got"), "got 100");
    assert_eq!(b.expect_line("got"), "got 100");
    a.send("exit");
    b.send("exit");
    assert!(a.wait_exit() && b.wait_exit());
}

fn watcher_node(server: &NatsServer) -> (proscenium::ActorSystem, Remote) {
    watcher_node_with(server, Duration::from_millis(1000))
}

fn watcher_node_with(
    server: &NatsServer,
    failure_detector: Duration,
) -> (proscenium::ActorSystem, Remote) {
    let sys = system("w");
    let remote = Remote::connect(
        &sys,
        RemoteSettings::new(server.url(), "p", "w")
            .failure_detector(Duration::from_millis(100), failure_detector),
    )
    .expect("connect");
    (sys, remote)
}

#[test]
fn sigkill_of_a_node_gives_its_watchers_terminated() {
    require_nats!();
    let server = NatsServer::start();
    let mut k = Node::start(&server.url(), "k", Some((100, 1000)));
    // The watcher's own heartbeat is slow next to its failure detector: a
    // detector that only looked on heartbeat ticks would find k gone a
    // tick late, up to `heartbeat` after the timeout.
    let heartbeat = Duration::from_millis(2000);
    let timeout = Duration::from_millis(2500);
    let sys = system("w");
    let w = Remote::connect(
        &sys,
        RemoteSettings::new(server.url(), "p", "w").failure_detector(heartbeat, timeout),
    )
    .expect("connect");
    let probe = TestProbe::<RemoteTerminated>::new(&sys);
    w.watch("counter-k", &probe.actor_ref(), |t| t)
        .expect("watch");
    // The watch's where-request goes out before this ask, and k answers
    // it before delivering the ask: once the ask is answered, the watch
    // knows k, and k's death is found by the heartbeats.
    let counter = w.actor_ref::<NodeCmd>("counter-k").expect("ref");
    assert_eq!(counter.ask(NodeCmd::Get, GUARD).wait(), Ok(0));
    // Kill k just after one of the watcher's heartbeats (seen on the
    // wire), so that a tick-driven detector would take a whole extra
    // tick: it looked then, and looks next `heartbeat` later.
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        use futures_util::StreamExt;
        let raw = async_nats::connect(server.url()).await.expect("raw client");
        let mut beats = raw.subscribe("p.node.w.hb").await.expect("sub");
        tokio::time::timeout(GUARD, beats.next())
            .await
            .expect("a heartbeat of the watcher within the guard")
            .expect("a message");
    });
    let killed = Instant::now();
    k.signal(libc::SIGKILL);
    let t = probe.expect_msg(GUARD);
    let detected = killed.elapsed();
    assert_eq!(t.name, "counter-k");
    assert_eq!(t.node.as_deref(), Some("k"));
    assert_eq!(t.reason, TerminatedReason::NodeUnreachable);
    // k's last heartbeat reached the watcher before the kill (give or
    // take its flight over loopback), so the detector fires within the
    // timeout of the kill. The margin is for the three threads that hand
    // the Terminated on (the remote's runtime waking at the deadline, an
    // engine worker running the probe, this thread) on a 2-core machine
    // shared with builds; no process starts inside the measured span. A
    // tick-driven detector takes about 2 x heartbeat = 4 s here.
    let margin = Duration::from_millis(750);
    assert!(
        detected < timeout + margin,
        "Terminated {detected:?} after the kill; the failure-detector timeout is {timeout:?}"
    );
    probe.expect_no_msg(Duration::from_millis(300));
    assert!(!k.wait_exit());
    drop(w);
    assert!(sys.terminate().wait_timeout(GUARD).is_some());
}

#[test]
fn sigterm_runs_the_cluster_phases_and_in_flight_asks_complete() {
    require_nats!();
    let server = NatsServer::start();
    let mut k = Node::start(&server.url(), "k", Some((100, 1000)));
    let (sys, w) = watcher_node(&server);
    let probe = TestProbe::<RemoteTerminated>::new(&sys);
    w.watch("counter-k", &probe.actor_ref(), |t| t)
        .expect("watch");
    let counter = w.actor_ref::<NodeCmd>("counter-k").expect("ref");
    counter.tell(NodeCmd::Add(5)).expect("tell");
    // In flight: k has the request (it says so) and answers in 700 ms.
    let in_flight = counter.ask(|r| NodeCmd::Slow(700, r), GUARD);
    k.expect_line("slow-started");
    // Akka (seeds, akka-coordinated-shutdown): "running the shutdown
    // process will also trigger the graceful leaving"; here SIGTERM runs
    // it, and the node's leave tasks are in its cluster phases.
    k.signal(libc::SIGTERM);
    assert_eq!(in_flight.wait(), Ok(5));
    let t = probe.expect_msg(GUARD);
    assert_eq!(t.name, "counter-k");
    assert!(
        matches!(
            t.reason,
            TerminatedReason::Stopped | TerminatedReason::NodeLeft
        ),
        "{t:?}"
    );
    assert_eq!(k.expect_line("terminated"), "terminated clean=true");
    assert!(k.wait_exit());
    let log = k.stderr();
    let drained = log.find("remote: exposed names drained").expect(&log);
    let left = log.find("remote: left the cluster").expect(&log);
    let closed = log.find("remote: connection closed").expect(&log);
    assert!(drained < left && left < closed, "{log}");
    probe.expect_no_msg(Duration::from_millis(300));
    drop(w);
    assert!(sys.terminate().wait_timeout(GUARD).is_some());
}

#[test]
fn a_node_restarted_under_the_same_name_is_another_incarnation() {
    require_nats!();
    let server = NatsServer::start();
    let mut k1 = Node::start(&server.url(), "k", Some((100, 1000)));
    // A failure detector far longer than the guard: a Terminated within
    // the guard comes from the new incarnation's heartbeat, not a timeout.
    let (sys, w) = watcher_node_with(&server, Duration::from_secs(3600));
    let probe = TestProbe::<RemoteTerminated>::new(&sys);
    w.watch("counter-k", &probe.actor_ref(), |t| t)
        .expect("watch");
    let counter = w.actor_ref::<NodeCmd>("counter-k").expect("ref");
    assert_eq!(counter.ask(NodeCmd::Get, GUARD).wait(), Ok(0));
    k1.signal(libc::SIGKILL);
    assert!(!k1.wait_exit());
    let _k2 = Node::start(&server.url(), "k", Some((100, 1000)));
    let t = probe.expect_msg(GUARD);
    assert_eq!(t.name, "counter-k");
    assert_eq!(t.reason, TerminatedReason::NodeUnreachable);
    drop(w);
    assert!(sys.terminate().wait_timeout(GUARD).is_some());
}

/// Issue 33, item 3: a signed terminated notice recorded from a node that
/// is gone, replayed while a watch's where-request is out (the attacker
/// sees the request), fired the watch (`Stopped`) of a live actor on
/// another node, and was not counted. The node that holds the name now
/// runs in its own process, stopped (SIGSTOP) while the where-request
/// waits for its answer, so the replay comes in between every time. A
/// notice of an incarnation that has left is a replay: dropped and
/// counted; and a watch not yet located takes a terminated notice only
/// from the node and incarnation that answers it.
#[test]
fn a_replayed_notice_of_a_departed_node_fires_no_watch() {
    require_nats!();
    use support::raw::RawNats;
    use support::{Cmd, Counter};
    const KEY: &str = "the test cluster's key: 32 bytes or more";
    let server = NatsServer::start();
    let settings = |node: &str| {
        RemoteSettings::new(server.url(), "p", node)
            .failure_detector(Duration::from_millis(100), Duration::from_secs(60))
            .cluster_key(KEY)
    };
    let sys_b = system("b");
    let b = Remote::connect(&sys_b, settings("b")).expect("connect b");
    // x exposes the name, its actor stops (the attacker records the
    // notice), and x leaves in order (b hears the leave).
    let mut raw = RawNats::connect(server.port, "");
    raw.subscribe("p.node.x.>");
    let sys_x = system("x");
    let x = Remote::connect(&sys_x, settings("x")).expect("connect x");
    x.add_to_coordinated_shutdown().expect("cs");
    let old = sys_x.spawn(Counter::props("x"), "c").expect("spawn");
    x.expose(&old, "counter-y").expect("expose");
    old.tell(Cmd::Stop);
    let recorded = loop {
        let m = raw.next();
        if m.subject == "p.node.x.terminated.counter-y" {
            break m;
        }
    };
    assert!(sys_x.terminate().wait_timeout(GUARD).is_some());
    drop(x);
    loop {
        if raw.next().subject == "p.node.x.leave" {
            break;
        }
    }
    // y (a process) exposes `counter-y`; stopped, it cannot answer.
    let dir = support::TempDir::new("replay");
    let config = dir.write(
        "y.toml",
        format!(
            "[remote]\nservers = [\"{}\"]\ncluster = \"p\"\nnode = \"y\"\n\
             cluster-key = \"{KEY}\"\n",
            server.url()
        ),
    );
    let y = Node::start_with_config(&config);
    raw.subscribe("p.where.counter-y");
    y.signal(libc::SIGSTOP);
    let rejected = b.rejected_messages();
    let probe = TestProbe::<RemoteTerminated>::new(&sys_b);
    b.watch("counter-y", &probe.actor_ref(), |t| t)
        .expect("watch");
    // The where-request is out (to y, stopped, and the attacker): replay.
    assert_eq!(raw.next().subject, "p.where.counter-y");
    raw.publish(&recorded.subject, &recorded.payload);
    raw.flush();
    support::eventually("b drops the replay", || b.rejected_messages() > rejected);
    probe.expect_no_msg(Duration::from_millis(200));
    // y answers once it runs again: the watch is located on it, and y's
    // counter answers.
    y.signal(libc::SIGCONT);
    let far = b.actor_ref::<NodeCmd>("counter-y").expect("ref");
    assert!(far.ask(NodeCmd::Get, GUARD).wait().is_ok());
    probe.expect_no_msg(Duration::from_millis(200));
    assert_eq!(b.rejected_messages(), rejected + 1);
    drop((y, b));
    assert!(sys_b.terminate().wait_timeout(GUARD).is_some());
}
