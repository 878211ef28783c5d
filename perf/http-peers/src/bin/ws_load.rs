//! A WebSocket echo load client (perf/axum-ws-bench.sh): CONNECTIONS
//! connections (default 64), each sending a small text message and awaiting
//! its echo, in a loop, one message in flight per connection; after WARMUP
//! seconds (default 1, not counted) it counts for SECONDS seconds (default
//! 10) and records each round trip in an HDR histogram (ns, 3 significant
//! digits). Runs on a tokio runtime of THREADS threads (default 2). Its
//! read buffer is 16 KiB (tungstenite's default, 128 KiB, is zeroed before
//! each read: a cost on the client that shares the cores).
//! Prints one line: messages (counted), messages/s, p50, p99, p99.9 and
//! max in µs, errors, all messages echoed (the warm-up's too), and the
//! fewest and most messages counted on one connection (how evenly the
//! server served them).
//! Usage: ws_load URL [CONNECTIONS] [SECONDS] [THREADS] [BYTES] [WARMUP]
use futures_util::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Barrier;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

fn arg<T: std::str::FromStr>(n: usize, default: T) -> T {
    std::env::args().nth(n).and_then(|a| a.parse().ok()).unwrap_or(default)
}

fn main() {
    let url: String = std::env::args().nth(1).expect("usage: ws_load URL [CONNECTIONS] [SECONDS] [THREADS] [BYTES] [WARMUP]");
    let connections: usize = arg(2, 64);
    let seconds: f64 = arg(3, 10.0);
    let threads: usize = arg(4, 2);
    let bytes: usize = arg(5, 32);
    let warmup: f64 = arg(6, 1.0);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("runtime");
    let payload = Utf8Bytes::from("x".repeat(bytes));
    let config = WebSocketConfig::default().read_buffer_size(16 * 1024);
    let (histogram, errors, total, fewest, most) = runtime.block_on(async move {
        // Every connection is open before the clock starts.
        let barrier = Arc::new(Barrier::new(connections + 1));
        let mut tasks = Vec::new();
        for _ in 0..connections {
            let (ws, _) = tokio_tungstenite::connect_async_with_config(url.as_str(), Some(config), true)
                .await
                .expect("connect");
            let barrier = Arc::clone(&barrier);
            let payload = payload.clone();
            tasks.push(tokio::spawn(async move {
                let mut ws = ws;
                let mut histogram = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
                let mut errors = 0u64;
                let mut all = 0u64;
                barrier.wait().await;
                let start = Instant::now();
                let from = start + Duration::from_secs_f64(warmup);
                let until = from + Duration::from_secs_f64(seconds);
                loop {
                    let sent = Instant::now();
                    if sent >= until {
                        break;
                    }
                    if ws.send(Message::Text(payload.clone())).await.is_err() {
                        errors += 1;
                        break;
                    }
                    match ws.next().await {
                        Some(Ok(Message::Text(echo))) if echo.len() == payload.len() => {}
                        _ => {
                            errors += 1;
                            break;
                        }
                    }
                    all += 1;
                    if sent >= from {
                        histogram.saturating_record(sent.elapsed().as_nanos() as u64);
                    }
                }
                let _ = ws.close(None).await;
                (histogram, errors, all)
            }));
        }
        barrier.wait().await;
        let mut all = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        let (mut errors, mut total) = (0, 0);
        let (mut fewest, mut most) = (u64::MAX, 0);
        for task in tasks {
            let (histogram, e, t) = task.await.expect("task");
            fewest = fewest.min(histogram.len());
            most = most.max(histogram.len());
            all.add(histogram).unwrap();
            errors += e;
            total += t;
        }
        (all, errors, total, fewest, most)
    });
    let us = |q: f64| histogram.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "connections {connections} seconds {seconds} messages {} messages/s {:.0} p50_us {:.1} p99_us {:.1} p999_us {:.1} max_us {:.1} errors {errors} total {total} connection_min {fewest} connection_max {most}",
        histogram.len(),
        histogram.len() as f64 / seconds,
        us(0.5),
        us(0.99),
        us(0.999),
        histogram.max() as f64 / 1000.0,
    );
}
