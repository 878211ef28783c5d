//! The remote benchmark's proscenium side (perf/remote-bench.sh,
//! BENCHMARKS.md): two OS processes on one NATS server, the same workloads
//! and message as the ractor_cluster peer in perf/remote-peers/.
//!
//! ```sh
//! nats-server -a 127.0.0.1 -p 4222 &
//! cargo run --release -p proscenium-remote --example bench_node -- receiver nats://127.0.0.1:4222 &
//! cargo run --release -p proscenium-remote --example bench_node -- sender nats://127.0.0.1:4222 200000 20000 [window]
//! ```
//!
//! The receiver exposes a counting actor as `bench-sink`, prints `ready`,
//! and runs until SIGTERM or Ctrl-C (the coordinated shutdown). The sender:
//!
//! 1. **tell throughput**: after a warm-up, tells `N` messages and asks the
//!    receiver for its count (per-sender order puts that ask behind every
//!    tell), so the time runs from the first tell until the receiver's
//!    actor has handled all `N`, not until the sends are queued. With a
//!    `window` (a fifth argument), it also waits for the count after every
//!    `window` tells: delivery is at most once, and without flow control a
//!    burst can outrun the receiving client, which then drops messages
//!    (a slow consumer; the count reports them as lost);
//! 2. **ask round trip**: after a warm-up, `M` sequential asks, each timed
//!    into an HDR histogram (p50, p99, p99.9).
//!
//! Environment (issue 25's A/B runs, perf/remote-reliable-bench.sh):
//! `BENCH_RELIABLE=1` on the sender sends the tells through a
//! `ReliableRef` (`send`, flow-controlled, then `confirmed`; no window by
//! hand is needed: nothing is lost), the asks as before;
//! `BENCH_CLUSTER_KEY=<secret>` on both sides signs everything.
//!
//! It prints a human line per workload and one
//! `RESULT tell_msgs_per_s=... ask_p50_us=... ask_p99_us=... ask_p999_us=...`
//! line for the script. The message is a 40-byte struct, `{ id: u64,
//! payload: [u8; 32] }`; an ask carries one and is answered with its id.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use proscenium::prelude::*;
use proscenium_remote::{Remote, RemoteAskError, RemoteReply, RemoteSettings};
use serde::{Deserialize, Serialize};

/// The benchmark's message, the same fields on the peer's side.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Payload {
    id: u64,
    payload: [u8; 32],
}

/// The receiver's protocol.
#[derive(Debug, Serialize, Deserialize)]
enum Bench {
    /// Counted.
    Tell(Payload),
    /// Answered with the payload's id.
    Ask(Payload, RemoteReply<u64>),
    /// Answered with the number of `Tell`s handled so far.
    Count(RemoteReply<u64>),
}

struct Sink {
    told: u64,
}

impl Actor for Sink {
    type Msg = Bench;
    fn receive(&mut self, _: &mut Context<Self>, msg: Bench) -> Outcome {
        match msg {
            Bench::Tell(p) => {
                // Touch the message, so it is not optimised away.
                std::hint::black_box(p);
                self.told += 1;
            }
            Bench::Ask(p, reply) => reply.send(p.id),
            Bench::Count(reply) => reply.send(self.told),
        }
        Ok(())
    }
}

const CLUSTER: &str = "bench";
const NAME: &str = "bench-sink";
const TIMEOUT: Duration = Duration::from_secs(30);
const COUNT_TIMEOUT: Duration = Duration::from_secs(10);
const WARM_TELLS: u64 = 10_000;
const WARM_ASKS: u64 = 2_000;

fn payload(id: u64) -> Payload {
    let mut payload = [0u8; 32];
    payload[..8].copy_from_slice(&id.to_le_bytes());
    Payload { id, payload }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [role, url] if role == "receiver" => receiver(url),
        [role, url, n, m] if role == "sender" => sender(url, n.parse()?, m.parse()?, 0),
        [role, url, n, m, w] if role == "sender" => sender(url, n.parse()?, m.parse()?, w.parse()?),
        _ => Err(
            "usage: bench_node receiver <nats-url> | sender <nats-url> <tells> <asks> [window]"
                .into(),
        ),
    }
}

fn receiver(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    // The NATS client's events (a slow consumer drops messages) on stderr.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::INFO)
        .init();
    let system = ActorSystem::builder().name("receiver").build()?;
    let mut settings = keyed(RemoteSettings::new(url, CLUSTER, "receiver"));
    // BENCH_SUBSCRIPTION_CAPACITY: the receiver's buffer per exposed name
    // (the default drops messages under a burst: BENCHMARKS.md, "Remote").
    if let Ok(n) = std::env::var("BENCH_SUBSCRIPTION_CAPACITY") {
        settings = settings.subscription_capacity(n.parse()?);
    }
    let remote = Remote::connect(&system, settings)?;
    remote.add_to_coordinated_shutdown()?;
    let sink = system.spawn(Props::new(|| Sink { told: 0 }), "sink")?;
    remote.expose(&sink, NAME)?;
    println!("ready");
    let report = system.when_terminated().wait();
    println!(
        "receiver: {} messages dropped by the NATS client (slow consumer)",
        remote.dropped_by_slow_consumer()
    );
    drop(remote);
    println!("receiver terminated clean={}", report.clean());
    Ok(())
}

/// The receiver's count. At most once: under a burst the receiving
/// client can drop messages (a slow consumer, logged by the receiver),
/// the count ask among them; then it is asked again, and the run's rate
/// is not valid (the time includes the timeout), which is printed.
fn count(sink: &proscenium_remote::RemoteRef<Bench>) -> Result<(u64, bool), RemoteAskError> {
    let mut valid = true;
    for _ in 0..5 {
        match sink.ask(Bench::Count, COUNT_TIMEOUT).wait() {
            Err(RemoteAskError::Timeout(_)) => {
                println!("the count ask got no answer in {COUNT_TIMEOUT:?} (lost): the rate below is not valid; asking again");
            }
            Ok(n) => return Ok((n, valid)),
            Err(e) => return Err(e),
        }
        valid = false;
    }
    Err(RemoteAskError::Timeout(COUNT_TIMEOUT))
}

/// The settings, with `BENCH_CLUSTER_KEY`'s key if set.
fn keyed(settings: RemoteSettings) -> RemoteSettings {
    match std::env::var("BENCH_CLUSTER_KEY") {
        Ok(key) => settings.cluster_key(key),
        Err(_) => settings,
    }
}

fn sender(url: &str, n: u64, m: u64, window: u64) -> Result<(), Box<dyn std::error::Error>> {
    let system = ActorSystem::builder().name("sender").build()?;
    let remote = Remote::connect(&system, keyed(RemoteSettings::new(url, CLUSTER, "sender")))?;
    let sink = remote.actor_ref::<Bench>(NAME)?;
    let reliable = std::env::var("BENCH_RELIABLE")
        .is_ok_and(|v| v == "1")
        .then(|| remote.reliable_ref::<Bench>(NAME))
        .transpose()?;

    // Wait for the receiver's name (no responders comes back at once).
    let mut base = None;
    for _ in 0..600 {
        match sink.ask(Bench::Count, TIMEOUT).wait() {
            Ok(c) => {
                base = Some(c);
                break;
            }
            Err(RemoteAskError::NoResponders(_)) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(e.into()),
        }
    }
    let mut told = base.ok_or("the receiver never answered")?;

    // 1. Tell throughput: warm-up, then N tells and the count.
    let mut tell_round = |k: u64| -> Result<(Duration, u64, bool), Box<dyn std::error::Error>> {
        let start = Instant::now();
        let mut valid = true;
        if let Some(reliable) = &reliable {
            // Flow control by the reliable ref; the count after every tell
            // is confirmed (in the actor's mailbox), so it sees them all.
            for id in 0..k {
                reliable.send(Bench::Tell(payload(id))).wait()?;
            }
            if !reliable.confirmed().wait_timeout(TIMEOUT) {
                return Err("the tells were not confirmed within the timeout".into());
            }
        }
        for id in (0..k).filter(|_| reliable.is_none()) {
            sink.tell(Bench::Tell(payload(id)))?;
            // Flow control by hand: wait for the count every `window` tells.
            if window > 0 && (id + 1) % window == 0 && id + 1 < k {
                valid &= count(&sink)?.1;
            }
        }
        let (now, last_valid) = count(&sink)?;
        let valid = valid && last_valid;
        let elapsed = start.elapsed();
        let handled = now - told;
        told = now;
        Ok((elapsed, handled, valid))
    };
    tell_round(WARM_TELLS)?;
    let (elapsed, handled, valid) = tell_round(n)?;
    if handled != n {
        // At most once: a slow consumer's client drops messages.
        println!("tell: {} of {n} messages lost", n - handled);
    }
    let rate = handled as f64 / elapsed.as_secs_f64();
    println!(
        "tell: {handled} of {n} handled in {:.3} s: {rate:.0} msgs/s{}",
        elapsed.as_secs_f64(),
        if valid {
            ""
        } else {
            " (not valid: a count ask was lost)"
        }
    );
    let rate = if valid {
        format!("{rate:.0}")
    } else {
        "invalid".to_owned()
    };

    // 2. Ask round trips: warm-up, then M sequential asks.
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    for id in 0..WARM_ASKS + m {
        let start = Instant::now();
        let got = sink.ask(|r| Bench::Ask(payload(id), r), TIMEOUT).wait()?;
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
        "RESULT tell_msgs_per_s={rate} ask_p50_us={:.1} ask_p99_us={:.1} ask_p999_us={:.1} lost={}",
        us(0.5),
        us(0.99),
        us(0.999),
        n - handled
    );
    drop(sink);
    drop(remote);
    drop(system.terminate());
    Ok(())
}
