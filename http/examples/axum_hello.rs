//! The benchmark's axum Router (`perf/axum-ws-bench.sh`): `GET /hello` ->
//! "hello, world", served by `Http::bind_service` on the actor system's
//! workers, HTTP/1.1 and HTTP/2 (h2c, prior knowledge) on one port. Its
//! peer is the same Router on `axum::serve` over tokio
//! (`perf/http-peers/src/bin/axum_hello.rs`).
//!
//! ```sh
//! cargo run --release -p proscenium-http --features tower --example axum_hello -- --port 8080
//! curl localhost:8080/hello
//! curl --http2-prior-knowledge localhost:8080/hello
//! ```
//!
//! Options: `--port N` (default 8080), `--workers N` (default 2). It
//! prints `listening on ADDR` once it serves; SIGTERM or Ctrl-C stops it.

use axum::{routing, Router};
use proscenium::prelude::*;
use proscenium_http::{Http, ServerSettings};
use std::io::Write;
use std::time::Duration;

/// The Router, the same code as the peer's.
fn app() -> Router {
    Router::new().route("/hello", routing::get(|| async { "hello, world" }))
}

/// `--name VALUE` on the command line.
fn option(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1).cloned()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port: u16 = option("--port").map_or(Ok(8080), |p| p.parse())?;
    let workers: usize = option("--workers").map_or(Ok(2), |w| w.parse())?;
    let system = ActorSystem::builder()
        .name("axum-hello")
        .workers(workers)
        .pin_workers(false)
        .coordinated_shutdown(ShutdownConfig::default().exit_process(true))
        .build()?;
    let binding = Http::bind_service(
        &system,
        ([127, 0, 0, 1], port).into(),
        ServerSettings::default(),
        app(),
    )?;
    binding.add_to_coordinated_shutdown(system.coordinated_shutdown(), Duration::from_secs(1))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening on {}", binding.local_addr())?;
    out.flush()?;
    drop(out);
    system.when_terminated().wait();
    Ok(())
}
