//! Memory per idle keep-alive connection, as resident set size (RSS) and
//! live heap (bytes and blocks, counted by a wrapper of the system
//! allocator), for decision 0012 ("Connections are tasks, not actors"):
//! the real HTTP server (one task per connection), a minimal echo server
//! with one task per connection, and the same echo server with one actor
//! per connection (engine/examples/echo.rs's shape: an acceptor actor, a
//! named child actor per connection that it watches, the connection's read
//! a future piped to the actor with `Context::pipe_to_self`).
//!
//! ```text
//! cargo run --release -p proscenium-http --example conn_memory            # 5000 connections, 5 runs
//! cargo run --release -p proscenium-http --example conn_memory -- 9000 7  # N, runs
//! cargo run --release -p proscenium-http --example conn_memory -- one actor 5000
//! ```
//!
//! Without `one`, it runs itself once per mode and run (a fresh process
//! each time, so no run reuses memory an earlier one freed) and prints
//! each figure and the median per mode. One run (`one MODE N`): a 2-worker
//! system, the server bound, 64 warm-up connections opened (one-time
//! allocations: thread caches, the reactor's first slab, the acceptor's
//! first children); then RSS (`/proc/self/statm`), N more connections, each
//! served once (the HTTP client sends `GET /hello` and reads the response,
//! as http/examples/terminate_idle.rs does; the echo client sends 64 bytes
//! and reads them back) and left open and idle: the server holds a pending
//! read on each. Once every server connection is waiting (the echo servers
//! count the first read that waits after the echo; the HTTP server's
//! `open_connections`), 200 ms of settling, RSS and heap again; prints
//! (after - before) / N of each.
//!
//! The clients are in the same process (plain std sockets in a vector
//! allocated before the first RSS reading: 4 bytes each once written);
//! kernel socket buffers are not in RSS. Needs 2 (N + 64) + a few file
//! descriptors: the soft limit is raised to the hard one on Unix.
//! Figures in BENCHMARKS.md ("Connections: tasks or actors").

use http::{Request, Response};
use proscenium::net::{TcpListener, TcpStream};
use proscenium::prelude::*;
use proscenium::ShutdownConfig;
use proscenium_http::{Body, Http, ServerSettings};
use std::alloc::{GlobalAlloc, Layout, System};
use std::future::poll_fn;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream as StdStream};
use std::pin::Pin;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Connections opened before the first RSS reading.
const WARMUP: usize = 64;
/// The echo servers' read buffer per connection.
const BUFFER: usize = 4096;
/// The echo clients' message.
const MESSAGE: usize = 64;
/// The modes, in the order the driver runs them.
const MODES: [&str; 3] = ["http", "task", "actor"];

/// The system allocator, counting the live heap: bytes requested and
/// blocks (no allocator overhead, unlike RSS).
struct Counting;

/// Live heap bytes and blocks. Relaxed: statistics read once everything is
/// quiet; nothing is published through them.
static HEAP_BYTES: AtomicIsize = AtomicIsize::new(0);
static HEAP_BLOCKS: AtomicIsize = AtomicIsize::new(0);

fn counted(bytes: isize, blocks: isize) {
    HEAP_BYTES.fetch_add(bytes, Ordering::Relaxed);
    HEAP_BLOCKS.fetch_add(blocks, Ordering::Relaxed);
}

/// A layout's size as a signed count (a layout's size fits in `isize`).
fn size(layout: Layout) -> isize {
    layout.size() as isize
}

// SAFETY: every method forwards to `System` with the caller's arguments,
// so `System`'s guarantees are ours; the counting has no effect on them.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc`, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            counted(size(layout), 1);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            counted(size(layout), 1);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) };
        counted(-size(layout), -1);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `realloc`, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            counted(new_size as isize - size(layout), 0);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// RSS, live heap bytes and live heap blocks.
fn memory() -> Result<[f64; 3], Box<dyn std::error::Error>> {
    Ok([
        rss()? as f64,
        HEAP_BYTES.load(Ordering::Relaxed) as f64,
        HEAP_BLOCKS.load(Ordering::Relaxed) as f64,
    ])
}

#[cfg(unix)]
fn raise_fd_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct we
    // pass, which lives on this stack frame.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

#[cfg(not(unix))]
fn raise_fd_limit() {}

/// This process's resident set size in bytes (`/proc/self/statm`, second
/// field, in pages).
fn rss() -> Result<usize, Box<dyn std::error::Error>> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .ok_or("no resident field in /proc/self/statm")?
        .parse()?;
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Ok(pages * usize::try_from(page)?)
}

/// Reads into `buf`; the first time this read waits, counts one idle
/// connection on `idle` (if given): the echo servers' sign that a
/// connection is served and idle.
async fn read_counting(
    stream: &TcpStream,
    buf: &mut [u8],
    idle: Option<&AtomicUsize>,
) -> io::Result<usize> {
    let mut idle = idle;
    poll_fn(|cx| {
        let read = futures_io::AsyncRead::poll_read(Pin::new(&mut &*stream), cx, buf);
        if read.is_pending() {
            if let Some(count) = idle.take() {
                // Relaxed: a statistic the main thread polls; nothing is
                // published through it.
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
        read
    })
    .await
}

/// Writes all of `buf`.
async fn write_all(stream: &TcpStream, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        let n = poll_fn(|cx| futures_io::AsyncWrite::poll_write(Pin::new(&mut &*stream), cx, buf))
            .await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        buf = &buf[n..];
    }
    Ok(())
}

/// The echo task of one connection (as benches/benches/tcp_echo.rs's).
async fn echo_task(stream: TcpStream, idle: Arc<AtomicUsize>) -> io::Result<()> {
    let mut buf = [0u8; BUFFER];
    let mut echoed = false;
    loop {
        let counting = if echoed { Some(&*idle) } else { None };
        let n = read_counting(&stream, &mut buf, counting).await?;
        if n == 0 {
            return Ok(());
        }
        write_all(&stream, &buf[..n]).await?;
        echoed = true;
    }
}

/// One connection as an actor (engine/examples/echo.rs's `Connection`).
struct Connection {
    stream: Arc<TcpStream>,
    idle: Arc<AtomicUsize>,
    echoed: bool,
    /// The read or write in flight.
    io: Option<PipeHandle>,
}

enum ConnectionMsg {
    Read(io::Result<usize>, Vec<u8>),
    Written(io::Result<()>, Vec<u8>),
}

impl Connection {
    /// Reads into `buf`, kept `BUFFER` long (as benches/benches/tcp_echo.rs's
    /// actor: no resize per read).
    fn read(&mut self, ctx: &mut Context<Self>, mut buf: Vec<u8>) {
        let stream = Arc::clone(&self.stream);
        let idle = self.echoed.then(|| Arc::clone(&self.idle));
        let read = async move {
            let n = read_counting(&stream, &mut buf, idle.as_deref()).await;
            (n, buf)
        };
        self.io = Some(ctx.pipe_to_self(read, |(n, buf)| ConnectionMsg::Read(n, buf)));
    }

    /// Writes `buf[..n]`.
    fn write(&mut self, ctx: &mut Context<Self>, buf: Vec<u8>, n: usize) {
        let stream = Arc::clone(&self.stream);
        let write = async move {
            let written = write_all(&stream, &buf[..n]).await;
            (written, buf)
        };
        self.io = Some(ctx.pipe_to_self(write, |(w, buf)| ConnectionMsg::Written(w, buf)));
    }
}

impl Actor for Connection {
    type Msg = ConnectionMsg;

    // `resize`, not `vec![0; BUFFER]`: see the comment below.
    #[allow(clippy::slow_vector_initialization)]
    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        // Written with zeros (`resize`), as the task's array is when its
        // future starts: `vec![0; BUFFER]` may come from `calloc` as fresh,
        // untouched pages, which would leave the buffer out of the RSS.
        let mut buf = Vec::with_capacity(BUFFER);
        buf.resize(BUFFER, 0);
        self.read(ctx, buf);
        Ok(())
    }

    fn receive(&mut self, ctx: &mut Context<Self>, msg: ConnectionMsg) -> Outcome {
        self.io = None;
        match msg {
            ConnectionMsg::Read(Ok(0), _) => ctx.stop_self(),
            ConnectionMsg::Read(Ok(n), buf) => self.write(ctx, buf, n),
            ConnectionMsg::Written(Ok(()), buf) => {
                self.echoed = true;
                self.read(ctx, buf);
            }
            ConnectionMsg::Read(Err(_), _) | ConnectionMsg::Written(Err(_), _) => ctx.stop_self(),
        }
        Ok(())
    }

    fn post_stop(&mut self, _ctx: &mut Context<Self>) {
        if let Some(io) = self.io.take() {
            io.cancel();
        }
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// Accepts connections and supervises one child actor per connection
/// (engine/examples/echo.rs's `Acceptor`, without its shutdown messages).
struct Acceptor {
    listener: Arc<TcpListener>,
    idle: Arc<AtomicUsize>,
    accepted: u64,
    /// Connections whose actor has not terminated.
    open: usize,
}

impl Acceptor {
    fn accept(&mut self, ctx: &mut Context<Self>) {
        let listener = Arc::clone(&self.listener);
        drop(ctx.pipe_to_self(async move { listener.accept().await }, |accepted| accepted));
    }
}

impl Actor for Acceptor {
    type Msg = io::Result<(TcpStream, SocketAddr)>;

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        self.accept(ctx);
        Ok(())
    }

    fn receive(&mut self, ctx: &mut Context<Self>, msg: Self::Msg) -> Outcome {
        if let Ok((stream, _)) = msg {
            let stream = Arc::new(stream);
            let idle = Arc::clone(&self.idle);
            self.accepted += 1;
            let connection = ctx.spawn(
                Props::new(move || Connection {
                    stream: Arc::clone(&stream),
                    idle: Arc::clone(&idle),
                    echoed: false,
                    io: None,
                }),
                &format!("connection-{}", self.accepted),
            )?;
            ctx.watch(&connection.id());
            self.open += 1;
        }
        self.accept(ctx);
        Ok(())
    }

    fn on_terminated(&mut self, _ctx: &mut Context<Self>, _who: ActorId) -> Outcome {
        self.open -= 1;
        Ok(())
    }
}

/// One HTTP exchange: `GET /hello`, then the whole response.
fn http_exchange(stream: &mut StdStream) -> io::Result<()> {
    stream.write_all(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")?;
    let mut buf = [0u8; 512];
    let mut got = 0;
    // The hello body ends the response (Content-Length 12, no more).
    while !buf[..got].ends_with(b"hello, world") {
        let n = stream.read(&mut buf[got..])?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        got += n;
    }
    Ok(())
}

/// One echo exchange: 64 bytes out, the same back.
fn echo_exchange(stream: &mut StdStream) -> io::Result<()> {
    let msg = [7u8; MESSAGE];
    stream.write_all(&msg)?;
    let mut back = [0u8; MESSAGE];
    stream.read_exact(&mut back)?;
    if back != msg {
        return Err(io::Error::other("echo differs"));
    }
    Ok(())
}

/// Opens `n` connections to `addr`, each served once and left open.
fn open(
    addr: SocketAddr,
    n: usize,
    exchange: fn(&mut StdStream) -> io::Result<()>,
    clients: &mut Vec<StdStream>,
) -> io::Result<()> {
    for _ in 0..n {
        let mut stream = StdStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        exchange(&mut stream)?;
        clients.push(stream);
    }
    Ok(())
}

/// Waits (at most 60 s) until `ready()` says so.
fn wait_until(what: &str, ready: impl Fn() -> bool) -> Result<(), Box<dyn std::error::Error>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}").into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// One measurement, per idle connection in `mode`: RSS bytes, live heap
/// bytes, live heap blocks.
fn one(mode: &str, n: usize) -> Result<[f64; 3], Box<dyn std::error::Error>> {
    raise_fd_limit();
    let system = ActorSystem::builder()
        .workers(2)
        .pin_workers(false)
        .coordinated_shutdown(ShutdownConfig::default().run_by_signals(false))
        .build()?;
    let handle = system.scheduler_handle().clone();
    let idle = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::with_capacity(WARMUP + n);

    // The server; `served()` is the number of connections served and idle.
    let mut binding = None;
    let (addr, exchange): (SocketAddr, fn(&mut StdStream) -> io::Result<()>) = match mode {
        "http" => {
            let settings = ServerSettings::default()
                .max_connections(WARMUP + n + 16)
                .idle_timeout(Duration::from_secs(600));
            let b = Http::bind_with(
                &system,
                "127.0.0.1:0".parse()?,
                settings,
                |_: Request<Body>| async { Response::new(Body::from("hello, world")) },
            )?;
            let addr = b.local_addr();
            binding = Some(b);
            (addr, http_exchange)
        }
        "task" => {
            let listener = TcpListener::bind(&handle, "127.0.0.1:0".parse()?)?;
            let addr = listener.local_addr()?;
            let h = handle.clone();
            let idle = Arc::clone(&idle);
            handle.spawn_detached(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    h.spawn_detached(echo_task(stream, Arc::clone(&idle)));
                }
            });
            (addr, echo_exchange)
        }
        "actor" => {
            let listener = TcpListener::bind(&handle, "127.0.0.1:0".parse()?)?;
            let addr = listener.local_addr()?;
            let listener = Arc::new(listener);
            let idle = Arc::clone(&idle);
            system.spawn(
                Props::new(move || Acceptor {
                    listener: Arc::clone(&listener),
                    idle: Arc::clone(&idle),
                    accepted: 0,
                    open: 0,
                }),
                "acceptor",
            )?;
            (addr, echo_exchange)
        }
        other => return Err(format!("unknown mode {other:?} (http, task, actor)").into()),
    };
    let served = |count: usize| match &binding {
        Some(b) => b.open_connections() >= count,
        None => idle.load(Ordering::Relaxed) >= count,
    };
    let settle = || std::thread::sleep(Duration::from_millis(200));

    open(addr, WARMUP, exchange, &mut clients)?;
    wait_until("the warm-up connections", || served(WARMUP))?;
    settle();
    let before = memory()?;
    open(addr, n, exchange, &mut clients)?;
    wait_until("the measured connections", || served(WARMUP + n))?;
    settle();
    let after = memory()?;

    drop(clients);
    drop(binding);
    system.terminate().wait();
    Ok([0, 1, 2].map(|i| (after[i] - before[i]) / n as f64))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("one") {
        let mode = args.get(1).ok_or("one MODE N")?;
        let n: usize = args.get(2).ok_or("one MODE N")?.parse()?;
        let [rss, heap, blocks] = one(mode, n)?;
        println!("{rss:.1} {heap:.1} {blocks:.2}");
        return Ok(());
    }
    let n: usize = args.first().map_or(Ok(5000), |a| a.parse())?;
    let runs: usize = args.get(1).map_or(Ok(5), |a| a.parse())?;
    let exe = std::env::current_exe()?;
    println!(
        "conn_memory: per idle connection, {n} connections, {runs} runs: \
         RSS bytes, live heap bytes, live heap blocks"
    );
    let mut medians = Vec::new();
    for mode in MODES {
        let mut figures: Vec<[f64; 3]> = Vec::new();
        for run in 0..runs {
            let out = std::process::Command::new(&exe)
                .args(["one", mode, &n.to_string()])
                .output()?;
            if !out.status.success() {
                return Err(format!(
                    "{mode} run {run} failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                )
                .into());
            }
            let text = String::from_utf8(out.stdout)?;
            let mut fields = text.split_whitespace().map(str::parse::<f64>);
            let mut next = || {
                fields
                    .next()
                    .ok_or("a field missing")
                    .map(|f| f.map_err(|e| e.to_string()))
            };
            let f = [next()??, next()??, next()??];
            println!(
                "  {mode:<6} run {run}: rss {:>8.1}  heap {:>8.1}  blocks {:>6.2}",
                f[0], f[1], f[2]
            );
            figures.push(f);
        }
        let m = [0, 1, 2].map(|i| median(figures.iter().map(|f| f[i]).collect()));
        println!(
            "{mode:<6} median: rss {:>8.1}  heap {:>8.1}  blocks {:>6.2}",
            m[0], m[1], m[2]
        );
        medians.push((mode, m));
    }
    if let [(_, http), (_, task), (_, actor)] = medians[..] {
        println!(
            "actor - task: rss {:.1}  heap {:.1}  blocks {:.2}; rss actor/task {:.2}x, http/task {:.2}x",
            actor[0] - task[0],
            actor[1] - task[1],
            actor[2] - task[2],
            actor[0] / task[0],
            http[0] / task[0]
        );
    }
    Ok(())
}
