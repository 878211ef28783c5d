//! TCP echo round trips over loopback: `proscenium::net` on a 2-worker
//! scheduler against tokio's `TcpStream` on a 2-worker tokio runtime.
//!
//! Each run starts a fresh scheduler (or runtime) with an echo server
//! (accept loop, one task per connection) and `clients` client tasks on
//! the same pool; each client connects (`TCP_NODELAY`), warms up with 1k
//! round trips, then times `ECHO_N / clients` round trips of a 64-byte
//! message one after the other (write it, read it back). Reports p50, p99,
//! p99.9 of every round trip of the run, then the median of each over the
//! runs.
//!
//! ```text
//! cargo bench -p proscenium-benches --bench tcp_echo
//! ECHO_RUNS=5 ECHO_N=100000 ECHO_CLIENTS=1,64 cargo bench -p proscenium-benches --bench tcp_echo
//! ```
//!
//! Figures in BENCHMARKS.md ("TCP echo").
#![allow(missing_docs, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Instant;

use hdrhistogram::Histogram;

const MESSAGE: usize = 64;
const WARMUP: usize = 1_000;

fn histogram() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram")
}

/// p50, p99, p99.9 in microseconds.
fn percentiles(hist: &Histogram<u64>) -> [f64; 3] {
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    [us(0.50), us(0.99), us(0.999)]
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

    async fn client(h: Handle, addr: SocketAddr, n: usize) -> Histogram<u64> {
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

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let runs = env_usize("ECHO_RUNS", 3);
    let total = env_usize("ECHO_N", 50_000);
    let clients: Vec<usize> = std::env::var("ECHO_CLIENTS")
        .unwrap_or_else(|_| "1,64".to_owned())
        .split(',')
        .filter_map(|c| c.trim().parse().ok())
        .collect();
    println!("tcp_echo: {MESSAGE}-byte round trips, {total} per run, {runs} runs, us");
    for &c in &clients {
        let mut medians: Vec<(&str, [f64; 3])> = Vec::new();
        for (name, run) in [
            (
                "proscenium",
                on_proscenium::run as fn(usize, usize) -> Histogram<u64>,
            ),
            ("tokio", on_tokio::run),
        ] {
            let mut per_run: Vec<[f64; 3]> = Vec::new();
            for r in 0..runs {
                let p = percentiles(&run(c, total));
                println!(
                    "  {name:<10} clients={c:<3} run {r}: p50 {:>8.1}  p99 {:>8.1}  p99.9 {:>8.1}",
                    p[0], p[1], p[2]
                );
                per_run.push(p);
            }
            let m = [0, 1, 2].map(|i| median(per_run.iter().map(|p| p[i]).collect()));
            medians.push((name, m));
        }
        for (name, m) in &medians {
            println!(
                "{name:<10} clients={c:<3} median: p50 {:>8.1}  p99 {:>8.1}  p99.9 {:>8.1}",
                m[0], m[1], m[2]
            );
        }
        if let [(_, p), (_, t)] = medians[..] {
            println!(
                "proscenium/tokio clients={c:<3}: p50 {:.2}x  p99 {:.2}x  p99.9 {:.2}x",
                p[0] / t[0],
                p[1] / t[1],
                p[2] / t[2]
            );
        }
    }
}
