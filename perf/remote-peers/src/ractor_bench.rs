//! The ractor_cluster side of the remote benchmark (perf/remote-bench.sh):
//! the same workloads, message and output as
//! remote/examples/bench_node.rs, with ractor_cluster's node-to-node TCP
//! in place of NATS.
//!
//! ```sh
//! ractor_bench receiver 4697 &
//! ractor_bench sender 4697 200000 20000
//! ```
//!
//! The receiver runs a `NodeServer` on the port and a counting actor in
//! the process group `bench-sink`, prints `ready` and runs until killed.
//! The sender runs its own `NodeServer`, connects it to the receiver's,
//! waits until the group shows the remote actor, then:
//!
//! 1. tell throughput: after a warm-up, casts `N` messages and calls the
//!    receiver for its count (one ordered session carries both), so the
//!    time runs until the receiver's actor has handled all `N` (with a
//!    `window`, a fifth argument, it also waits for the count after every
//!    `window` casts, as bench_node does);
//! 2. ask round trip: after a warm-up, `M` sequential calls, each timed
//!    into an HDR histogram.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use ractor::rpc::CallResult;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use ractor_cluster::{BytesConvertable, NodeServer, RactorClusterMessage};

/// The benchmark's message: `{ id: u64, payload: [u8; 32] }`, 40 bytes on
/// the wire (ractor_cluster's encoding is per field, `BytesConvertable`).
#[derive(Debug, Clone, Copy)]
struct Payload {
    id: u64,
    payload: [u8; 32],
}

impl BytesConvertable for Payload {
    fn into_bytes(self) -> Vec<u8> {
        let mut v = Vec::with_capacity(40);
        v.extend_from_slice(&self.id.to_be_bytes());
        v.extend_from_slice(&self.payload);
        v
    }
    fn from_bytes(bytes: Vec<u8>) -> Self {
        let mut id = [0u8; 8];
        id.copy_from_slice(&bytes[..8]);
        let mut payload = [0u8; 32];
        payload.copy_from_slice(&bytes[8..40]);
        Payload {
            id: u64::from_be_bytes(id),
            payload,
        }
    }
}

#[derive(RactorClusterMessage)]
enum Bench {
    /// Counted.
    Tell(Payload),
    /// Answered with the payload's id.
    #[rpc]
    Ask(Payload, RpcReplyPort<u64>),
    /// Answered with the number of `Tell`s handled so far.
    #[rpc]
    Count(RpcReplyPort<u64>),
}

struct Sink;

impl Actor for Sink {
    type Msg = Bench;
    type State = u64;
    type Arguments = ();

    async fn pre_start(&self, myself: ActorRef<Bench>, (): ()) -> Result<u64, ActorProcessingErr> {
        ractor::pg::join(GROUP.to_owned(), vec![myself.get_cell()]);
        Ok(0)
    }

    async fn handle(
        &self,
        _: ActorRef<Bench>,
        msg: Bench,
        told: &mut u64,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            Bench::Tell(p) => {
                std::hint::black_box(p);
                *told += 1;
            }
            Bench::Ask(p, reply) => reply.send(p.id)?,
            Bench::Count(reply) => reply.send(*told)?,
        }
        Ok(())
    }
}

const GROUP: &str = "bench-sink";
const COOKIE: &str = "bench";
const TIMEOUT: Duration = Duration::from_secs(30);
const WARM_TELLS: u64 = 10_000;
const WARM_ASKS: u64 = 2_000;

fn payload(id: u64) -> Payload {
    let mut payload = [0u8; 32];
    payload[..8].copy_from_slice(&id.to_le_bytes());
    Payload { id, payload }
}

type Error = Box<dyn std::error::Error + Send + Sync>;

async fn call<R: Send + 'static>(
    sink: &ActorRef<Bench>,
    make: impl FnOnce(RpcReplyPort<R>) -> Bench,
) -> Result<R, Error> {
    match sink.call(make, Some(TIMEOUT)).await {
        Ok(CallResult::Success(r)) => Ok(r),
        Ok(CallResult::Timeout) => Err("call timed out".into()),
        Ok(CallResult::SenderError) => Err("the reply port was dropped".into()),
        Err(e) => Err(format!("call failed: {e}").into()),
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [role, port] if role == "receiver" => receiver(port.parse()?).await,
        [role, port, n, m] if role == "sender" => {
            sender(port.parse()?, n.parse()?, m.parse()?, 0).await
        }
        [role, port, n, m, w] if role == "sender" => {
            sender(port.parse()?, n.parse()?, m.parse()?, w.parse()?).await
        }
        _ => Err(
            "usage: ractor_bench receiver <port> | sender <port> <tells> <asks> [window]".into(),
        ),
    }
}

fn node(port: u16, name: &str) -> NodeServer {
    NodeServer::new(
        port,
        COOKIE.to_owned(),
        name.to_owned(),
        "localhost".to_owned(),
        None,
        None,
    )
    .with_listen_addr([127, 0, 0, 1].into())
}

async fn receiver(port: u16) -> Result<(), Error> {
    let (_server, _) = Actor::spawn(None, node(port, "receiver"), ()).await?;
    let (_sink, _) = Actor::spawn(Some("sink".to_owned()), Sink, ()).await?;
    println!("ready");
    std::future::pending::<()>().await;
    Ok(())
}

async fn sender(port: u16, n: u64, m: u64, window: u64) -> Result<(), Error> {
    let (server, _) = Actor::spawn(None, node(0, "sender"), ()).await?;
    ractor_cluster::client_connect(&server, format!("127.0.0.1:{port}")).await?;
    // Wait until the session is up and the group shows the remote actor.
    let mut remote = None;
    for _ in 0..600 {
        remote = ractor::pg::get_members(&GROUP.to_owned())
            .into_iter()
            .find(|a| !a.get_id().is_local());
        if remote.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sink: ActorRef<Bench> = remote.ok_or("the receiver's actor never showed up")?.into();
    let mut told = call(&sink, Bench::Count).await?;

    // 1. Tell throughput: warm-up, then N casts and the count.
    let mut results = Vec::new();
    for count in [WARM_TELLS, n] {
        let start = Instant::now();
        for id in 0..count {
            sink.cast(Bench::Tell(payload(id)))
                .map_err(|e| format!("cast failed: {e}"))?;
            // The same flow control by hand as bench_node's `window`.
            if window > 0 && (id + 1) % window == 0 && id + 1 < count {
                call(&sink, Bench::Count).await?;
            }
        }
        let now = call(&sink, Bench::Count).await?;
        results.push((start.elapsed(), now - told));
        told = now;
    }
    let (elapsed, handled) = results[1];
    if handled != n {
        println!("tell: {} of {n} messages lost", n - handled);
    }
    let rate = handled as f64 / elapsed.as_secs_f64();
    println!(
        "tell: {handled} of {n} handled in {:.3} s: {rate:.0} msgs/s",
        elapsed.as_secs_f64()
    );

    // 2. Ask round trips: warm-up, then M sequential calls.
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    for id in 0..WARM_ASKS + m {
        let start = Instant::now();
        let got = call(&sink, |r| Bench::Ask(payload(id), r)).await?;
        let rtt = start.elapsed();
        if got != id {
            return Err(format!("ask {id} answered {got}").into());
        }
        if id >= WARM_ASKS {
            hist.saturating_record(u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX));
        }
    }
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "ask: {m} round trips: p50 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs, max {:.1} µs",
        us(0.5),
        us(0.99),
        us(0.999),
        hist.max() as f64 / 1000.0
    );
    println!(
        "RESULT tell_msgs_per_s={rate:.0} ask_p50_us={:.1} ask_p99_us={:.1} ask_p999_us={:.1} lost={}",
        us(0.5),
        us(0.99),
        us(0.999),
        n - handled
    );
    Ok(())
}
