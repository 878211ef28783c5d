//! Actor timers at scale: many actors, each with a repeating timer
//! started through its context (`Context::tell_every`), measured for
//!
//! * CPU time per timer tick: the process's CPU time (user + system, all
//!   threads, from `/proc/self/stat`) over a window, divided by the ticks
//!   the actors handled in it, after a warm-up; and the tick rate reached
//!   against the nominal one (actors / interval);
//! * ping-pong latency: round trips between two actors (each timed by the
//!   serving actor), median and p99, without the timers, with them running,
//!   and without them again (A-B-A, to tell an effect from drift).
//!
//! A plain binary (`harness = false`), not criterion: one long-running
//! setup measured in windows. Run:
//! `cargo bench -p proscenium-benches --bench actor_timers`.
//!
//! Environment: `TIMERS_ACTORS` (default 100 000), `TIMERS_INTERVAL_MS`
//! (10), `TIMERS_WINDOW_S` (3), `TIMERS_ROUNDS` (20 000 round trips per
//! latency pass).

use std::env;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proscenium::prelude::*;

fn env_u64(name: &str, default: u64) -> u64 {
    env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Process CPU time (all threads, user + system) from `/proc/self/stat`.
fn cpu_time(clk_tck: f64) -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command name (which may hold spaces): state is the
    // first, utime the 12th, stime the 13th.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 =
        fields[11].parse::<f64>().expect("utime") + fields[12].parse::<f64>().expect("stime");
    Duration::from_secs_f64(ticks / clk_tck)
}

fn clk_tck() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// Counts its ticks in a shared counter.
struct Ticker {
    ticks: Arc<AtomicU64>,
    initial: Duration,
    interval: Duration,
}

impl Actor for Ticker {
    type Msg = ();

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        let _timer = ctx.tell_every(self.initial, self.interval, ());
        Ok(())
    }

    fn receive(&mut self, _: &mut Context<Self>, (): ()) -> Outcome {
        // Relaxed: a statistic, read after the window by the main thread.
        self.ticks.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

enum Pp {
    Peer(ActorRef<Pp>),
    /// Serve this many round trips; send the round-trip times (ns) back.
    Serve(u32, Sender<Vec<u64>>),
    Hit,
}

struct Player {
    peer: Option<ActorRef<Pp>>,
    left: u32,
    sent_at: Option<Instant>,
    samples: Vec<u64>,
    done: Option<Sender<Vec<u64>>>,
}

impl Player {
    fn hit(&mut self) {
        self.sent_at = Some(Instant::now());
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
            Pp::Serve(rounds, done) => {
                self.left = rounds;
                self.samples = Vec::with_capacity(rounds as usize);
                self.done = Some(done);
                self.hit();
            }
            Pp::Hit => match self.sent_at.take() {
                // The server: a round trip ended.
                Some(at) => {
                    self.samples.push(at.elapsed().as_nanos() as u64);
                    self.left -= 1;
                    if self.left > 0 {
                        self.hit();
                    } else if let Some(done) = self.done.take() {
                        let _ = done.send(std::mem::take(&mut self.samples));
                    }
                }
                // The other side: hit back.
                None => {
                    if let Some(peer) = &self.peer {
                        peer.tell(Pp::Hit);
                    }
                }
            },
        }
        Ok(())
    }
}

fn player() -> Player {
    Player {
        peer: None,
        left: 0,
        sent_at: None,
        samples: Vec::new(),
        done: None,
    }
}

/// Median and p99 of one pass of `rounds` round trips, in µs.
fn ping_pong(server: &ActorRef<Pp>, rounds: u32) -> (f64, f64) {
    let (tx, rx) = mpsc::channel();
    server.tell(Pp::Serve(rounds, tx));
    let mut samples = rx
        .recv_timeout(Duration::from_secs(600))
        .expect("ping-pong done");
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
    (at(0.5), at(0.99))
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is ignored.
    let actors = env_u64("TIMERS_ACTORS", 100_000);
    let interval = Duration::from_millis(env_u64("TIMERS_INTERVAL_MS", 10));
    let window = Duration::from_secs(env_u64("TIMERS_WINDOW_S", 3));
    let rounds = env_u64("TIMERS_ROUNDS", 20_000) as u32;
    let clk = clk_tck();

    let system = ActorSystem::builder()
        .name("timers-bench")
        .pin_workers(false)
        .build()
        .expect("system");
    let a = system.spawn(Props::new(player), "a").expect("a");
    let b = system.spawn(Props::new(player), "b").expect("b");
    a.tell(Pp::Peer(b.clone()));
    b.tell(Pp::Peer(a.clone()));
    let _ = ping_pong(&a, rounds); // warm-up

    println!(
        "actor_timers: {actors} actors, {} ms interval, {} s window, {rounds} round trips per pass, {} cpus",
        interval.as_millis(),
        window.as_secs(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let idle_cpu0 = cpu_time(clk);
    std::thread::sleep(Duration::from_secs(1));
    let idle_cpu = cpu_time(clk) - idle_cpu0;
    println!(
        "idle system: {:.1} ms CPU per s",
        idle_cpu.as_secs_f64() * 1e3
    );

    let (m, p) = ping_pong(&a, rounds);
    println!("ping-pong without timers: median {m:.2} us, p99 {p:.2} us");

    // Spread the first ticks over one interval.
    let ticks = Arc::new(AtomicU64::new(0));
    let spawn_start = Instant::now();
    let tickers: Vec<ActorRef<()>> = (0..actors)
        .map(|i| {
            let ticks = Arc::clone(&ticks);
            let initial = interval.mul_f64(i as f64 / actors as f64);
            system
                .spawn_anonymous(Props::new(move || Ticker {
                    ticks: Arc::clone(&ticks),
                    initial,
                    interval,
                }))
                .expect("ticker")
        })
        .collect();
    println!(
        "spawned {actors} tickers in {:.0} ms",
        spawn_start.elapsed().as_secs_f64() * 1e3
    );
    std::thread::sleep(Duration::from_secs(1)); // warm-up

    let (t0, c0, n0) = (Instant::now(), cpu_time(clk), ticks.load(Ordering::Relaxed));
    std::thread::sleep(window);
    let (t1, c1, n1) = (Instant::now(), cpu_time(clk), ticks.load(Ordering::Relaxed));
    let secs = (t1 - t0).as_secs_f64();
    let handled = (n1 - n0) as f64;
    let nominal = actors as f64 / interval.as_secs_f64();
    let cpu = (c1 - c0).as_secs_f64();
    println!(
        "timers: {:.0} ticks/s ({:.0}% of the nominal {:.0}/s), {:.2} CPUs busy, {:.0} ns CPU per tick",
        handled / secs,
        100.0 * handled / secs / nominal,
        nominal,
        cpu / secs,
        cpu * 1e9 / handled
    );
    println!(
        "timers pending: {}",
        system.scheduler_handle().timers_pending()
    );

    let (m, p) = ping_pong(&a, rounds);
    println!("ping-pong with the timers: median {m:.2} us, p99 {p:.2} us");

    for t in &tickers {
        t.stop();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while !tickers.iter().all(|t| t.is_terminated()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    println!(
        "tickers stopped: timers pending {}",
        system.scheduler_handle().timers_pending()
    );
    drop(tickers);
    let (m, p) = ping_pong(&a, rounds);
    println!("ping-pong without timers again: median {m:.2} us, p99 {p:.2} us");

    drop((a, b));
    let report = system.terminate().wait();
    println!("terminated: clean {}", report.clean());
}
