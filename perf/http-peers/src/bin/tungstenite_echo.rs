//! A WebSocket echo on tokio-tungstenite, on a tokio runtime of WORKERS
//! workers (default 2): every text and binary message is sent back, one
//! task per connection (the peer of proscenium-http's `ws_echo` example).
//! tokio-tungstenite's default `WebSocketConfig` (a 128 KiB read buffer),
//! or with READ_BUFFER given, that read buffer and no write buffer
//! (`write_buffer_size(0)`): proscenium-http's settings are 16384 and 0.
//! Usage: tungstenite_echo PORT [WORKERS] [READ_BUFFER]
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

fn main() {
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(8084);
    let workers: usize = std::env::args().nth(2).and_then(|w| w.parse().ok()).unwrap_or(2);
    let config = std::env::args().nth(3).and_then(|b| b.parse().ok()).map(|bytes: usize| {
        WebSocketConfig::default().read_buffer_size(bytes).write_buffer_size(0)
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
        println!("tokio-tungstenite listening on {port}");
        loop {
            let (stream, _) = listener.accept().await.expect("accept");
            stream.set_nodelay(true).ok();
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async_with_config(stream, config).await else {
                    return;
                };
                while let Some(Ok(message)) = ws.next().await {
                    if (message.is_text() || message.is_binary()) && ws.send(message).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
}
