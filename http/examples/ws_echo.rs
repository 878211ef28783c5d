//! The benchmark's WebSocket echo (`perf/axum-ws-bench.sh`): every text and
//! binary message on `GET /ws` (any path) is sent back, served by
//! `Http::bind` on the actor system's workers. Its peer is a
//! tokio-tungstenite echo on tokio (`perf/http-peers/src/bin/tungstenite_echo.rs`);
//! the load client is `perf/http-peers/src/bin/ws_load.rs`.
//!
//! ```sh
//! cargo run --release -p proscenium-http --features websocket --example ws_echo -- --port 8080
//! ```
//!
//! Options: `--port N` (default 8080), `--workers N` (default 2). It
//! prints `listening on ADDR` once it serves; SIGTERM or Ctrl-C stops it.

use http::{Request, Response};
use proscenium::prelude::*;
use proscenium_http::{Body, Http, ServerSettings, WebSocket, WebSocketUpgrade};
use std::io::Write;
use std::time::Duration;

/// Sends back every text and binary message until the client closes.
async fn echo(mut socket: WebSocket) {
    while let Some(message) = socket.recv().await {
        if (message.is_text() || message.is_binary()) && socket.send(message).await.is_err() {
            break;
        }
    }
}

async fn handler(request: Request<Body>) -> Response<Body> {
    match WebSocketUpgrade::from_request(&request) {
        Ok(upgrade) => upgrade.on_upgrade(echo),
        Err(refusal) => refusal,
    }
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
        .name("ws-echo")
        .workers(workers)
        .pin_workers(false)
        .coordinated_shutdown(ShutdownConfig::default().exit_process(true))
        .build()?;
    let binding = Http::bind_with(
        &system,
        ([127, 0, 0, 1], port).into(),
        ServerSettings::default(),
        handler,
    )?;
    binding.add_to_coordinated_shutdown(system.coordinated_shutdown(), Duration::from_secs(1))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening on {}", binding.local_addr())?;
    out.flush()?;
    drop(out);
    system.when_terminated().wait();
    Ok(())
}
