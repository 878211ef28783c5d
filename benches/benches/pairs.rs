//! Independent ping-pong pairs on `W` workers, proscenium against actix,
//! ractor and kameo: the scaling workload of issue 27 (`perf/scaling.sh`
//! runs it at 1, 2, 4, ... workers, each under `taskset` to as many cores,
//! and prints the ratios).
//!
//! `P` pairs of actors, each exchanging `R` round trips, all pairs at once;
//! reported: messages per second (two per round trip), the median of the
//! repetitions, each on a fresh runtime. Nothing is shared between pairs,
//! so `W` cores should run it close to `W` times as fast as one.
//!
//! ```text
//! cargo bench -p proscenium-benches --bench pairs
//! PAIRS_WORKERS=4 PAIRS_PEERS=proscenium,actix taskset -c 0-3 target/release/deps/pairs-*
//! ```
//!
//! # Runtimes
//!
//! * proscenium: `ActorSystem::builder().workers(W)` (pinned workers, the
//!   default).
//! * actix: a System plus `W - 1` more arbiters, one thread each (actix's
//!   way to use `W` cores); pair `i` lives on arbiter `i % W`, both of its
//!   actors (actix never moves an actor, and a pair on one thread is its
//!   best case).
//! * ractor and kameo: a tokio multi-thread runtime with `W` worker threads.
//!
//! # Environment
//!
//! * `PAIRS_WORKERS` (default: the cores this process may run on).
//! * `PAIRS_N` (default 1000) pairs, `PAIRS_ROUNDS` (default 5000) round
//!   trips each, `PAIRS_REPS` (default 3) repetitions.
//! * `PAIRS_PEERS`: comma list among `proscenium`, `actix`, `ractor`,
//!   `kameo` (default: all four); repetitions alternate between them.
//! * `PAIRS_METRICS=1`: print proscenium's per-worker scheduler counters
//!   after each run.

use std::env;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const DONE_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Clone, Copy)]
struct Params {
    workers: usize,
    pairs: usize,
    rounds: u64,
}

/// Counts the pairs still playing; the last to finish signals done.
#[derive(Clone)]
struct Finish {
    left: Arc<AtomicUsize>,
    done: Sender<()>,
}

impl Finish {
    fn new(pairs: usize) -> (Finish, Receiver<()>) {
        let (done, rx) = mpsc::channel();
        (
            Finish {
                left: Arc::new(AtomicUsize::new(pairs)),
                done,
            },
            rx,
        )
    }

    fn pair_done(&self) {
        // AcqRel: the last decrement sees every other pair's; the channel
        // send orders the rest for the measuring thread.
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            let _ = self.done.send(());
        }
    }
}

/// One side of a pair: the server counts its round trips, the other side
/// always hits back.
struct Rally {
    left: u64,
    finish: Option<Finish>,
}

impl Rally {
    fn new() -> Rally {
        Rally {
            left: 0,
            finish: None,
        }
    }

    fn serve(&mut self, rounds: u64, finish: Finish) {
        self.left = rounds;
        self.finish = Some(finish);
    }

    /// Handles a hit; whether to hit back.
    fn hit(&mut self) -> bool {
        let Some(finish) = &self.finish else {
            return true;
        };
        self.left -= 1;
        if self.left == 0 {
            finish.pair_done();
            self.finish = None;
            return false;
        }
        true
    }
}

fn wait(rx: &Receiver<()>) -> Result<(), String> {
    rx.recv_timeout(DONE_TIMEOUT)
        .map_err(|e| format!("no completion signal: {e}"))
}

/// CPU time of every live thread of this process, in nanoseconds
/// (`/proc/self/task/*/schedstat`); 0 where /proc is missing.
fn cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// A timed run: wall-clock time, and the CPU time all threads spent in it.
struct Timed {
    wall: Duration,
    cpu: Duration,
}

/// Starts every pair with `serve(i, rounds, finish)` and times until the
/// last one finishes.
fn drive(p: &Params, serve: impl Fn(usize, u64, Finish)) -> Result<Timed, String> {
    // A short warm-up round of every pair first (first-touch of the cells,
    // the workers awake).
    let (finish, rx) = Finish::new(p.pairs);
    for i in 0..p.pairs {
        serve(i, (p.rounds / 50).max(1), finish.clone());
    }
    wait(&rx)?;
    let (finish, rx) = Finish::new(p.pairs);
    let cpu = cpu_ns();
    let start = Instant::now();
    for i in 0..p.pairs {
        serve(i, p.rounds, finish.clone());
    }
    wait(&rx)?;
    let wall = start.elapsed();
    Ok(Timed {
        wall,
        cpu: Duration::from_nanos(cpu_ns().saturating_sub(cpu)),
    })
}

// ---------------------------------------------------------------------------

mod pro {
    use proscenium::prelude::*;

    use crate::{drive, Finish, Params, Rally};

    enum Pp {
        Peer(ActorRef<Pp>),
        Serve(u64, Finish),
        Hit,
    }

    struct Player {
        peer: Option<ActorRef<Pp>>,
        rally: Rally,
    }

    impl Player {
        fn hit_back(&self) {
            if let Some(peer) = &self.peer {
                peer.tell(Pp::Hit);
            }
        }
    }

    impl Actor for Player {
        type Msg = Pp;
        fn receive(&mut self, _: &mut Context<Self>, msg: Pp) -> Outcome {
            match msg {
                Pp::Peer(peer) => self.peer = Some(peer),
                Pp::Serve(rounds, finish) => {
                    self.rally.serve(rounds, finish);
                    self.hit_back();
                }
                Pp::Hit => {
                    if self.rally.hit() {
                        self.hit_back();
                    }
                }
            }
            Ok(())
        }
    }

    pub(crate) fn pairs(p: &Params) -> Result<crate::Timed, String> {
        let system = ActorSystem::builder()
            .name("pairs")
            .workers(p.workers)
            .build()
            .map_err(|e| e.to_string())?;
        let player = || Player {
            peer: None,
            rally: Rally::new(),
        };
        let mut servers = Vec::with_capacity(p.pairs);
        let mut others = Vec::with_capacity(p.pairs);
        for _ in 0..p.pairs {
            let a = system
                .spawn_anonymous(Props::new(player))
                .map_err(|e| e.to_string())?;
            let b = system
                .spawn_anonymous(Props::new(player))
                .map_err(|e| e.to_string())?;
            a.tell(Pp::Peer(b.clone()));
            b.tell(Pp::Peer(a.clone()));
            servers.push(a);
            others.push(b);
        }
        let r = drive(p, |i, rounds, finish| {
            servers[i].tell(Pp::Serve(rounds, finish))
        });
        if std::env::var_os("PAIRS_METRICS").is_some() {
            let m = system.scheduler_handle().metrics();
            for (i, w) in m.workers.iter().enumerate() {
                println!(
                    "    worker {i}: runs {} steals {} injector {} parks {} rescued {}",
                    w.runs, w.steals, w.injector_pulls, w.parks, w.lifo_rescued
                );
            }
        }
        drop((servers, others));
        let _ = system
            .terminate()
            .wait_timeout(std::time::Duration::from_secs(30));
        r
    }
}

// ---------------------------------------------------------------------------

mod act {
    use std::sync::mpsc;
    use std::thread;

    use actix::{Actor, Addr, ArbiterHandle, Context, Handler, Message};

    use crate::{drive, Finish, Params, Rally};

    struct Peer(Addr<Player>);
    impl Message for Peer {
        type Result = ();
    }
    struct Serve(u64, Finish);
    impl Message for Serve {
        type Result = ();
    }
    struct Hit;
    impl Message for Hit {
        type Result = ();
    }

    struct Player {
        peer: Option<Addr<Player>>,
        rally: Rally,
    }

    impl Player {
        fn hit_back(&self) {
            if let Some(peer) = &self.peer {
                peer.do_send(Hit);
            }
        }
    }

    impl Actor for Player {
        type Context = Context<Self>;
    }

    impl Handler<Peer> for Player {
        type Result = ();
        fn handle(&mut self, msg: Peer, _: &mut Context<Self>) {
            self.peer = Some(msg.0);
        }
    }

    impl Handler<Serve> for Player {
        type Result = ();
        fn handle(&mut self, Serve(rounds, finish): Serve, _: &mut Context<Self>) {
            self.rally.serve(rounds, finish);
            self.hit_back();
        }
    }

    impl Handler<Hit> for Player {
        type Result = ();
        fn handle(&mut self, _: Hit, _: &mut Context<Self>) {
            if self.rally.hit() {
                self.hit_back();
            }
        }
    }

    pub(crate) fn pairs(p: &Params) -> Result<crate::Timed, String> {
        let workers = p.workers;
        let (tx, rx) = mpsc::channel();
        let main = thread::Builder::new()
            .name("actix-system".into())
            .spawn(move || {
                let runner = actix_rt::System::new();
                let extra: Vec<actix_rt::Arbiter> = runner
                    .block_on(async { (1..workers).map(|_| actix_rt::Arbiter::new()).collect() });
                let system = actix_rt::System::current();
                let mut handles: Vec<ArbiterHandle> = vec![system.arbiter().clone()];
                handles.extend(extra.iter().map(actix_rt::Arbiter::handle));
                let _ = tx.send((system, handles));
                let _ = runner.run();
                for arbiter in extra {
                    arbiter.stop();
                    let _ = arbiter.join();
                }
            })
            .map_err(|e| e.to_string())?;
        let (system, arbiters) = rx.recv().map_err(|e| e.to_string())?;
        let player = |_: &mut Context<Player>| Player {
            peer: None,
            rally: Rally::new(),
        };
        let mut servers = Vec::with_capacity(p.pairs);
        for i in 0..p.pairs {
            let arbiter = &arbiters[i % arbiters.len()];
            let a = Player::start_in_arbiter(arbiter, player);
            let b = Player::start_in_arbiter(arbiter, player);
            a.do_send(Peer(b.clone()));
            b.do_send(Peer(a.clone()));
            servers.push(a);
        }
        let r = drive(p, |i, rounds, finish| {
            servers[i].do_send(Serve(rounds, finish))
        });
        drop(servers);
        system.stop();
        let _ = main.join();
        r
    }
}

// ---------------------------------------------------------------------------

fn tokio_runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

mod rac {
    use ractor::{Actor, ActorProcessingErr, ActorRef};

    use crate::{drive, tokio_runtime, Finish, Params, Rally};

    enum Pp {
        Peer(ActorRef<Pp>),
        Serve(u64, Finish),
        Hit,
    }

    struct Player;

    struct State {
        peer: Option<ActorRef<Pp>>,
        rally: Rally,
    }

    impl State {
        fn hit_back(&self) {
            if let Some(peer) = &self.peer {
                let _ = peer.cast(Pp::Hit);
            }
        }
    }

    impl Actor for Player {
        type Msg = Pp;
        type State = State;
        type Arguments = ();

        async fn pre_start(&self, _: ActorRef<Pp>, _: ()) -> Result<State, ActorProcessingErr> {
            Ok(State {
                peer: None,
                rally: Rally::new(),
            })
        }

        async fn handle(
            &self,
            _: ActorRef<Pp>,
            msg: Pp,
            state: &mut State,
        ) -> Result<(), ActorProcessingErr> {
            match msg {
                Pp::Peer(peer) => state.peer = Some(peer),
                Pp::Serve(rounds, finish) => {
                    state.rally.serve(rounds, finish);
                    state.hit_back();
                }
                Pp::Hit => {
                    if state.rally.hit() {
                        state.hit_back();
                    }
                }
            }
            Ok(())
        }
    }

    pub(crate) fn pairs(p: &Params) -> Result<crate::Timed, String> {
        let rt = tokio_runtime(p.workers);
        let mut servers = Vec::with_capacity(p.pairs);
        let mut handles = Vec::with_capacity(2 * p.pairs);
        for _ in 0..p.pairs {
            let (a, ha) = rt
                .block_on(Actor::spawn(None, Player, ()))
                .map_err(|e| e.to_string())?;
            let (b, hb) = rt
                .block_on(Actor::spawn(None, Player, ()))
                .map_err(|e| e.to_string())?;
            let _ = a.cast(Pp::Peer(b.clone()));
            let _ = b.cast(Pp::Peer(a.clone()));
            servers.push((a, b));
            handles.push(ha);
            handles.push(hb);
        }
        let r = drive(p, |i, rounds, finish| {
            let _ = servers[i].0.cast(Pp::Serve(rounds, finish));
        });
        for (a, b) in &servers {
            a.stop(None);
            b.stop(None);
        }
        for h in handles {
            let _ = rt.block_on(h);
        }
        rt.shutdown_timeout(std::time::Duration::from_secs(10));
        r
    }
}

// ---------------------------------------------------------------------------

mod kam {
    use kameo::error::Infallible;
    use kameo::mailbox;
    use kameo::message::{Context, Message};
    use kameo::prelude::{Actor, ActorRef, Spawn};

    use crate::{drive, tokio_runtime, Finish, Params, Rally};

    struct Player {
        peer: Option<ActorRef<Player>>,
        rally: Rally,
    }

    impl Player {
        fn hit_back(&self) {
            if let Some(peer) = &self.peer {
                let _ = peer.tell(Hit).try_send();
            }
        }
    }

    impl Actor for Player {
        type Args = Self;
        type Error = Infallible;
        async fn on_start(state: Self, _: ActorRef<Self>) -> Result<Self, Infallible> {
            Ok(state)
        }
    }

    struct Peer(ActorRef<Player>);
    struct Serve(u64, Finish);
    struct Hit;

    impl Message<Peer> for Player {
        type Reply = ();
        async fn handle(&mut self, Peer(peer): Peer, _: &mut Context<Self, ()>) {
            self.peer = Some(peer);
        }
    }

    impl Message<Serve> for Player {
        type Reply = ();
        async fn handle(&mut self, Serve(rounds, finish): Serve, _: &mut Context<Self, ()>) {
            self.rally.serve(rounds, finish);
            self.hit_back();
        }
    }

    impl Message<Hit> for Player {
        type Reply = ();
        async fn handle(&mut self, _: Hit, _: &mut Context<Self, ()>) {
            if self.rally.hit() {
                self.hit_back();
            }
        }
    }

    pub(crate) fn pairs(p: &Params) -> Result<crate::Timed, String> {
        let rt = tokio_runtime(p.workers);
        let servers: Vec<(ActorRef<Player>, ActorRef<Player>)> = {
            let _enter = rt.enter();
            (0..p.pairs)
                .map(|_| {
                    let player = || Player {
                        peer: None,
                        rally: Rally::new(),
                    };
                    let a = Player::spawn_with_mailbox(player(), mailbox::unbounded());
                    let b = Player::spawn_with_mailbox(player(), mailbox::unbounded());
                    let _ = a.tell(Peer(b.clone())).try_send();
                    let _ = b.tell(Peer(a.clone())).try_send();
                    (a, b)
                })
                .collect()
        };
        let r = drive(p, |i, rounds, finish| {
            let _ = servers[i].0.tell(Serve(rounds, finish)).try_send();
        });
        drop(servers);
        rt.shutdown_timeout(std::time::Duration::from_secs(10));
        r
    }
}

// ---------------------------------------------------------------------------

fn env_usize(name: &str, default: usize) -> usize {
    match env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}: not a number: {v:?}")),
        Err(_) => default,
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken from the args.
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    let p = Params {
        workers: env_usize("PAIRS_WORKERS", cores),
        pairs: env_usize("PAIRS_N", 1000),
        rounds: env_usize("PAIRS_ROUNDS", 5000) as u64,
    };
    let reps = env_usize("PAIRS_REPS", 3).max(1);
    let peers: Vec<String> = match env::var("PAIRS_PEERS") {
        Ok(list) => list.split(',').map(|s| s.trim().to_string()).collect(),
        Err(_) => ["proscenium", "actix", "ractor", "kameo"]
            .map(String::from)
            .to_vec(),
    };
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); peers.len()];
    let messages = 2.0 * p.pairs as f64 * p.rounds as f64;
    for _ in 0..reps {
        for (k, peer) in peers.iter().enumerate() {
            let r = match peer.as_str() {
                "proscenium" => pro::pairs(&p),
                "actix" => act::pairs(&p),
                "ractor" => rac::pairs(&p),
                "kameo" => kam::pairs(&p),
                other => panic!("PAIRS_PEERS: unknown contender {other:?}"),
            };
            match r {
                Ok(Timed { wall, cpu }) => {
                    let rate = messages / wall.as_secs_f64();
                    // Busy cores: the CPU time over the wall-clock time (a
                    // worker that parks is not busy; one that spins is).
                    println!(
                        "  {peer}: {:.1} ms, {:.2} M msgs/s, {:.2} busy cores",
                        wall.as_secs_f64() * 1e3,
                        rate / 1e6,
                        cpu.as_secs_f64() / wall.as_secs_f64()
                    );
                    samples[k].push(rate);
                }
                Err(e) => println!("  {peer}: failed: {e}"),
            }
        }
    }
    for (peer, mut s) in peers.iter().zip(samples) {
        if s.is_empty() {
            continue;
        }
        s.sort_by(f64::total_cmp);
        // One line per contender, for perf/scaling.sh to parse.
        println!(
            "pairs workers={} contender={peer} median_mmsgs={:.2} pairs={} rounds={} reps={}",
            p.workers,
            s[s.len() / 2] / 1e6,
            p.pairs,
            p.rounds,
            s.len()
        );
    }
}
