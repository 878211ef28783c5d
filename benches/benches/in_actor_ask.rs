//! Asks made from inside an actor's handler, answers coming back as
//! messages: asks per second, three ways, in one run.
//!
//! * `task-ask` — the baseline: a task on the system's workers awaits
//!   `echo.ask(..)` in a loop (what a task's ask costs);
//! * `detached-task` — the workaround before issue 14: the handler spawns a
//!   detached task that awaits the `Ask` and tells the answer back;
//! * `ask_pipe` — `Context::ask_pipe`: no task, the ask slot's completion
//!   tells the answer to the asker.
//!
//! Each is measured with 1 ask in flight (sequential: the answer to one
//! triggers the next) and with 64 in flight, on a fresh 2-worker system,
//! after a warm-up; every figure is the median of `RUNS` runs.
//!
//! ```text
//! cargo bench -p proscenium-benches --bench in_actor_ask
//! ASK_N=200000 ASK_RUNS=5 cargo bench -p proscenium-benches --bench in_actor_ask
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

fn system() -> ActorSystem {
    ActorSystem::builder()
        .workers(2)
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
        println!(
            "in flight {window:>2}: task-ask {:>9.0}  detached-task {:>9.0}  ask_pipe {:>9.0}  (ask_pipe / detached {:.2}x, / task {:.2}x)",
            task,
            detached,
            pipe,
            pipe / detached,
            pipe / task
        );
    }
}
