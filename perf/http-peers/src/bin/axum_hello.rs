//! The same axum Router as proscenium-http's `axum_hello` example (`GET
//! /hello` -> "hello, world") on `axum::serve`, on a tokio runtime of
//! WORKERS workers (default 2). `axum::serve` serves HTTP/1.1 and HTTP/2
//! (h2c, prior knowledge) on one port: with axum's `http1` and `http2`
//! features it runs hyper-util's auto builder on each connection.
//! Usage: axum_hello PORT [WORKERS]
use axum::serve::ListenerExt;
use axum::{routing, Router};

/// The Router, the same code as proscenium-http's example.
fn app() -> Router {
    Router::new().route("/hello", routing::get(|| async { "hello, world" }))
}

fn main() {
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(8083);
    let workers: usize = std::env::args().nth(2).and_then(|w| w.parse().ok()).unwrap_or(2);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
        // TCP_NODELAY, as proscenium-http and the hyper peer set it.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        println!("axum listening on {port}");
        axum::serve(listener, app()).await.expect("serve");
    });
}
