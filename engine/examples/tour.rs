//! A tour of proscenium in one program: a counter asked for its state, a
//! supervised worker that fails (an error, then a panic) and is restarted
//! and resumed, death watch, a PoisonPill with messages queued behind it
//! (dead letters), a confirmed graceful stop, a ping-pong throughput run,
//! and a clean termination with its report.
//!
//! Run it with `cargo run --release -p proscenium --example tour`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proscenium::prelude::*;

struct Counter {
    n: u64,
}

enum CounterMsg {
    Add(u64),
    Get(Reply<u64>),
    Fail(&'static str),
    Panic,
}

impl Actor for Counter {
    type Msg = CounterMsg;
    fn receive(&mut self, _ctx: &mut Context<Self>, msg: CounterMsg) -> Outcome {
        match msg {
            CounterMsg::Add(k) => self.n += k,
            CounterMsg::Get(reply) => reply.send(self.n),
            CounterMsg::Fail(why) => return Err(why.into()),
            CounterMsg::Panic => panic!("the counter panicked (on purpose)"),
        }
        Ok(())
    }
    fn post_restart(&mut self, _ctx: &mut Context<Self>, failure: &Failure) -> Outcome {
        println!("  counter restarted after: {failure}");
        Ok(())
    }
}

/// Supervises one counter: resumes on errors, restarts on panics.
struct Supervisor;

enum SupervisorMsg {
    Start(Reply<ActorRef<CounterMsg>>),
}

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    fn receive(&mut self, ctx: &mut Context<Self>, msg: SupervisorMsg) -> Outcome {
        let SupervisorMsg::Start(reply) = msg;
        let child = ctx.spawn(Props::new(|| Counter { n: 0 }), "counter")?;
        ctx.watch(&child.id());
        reply.send(child);
        Ok(())
    }
    fn supervisor_strategy(&self) -> SupervisorStrategy {
        SupervisorStrategy::one_for_one()
            .max_retries(3)
            .within(Duration::from_secs(10))
            .decider(|f| {
                if f.is_panic() {
                    Directive::Restart
                } else {
                    Directive::Resume
                }
            })
    }
    fn on_terminated(&mut self, _ctx: &mut Context<Self>, who: ActorId) -> Outcome {
        println!("  supervisor saw {who} terminate (death watch)");
        Ok(())
    }
}

struct Pinger {
    left: u64,
    done: Option<Reply<Duration>>,
    started: Instant,
}

enum Ping {
    Start(ActorRef<Ping>, Reply<Duration>),
    Ball(ActorRef<Ping>),
}

impl Actor for Pinger {
    type Msg = Ping;
    fn receive(&mut self, ctx: &mut Context<Self>, msg: Ping) -> Outcome {
        match msg {
            Ping::Start(other, done) => {
                self.done = Some(done);
                self.started = Instant::now();
                other.tell(Ping::Ball(ctx.self_ref()));
            }
            Ping::Ball(from) => {
                if self.left == 0 {
                    if let Some(done) = self.done.take() {
                        done.send(self.started.elapsed());
                    }
                } else {
                    self.left -= 1;
                    from.tell(Ping::Ball(ctx.self_ref()));
                }
            }
        }
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // One line per panic instead of a backtrace: the panics here are on purpose.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("  (panic caught by the engine: {info})")
    }));
    let system = ActorSystem::builder().name("tour").build()?;
    let timeout = Duration::from_secs(5);

    println!("1. ask");
    let counter = system.spawn(Props::new(|| Counter { n: 0 }), "counter")?;
    counter.tell(CounterMsg::Add(40));
    counter.tell(CounterMsg::Add(2));
    println!(
        "  counter = {}",
        counter.ask(CounterMsg::Get, timeout).wait()?
    );

    println!("2. supervision");
    let supervisor = system.spawn(Props::new(|| Supervisor), "supervisor")?;
    let child = supervisor.ask(SupervisorMsg::Start, timeout).wait()?;
    println!("  child path: {}", child.path());
    child.tell(CounterMsg::Add(5));
    child.tell(CounterMsg::Fail("a handler error"));
    println!(
        "  after an error (resumed): {}",
        child.ask(CounterMsg::Get, timeout).wait()?
    );
    child.tell(CounterMsg::Panic);
    println!(
        "  after a panic (restarted): {}",
        child.ask(CounterMsg::Get, timeout).wait()?
    );

    println!("3. PoisonPill, dead letters, death watch");
    let dead = Arc::new(AtomicU64::new(0));
    let d = Arc::clone(&dead);
    system.event_stream().subscribe(move |_: &DeadLetter| {
        d.fetch_add(1, Ordering::Relaxed);
    });
    child.tell(CounterMsg::Add(1));
    let stopping = child.graceful_stop(timeout); // sends a PoisonPill
    child.tell(CounterMsg::Add(1)); // queued behind the pill: a dead letter
    let gone = stopping.wait();
    println!(
        "  child stopped: {gone}; dead letters seen: {}",
        dead.load(Ordering::Relaxed)
    );

    println!("4. graceful stop");
    println!(
        "  counter stopped in time: {}",
        counter.graceful_stop(timeout).wait()
    );
    println!(
        "  asking it now: {:?}",
        counter.ask(CounterMsg::Get, timeout).wait()
    );

    println!("5. ping-pong");
    let rounds = 1_000_000;
    let mk = move |left| {
        Props::new(move || Pinger {
            left,
            done: None,
            started: Instant::now(),
        })
    };
    let a = system.spawn(mk(rounds), "ping")?;
    let b = system.spawn(mk(u64::MAX), "pong")?; // pong just answers
    let elapsed = a
        .ask(|r| Ping::Start(b.clone(), r), Duration::from_secs(60))
        .wait()?;
    println!(
        "  {rounds} round trips in {elapsed:?} ({:.0} ns per message)",
        elapsed.as_nanos() as f64 / (2 * rounds) as f64
    );

    println!("6. terminate");
    drop((counter, supervisor, child, a, b));
    let report = system.terminate().wait();
    println!(
        "  clean: {}; dead letters: {}; cells left: {}",
        report.clean(),
        report.dead_letters,
        system.live_cells()
    );
    Ok(())
}
