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
    for n in 0..asks {
        let answer = echo.ask(|r| (n, r), Duration::from_secs(10)).wait()?;
        assert_eq!(answer, n);
    }
    drop(echo);
    system.terminate().wait();
    Ok(())
}
