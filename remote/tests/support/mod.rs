//! Test support: a real nats-server on a free loopback port, and actors
//! shared by the tests.
#![allow(dead_code, unreachable_pub)]

pub mod pki;
pub mod raw;
pub mod shop;

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use proscenium::prelude::*;
use proscenium_remote::RemoteReply;
use serde::{Deserialize, Serialize};

/// A guard against hangs, never a wait for correctness.
pub const GUARD: Duration = Duration::from_secs(30);

/// The nats-server binary: `$NATS_SERVER` if set, else on PATH, else
/// /usr/sbin (where the Debian package puts it).
pub fn nats_server_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NATS_SERVER") {
        // Set: that one or none (NATS_SERVER=/nonexistent shows the skip).
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([
            "/usr/sbin".into(),
            "/usr/local/bin".into(),
            "/usr/bin".into(),
        ])
        .map(|d| d.join("nats-server"))
        .find(|p| p.is_file())
}

/// Whether the programs the tests drive must be present:
/// `PROSCENIUM_REQUIRE_PROGRAMS` set to anything but empty or `0` (CI
/// sets it to 1 once it has installed them). Then a missing program fails
/// the test that needs it, naming the program; otherwise that test is
/// skipped, saying so.
pub fn programs_required() -> bool {
    std::env::var_os("PROSCENIUM_REQUIRE_PROGRAMS").is_some_and(|v| !v.is_empty() && v != "0")
}

/// `program` is missing: panics if [`programs_required`], else reports
/// the skip on the real stderr (not the test harness's captured output,
/// so it shows beside the test's `ok`).
pub fn missing_program(program: &str, why: &str) {
    if programs_required() {
        panic!(
            "{program} is not installed (PROSCENIUM_REQUIRE_PROGRAMS is set, so this is a \
             failure, not a skip): {why}"
        );
    }
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: {program} is not installed: {why} (set PROSCENIUM_REQUIRE_PROGRAMS=1 to make \
         this a failure)"
    );
}

/// Returns from the test (skipped, saying so) when nats-server is
/// missing, or fails it if programs are required.
macro_rules! require_nats {
    () => {
        if support::nats_server_binary().is_none() {
            support::missing_program(
                "nats-server",
                "this test needs a real NATS server ($NATS_SERVER, PATH or /usr/sbin; \
                 apt-get install nats-server, which .ci/run does)",
            );
            return;
        }
    };
}
pub(crate) use require_nats;

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// How to start a nats-server beyond the port: command-line arguments and
/// a configuration file's text (written to the server's own directory,
/// and read with `-c`; the command line overrides it).
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    pub args: Vec<String>,
    pub config: Option<String>,
    /// Environment variables for the server (a config file can read
    /// them as `$NAME`).
    pub env: Vec<(String, String)>,
}

impl ServerOptions {
    pub fn args(args: &[&str]) -> ServerOptions {
        ServerOptions {
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            ..ServerOptions::default()
        }
    }

    pub fn config(text: impl Into<String>) -> ServerOptions {
        ServerOptions {
            config: Some(text.into()),
            ..ServerOptions::default()
        }
    }
}

/// A directory of its own under the system's temporary directory,
/// removed on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(what: &str) -> TempDir {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        // Relaxed: only uniqueness matters.
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "proscenium-remote-{what}-{}-{n}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        TempDir(dir)
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }

    /// Writes `name` in this directory; returns its path.
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).expect("write a temporary file");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A nats-server child process, killed on drop.
pub struct NatsServer {
    child: Option<Child>,
    pub port: u16,
    pub cluster_port: Option<u16>,
    /// The server's log lines (stderr), as they come.
    pub log: mpsc::Receiver<String>,
    options: ServerOptions,
    route: Option<u16>,
    dir: TempDir,
}

impl NatsServer {
    /// A lone server on a free loopback port; returns once it accepts.
    pub fn start() -> NatsServer {
        NatsServer::start_with(false, None, ServerOptions::default())
    }

    /// A lone server started with `options`.
    pub fn start_with_options(options: ServerOptions) -> NatsServer {
        NatsServer::start_with(false, None, options)
    }

    /// A server that is part of a NATS cluster named `test`, routed to
    /// `route` (another server's cluster port) if given.
    pub fn start_routed(route: Option<u16>) -> NatsServer {
        NatsServer::start_with(true, route, ServerOptions::default())
    }

    fn start_with(clustered: bool, route: Option<u16>, options: ServerOptions) -> NatsServer {
        // A port found free can be taken before the server binds it: try again.
        for _ in 0..5 {
            let port = free_port();
            let cluster_port = clustered.then(free_port);
            let mut server = NatsServer {
                child: None,
                port,
                cluster_port,
                log: mpsc::channel().1,
                options: options.clone(),
                route,
                dir: TempDir::new("nats"),
            };
            if server.spawn() {
                return server;
            }
        }
        panic!("nats-server did not start on a free port in 5 tries");
    }

    /// Starts the process on this server's ports; `true` once it accepts.
    fn spawn(&mut self) -> bool {
        let binary = nats_server_binary().expect("require_nats! first");
        let mut cmd = Command::new(&binary);
        if let Some(text) = &self.options.config {
            let conf = self.dir.write("nats.conf", text);
            cmd.arg("-c").arg(conf);
        }
        cmd.args(["-p", &self.port.to_string(), "-a", "127.0.0.1"]);
        if let Some(cp) = self.cluster_port {
            cmd.args(["--cluster_name", "test", "--cluster"])
                .arg(format!("nats://127.0.0.1:{cp}"));
        }
        if let Some(r) = self.route {
            cmd.arg("--routes").arg(format!("nats://127.0.0.1:{r}"));
        }
        cmd.args(&self.options.args);
        for (k, v) in &self.options.env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start nats-server");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, log) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    // Nobody listens any more; keep draining the pipe.
                    continue;
                }
            }
        });
        self.child = Some(child);
        self.log = log;
        if self.wait_for_log("Server is ready").is_some()
            && TcpStream::connect(("127.0.0.1", self.port)).is_ok()
        {
            return true;
        }
        self.kill();
        false
    }

    /// Kills the server (SIGKILL) and waits for it: an outage.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again after [`kill`](Self::kill), on the same
    /// port with the same options (clients reconnect to it).
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "kill it first");
        // The port was ours a moment ago; another process may take it in
        // between, which a test cannot prevent: say so.
        assert!(
            self.spawn() || self.spawn(),
            "nats-server did not start again on port {}",
            self.port
        );
    }

    /// This server's directory (its config file, and the tests' files).
    pub fn dir(&self) -> &TempDir {
        &self.dir
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Waits for a log line containing `needle` (`None` if the server
    /// exits or the guard passes first).
    pub fn wait_for_log(&mut self, needle: &str) -> Option<String> {
        let deadline = std::time::Instant::now() + GUARD;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.log.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return Some(line),
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The tests' exposed actor.
#[derive(Debug, Serialize, Deserialize)]
pub enum Cmd {
    Add(u64),
    /// Records a sequence number (per-sender order).
    Seq(u32),
    Get(RemoteReply<u64>),
    Log(RemoteReply<Vec<u32>>),
    /// Never answered: the reply is kept.
    Hold(RemoteReply<u64>),
    /// Answered by dropping the reply.
    Drop(RemoteReply<u64>),
    /// Stops the actor.
    Stop,
    /// A large payload.
    Blob(Vec<u8>),
    /// Who handled it.
    Who(RemoteReply<String>),
    /// Answered after this many milliseconds, from another thread (slow
    /// work that does not hold the actor).
    Later(u64, RemoteReply<u64>),
    /// Answers every held reply (`Hold`) with the count.
    Release,
}

pub struct Counter {
    pub n: u64,
    pub seen: Vec<u32>,
    pub held: Vec<RemoteReply<u64>>,
    pub who: String,
}

impl Counter {
    pub fn props(who: &str) -> Props<Counter> {
        let who = who.to_owned();
        Props::new(move || Counter {
            n: 0,
            seen: Vec::new(),
            held: Vec::new(),
            who: who.clone(),
        })
    }
}

impl Actor for Counter {
    type Msg = Cmd;
    fn receive(&mut self, ctx: &mut Context<Self>, msg: Cmd) -> Outcome {
        match msg {
            Cmd::Add(k) => self.n += k,
            Cmd::Seq(i) => self.seen.push(i),
            Cmd::Get(r) => r.send(self.n),
            Cmd::Log(r) => r.send(self.seen.clone()),
            Cmd::Hold(r) => self.held.push(r),
            Cmd::Drop(r) => drop(r),
            Cmd::Stop => ctx.stop_self(),
            Cmd::Blob(b) => self.n += b.len() as u64,
            Cmd::Who(r) => r.send(self.who.clone()),
            Cmd::Release => {
                for r in self.held.drain(..) {
                    r.send(self.n);
                }
            }
            Cmd::Later(ms, r) => {
                let n = self.n;
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(ms));
                    r.send(n);
                });
            }
        }
        Ok(())
    }
}

/// Waits until `ready` holds (it is an observable count or state that
/// the code under test moves), looking every few milliseconds; fails the
/// test after the guard. A wait for an event that has no hook of its own,
/// never a sleep in place of one.
pub fn eventually(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + GUARD;
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within {GUARD:?}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A system for a test: 2 unpinned workers, no signal handlers.
pub fn system(name: &str) -> ActorSystem {
    ActorSystem::builder()
        .name(name)
        .workers(2)
        .pin_workers(false)
        .from_toml_str("[coordinated-shutdown]\nrun-by-signals = \"off\"")
        .expect("valid toml")
        .build()
        .expect("system")
}

/// This process's resident set, in bytes (/proc/self/statm): the memory
/// tests run in binaries of their own, so it is theirs alone.
pub fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("resident pages");
    // SAFETY: sysconf has no preconditions; it reads a constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * usize::try_from(page).expect("a page size")
}
