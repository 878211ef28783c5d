//! JetStream's side of issue 25's choice for reliable delivery
//! (perf/remote-reliable-bench.sh runs it against bench_node's reliable
//! mode): the same 40-byte message, N of them published to a file-backed
//! stream (each publish acknowledged by the server, at most WINDOW
//! acknowledgements outstanding) and read by a durable pull consumer on a
//! second connection, acknowledged cumulatively (AckAll) every 1,024 and
//! at the end; the time runs until the consumer has all N. Then M
//! sequential publishes, each waiting for its acknowledgement (p50, p99).
//!
//!     jetstream_bench <nats-url> <n> <m> [window]
//!
//! Prints `RESULT tell_msgs_per_s=... ask_p50_us=... ask_p99_us=...
//! ask_p999_us=... lost=...` as bench_node does (the "ask" here is a
//! publish and its acknowledgement: the stream's round trip).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer::AckPolicy, stream::StorageType};
use bytes::Bytes;
use futures_util::StreamExt;
use hdrhistogram::Histogram;

const SUBJECT: &str = "bench.js";

fn payload(id: u64) -> Bytes {
    // { id: u64, payload: [u8; 32] }, as postcard would have it: the id,
    // then 32 bytes (8 of them the id again).
    let mut p = Vec::with_capacity(40);
    p.extend_from_slice(&id.to_le_bytes());
    p.extend_from_slice(&id.to_le_bytes());
    p.extend_from_slice(&[0; 24]);
    Bytes::from(p)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (url, n, m, window) = match args.as_slice() {
        [url, n, m] => (url.clone(), n.parse::<u64>()?, m.parse::<u64>()?, 4096),
        [url, n, m, w] => (url.clone(), n.parse()?, m.parse()?, w.parse::<usize>()?),
        _ => return Err("usage: jetstream_bench <nats-url> <n> <m> [window]".into()),
    };
    let producer = async_nats::connect(&url).await?;
    let consumer_client = async_nats::connect(&url).await?;
    let js = jetstream::new(producer.clone());
    let _ = js.delete_stream("BENCH").await;
    let stream = js
        .create_stream(jetstream::stream::Config {
            name: "BENCH".into(),
            subjects: vec![SUBJECT.into()],
            storage: StorageType::File,
            ..Default::default()
        })
        .await?;
    stream
        .create_consumer(jetstream::consumer::pull::Config {
            durable_name: Some("sink".into()),
            ack_policy: AckPolicy::All,
            max_ack_pending: 100_000,
            ..Default::default()
        })
        .await?;

    // 1. Throughput: a warm-up of 10,000, then N.
    let consume = |count: u64| {
        let js = jetstream::new(consumer_client.clone());
        tokio::spawn(async move {
            let consumer: jetstream::consumer::PullConsumer = js
                .get_stream("BENCH")
                .await?
                .get_consumer("sink")
                .await?;
            let mut messages = consumer.messages().await?;
            let mut got = 0u64;
            while let Some(msg) = messages.next().await {
                let msg = msg?;
                got += 1;
                if got % 1024 == 0 || got == count {
                    msg.ack().await?;
                }
                if got == count {
                    break;
                }
            }
            Ok::<u64, Box<dyn std::error::Error + Send + Sync>>(got)
        })
    };
    let publish = |count: u64| {
        let js = js.clone();
        async move {
            let mut acks = VecDeque::with_capacity(window);
            for id in 0..count {
                if acks.len() == window {
                    let ack: jetstream::context::PublishAckFuture =
                        acks.pop_front().expect("a pending ack");
                    ack.await?;
                }
                acks.push_back(js.publish(SUBJECT, payload(id)).await?);
            }
            for ack in acks {
                ack.await?;
            }
            Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
        }
    };
    let warm = 10_000;
    let reader = consume(warm);
    publish(warm).await?;
    reader.await??;
    let reader = consume(n);
    let start = Instant::now();
    publish(n).await?;
    let got = reader.await??;
    let elapsed = start.elapsed();
    let rate = got as f64 / elapsed.as_secs_f64();
    println!(
        "jetstream: {got} of {n} through a file stream in {:.3} s: {rate:.0} msgs/s",
        elapsed.as_secs_f64()
    );

    // 2. Publish-acknowledgement round trips.
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    for id in 0..2_000 + m {
        let start = Instant::now();
        js.publish(SUBJECT, payload(id)).await?.await?;
        if id >= 2_000 {
            hist.saturating_record(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
        }
    }
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "jetstream publish+ack: p50 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs",
        us(0.5),
        us(0.99),
        us(0.999)
    );
    println!(
        "RESULT tell_msgs_per_s={rate:.0} ask_p50_us={:.1} ask_p99_us={:.1} ask_p999_us={:.1} lost={}",
        us(0.5),
        us(0.99),
        us(0.999),
        n - got
    );
    let _ = js.delete_stream("BENCH").await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    Ok(())
}
