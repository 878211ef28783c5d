//! Coordinated shutdown: the time from `CoordinatedShutdown::run` to the
//! last worker joined (`when_terminated` complete), for an idle system and
//! for one with 100k actors and 1M queued messages (what is still queued when
//! an actor stops goes to dead letters, counted).
//!
//! Not criterion: each sample builds and tears down a whole system, so the
//! bench takes a median over a few repetitions and prints a markdown table.
//!
//!     cargo bench -p proscenium-benches --bench shutdown
//!
//! `SHUTDOWN_REPS` (default 9) sets the repetitions, `SHUTDOWN_ACTORS`
//! (default 100000) and `SHUTDOWN_MESSAGES` (default 1000000) the load, and
//! `SHUTDOWN_WORK_NS` (default 2000) the CPU each message costs: 1M messages
//! are then about 2 s of work, far more than the shutdown waits for.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proscenium::prelude::*;
use proscenium::{Reason, ShutdownConfig};

/// A busy actor: each message costs about `work` of CPU, so the queue is
/// far from drained when the shutdown starts.
struct Sink {
    handled: Arc<AtomicU64>,
    work: Duration,
}

impl Actor for Sink {
    type Msg = u64;
    fn receive(&mut self, _ctx: &mut Context<Self>, msg: u64) -> Outcome {
        let start = Instant::now();
        while start.elapsed() < self.work {
            std::hint::black_box(msg);
        }
        self.handled.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn system() -> ActorSystem {
    ActorSystem::builder()
        .name("bench")
        .dead_letter_logging(0, Duration::from_secs(1))
        .coordinated_shutdown(ShutdownConfig::default().run_by_signals(false))
        .build()
        .expect("the system starts")
}

/// One sample: what the shutdown took, and the messages handled and
/// dead-lettered.
struct Sample {
    run_done: Duration,
    joined: Duration,
    handled: u64,
    dead: u64,
}

fn sample(actors: u64, messages: u64, work: Duration) -> Sample {
    let system = system();
    let handled = Arc::new(AtomicU64::new(0));
    let refs: Vec<ActorRef<u64>> = (0..actors)
        .map(|_| {
            let handled = Arc::clone(&handled);
            system
                .spawn_anonymous(Props::new(move || Sink {
                    handled: Arc::clone(&handled),
                    work,
                }))
                .expect("spawned")
        })
        .collect();
    if let Some(per) = messages.checked_div(actors) {
        for k in 0..per {
            for r in &refs {
                r.tell(k);
            }
        }
    }
    drop(refs);
    let start = Instant::now();
    let run = system.coordinated_shutdown().run(Reason::Unknown);
    run.wait().expect("the run completes");
    let run_done = start.elapsed();
    let report = system.when_terminated().wait();
    let joined = start.elapsed();
    assert!(report.clean(), "{report:?}");
    assert_eq!(system.live_cells(), 0);
    Sample {
        run_done,
        joined,
        handled: handled.load(Ordering::Relaxed),
        dead: report.dead_letters,
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it once,
    // small, as a smoke test.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let reps = if smoke { 1 } else { env("SHUTDOWN_REPS", 9) };
    let actors = if smoke {
        1000
    } else {
        env("SHUTDOWN_ACTORS", 100_000)
    };
    let messages = if smoke {
        10_000
    } else {
        env("SHUTDOWN_MESSAGES", 1_000_000)
    };
    let work = Duration::from_nanos(env("SHUTDOWN_WORK_NS", 2000));
    println!("| system | run() -> run complete (ms) | run() -> last worker joined (ms) | min..max joined (ms) | handled | dead letters |");
    println!("|---|---|---|---|---|---|");
    for (label, a, m) in [
        ("idle (guardians only)".to_owned(), 0, 0),
        (
            format!("{actors} actors, {messages} queued"),
            actors,
            messages,
        ),
    ] {
        let samples: Vec<Sample> = (0..reps).map(|_| sample(a, m, work)).collect();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let joined: Vec<f64> = samples.iter().map(|s| ms(s.joined)).collect();
        let min = joined.iter().copied().fold(f64::INFINITY, f64::min);
        let max = joined.iter().copied().fold(0.0, f64::max);
        let handled = median(samples.iter().map(|s| s.handled as f64).collect());
        let dead = median(samples.iter().map(|s| s.dead as f64).collect());
        for s in &samples {
            assert_eq!(s.handled + s.dead, m, "every message handled or dead, once");
        }
        println!(
            "| {label} | {:.2} | {:.2} | {:.2}..{:.2} | {handled:.0} | {dead:.0} |",
            median(samples.iter().map(|s| ms(s.run_done)).collect()),
            median(joined),
            min,
            max,
        );
    }
}
