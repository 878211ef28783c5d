//! The measuring thread spawns N anonymous actors from outside the pool and
//! tells each one message; each stops itself after it. The example returns
//! once every actor has handled its message: a fixed workload for
//! instruction counts (and profiles) of the spawn path, as `compare`'s
//! `spawn` workload drives it.
//!
//! ```text
//! perf/callgrind-engine.sh actor_spawn 100000 200000   # instructions per spawn
//! cargo run --release -p proscenium --example actor_spawn -- 1000000 2
//! ```
//!
//! The second argument is the worker count (default 1, unpinned: one worker
//! makes the instruction count deterministic).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::time::Instant;

use proscenium::prelude::*;

/// Counts handled messages; the last one signals the main thread.
struct Done {
    left: AtomicU64,
    tx: SyncSender<()>,
}

struct Once(Arc<Done>);

impl Actor for Once {
    type Msg = ();

    fn receive(&mut self, ctx: &mut Context<Self>, (): ()) -> Outcome {
        // AcqRel: the last decrement sees every other actor's.
        if self.0.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            let _ = self.0.tx.send(());
        }
        ctx.stop_self();
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(Ok(100_000), |s| s.parse())?;
    let workers: usize = args.next().map_or(Ok(1), |s| s.parse())?;
    let system = ActorSystem::builder()
        .workers(workers)
        .pin_workers(workers > 1)
        .build()?;
    let (tx, rx) = sync_channel(1);
    let done = Arc::new(Done {
        left: AtomicU64::new(n),
        tx,
    });
    let mut refs = Vec::with_capacity(n as usize);
    let start = Instant::now();
    for _ in 0..n {
        let d = Arc::clone(&done);
        let r = system.spawn_anonymous(Props::new(move || Once(Arc::clone(&d))))?;
        r.tell(());
        refs.push(r);
    }
    rx.recv()?;
    let elapsed = start.elapsed();
    drop(refs);
    let metrics = system.scheduler_handle().metrics();
    let (runs, parks, pulls) = metrics.workers.iter().fold((0, 0, 0), |(r, p, i), w| {
        (r + w.runs, p + w.parks, i + w.injector_pulls)
    });
    eprintln!(
        "{n} spawns on {workers} worker(s): {:.1} ms ({runs} runs, {pulls} injector pulls, {parks} parks)",
        elapsed.as_secs_f64() * 1e3
    );
    system.terminate().wait();
    Ok(())
}
