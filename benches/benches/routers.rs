//! Criterion benchmark of routers: a round-robin pool of 8 routees fed by 4
//! producer threads, beside the same workload sent to one actor (the
//! baseline in the same run). The router is one actor that forwards every
//! message, so the pool pays one extra hop per message; what it buys is
//! that the handling is spread over 8 actors (which only pays when the
//! handler does real work; here it only counts).

#![allow(missing_docs)] // criterion_group! generates undocumented fns

use std::sync::mpsc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use proscenium::prelude::*;
use proscenium::{Pool, RouterRef};

const PRODUCERS: u64 = 4;
const PER_PRODUCER: u64 = 25_000;
const ROUTEES: u64 = 8;

fn system() -> ActorSystem {
    ActorSystem::builder()
        .name("bench")
        .workers(2)
        .build()
        .expect("system")
}

/// Counts down its share of the messages and says when it is done.
struct Count {
    left: u64,
    done: mpsc::Sender<()>,
}

impl Actor for Count {
    type Msg = u64;
    fn receive(&mut self, _: &mut Context<Self>, _: u64) -> Outcome {
        self.left -= 1;
        if self.left == 0 {
            let _ = self.done.send(());
        }
        Ok(())
    }
}

fn count_props(left: u64, done: &mpsc::Sender<()>) -> Props<Count> {
    let done = done.clone();
    Props::new(move || Count {
        left,
        done: done.clone(),
    })
}

fn fan_in(c: &mut Criterion) {
    let system = system();
    let total = PRODUCERS * PER_PRODUCER;
    let mut g = c.benchmark_group("routers/fan_in_4_producers");
    g.throughput(Throughput::Elements(total));
    g.bench_function(BenchmarkId::new("one_actor", total), |bench| {
        bench.iter(|| {
            let (tx, rx) = mpsc::channel();
            let sink = system
                .spawn_anonymous(count_props(total, &tx))
                .expect("sink");
            std::thread::scope(|s| {
                for _ in 0..PRODUCERS {
                    let sink = sink.clone();
                    s.spawn(move || (0..PER_PRODUCER).for_each(|i| sink.tell(i)));
                }
            });
            rx.recv().expect("done");
            sink.stop();
        })
    });
    g.bench_function(BenchmarkId::new("round_robin_pool_8", total), |bench| {
        bench.iter(|| {
            let (tx, rx) = mpsc::channel();
            // Round-robin from one router: each routee gets exactly its share.
            let pool = Pool::round_robin(ROUTEES as usize).props(count_props(total / ROUTEES, &tx));
            let router = RouterRef::new(system.spawn_anonymous(pool).expect("pool"));
            std::thread::scope(|s| {
                for _ in 0..PRODUCERS {
                    let router = router.clone();
                    s.spawn(move || (0..PER_PRODUCER).for_each(|i| router.tell(i)));
                }
            });
            for _ in 0..ROUTEES {
                rx.recv().expect("done");
            }
            router.actor_ref().stop();
        })
    });
    g.finish();
    system.terminate().wait();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1));
    targets = fan_in
}
criterion_main!(benches);
