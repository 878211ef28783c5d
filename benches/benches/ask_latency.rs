//! Sequential asks from a plain thread: the latency tail, run by run.
//!
//! Each run spawns a fresh system (or runtime) with one responder, warms up
//! with 5k asks, then times 100k asks one after the other from the bench's
//! own thread (`ask(..).wait()`; ractor: `block_on(call)` on a tokio
//! handle, its blocking equivalent) and reports p50, p99, p99.9 and max,
//! and how many asks took 500 µs or more ("stalls"). Contenders:
//!
//! * `proscenium` — the defaults a user gets (workers pinned, one per core);
//! * `proscenium-unpinned` — the same with `pin_workers(false)`;
//! * `ractor` — on a 2-worker tokio runtime, as in the `compare` bench.
//!
//! ```text
//! cargo bench -p proscenium-benches --bench ask_latency
//! ASK_RUNS=10 ASK_N=100000 ASK_ONLY=proscenium,ractor cargo bench ...
//! ```
//!
//! Figures in BENCHMARKS.md ("Sequential ask latency").
#![allow(missing_docs, clippy::unwrap_used)]

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// What one run measured, in microseconds.
struct Run {
    p50: f64,
    p99: f64,
    p999: f64,
    max: f64,
    stalls: u64,
}

/// A stall: an ask that took at least this long.
const STALL: Duration = Duration::from_micros(500);

fn measure(n: u64, mut ask: impl FnMut() -> u64) -> Run {
    for _ in 0..5_000 {
        ask();
    }
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram");
    let mut stalls = 0;
    for _ in 0..n {
        let start = Instant::now();
        std::hint::black_box(ask());
        let took = start.elapsed();
        if took >= STALL {
            stalls += 1;
        }
        hist.saturating_record(took.as_nanos().max(1) as u64);
    }
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    Run {
        p50: us(0.50),
        p99: us(0.99),
        p999: us(0.999),
        max: hist.max() as f64 / 1000.0,
        stalls,
    }
}

mod pro {
    use std::time::Duration;

    use proscenium::prelude::*;
    use proscenium::ShutdownConfig;

    struct Responder(u64);

    impl Actor for Responder {
        type Msg = Reply<u64>;
        fn receive(&mut self, _: &mut Context<Self>, reply: Reply<u64>) -> Outcome {
            self.0 += 1;
            reply.send(self.0);
            Ok(())
        }
    }

    pub(crate) fn run(n: u64, pin: bool) -> super::Run {
        let system = ActorSystem::builder()
            .name("ask-latency")
            .pin_workers(pin)
            .dead_letter_logging(0, Duration::from_secs(1))
            .coordinated_shutdown(ShutdownConfig::default().run_by_signals(false))
            .build()
            .expect("system");
        let responder = system
            .spawn(Props::new(|| Responder(0)), "responder")
            .expect("spawn");
        let run = super::measure(n, || {
            responder
                .ask(|r| r, Duration::from_secs(10))
                .wait()
                .expect("answer")
        });
        drop(responder);
        system.terminate().wait();
        run
    }
}

mod rac {
    use std::time::Duration;

    use ractor::rpc::CallResult;
    use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

    struct Responder;

    impl Actor for Responder {
        type Msg = RpcReplyPort<u64>;
        type State = u64;
        type Arguments = ();

        async fn pre_start(
            &self,
            _: ActorRef<Self::Msg>,
            _: (),
        ) -> Result<u64, ActorProcessingErr> {
            Ok(0)
        }

        async fn handle(
            &self,
            _: ActorRef<Self::Msg>,
            reply: RpcReplyPort<u64>,
            n: &mut u64,
        ) -> Result<(), ActorProcessingErr> {
            *n += 1;
            let _ = reply.send(*n);
            Ok(())
        }
    }

    pub(crate) fn run(n: u64) -> super::Run {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let (responder, _) = rt
            .block_on(Actor::spawn(None, Responder, ()))
            .expect("ractor spawn");
        let handle = rt.handle().clone();
        let run = super::measure(n, || {
            match handle.block_on(responder.call(|reply| reply, None)) {
                Ok(CallResult::Success(v)) => v,
                _ => panic!("ractor: no answer"),
            }
        });
        responder.stop(None);
        rt.shutdown_timeout(Duration::from_secs(10));
        run
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let runs = env_u64("ASK_RUNS", 10);
    let n = env_u64("ASK_N", 100_000);
    let only: Option<Vec<String>> = std::env::var("ASK_ONLY")
        .ok()
        .map(|v| v.split(',').map(str::to_owned).collect());
    let wanted = |name: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == name));
    let contenders: [(&str, &dyn Fn() -> Run); 3] = [
        ("proscenium", &|| pro::run(n, true)),
        ("proscenium-unpinned", &|| pro::run(n, false)),
        ("ractor", &|| rac::run(n)),
    ];
    println!("sequential asks from a plain thread: {runs} runs of {n} (after 5k warm-up)");
    println!("| contender | run | p50 µs | p99 µs | p99.9 µs | max µs | asks >= 500 µs |");
    println!("|---|---|---|---|---|---|---|");
    for (name, run) in contenders {
        if !wanted(name) {
            continue;
        }
        let mut stalled_runs = 0;
        let mut p999s = Vec::new();
        for i in 0..runs {
            let r = run();
            if r.stalls > 0 {
                stalled_runs += 1;
            }
            p999s.push(r.p999);
            println!(
                "| {name} | {i} | {:.1} | {:.1} | {:.1} | {:.0} | {} |",
                r.p50, r.p99, r.p999, r.max, r.stalls
            );
        }
        p999s.sort_by(f64::total_cmp);
        println!(
            "| {name} | summary | | | median {:.1} | | runs with a stall: {stalled_runs}/{runs} |",
            p999s[p999s.len() / 2]
        );
    }
}
