//! Criterion benchmarks of the engine (the regression view; the side-by-side
//! peer table is the `compare` bench): ping-pong, fan-in, spawn, and the
//! Savina thread ring, each at a size criterion can repeat.

#![allow(missing_docs)] // criterion_group! generates undocumented fns

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use proscenium::prelude::*;

fn system() -> ActorSystem {
    ActorSystem::builder()
        .name("bench")
        .workers(2)
        .build()
        .expect("system")
}

enum Ball {
    Serve(ActorRef<Ball>, u64, mpsc::Sender<()>),
    Hit(ActorRef<Ball>),
}

struct Player {
    left: u64,
    done: Option<mpsc::Sender<()>>,
}

impl Actor for Player {
    type Msg = Ball;
    fn receive(&mut self, ctx: &mut Context<Self>, msg: Ball) -> Outcome {
        match msg {
            Ball::Serve(other, rounds, done) => {
                self.left = rounds;
                self.done = Some(done);
                other.tell(Ball::Hit(ctx.self_ref()));
            }
            Ball::Hit(from) => {
                if self.done.is_some() {
                    if self.left == 0 {
                        let _ = self.done.take().map(|d| d.send(()));
                        return Ok(());
                    }
                    self.left -= 1;
                }
                from.tell(Ball::Hit(ctx.self_ref()));
            }
        }
        Ok(())
    }
}

fn ping_pong(c: &mut Criterion) {
    let system = system();
    let a = system
        .spawn_anonymous(Props::new(|| Player {
            left: 0,
            done: None,
        }))
        .expect("a");
    let b = system
        .spawn_anonymous(Props::new(|| Player {
            left: 0,
            done: None,
        }))
        .expect("b");
    let rounds = 10_000;
    let mut g = c.benchmark_group("actors/ping_pong");
    g.throughput(Throughput::Elements(2 * rounds));
    g.bench_function("round_trips_10k", |bench| {
        bench.iter(|| {
            let (tx, rx) = mpsc::channel();
            a.tell(Ball::Serve(b.clone(), rounds, tx));
            rx.recv().expect("done");
        })
    });
    g.finish();
    drop((a, b));
    system.terminate().wait();
}

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

fn fan_in(c: &mut Criterion) {
    let system = system();
    let producers = 4;
    let per = 25_000u64;
    let mut g = c.benchmark_group("actors/fan_in");
    g.throughput(Throughput::Elements(producers * per));
    g.bench_function(BenchmarkId::new("4_producers", per), |bench| {
        bench.iter(|| {
            let (tx, rx) = mpsc::channel();
            let sink = system
                .spawn_anonymous(Props::new(move || Count {
                    left: producers * per,
                    done: tx.clone(),
                }))
                .expect("sink");
            std::thread::scope(|s| {
                for _ in 0..producers {
                    let sink = sink.clone();
                    s.spawn(move || (0..per).for_each(|i| sink.tell(i)));
                }
            });
            rx.recv().expect("done");
            sink.stop();
        })
    });
    g.finish();
    system.terminate().wait();
}

struct Once {
    left: Arc<AtomicU64>,
    done: mpsc::Sender<()>,
}

impl Actor for Once {
    type Msg = ();
    fn receive(&mut self, ctx: &mut Context<Self>, _: ()) -> Outcome {
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            let _ = self.done.send(());
        }
        ctx.stop_self();
        Ok(())
    }
}

fn spawn(c: &mut Criterion) {
    let system = system();
    let n = 10_000u64;
    let mut g = c.benchmark_group("actors/spawn");
    g.throughput(Throughput::Elements(n));
    g.bench_function("spawn_tell_stop_10k", |bench| {
        bench.iter(|| {
            let (tx, rx) = mpsc::channel();
            let left = Arc::new(AtomicU64::new(n));
            for _ in 0..n {
                let (left, tx) = (left.clone(), tx.clone());
                system
                    .spawn_anonymous(Props::new(move || Once {
                        left: left.clone(),
                        done: tx.clone(),
                    }))
                    .expect("spawn")
                    .tell(());
            }
            rx.recv().expect("done");
        })
    });
    g.finish();
    system.terminate().wait();
}

enum Token {
    Link(ActorRef<Token>),
    Hop(u64, mpsc::Sender<()>),
}

struct Link {
    next: Option<ActorRef<Token>>,
}

impl Actor for Link {
    type Msg = Token;
    fn receive(&mut self, _: &mut Context<Self>, msg: Token) -> Outcome {
        match msg {
            Token::Link(next) => self.next = Some(next),
            Token::Hop(0, done) => {
                let _ = done.send(());
            }
            Token::Hop(n, done) => {
                if let Some(next) = &self.next {
                    next.tell(Token::Hop(n - 1, done));
                }
            }
        }
        Ok(())
    }
}

fn thread_ring(c: &mut Criterion) {
    let system = system();
    let ring: Vec<ActorRef<Token>> = (0..503)
        .map(|_| {
            system
                .spawn_anonymous(Props::new(|| Link { next: None }))
                .expect("link")
        })
        .collect();
    for (i, link) in ring.iter().enumerate() {
        link.tell(Token::Link(ring[(i + 1) % ring.len()].clone()));
    }
    let hops = 100_000;
    let mut g = c.benchmark_group("actors/thread_ring");
    g.throughput(Throughput::Elements(hops));
    g.bench_function("503_actors_100k_hops", |bench| {
        bench.iter(|| {
            let (tx, rx) = mpsc::channel();
            ring[0].tell(Token::Hop(hops, tx));
            rx.recv().expect("done");
        })
    });
    g.finish();
    // The ring refers to itself: break it before terminating.
    for link in &ring {
        link.stop();
    }
    drop(ring);
    system.terminate().wait();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = ping_pong, fan_in, spawn, thread_ring
}
criterion_main!(benches);
