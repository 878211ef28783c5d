//! The cost of a narrowed reference (`ActorRef::adapt`): tells per second
//! from one plain thread to a counting actor, straight and through an
//! adapter (a forwarding actor: one extra hop), in one run. The straight
//! tell is the baseline: adapters leave its path untouched.
//!
//! ```text
//! cargo bench -p proscenium-benches --bench adapted_tell
//! ```
//!
//! Figures in BENCHMARKS.md ("Narrowed references").
#![allow(missing_docs, clippy::unwrap_used)]

use std::sync::mpsc;
use std::time::Instant;

use proscenium::prelude::*;

enum Msg {
    One,
    Expect(u64, mpsc::Sender<()>),
}

struct Count {
    n: u64,
    want: Option<(u64, mpsc::Sender<()>)>,
}

impl Count {
    fn check(&mut self) {
        if let Some((want, _)) = &self.want {
            if self.n >= *want {
                let (_, tx) = self.want.take().unwrap();
                let _ = tx.send(());
            }
        }
    }
}

impl Actor for Count {
    type Msg = Msg;
    fn receive(&mut self, _: &mut Context<Self>, msg: Msg) -> Outcome {
        match msg {
            Msg::One => self.n += 1,
            Msg::Expect(n, tx) => self.want = Some((n, tx)),
        }
        self.check();
        Ok(())
    }
}

fn run(adapted: bool, n: u64) -> f64 {
    let system = ActorSystem::builder()
        .workers(2)
        .pin_workers(false)
        .build()
        .unwrap();
    let count = system
        .spawn(Props::new(|| Count { n: 0, want: None }), "count")
        .unwrap();
    let via: ActorRef<()> = count.adapt(|()| Msg::One).unwrap();
    let mut total = 0;
    let mut once = |k: u64| {
        let (tx, rx) = mpsc::channel();
        total += k;
        count.tell(Msg::Expect(total, tx));
        let start = Instant::now();
        for _ in 0..k {
            if adapted {
                via.tell(());
            } else {
                count.tell(Msg::One);
            }
        }
        rx.recv().unwrap();
        start.elapsed()
    };
    once(n / 10);
    let took = once(n);
    drop((count, via));
    system.terminate().wait();
    n as f64 / took.as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let n = if bench { 2_000_000 } else { 10_000 };
    let runs = if bench { 3 } else { 1 };
    let straight = median((0..runs).map(|_| run(false, n)).collect());
    let adapted = median((0..runs).map(|_| run(true, n)).collect());
    println!(
        "tells per second, n = {n}, median of {runs}: straight {straight:.0}  adapted {adapted:.0}  (adapted / straight {:.2}x)",
        adapted / straight
    );
}
