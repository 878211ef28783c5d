//! Asks made from inside an actor's handler, answers coming back as
//! messages: asks per second, three ways on proscenium and actix's way
//! twice, in one run.
//!
//! * `task-ask` — the baseline: a task on the system's workers awaits
//!   `echo.ask(..)` in a loop (what a task's ask costs);
//! * `detached-task` — the workaround before issue 14: the handler spawns a
//!   detached task that awaits the `Ask` and tells the answer back;
//! * `ask_pipe` — `Context::ask_pipe`: no task, the ask slot's completion
//!   tells the answer to the asker;
//! * actix 0.13, the same asker and echo, as actix users write an ask
//!   inside a handler: `ctx.spawn(addr.send(..).into_actor(self).map(..))`,
//!   the answer handled in the `map` closure with the actor's state; twice,
//!   because where actix actors run is the user's choice (as in
//!   `compare.rs`): `actix-1arb`, both actors on the System's arbiter (one
//!   thread: an in-thread ask), and `actix-2arb`, the echo on a second
//!   arbiter (every ask and answer crosses threads). The echo's mailbox
//!   capacity is raised from actix's default 16 to 1024, so 64 asks in
//!   flight never wait for room (ours are unbounded).
//!
//! Each is measured with 1 ask in flight (sequential: the answer to one
//! triggers the next) and with 64 in flight, on a fresh 2-worker system
//! (a fresh actix System), after a warm-up; every figure is the median of
//! `RUNS` runs.
//!
//! ```text
//! cargo bench -p proscenium-benches --bench in_actor_ask
//! ASK_N=200000 ASK_RUNS=5 cargo bench -p proscenium-benches --bench in_actor_ask
//! ASK_WORKERS=1 cargo bench -p proscenium-benches --bench in_actor_ask
//! ```
//!
//! Figures in BENCHMARKS.md ("Asks from inside an actor").
#![allow(missing_docs, clippy::unwrap_used)]

use std::sync::mpsc;
use std::time::{Duration, Instant};

use proscenium::prelude::*;

const TIMEOUT: Duration = Duration::from_secs(30);

struct Echo;

impl Actor for Echo {
    type Msg = (u64, Reply<u64>);
    fn receive(&mut self, _: &mut Context<Self>, (n, r): Self::Msg) -> Outcome {
        r.send(n);
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Way {
    DetachedTask,
    AskPipe,
}

enum Msg {
    Start,
    Got(Result<u64, AskError>),
}

struct Asker {
    way: Way,
    echo: ActorRef<(u64, Reply<u64>)>,
    window: u64,
    total: u64,
    sent: u64,
    got: u64,
    done: mpsc::Sender<()>,
}

impl Asker {
    fn ask(&mut self, ctx: &mut Context<Self>) {
        let n = self.sent;
        self.sent += 1;
        match self.way {
            Way::AskPipe => ctx.ask_pipe(&self.echo, |r| (n, r), TIMEOUT, Msg::Got),
            Way::DetachedTask => {
                let ask = self.echo.ask(|r| (n, r), TIMEOUT);
                let me = ctx.self_ref();
                ctx.system()
                    .scheduler_handle()
                    .spawn_detached(async move { me.tell(Msg::Got(ask.await)) });
            }
        }
    }
}

impl Actor for Asker {
    type Msg = Msg;
    fn receive(&mut self, ctx: &mut Context<Self>, msg: Msg) -> Outcome {
        match msg {
            Msg::Start => {
                while self.sent < self.window.min(self.total) {
                    self.ask(ctx);
                }
            }
            Msg::Got(answer) => {
                answer?;
                self.got += 1;
                if self.got == self.total {
                    let _ = self.done.send(());
                } else if self.sent < self.total {
                    self.ask(ctx);
                }
            }
        }
        Ok(())
    }
}

/// `ASK_WORKERS` workers (default 2; 1 puts both actors on one thread,
/// as `actix-1arb` does).
fn system() -> ActorSystem {
    let workers = std::env::var("ASK_WORKERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    ActorSystem::builder()
        .workers(workers)
        .pin_workers(false)
        .build()
        .unwrap()
}

/// Asks per second of one run of `n` asks, `window` in flight.
fn run_actor(way: Way, n: u64, window: u64) -> f64 {
    let system = system();
    let echo = system.spawn(Props::new(|| Echo), "echo").unwrap();
    let go = |total: u64| {
        let (tx, rx) = mpsc::channel();
        let echo = echo.clone();
        let asker = system
            .spawn_anonymous(Props::new(move || Asker {
                way,
                echo: echo.clone(),
                window,
                total,
                sent: 0,
                got: 0,
                done: tx.clone(),
            }))
            .unwrap();
        let start = Instant::now();
        asker.tell(Msg::Start);
        rx.recv().unwrap();
        let took = start.elapsed();
        asker.stop();
        took
    };
    go(n / 10); // warm-up
    let took = go(n);
    drop(echo);
    system.terminate().wait();
    n as f64 / took.as_secs_f64()
}

fn run_task(n: u64, window: u64) -> f64 {
    let system = system();
    let echo = system.spawn(Props::new(|| Echo), "echo").unwrap();
    let go = |total: u64| {
        let start = Instant::now();
        let per = total / window;
        let tasks: Vec<_> = (0..window)
            .map(|_| {
                let echo = echo.clone();
                system.spawn_task(async move {
                    for i in 0..per {
                        echo.ask(|r| (i, r), TIMEOUT).await.unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.wait().unwrap();
        }
        start.elapsed()
    };
    go(n / 10);
    let took = go(n);
    drop(echo);
    system.terminate().wait();
    n as f64 / took.as_secs_f64()
}

/// actix's in-actor ask: `Addr::send` awaited by a future spawned in the
/// asker's context, its answer handled with the actor's state.
mod act {
    use std::sync::mpsc;
    use std::thread;
    use std::time::Instant;

    use actix::prelude::*;

    struct Ping(u64);
    impl Message for Ping {
        type Result = u64;
    }

    struct Echo;
    impl Actor for Echo {
        type Context = Context<Self>;
        fn started(&mut self, ctx: &mut Context<Self>) {
            ctx.set_mailbox_capacity(1024);
        }
    }
    impl Handler<Ping> for Echo {
        type Result = u64;
        fn handle(&mut self, Ping(n): Ping, _: &mut Context<Self>) -> u64 {
            n
        }
    }

    struct Start;
    impl Message for Start {
        type Result = ();
    }

    struct Asker {
        echo: Addr<Echo>,
        window: u64,
        total: u64,
        sent: u64,
        got: u64,
        done: mpsc::Sender<()>,
    }

    impl Actor for Asker {
        type Context = Context<Self>;
    }

    impl Asker {
        fn ask(&mut self, ctx: &mut Context<Self>) {
            let n = self.sent;
            self.sent += 1;
            let answer = self.echo.send(Ping(n)).into_actor(self).map(
                |answer, asker: &mut Asker, ctx: &mut Context<Asker>| {
                    answer.unwrap();
                    asker.got += 1;
                    if asker.got == asker.total {
                        let _ = asker.done.send(());
                    } else if asker.sent < asker.total {
                        asker.ask(ctx);
                    }
                },
            );
            ctx.spawn(answer);
        }
    }

    impl Handler<Start> for Asker {
        type Result = ();
        fn handle(&mut self, _: Start, ctx: &mut Context<Self>) {
            while self.sent < self.window.min(self.total) {
                self.ask(ctx);
            }
        }
    }

    /// Asks per second of one run: `arbiters` 1 puts both actors on the
    /// System's arbiter, 2 the echo on a second one.
    pub(crate) fn run(arbiters: usize, n: u64, window: u64) -> f64 {
        let (tx, rx) = mpsc::channel();
        let main = thread::spawn(move || {
            let runner = actix_rt::System::new();
            let extra = runner.block_on(async { (arbiters > 1).then(actix_rt::Arbiter::new) });
            let system = actix_rt::System::current();
            let here = system.arbiter().clone();
            let there = extra.as_ref().map_or_else(|| here.clone(), |a| a.handle());
            tx.send((system, here, there)).unwrap();
            runner.run().unwrap();
            if let Some(arbiter) = extra {
                arbiter.stop();
                arbiter.join().unwrap();
            }
        });
        let (system, here, there) = rx.recv().unwrap();
        let echo = Echo::start_in_arbiter(&there, |_| Echo);
        let go = |total: u64| {
            let (done, finished) = mpsc::channel();
            let echo = echo.clone();
            let asker = Asker::start_in_arbiter(&here, move |_| Asker {
                echo,
                window,
                total,
                sent: 0,
                got: 0,
                done,
            });
            let start = Instant::now();
            asker.do_send(Start);
            finished.recv().unwrap();
            start.elapsed()
        };
        go(n / 10); // warm-up
        let took = go(n);
        drop(echo);
        system.stop();
        main.join().unwrap();
        n as f64 / took.as_secs_f64()
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    // `cargo test --benches` runs this with `--bench` absent: keep it short.
    let bench = std::env::args().any(|a| a == "--bench");
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let n = if bench { env("ASK_N", 200_000) } else { 2_000 };
    let runs = if bench { env("ASK_RUNS", 3) } else { 1 };
    println!("in-actor asks, n = {n}, median of {runs} runs (asks per second)");
    for window in [1u64, 64] {
        let task = median((0..runs).map(|_| run_task(n, window)).collect());
        let detached = median(
            (0..runs)
                .map(|_| run_actor(Way::DetachedTask, n, window))
                .collect(),
        );
        let pipe = median(
            (0..runs)
                .map(|_| run_actor(Way::AskPipe, n, window))
                .collect(),
        );
        let actix1 = median((0..runs).map(|_| act::run(1, n, window)).collect());
        let actix2 = median((0..runs).map(|_| act::run(2, n, window)).collect());
        println!(
            "in flight {window:>2}: task-ask {:>9.0}  detached-task {:>9.0}  ask_pipe {:>9.0}  actix-1arb {:>9.0}  actix-2arb {:>9.0}",
            task, detached, pipe, actix1, actix2
        );
        println!(
            "              ask_pipe / detached {:.2}x, / task {:.2}x, / actix-1arb {:.2}x, / actix-2arb {:.2}x",
            pipe / detached,
            pipe / task,
            pipe / actix1,
            pipe / actix2
        );
    }
}
