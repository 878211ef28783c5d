//! TCP echo round trips over loopback: `proscenium::net` on a 2-worker
//! scheduler against tokio's `TcpStream` on a 2-worker tokio runtime, and
//! the same proscenium server with an actor per connection instead of a
//! task (decision 0012, "Connections are tasks, not actors").
//!
//! Each run starts a fresh scheduler (or runtime, or actor system) with an
//! echo server and `clients` client tasks on the same pool; each client
//! connects (`TCP_NODELAY`), warms up with 1k round trips, then times
//! `ECHO_N / clients` round trips of a 64-byte message one after the other
//! (write it, read it back). Reports p50, p99, p99.9 and the mean of every
//! round trip of the run, then the median of each over the runs. The contenders:
//!
//! - `proscenium`: an accept loop and one task per connection (read,
//!   `write_all`, in a loop), as the HTTP server's connections;
//! - `tokio`: the same on tokio;
//! - `actor`: engine/examples/echo.rs's server: an acceptor actor, one
//!   child actor per connection, whose reads and writes are futures piped
//!   to it (`Context::pipe_to_self`): read -> message -> write -> message
//!   (its read buffer kept whole, where echo.rs resizes it per read: a
//!   4 KB memset the tasks do not pay);
//! - `actor-iw`: the same actor, writing in its handler first (one
//!   non-blocking attempt; only the rest, if any, is piped): one pipe and
//!   one message per round trip instead of two.
//!
//! ```text
//! cargo bench -p proscenium-benches --bench tcp_echo
//! ECHO_RUNS=5 ECHO_N=100000 ECHO_CLIENTS=1,64 cargo bench -p proscenium-benches --bench tcp_echo
//! ECHO_ONLY=proscenium,actor cargo bench -p proscenium-benches --bench tcp_echo
//! ```
//!
//! Figures in BENCHMARKS.md ("TCP echo", "Connections: tasks or actors").
#![allow(missing_docs, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Instant;

use hdrhistogram::Histogram;

const MESSAGE: usize = 64;
const WARMUP: usize = 1_000;

fn histogram() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram")
}

/// p50, p99, p99.9 and the mean, in microseconds. The mean, with the
/// clients' number, gives the throughput (each client has one round trip
/// in flight): a server that serves some connections ahead of others
/// lowers the p50 but not the mean.
fn percentiles(hist: &Histogram<u64>) -> [f64; 4] {
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    [us(0.50), us(0.99), us(0.999), hist.mean() / 1000.0]
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

mod on_proscenium {
    use super::*;
    use futures_util::io::{AsyncReadExt, AsyncWriteExt};
    use proscenium::net::{TcpListener, TcpStream};
    use proscenium_scheduler::{Handle, Scheduler};

    async fn echo(mut stream: TcpStream) -> std::io::Result<()> {
        let mut buf = [0u8; 4096];
        loop {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            stream.write_all(&buf[..n]).await?;
        }
    }

    pub(super) async fn client(h: Handle, addr: SocketAddr, n: usize) -> Histogram<u64> {
        let mut stream = TcpStream::connect(&h, addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let msg = [7u8; MESSAGE];
        let mut buf = [0u8; MESSAGE];
        let mut hist = histogram();
        for i in 0..WARMUP + n {
            let start = Instant::now();
            stream.write_all(&msg).await.unwrap();
            stream.read_exact(&mut buf).await.unwrap();
            if i >= WARMUP {
                hist.saturating_record(start.elapsed().as_nanos().max(1) as u64);
            }
        }
        hist
    }

    pub(super) fn run(clients: usize, total: usize) -> Histogram<u64> {
        let scheduler = Scheduler::builder()
            .workers(2)
            .pin_workers(false)
            .build()
            .unwrap();
        let handle = scheduler.handle().clone();
        let listener = TcpListener::bind(&handle, "127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let h = handle.clone();
        handle.spawn_detached(async move {
            while let Ok((stream, _)) = listener.accept().await {
                stream.set_nodelay(true).unwrap();
                h.spawn_detached(echo(stream));
            }
        });
        let joins: Vec<_> = (0..clients)
            .map(|_| handle.spawn(client(handle.clone(), addr, total / clients)))
            .collect();
        let mut hist = histogram();
        for j in joins {
            hist.add(j.wait().unwrap()).unwrap();
        }
        drop(scheduler);
        hist
    }
}

/// The same echo server with an actor per connection, as
/// engine/examples/echo.rs builds it: an acceptor actor whose accept is a
/// future piped to it, one named child actor per accepted connection
/// (watched by the acceptor, which counts them), and each connection's
/// reads and writes futures piped back to it (`Context::pipe_to_self`):
/// read -> message -> write -> message -> next read. The clients are the
/// same tasks as in `on_proscenium`, on the system's scheduler.
mod on_actors {
    use super::*;
    use futures_util::io::{AsyncReadExt, AsyncWriteExt};
    use futures_util::FutureExt;
    use proscenium::net::{TcpListener, TcpStream};
    use proscenium::prelude::*;
    use std::io;
    use std::net::Shutdown;
    use std::sync::Arc;

    /// The size of each connection's read buffer (the tasks' too).
    const BUFFER: usize = 4096;

    /// How a connection actor writes what it read.
    #[derive(Clone, Copy)]
    pub(super) enum Write {
        /// A future piped to the actor, as echo.rs does: two pipes (two
        /// detached tasks) and two messages per round trip.
        Piped,
        /// First one non-blocking attempt in the handler (`poll_write`
        /// once, `now_or_never`); only what the socket did not take is
        /// piped. One pipe and one message per round trip when the
        /// socket's send buffer has room, which for an echo it has.
        Inline,
    }

    struct Connection {
        stream: Arc<TcpStream>,
        write: Write,
        /// The read or write in flight.
        io: Option<PipeHandle>,
    }

    enum ConnectionMsg {
        /// A read ended: its result and the buffer read into.
        Read(io::Result<usize>, Vec<u8>),
        /// A write ended: its result and the buffer, for the next read.
        Written(io::Result<()>, Vec<u8>),
    }

    impl Connection {
        /// Reads into `buf`, which stays `BUFFER` long: echo.rs truncates
        /// it to what it writes and resizes it for the next read, a 4 KB
        /// memset per read that the tasks (one zeroed array per
        /// connection) do not pay; here the write takes a slice instead.
        fn read(&mut self, ctx: &mut Context<Self>, mut buf: Vec<u8>) {
            let stream = Arc::clone(&self.stream);
            let read = async move {
                let mut reader: &TcpStream = &stream;
                let n = reader.read(&mut buf).await;
                (n, buf)
            };
            self.io = Some(ctx.pipe_to_self(read, |(n, buf)| ConnectionMsg::Read(n, buf)));
        }

        /// Writes `buf[..n]`, then reads again.
        fn write(&mut self, ctx: &mut Context<Self>, buf: Vec<u8>, n: usize) {
            let mut from = 0;
            if let Write::Inline = self.write {
                let mut writer: &TcpStream = &self.stream;
                match writer.write(&buf[..n]).now_or_never() {
                    Some(Ok(m)) if m == n => return self.read(ctx, buf),
                    Some(Ok(m)) => from = m,
                    Some(Err(_)) => return ctx.stop_self(),
                    None => {} // the socket is full: pipe the whole write
                }
            }
            let stream = Arc::clone(&self.stream);
            let write = async move {
                let mut writer: &TcpStream = &stream;
                let written = writer.write_all(&buf[from..n]).await;
                (written, buf)
            };
            self.io = Some(ctx.pipe_to_self(write, |(w, buf)| ConnectionMsg::Written(w, buf)));
        }
    }

    impl Actor for Connection {
        type Msg = ConnectionMsg;

        fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
            self.read(ctx, vec![0; BUFFER]);
            Ok(())
        }

        fn receive(&mut self, ctx: &mut Context<Self>, msg: ConnectionMsg) -> Outcome {
            self.io = None;
            match msg {
                ConnectionMsg::Read(Ok(0), _) => ctx.stop_self(),
                ConnectionMsg::Read(Ok(n), buf) => self.write(ctx, buf, n),
                ConnectionMsg::Written(Ok(()), buf) => self.read(ctx, buf),
                ConnectionMsg::Read(Err(_), _) | ConnectionMsg::Written(Err(_), _) => {
                    ctx.stop_self()
                }
            }
            Ok(())
        }

        /// As echo.rs: the I/O in flight cancelled, the socket shut down.
        fn post_stop(&mut self, _ctx: &mut Context<Self>) {
            if let Some(io) = self.io.take() {
                io.cancel();
            }
            let _ = self.stream.shutdown(Shutdown::Both);
        }
    }

    struct Acceptor {
        listener: Arc<TcpListener>,
        write: Write,
        accepted: u64,
        /// Connections whose actor has not terminated.
        open: usize,
    }

    enum AcceptorMsg {
        Accepted(io::Result<(TcpStream, SocketAddr)>),
    }

    impl Acceptor {
        fn accept(&mut self, ctx: &mut Context<Self>) {
            let listener = Arc::clone(&self.listener);
            let accept = async move { listener.accept().await };
            drop(ctx.pipe_to_self(accept, AcceptorMsg::Accepted));
        }
    }

    impl Actor for Acceptor {
        type Msg = AcceptorMsg;

        fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
            self.accept(ctx);
            Ok(())
        }

        fn receive(&mut self, ctx: &mut Context<Self>, msg: AcceptorMsg) -> Outcome {
            match msg {
                AcceptorMsg::Accepted(Ok((stream, _))) => {
                    stream.set_nodelay(true).unwrap();
                    let stream = Arc::new(stream);
                    let write = self.write;
                    self.accepted += 1;
                    let connection = ctx.spawn(
                        Props::new(move || Connection {
                            stream: Arc::clone(&stream),
                            write,
                            io: None,
                        }),
                        &format!("connection-{}", self.accepted),
                    )?;
                    ctx.watch(&connection.id());
                    self.open += 1;
                }
                AcceptorMsg::Accepted(Err(e)) => panic!("accept failed: {e}"),
            }
            self.accept(ctx);
            Ok(())
        }

        /// A connection ended (its client left).
        fn on_terminated(&mut self, _ctx: &mut Context<Self>, _who: ActorId) -> Outcome {
            self.open -= 1;
            Ok(())
        }
    }

    pub(super) fn run(write: Write, clients: usize, total: usize) -> Histogram<u64> {
        let system = ActorSystem::builder()
            .workers(2)
            .pin_workers(false)
            .build()
            .unwrap();
        let handle = system.scheduler_handle().clone();
        let listener = TcpListener::bind(&handle, "127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let listener = Arc::new(listener);
        system
            .spawn(
                Props::new(move || Acceptor {
                    listener: Arc::clone(&listener),
                    write,
                    accepted: 0,
                    open: 0,
                }),
                "acceptor",
            )
            .unwrap();
        let joins: Vec<_> = (0..clients)
            .map(|_| handle.spawn(on_proscenium::client(handle.clone(), addr, total / clients)))
            .collect();
        let mut hist = histogram();
        for j in joins {
            hist.add(j.wait().unwrap()).unwrap();
        }
        system.terminate().wait();
        hist
    }

    pub(super) fn run_piped(clients: usize, total: usize) -> Histogram<u64> {
        run(Write::Piped, clients, total)
    }

    pub(super) fn run_inline(clients: usize, total: usize) -> Histogram<u64> {
        run(Write::Inline, clients, total)
    }
}

mod on_tokio {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    async fn echo(mut stream: TcpStream) -> std::io::Result<()> {
        let mut buf = [0u8; 4096];
        loop {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            stream.write_all(&buf[..n]).await?;
        }
    }

    async fn client(addr: SocketAddr, n: usize) -> Histogram<u64> {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let msg = [7u8; MESSAGE];
        let mut buf = [0u8; MESSAGE];
        let mut hist = histogram();
        for i in 0..WARMUP + n {
            let start = Instant::now();
            stream.write_all(&msg).await.unwrap();
            stream.read_exact(&mut buf).await.unwrap();
            if i >= WARMUP {
                hist.saturating_record(start.elapsed().as_nanos().max(1) as u64);
            }
        }
        hist
    }

    pub(super) fn run(clients: usize, total: usize) -> Histogram<u64> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_io()
            .build()
            .unwrap();
        let hist = rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    stream.set_nodelay(true).unwrap();
                    tokio::spawn(echo(stream));
                }
            });
            let joins: Vec<_> = (0..clients)
                .map(|_| tokio::spawn(client(addr, total / clients)))
                .collect();
            let mut hist = histogram();
            for j in joins {
                hist.add(j.await.unwrap()).unwrap();
            }
            hist
        });
        rt.shutdown_background();
        hist
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

type Run = fn(usize, usize) -> Histogram<u64>;

/// The contenders, by the name the output and `ECHO_ONLY` use.
const CONTENDERS: [(&str, Run); 4] = [
    ("proscenium", on_proscenium::run),
    ("tokio", on_tokio::run),
    ("actor", on_actors::run_piped),
    ("actor-iw", on_actors::run_inline),
];

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported
    // (`ECHO_ONLY=actor,proscenium` picks contenders).
    let runs = env_usize("ECHO_RUNS", 3);
    let total = env_usize("ECHO_N", 50_000);
    let clients: Vec<usize> = std::env::var("ECHO_CLIENTS")
        .unwrap_or_else(|_| "1,64".to_owned())
        .split(',')
        .filter_map(|c| c.trim().parse().ok())
        .collect();
    let only: Option<Vec<String>> = std::env::var("ECHO_ONLY")
        .ok()
        .map(|v| v.split(',').map(|c| c.trim().to_owned()).collect());
    println!("tcp_echo: {MESSAGE}-byte round trips, {total} per run, {runs} runs, us");
    for &c in &clients {
        let mut medians: Vec<(&str, [f64; 4])> = Vec::new();
        for (name, run) in CONTENDERS {
            if only
                .as_ref()
                .is_some_and(|o| !o.iter().any(|n| n.as_str() == name))
            {
                continue;
            }
            let mut per_run: Vec<[f64; 4]> = Vec::new();
            for r in 0..runs {
                let p = percentiles(&run(c, total));
                println!(
                    "  {name:<10} clients={c:<3} run {r}: p50 {:>8.1}  p99 {:>8.1}  p99.9 {:>8.1}  mean {:>8.1}",
                    p[0], p[1], p[2], p[3]
                );
                per_run.push(p);
            }
            let m = [0, 1, 2, 3].map(|i| median(per_run.iter().map(|p| p[i]).collect()));
            medians.push((name, m));
        }
        for (name, m) in &medians {
            println!(
                "{name:<10} clients={c:<3} median: p50 {:>8.1}  p99 {:>8.1}  p99.9 {:>8.1}  mean {:>8.1}",
                m[0], m[1], m[2], m[3]
            );
        }
        let find = |n: &str| medians.iter().find(|(name, _)| *name == n).map(|(_, m)| *m);
        for (a, b) in [
            ("proscenium", "tokio"),
            ("actor", "proscenium"),
            ("actor-iw", "proscenium"),
        ] {
            if let (Some(x), Some(y)) = (find(a), find(b)) {
                println!(
                    "{a}/{b} clients={c:<3}: p50 {:.2}x  p99 {:.2}x  p99.9 {:.2}x  mean {:.2}x",
                    x[0] / y[0],
                    x[1] / y[1],
                    x[2] / y[2],
                    x[3] / y[3]
                );
            }
        }
    }
}
