//! N sequential asks from a plain thread to one actor on one worker, then
//! the system terminates: a fixed workload for instruction counts of the
//! ask path (`Ask::wait`, the reply slot, the wake-ups on both sides).
//!
//! ```text
//! cargo build --release -p proscenium --example actor_ask
//! for n in 10000 20000; do
//!     valgrind --tool=callgrind --callgrind-out-file=cg.$n target/release/examples/actor_ask $n
//! done
//! # instructions per ask = (Ir(20000) - Ir(10000)) / 10000
//! ```
//!
//! Unlike `actor_ping_pong`, the count is not exact run to run: the worker
//! looks for work a while before it parks, and how long depends on when the
//! next ask comes.
//!
//! It prints how many times the asking thread blocked per ask (its
//! voluntary context switches, from `/proc/thread-self/status`, on Linux):
//! a count, but one that depends on timing (whether the answer comes
//! before the asker gives up waiting for it without blocking), so on a
//! busy machine it says how the wait behaved there, not in general.

use std::time::Duration;

use proscenium::prelude::*;

struct Echo;

impl Actor for Echo {
    type Msg = (u64, Reply<u64>);

    fn receive(&mut self, _: &mut Context<Self>, (n, reply): Self::Msg) -> Outcome {
        reply.send(n);
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let asks: u64 = match std::env::args().nth(1) {
        Some(n) => n.parse()?,
        None => 10_000,
    };
    let system = ActorSystem::builder()
        .workers(1)
        .pin_workers(false)
        .build()?;
    let echo = system.spawn(Props::new(|| Echo), "echo")?;
    let before = voluntary_switches();
    for n in 0..asks {
        let answer = echo.ask(|r| (n, r), Duration::from_secs(10)).wait()?;
        assert_eq!(answer, n);
    }
    if let (Some(before), Some(after)) = (before, voluntary_switches()) {
        println!(
            "asks: {asks}; the asking thread blocked {:.3} times per ask",
            (after - before) as f64 / asks as f64
        );
    }
    drop(echo);
    system.terminate().wait();
    Ok(())
}

/// This thread's voluntary context switches so far (Linux only).
fn voluntary_switches() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/thread-self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
}
