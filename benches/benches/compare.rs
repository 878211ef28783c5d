//! Side-by-side comparison: the same workloads, with the same parameters, on
//! proscenium, actix, ractor and kameo, in one run; prints a markdown table
//! of the figures and of proscenium against the best peer.
//!
//! ```text
//! cargo bench -p proscenium-benches --bench compare
//! COMPARE_SCALE=0.1 COMPARE_REPS=1 cargo bench -p proscenium-benches --bench compare
//! ```
//!
//! # Workloads (counts at `COMPARE_SCALE=1`)
//!
//! * `ping-pong`: two actors hit a ball back and forth, 1 000 000 round
//!   trips (2 000 000 messages). Reported: ns per round trip and messages/s.
//! * `fan-in`: 4 producers send 1 000 000 `u64` each to one actor that
//!   counts them; done when it has counted 4 000 000. The producers are plain
//!   OS threads for every contender (all four frameworks can send from
//!   outside their runtime without blocking), released together by a
//!   barrier. Reported: million messages/s.
//! * `spawn`: the measuring thread spawns 1 000 000 actors and sends each
//!   one message; each decrements a shared atomic and stops itself; the last
//!   one signals done. The measuring thread keeps the references in a
//!   preallocated vector until then (see `drive_spawn` for why). Reported:
//!   total time and actors/s.
//! * `rss`: memory per idle actor. In a fresh child process per contender
//!   (so that no earlier workload's freed heap hides the growth): `VmRSS`
//!   from `/proc/self/status` before and after spawning 100 000 actors that
//!   have each handled one message and are still alive;
//!   `(after - before) / N`. The harness's own vector of references is
//!   allocated and touched before the first reading. Then they are stopped.
//! * `ring`: the Savina thread ring: 503 actors in a ring pass a token
//!   10 000 000 hops; each hop decrements the token's counter, the actor that
//!   sees 0 signals done. Reported: ns per hop.
//! * `ask`: ask latency under load. One actor answers asks with a `u64`,
//!   while a producer thread floods another actor with fire-and-forget
//!   messages the whole time (at most 10 000 outstanding, so the flooded
//!   mailbox never empties and never grows without bound). The measuring
//!   thread (a plain thread, blocking on each answer) makes 20 000
//!   sequential asks after a warm-up. Reported: p50, p99, p99.9 in µs
//!   (hdrhistogram).
//! * `router`: a round-robin pool of 4 routees behind one router; the
//!   measuring thread tells 500 000 `u64` through the router; each routee
//!   decrements a shared count per message, done when all have been handled
//!   (after a warm-up batch of 1%). Reported: million messages/s and ns per
//!   message. Contenders: proscenium's `Pool::round_robin(4)` (a router
//!   actor that forwards each message to a routee's mailbox) and ractor's
//!   `factory::Factory` with `RoundRobinRouting` and 4 workers (each message
//!   is cast as a `Job` (key `()`, default `JobOptions`, which time-stamp
//!   it) that the factory routes to a worker, and the worker sends
//!   `Finished` back to the factory after each job). actix has no router (its `SyncArbiter` is a pool
//!   of threads running one sync actor type off a shared queue, not a router
//!   of actors) and kameo 0.22 has none (`kameo_actors`' `ActorPool` is a
//!   separate crate, least-connections rather than round-robin, each of its
//!   workers `ask`s the routee, and it depends on kameo with the default
//!   features, which would switch kameo's `tracing` on for every kameo
//!   workload): "no such feature" in the table; no hand-rolled router.
//! * `timers`: 100 actors, each with a periodic timer of 1 ms started from
//!   its start hook, record 1 000 ticks each and then cancel it. The lateness
//!   of a tick is its delivery (the handler's start) minus the time the
//!   timer's own semantics scheduled it for: proscenium's
//!   `Context::tell_every(1 ms, 1 ms, ())` is fixed-delay (the next tick is
//!   due an interval after this one starts being handled), actix's
//!   `run_interval` and ractor's `send_interval` (a tokio `interval`, in a
//!   task of its own, started in `post_start`; missed ticks burst) are
//!   fixed-rate (tick k is due k intervals after the timer started: a late
//!   tick does not move the next one's due time). A fixed-delay timer's due
//!   time follows each late delivery, so it ticks less often instead (both
//!   timer wheels here have a 1 ms granularity). Reported: p50 and p99 of
//!   every tick's lateness (exact, over all 100 000 ticks) in µs; the CPU
//!   time of the whole process (every thread's
//!   `/proc/self/task/*/schedstat`) from before the spawns until the last
//!   tick, per tick, in µs; and that time in ms (1 000 ms is the nominal,
//!   for 1 000 ticks of 1 ms). kameo 0.22 has no actor timer (only
//!   `kameo_actors`' `Scheduler` actor, with the dependency problem above):
//!   "no such feature".
//! * `stop`: 100 000 idle actors (each has handled one message, so all have
//!   started); the clock runs from the stop request until every actor's
//!   stop hook has run (a shared count; the last one signals done). Each
//!   contender's own way to stop them all: proscenium `ActorSystem::terminate`
//!   (the coordinated shutdown, whose last phase stops `/user`; hook
//!   `post_stop`); actix: dropping every `Addr` (an actix actor stops when
//!   no address to it is left; `System::stop` ends the arbiters' event
//!   loops instead; hook `stopped`); ractor (no system): `stop(None)` on
//!   each actor (hook `post_stop`); kameo (no system):
//!   `stop_gracefully()` on each (an unbounded mailbox: the send completes
//!   at once; hook `on_stop`). For the peers the clock includes the
//!   measuring thread's loop over the 100 000 references.
//! * `handler-sync`, `async-ready`, `async-yield`: the cost of a handler
//!   per message (issue 35). The measuring thread tells 1 000 000 `u64` to
//!   one actor that counts them; done when it has counted them all.
//!   Reported: ns per message. `handler-sync`: proscenium's synchronous
//!   `receive`; `async-ready`: proscenium's `AsyncActor` (the `Async`
//!   adapter) whose `async fn handle` awaits nothing; `async-yield`: the
//!   same handler awaits a future that is pending once (it wakes itself,
//!   as a client whose answer is already there), so each message
//!   suspends and is resumed by its waker. ractor's and kameo's handlers
//!   are `async fn`s in all three (the same body as proscenium's async
//!   one: in `handler-sync` and `async-ready` they await nothing). actix
//!   is not measured here ("no such feature": its async handlers are
//!   `ResponseActFuture`s, not an `async fn` per message).
//!
//! Every run of every workload completes by sending `()` on a
//! `std::sync::mpsc` channel to the measuring thread, for every contender.
//! Each repetition of each workload of each contender gets a fresh runtime,
//! shut down before the next starts; repetitions are interleaved across the
//! contenders and the **median** is reported.
//!
//! # Runtimes
//!
//! * proscenium: `ActorSystem::builder().name("compare").workers(2).build()`
//!   (`COMPARE_WORKERS` changes the 2, here and below)
//!   (the defaults otherwise, worker pinning included).
//! * actix 0.13 runs twice, as two contenders, because actix never moves
//!   an actor between threads and where to put them is the user's choice:
//!   - `actix`: an `actix_rt::System` on a thread of its own plus one more
//!     `Arbiter`, so that actix gets two threads like the others; actor `i`
//!     (in spawn order) starts on arbiter `i % 2` with `start_in_arbiter`.
//!     Ping-pong and the ring then cross threads on every message; in the
//!     ask workload the responder and the flooded actor get a thread each.
//!   - `actix-1arb`: every actor on the System's arbiter (one thread),
//!     where `Actor::start` from inside the System would put them: actix's
//!     default model.
//!
//!   The "best peer" column takes the better of the two.
//! * ractor and kameo: a tokio multi-thread runtime with 2 worker threads.
//!   kameo actors get an unbounded mailbox (`mailbox::unbounded()`), as
//!   proscenium's, ractor's and actix's `do_send` are unbounded.
//!
//! Where the APIs differ: a plain thread waits for an answer with
//! proscenium's `Ask::wait` (which always arms a timeout timer), kameo's
//! `ask(..).blocking_send()`, ractor's `call` (no timeout) under tokio's
//! `Handle::block_on`, and actix's `Addr::send` under a minimal park/unpark
//! `block_on`. ractor's spawn workload uses `spawn_instant` (it does not wait
//! for `pre_start`, like the other three); elsewhere ractor actors are
//! spawned with `Actor::spawn(..).await`.
//!
//! # Environment
//!
//! * `COMPARE_SCALE` (float, default 1.0): multiplies every message and
//!   actor count and the timers' ticks (not the ring's 503 actors, the 4
//!   producers, the 4 routees nor the 1 ms period).
//! * `COMPARE_REPS` (default 3): repetitions; the median is reported.
//! * `COMPARE_ONLY`: comma list of workloads to run, among `ping-pong`,
//!   `fan-in`, `spawn`, `rss`, `ring`, `ask`, `router`, `timers`, `stop`.
//! * `COMPARE_PEERS`: comma list of contenders, among `proscenium`, `actix`,
//!   `actix-1arb`, `ractor`, `kameo`.
//! * `COMPARE_WORKERS` (default 2): the threads each runtime gets:
//!   proscenium's workers, tokio's worker threads (ractor, kameo) and
//!   `actix`'s arbiters (`actix-1arb` keeps one). `perf/scaling.sh` sets
//!   it to the cores present.

use std::env;
use std::future::Future;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Barrier, Mutex};
use std::task::{Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// How long a run may take to signal done before it counts as failed.
const DONE_TIMEOUT: Duration = Duration::from_secs(600);
/// At most this many flood messages outstanding in the ask workload.
const FLOOD_WINDOW: u64 = 10_000;
/// The Savina ring's size.
const RING_ACTORS: usize = 503;
/// Fan-in producers.
const PRODUCERS: u64 = 4;
/// Routees of the router pool.
const ROUTEES: usize = 4;
/// The period of every actor timer in the timers workload.
const TIMER_INTERVAL: Duration = Duration::from_millis(1);
/// Set in the child process that measures one contender's memory.
const RSS_CHILD_ENV: &str = "COMPARE_RSS_CHILD";
const RSS_N_ENV: &str = "COMPARE_RSS_N";
const RSS_LINE: &str = "rss-bytes-per-actor ";

// ---------------------------------------------------------------------------
// Parameters and selection

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Contender {
    Proscenium,
    /// `COMPARE_WORKERS` arbiters (two by default), actors placed
    /// round-robin.
    Actix,
    /// Everything on the System's arbiter.
    Actix1,
    Ractor,
    Kameo,
}

const CONTENDERS: [Contender; 5] = [
    Contender::Proscenium,
    Contender::Actix,
    Contender::Actix1,
    Contender::Ractor,
    Contender::Kameo,
];

impl Contender {
    fn name(self) -> &'static str {
        match self {
            Contender::Proscenium => "proscenium",
            Contender::Actix => "actix",
            Contender::Actix1 => "actix-1arb",
            Contender::Ractor => "ractor",
            Contender::Kameo => "kameo",
        }
    }

    fn from_name(name: &str) -> Option<Contender> {
        CONTENDERS.into_iter().find(|c| c.name() == name)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Workload {
    PingPong,
    FanIn,
    Spawn,
    Rss,
    Ring,
    Ask,
    Router,
    Timers,
    Stop,
    HandlerSync,
    AsyncReady,
    AsyncYield,
}

const WORKLOADS: [Workload; 12] = [
    Workload::PingPong,
    Workload::FanIn,
    Workload::Spawn,
    Workload::Rss,
    Workload::Ring,
    Workload::Ask,
    Workload::Router,
    Workload::Timers,
    Workload::Stop,
    Workload::HandlerSync,
    Workload::AsyncReady,
    Workload::AsyncYield,
];

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::PingPong => "ping-pong",
            Workload::FanIn => "fan-in",
            Workload::Spawn => "spawn",
            Workload::Rss => "rss",
            Workload::Ring => "ring",
            Workload::Ask => "ask",
            Workload::Router => "router",
            Workload::Timers => "timers",
            Workload::Stop => "stop",
            Workload::HandlerSync => "handler-sync",
            Workload::AsyncReady => "async-ready",
            Workload::AsyncYield => "async-yield",
        }
    }
}

#[derive(Clone, Debug)]
struct Params {
    scale: f64,
    reps: usize,
    rounds: u64,
    fan_per: u64,
    spawn_n: u64,
    rss_n: u64,
    hops: u64,
    asks: u64,
    router_n: u64,
    timer_actors: u64,
    timer_ticks: u64,
    stop_n: u64,
    handler_n: u64,
}

fn scaled(base: u64, scale: f64) -> u64 {
    ((base as f64) * scale).round().max(1.0) as u64
}

fn env_list(name: &str) -> Option<Vec<String>> {
    env::var(name).ok().map(|v| {
        v.split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    })
}

impl Params {
    fn from_env() -> Params {
        let scale: f64 = env::var("COMPARE_SCALE")
            .ok()
            .map(|s| s.parse().expect("COMPARE_SCALE: a number"))
            .unwrap_or(1.0);
        assert!(scale > 0.0, "COMPARE_SCALE must be positive");
        let reps: usize = env::var("COMPARE_REPS")
            .ok()
            .map(|s| s.parse().expect("COMPARE_REPS: a whole number"))
            .unwrap_or(3);
        Params {
            scale,
            reps: reps.max(1),
            rounds: scaled(1_000_000, scale),
            fan_per: scaled(1_000_000, scale),
            spawn_n: scaled(1_000_000, scale),
            rss_n: scaled(100_000, scale),
            hops: scaled(10_000_000, scale),
            asks: scaled(20_000, scale),
            router_n: scaled(500_000, scale),
            timer_actors: scaled(100, scale),
            timer_ticks: scaled(1_000, scale),
            stop_n: scaled(100_000, scale),
            handler_n: scaled(1_000_000, scale),
        }
    }
}

// ---------------------------------------------------------------------------
// What a run yields

#[derive(Clone, Copy, Debug)]
enum Sample {
    Elapsed(Duration),
    BytesPerActor(f64),
    /// p50, p99, p99.9 in microseconds.
    Latency([f64; 3]),
    /// Tick lateness p50 and p99 in microseconds, CPU microseconds per
    /// tick, milliseconds until the last tick.
    Timers([f64; 4]),
}

type RunResult = Result<Sample, String>;

fn wait_done(rx: &Receiver<()>) -> Result<(), String> {
    rx.recv_timeout(DONE_TIMEOUT)
        .map_err(|e| format!("no completion signal: {e}"))
}

/// Panics if a send failed: the run could never complete.
fn sent<T, E>(r: Result<T, E>) {
    assert!(r.is_ok(), "a send to an actor failed");
}

/// Signals done once `left` reaches zero.
struct Tally {
    left: u64,
    done: Sender<()>,
}

impl Tally {
    fn add(&mut self) {
        self.left -= 1;
        if self.left == 0 {
            let _ = self.done.send(());
        }
    }
}

/// The ping-pong logic, shared by every contender: the server counts round
/// trips (its `done` is set), the other side always hits back.
#[derive(Default)]
struct Rally {
    left: u64,
    done: Option<Sender<()>>,
}

impl Rally {
    fn serve(&mut self, rounds: u64, done: Sender<()>) {
        self.left = rounds;
        self.done = Some(done);
    }

    /// Handles a hit; whether to hit back.
    fn hit(&mut self) -> bool {
        if self.done.is_none() {
            return true;
        }
        self.left -= 1;
        if self.left == 0 {
            if let Some(done) = self.done.take() {
                let _ = done.send(());
            }
            return false;
        }
        true
    }
}

/// One message each: decrements the shared count; the last signals done.
#[derive(Clone)]
struct OneShot {
    left: Arc<AtomicU64>,
    done: Sender<()>,
}

impl OneShot {
    fn new(n: u64) -> (OneShot, Receiver<()>) {
        let (tx, rx) = mpsc::channel();
        (
            OneShot {
                left: Arc::new(AtomicU64::new(n)),
                done: tx,
            },
            rx,
        )
    }

    fn hit(&self) {
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            let _ = self.done.send(());
        }
    }
}

/// A ring link's reaction to a token: `Some(n - 1)` to pass on, or `None`
/// once it has signalled done.
fn ring_hop(n: u64, done: &Sender<()>) -> Option<u64> {
    if n == 0 {
        let _ = done.send(());
        None
    } else {
        Some(n - 1)
    }
}

/// A future that is pending once and wakes itself: what an async handler
/// awaits in `async-yield` (runtime-agnostic, the same for every contender).
#[derive(Default)]
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

// ---------------------------------------------------------------------------
// Drivers: the measuring side, shared by every contender

/// `n` messages told by the measuring thread to one actor; done when it
/// has handled them all.
fn drive_handler(n: u64, send: impl Fn(u64), rx: &Receiver<()>) -> RunResult {
    let start = Instant::now();
    for i in 0..n {
        send(i);
    }
    wait_done(rx)?;
    Ok(Sample::Elapsed(start.elapsed()))
}

fn drive_ping_pong(rounds: u64, serve: impl Fn(u64, Sender<()>)) -> RunResult {
    let (tx, rx) = mpsc::channel();
    serve((rounds / 100).max(1), tx.clone());
    wait_done(&rx)?;
    let start = Instant::now();
    serve(rounds, tx);
    wait_done(&rx)?;
    Ok(Sample::Elapsed(start.elapsed()))
}

fn drive_fan_in<S>(per: u64, send: S, rx: &Receiver<()>) -> RunResult
where
    S: Fn(u64) + Clone + Send,
{
    let barrier = Barrier::new(PRODUCERS as usize + 1);
    thread::scope(|s| {
        for _ in 0..PRODUCERS {
            let send = send.clone();
            let barrier = &barrier;
            s.spawn(move || {
                barrier.wait();
                for i in 0..per {
                    send(i);
                }
            });
        }
        drop(send);
        barrier.wait();
        let start = Instant::now();
        wait_done(rx)?;
        Ok(Sample::Elapsed(start.elapsed()))
    })
}

/// Keeps every reference until all the actors are done (and drops them after
/// the clock stops): with actix, dropping the last `Addr` right after
/// `do_send` can lose the message (the actor's context may see "no
/// senders" between an empty mailbox poll and the message's arrival, and
/// stop), so no contender drops them early.
fn drive_spawn<R>(n: u64, mut spawn_one: impl FnMut() -> R, rx: &Receiver<()>) -> RunResult {
    let mut refs = Vec::with_capacity(n as usize);
    let start = Instant::now();
    for _ in 0..n {
        refs.push(spawn_one());
    }
    wait_done(rx)?;
    let elapsed = start.elapsed();
    drop(refs);
    Ok(Sample::Elapsed(elapsed))
}

fn rss_bytes() -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| format!("/proc: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| "no VmRSS in /proc/self/status".to_owned())
}

/// Spawns `n` actors that each get one message, and returns the RSS growth
/// per actor once all have handled it, with the (live) references.
fn drive_rss<R>(
    n: u64,
    mut spawn_one: impl FnMut() -> R,
    rx: &Receiver<()>,
) -> Result<(f64, Vec<R>), String> {
    // Allocated and touched before the first reading.
    let mut refs: Vec<Option<R>> = (0..n).map(|_| None).collect();
    let before = rss_bytes()?;
    for slot in refs.iter_mut() {
        *slot = Some(spawn_one());
    }
    wait_done(rx)?;
    let after = rss_bytes()?;
    let per = (after as f64 - before as f64) / n as f64;
    Ok((per, refs.into_iter().flatten().collect()))
}

fn drive_ring(hops: u64, inject: impl Fn(u64), rx: &Receiver<()>) -> RunResult {
    // One warm-up lap and a half, which also proves the ring is linked.
    inject(RING_ACTORS as u64 * 3 / 2);
    wait_done(rx)?;
    let start = Instant::now();
    inject(hops);
    wait_done(rx)?;
    Ok(Sample::Elapsed(start.elapsed()))
}

fn drive_ask(
    asks: u64,
    flood: impl Fn(u64) + Send,
    processed: &AtomicU64,
    mut ask: impl FnMut() -> Result<u64, String>,
) -> RunResult {
    let stop = AtomicBool::new(false);
    thread::scope(|s| {
        let stop = &stop;
        let producer = s.spawn(move || {
            let mut sent = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if sent - processed.load(Ordering::Relaxed) < FLOOD_WINDOW {
                    flood(sent);
                    sent += 1;
                } else {
                    thread::yield_now();
                }
            }
        });
        let result = (|| {
            let deadline = Instant::now() + DONE_TIMEOUT;
            while processed.load(Ordering::Relaxed) < FLOOD_WINDOW {
                if Instant::now() > deadline || producer.is_finished() {
                    return Err("the flood did not start".to_owned());
                }
                thread::yield_now();
            }
            for _ in 0..(asks / 20).max(1) {
                ask()?;
            }
            let mut hist =
                Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("histogram");
            for _ in 0..asks {
                let start = Instant::now();
                ask()?;
                hist.saturating_record(start.elapsed().as_nanos().max(1) as u64);
            }
            if processed.load(Ordering::Relaxed) < FLOOD_WINDOW * 2 {
                return Err("the flood stalled during the asks".to_owned());
            }
            let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
            Ok(Sample::Latency([us(0.50), us(0.99), us(0.999)]))
        })();
        stop.store(true, Ordering::Relaxed);
        let _ = producer.join();
        result
    })
}

/// The error of a contender that lacks a workload's feature; the table
/// says "no such feature" and the note after it says why.
const NO_FEATURE: &str = "no such feature";

fn no_feature(why: &str) -> RunResult {
    Err(format!("{NO_FEATURE}: {why}"))
}

impl OneShot {
    /// Re-arms the count for the next batch (the previous one is done).
    fn arm(&self, n: u64) {
        // Release: pairs with the routees' AcqRel decrements; the batch's
        // messages are sent after this store.
        self.left.store(n, Ordering::Release);
    }
}

/// Tells `n` messages through a router whose routees all `hit` `shot`,
/// after a warm-up batch (which also proves every routee is up).
fn drive_router(n: u64, shot: &OneShot, rx: &Receiver<()>, tell: impl Fn(u64)) -> RunResult {
    let warm = (n / 100).max(ROUTEES as u64);
    shot.arm(warm);
    (0..warm).for_each(&tell);
    wait_done(rx)?;
    shot.arm(n);
    let start = Instant::now();
    (0..n).for_each(&tell);
    wait_done(rx)?;
    Ok(Sample::Elapsed(start.elapsed()))
}

/// CPU time of every thread of this process so far, in nanoseconds (the
/// first field of each `/proc/self/task/*/schedstat`).
fn cpu_ns() -> Result<u64, String> {
    let tasks = std::fs::read_dir("/proc/self/task").map_err(|e| format!("/proc: {e}"))?;
    let mut total = 0;
    for task in tasks.flatten() {
        // A thread that exits meanwhile has no file any more: skipped.
        if let Ok(s) = std::fs::read_to_string(task.path().join("schedstat")) {
            total += s
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Ok(total)
}

/// Where the ticking actors put their tick lateness (ns) and say they are
/// done.
struct TimerSink {
    lateness: Mutex<Vec<u64>>,
    shot: OneShot,
}

/// One actor's record of its periodic timer: the lateness of each tick,
/// its delivery (the handler's start) minus the time the timer's own
/// semantics scheduled it for: with a fixed rate, start + k x interval;
/// with a fixed delay, the previous delivery + interval.
struct TickLog {
    fixed_rate: bool,
    due: Instant,
    left: u64,
    lateness: Vec<u64>,
    sink: Arc<TimerSink>,
}

impl TickLog {
    /// The first tick is due one interval after [`TickLog::started`]
    /// (called right before the timer is started).
    fn new(ticks: u64, fixed_rate: bool, sink: &Arc<TimerSink>) -> TickLog {
        TickLog {
            fixed_rate,
            due: Instant::now() + TIMER_INTERVAL,
            left: ticks,
            lateness: Vec::with_capacity(ticks as usize),
            sink: sink.clone(),
        }
    }

    /// The timer starts now.
    fn started(&mut self) {
        self.due = Instant::now() + TIMER_INTERVAL;
    }

    /// Records a tick; true on the last one to record (then the actor
    /// cancels its timer).
    fn tick(&mut self) -> bool {
        if self.left == 0 {
            return false;
        }
        let now = Instant::now();
        let late = now.saturating_duration_since(self.due);
        self.lateness.push(late.as_nanos() as u64);
        self.due = if self.fixed_rate { self.due } else { now } + TIMER_INTERVAL;
        self.left -= 1;
        if self.left > 0 {
            return false;
        }
        if let Ok(mut all) = self.sink.lateness.lock() {
            all.append(&mut self.lateness);
        }
        self.sink.shot.hit();
        true
    }
}

/// Starts `actors` ticking actors with `spawn`, waits until each has
/// recorded its ticks; reports p50 and p99 lateness (µs), the process's
/// CPU time per tick (µs) from before the spawns until then, and that
/// time (ms).
fn drive_timers(p: &Params, mut spawn: impl FnMut(&Arc<TimerSink>)) -> RunResult {
    let (shot, rx) = OneShot::new(p.timer_actors);
    let sink = Arc::new(TimerSink {
        lateness: Mutex::new(Vec::with_capacity(
            (p.timer_actors * p.timer_ticks) as usize,
        )),
        shot,
    });
    let cpu0 = cpu_ns()?;
    let start = Instant::now();
    for _ in 0..p.timer_actors {
        spawn(&sink);
    }
    wait_done(&rx)?;
    let elapsed = start.elapsed();
    let cpu = cpu_ns()?.saturating_sub(cpu0);
    let mut all = std::mem::take(&mut *sink.lateness.lock().map_err(|_| "poisoned")?);
    if all.len() as u64 != p.timer_actors * p.timer_ticks {
        return Err(format!("{} ticks recorded", all.len()));
    }
    all.sort_unstable();
    let pct = |q: f64| all[((all.len() - 1) as f64 * q).round() as usize] as f64 / 1000.0;
    let per_tick = cpu as f64 / 1000.0 / all.len() as f64;
    Ok(Sample::Timers([
        pct(0.50),
        pct(0.99),
        per_tick,
        elapsed.as_secs_f64() * 1e3,
    ]))
}

/// Spawns `n` actors that each handle one message (`started` fires when
/// all have), then times `stop` until all their stop hooks have run
/// (`stopped`). The references still held after `stop` are dropped after
/// the clock stops.
fn drive_stop<R>(
    n: u64,
    mut spawn_one: impl FnMut() -> R,
    started: &Receiver<()>,
    stop: impl FnOnce(&mut Vec<R>),
    stopped: &Receiver<()>,
) -> RunResult {
    let mut refs = Vec::with_capacity(n as usize);
    for _ in 0..n {
        refs.push(spawn_one());
    }
    wait_done(started)?;
    let start = Instant::now();
    stop(&mut refs);
    wait_done(stopped)?;
    let elapsed = start.elapsed();
    drop(refs);
    Ok(Sample::Elapsed(elapsed))
}

// ---------------------------------------------------------------------------
// Helpers for the async peers

/// Minimal `block_on` for a plain thread: park until woken.
fn block_on<F: Future>(fut: F) -> F::Output {
    struct Unpark(thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park();
    }
}

/// The threads each runtime gets (`COMPARE_WORKERS`, default 2).
fn workers() -> usize {
    static WORKERS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *WORKERS.get_or_init(|| {
        env::var("COMPARE_WORKERS")
            .ok()
            .map(|s| s.parse().expect("COMPARE_WORKERS: a whole number"))
            .unwrap_or(2)
            .max(1)
    })
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers())
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn tokio_shutdown(rt: tokio::runtime::Runtime) {
    rt.shutdown_timeout(Duration::from_secs(10));
}

// ---------------------------------------------------------------------------
// proscenium

mod pro {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::mpsc::{self, Sender};
    use std::sync::Arc;
    use std::time::Duration;

    use proscenium::prelude::*;
    use proscenium::{Cancellable, Pool, RouterRef};

    use crate::{
        drive_ask, drive_fan_in, drive_ping_pong, drive_ring, drive_router, drive_rss, drive_spawn,
        drive_stop, drive_timers, ring_hop, OneShot, Params, Rally, RunResult, Tally, TickLog,
        RING_ACTORS, ROUTEES, TIMER_INTERVAL,
    };

    fn system() -> ActorSystem {
        ActorSystem::builder()
            .name("compare")
            .workers(crate::workers())
            .build()
            .expect("proscenium system")
    }

    fn shutdown(system: &ActorSystem) {
        let _ = system.terminate().wait_timeout(Duration::from_secs(30));
    }

    fn spawn<A: Actor>(
        system: &ActorSystem,
        f: impl Fn() -> A + Send + Sync + 'static,
    ) -> ActorRef<A::Msg> {
        system.spawn_anonymous(Props::new(f)).expect("spawn")
    }

    enum Pp {
        Peer(ActorRef<Pp>),
        Serve(u64, Sender<()>),
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
                Pp::Serve(rounds, done) => {
                    self.rally.serve(rounds, done);
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

    pub(crate) fn ping_pong(p: &Params) -> RunResult {
        let system = system();
        let player = || Player {
            peer: None,
            rally: Rally::default(),
        };
        let a = spawn(&system, player);
        let b = spawn(&system, player);
        a.tell(Pp::Peer(b.clone()));
        b.tell(Pp::Peer(a.clone()));
        let r = drive_ping_pong(p.rounds, |n, done| a.tell(Pp::Serve(n, done)));
        a.stop();
        b.stop();
        shutdown(&system);
        r
    }

    struct Counter(Tally);

    impl Actor for Counter {
        type Msg = u64;
        fn receive(&mut self, _: &mut Context<Self>, _: u64) -> Outcome {
            self.0.add();
            Ok(())
        }
    }

    pub(crate) fn handler_sync(p: &Params) -> RunResult {
        let system = system();
        let (tx, rx) = mpsc::channel();
        let left = p.handler_n;
        let sink = spawn(&system, move || {
            Counter(Tally {
                left,
                done: tx.clone(),
            })
        });
        let r = crate::drive_handler(p.handler_n, |i| sink.tell(i), &rx);
        sink.stop();
        shutdown(&system);
        r
    }

    struct AsyncCounter {
        tally: Tally,
        pend: bool,
    }

    impl AsyncActor for AsyncCounter {
        type Msg = u64;
        async fn handle(&mut self, _: &mut AsyncContext<Self>, _: u64) -> Outcome {
            if self.pend {
                crate::YieldOnce::default().await;
            }
            self.tally.add();
            Ok(())
        }
    }

    pub(crate) fn handler_async(p: &Params, pend: bool) -> RunResult {
        let system = system();
        let (tx, rx) = mpsc::channel();
        let left = p.handler_n;
        let sink = spawn(&system, move || {
            Async::new(AsyncCounter {
                tally: Tally {
                    left,
                    done: tx.clone(),
                },
                pend,
            })
        });
        let r = crate::drive_handler(p.handler_n, |i| sink.tell(i), &rx);
        sink.stop();
        shutdown(&system);
        r
    }

    pub(crate) fn fan_in(p: &Params) -> RunResult {
        let system = system();
        let (tx, rx) = mpsc::channel();
        let total = crate::PRODUCERS * p.fan_per;
        let sink = spawn(&system, move || {
            Counter(Tally {
                left: total,
                done: tx.clone(),
            })
        });
        let r = drive_fan_in(p.fan_per, |i| sink.tell(i), &rx);
        sink.stop();
        shutdown(&system);
        r
    }

    struct Once {
        shot: OneShot,
        stop_after: bool,
    }

    impl Actor for Once {
        type Msg = ();
        fn receive(&mut self, ctx: &mut Context<Self>, _: ()) -> Outcome {
            self.shot.hit();
            if self.stop_after {
                ctx.stop_self();
            }
            Ok(())
        }
    }

    pub(crate) fn spawn_many(p: &Params) -> RunResult {
        let system = system();
        let (shot, rx) = OneShot::new(p.spawn_n);
        let r = drive_spawn(
            p.spawn_n,
            || {
                let shot = shot.clone();
                let r = spawn(&system, move || Once {
                    shot: shot.clone(),
                    stop_after: true,
                });
                r.tell(());
                r
            },
            &rx,
        );
        shutdown(&system);
        r
    }

    pub(crate) fn rss(n: u64) -> Result<f64, String> {
        let system = system();
        let (shot, rx) = OneShot::new(n);
        let r = drive_rss(
            n,
            || {
                let shot = shot.clone();
                let r = spawn(&system, move || Once {
                    shot: shot.clone(),
                    stop_after: false,
                });
                r.tell(());
                r
            },
            &rx,
        );
        if let Ok((_, refs)) = &r {
            refs.iter().for_each(ActorRef::stop);
        }
        shutdown(&system);
        r.map(|(per, _)| per)
    }

    enum Tok {
        Next(ActorRef<Tok>),
        Hop(u64),
    }

    struct Link {
        next: Option<ActorRef<Tok>>,
        done: Sender<()>,
    }

    impl Actor for Link {
        type Msg = Tok;
        fn receive(&mut self, _: &mut Context<Self>, msg: Tok) -> Outcome {
            match msg {
                Tok::Next(next) => self.next = Some(next),
                Tok::Hop(n) => {
                    if let (Some(n), Some(next)) = (ring_hop(n, &self.done), &self.next) {
                        next.tell(Tok::Hop(n));
                    }
                }
            }
            Ok(())
        }
    }

    pub(crate) fn ring(p: &Params) -> RunResult {
        let system = system();
        let (tx, rx) = mpsc::channel();
        let ring: Vec<ActorRef<Tok>> = (0..RING_ACTORS)
            .map(|_| {
                let tx = tx.clone();
                spawn(&system, move || Link {
                    next: None,
                    done: tx.clone(),
                })
            })
            .collect();
        for (i, link) in ring.iter().enumerate() {
            link.tell(Tok::Next(ring[(i + 1) % RING_ACTORS].clone()));
        }
        let r = drive_ring(p.hops, |n| ring[0].tell(Tok::Hop(n)), &rx);
        ring.iter().for_each(ActorRef::stop);
        shutdown(&system);
        r
    }

    struct Responder(u64);

    impl Actor for Responder {
        type Msg = Reply<u64>;
        fn receive(&mut self, _: &mut Context<Self>, reply: Reply<u64>) -> Outcome {
            self.0 += 1;
            reply.send(self.0);
            Ok(())
        }
    }

    struct Flooded(Arc<AtomicU64>);

    impl Actor for Flooded {
        type Msg = u64;
        fn receive(&mut self, _: &mut Context<Self>, _: u64) -> Outcome {
            self.0.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }

    pub(crate) fn ask(p: &Params) -> RunResult {
        let system = system();
        let processed = Arc::new(AtomicU64::new(0));
        let responder = spawn(&system, || Responder(0));
        let counted = processed.clone();
        let flooded = spawn(&system, move || Flooded(counted.clone()));
        let r = drive_ask(
            p.asks,
            |i| flooded.tell(i),
            &processed,
            || {
                responder
                    .ask(|reply| reply, Duration::from_secs(60))
                    .wait()
                    .map_err(|e| format!("ask: {e:?}"))
            },
        );
        responder.stop();
        flooded.stop();
        shutdown(&system);
        r
    }

    struct Routee(OneShot);

    impl Actor for Routee {
        type Msg = u64;
        fn receive(&mut self, _: &mut Context<Self>, _: u64) -> Outcome {
            self.0.hit();
            Ok(())
        }
    }

    pub(crate) fn router(p: &Params) -> RunResult {
        let system = system();
        let (shot, rx) = OneShot::new(0);
        let routee = shot.clone();
        let pool = Pool::round_robin(ROUTEES).props(Props::new(move || Routee(routee.clone())));
        let router = RouterRef::new(system.spawn_anonymous(pool).expect("pool"));
        let r = drive_router(p.router_n, &shot, &rx, |i| router.tell(i));
        router.actor_ref().stop();
        shutdown(&system);
        r
    }

    struct Ticker {
        log: TickLog,
        timer: Option<Cancellable>,
    }

    impl Actor for Ticker {
        type Msg = ();
        fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
            self.log.started();
            self.timer = Some(ctx.tell_every(TIMER_INTERVAL, TIMER_INTERVAL, ()));
            Ok(())
        }
        fn receive(&mut self, _: &mut Context<Self>, (): ()) -> Outcome {
            if self.log.tick() {
                if let Some(timer) = &self.timer {
                    timer.cancel();
                }
            }
            Ok(())
        }
    }

    pub(crate) fn timers(p: &Params) -> RunResult {
        let system = system();
        let ticks = p.timer_ticks;
        let mut refs = Vec::new();
        let r = drive_timers(p, |sink| {
            let sink = sink.clone();
            refs.push(spawn(&system, move || Ticker {
                // Fixed delay: `tell_every`'s next tick is due an interval
                // after this one starts being handled.
                log: TickLog::new(ticks, false, &sink),
                timer: None,
            }));
        });
        refs.iter().for_each(ActorRef::stop);
        shutdown(&system);
        r
    }

    struct Idle {
        started: OneShot,
        stopped: OneShot,
    }

    impl Actor for Idle {
        type Msg = ();
        fn receive(&mut self, _: &mut Context<Self>, (): ()) -> Outcome {
            self.started.hit();
            Ok(())
        }
        fn post_stop(&mut self, _: &mut Context<Self>) {
            self.stopped.hit();
        }
    }

    pub(crate) fn stop(p: &Params) -> RunResult {
        let system = system();
        let (started, started_rx) = OneShot::new(p.stop_n);
        let (stopped, stopped_rx) = OneShot::new(p.stop_n);
        let r = drive_stop(
            p.stop_n,
            || {
                let (started, stopped) = (started.clone(), stopped.clone());
                let r = spawn(&system, move || Idle {
                    started: started.clone(),
                    stopped: stopped.clone(),
                });
                r.tell(());
                r
            },
            &started_rx,
            |_| {
                // Started here; the clock stops at the last `post_stop`,
                // and `shutdown` waits for the termination afterwards.
                drop(system.terminate());
            },
            &stopped_rx,
        );
        shutdown(&system);
        r
    }
}

// ---------------------------------------------------------------------------
// actix

mod act {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::mpsc::{self, Sender};
    use std::sync::Arc;
    use std::thread;

    use actix::{
        Actor, ActorContext, Addr, ArbiterHandle, AsyncContext, Context, Handler, Message,
        SpawnHandle,
    };

    use crate::{
        block_on, drive_ask, drive_fan_in, drive_ping_pong, drive_ring, drive_rss, drive_spawn,
        drive_stop, drive_timers, ring_hop, OneShot, Params, Rally, RunResult, Tally, TickLog,
        RING_ACTORS, TIMER_INTERVAL,
    };

    /// An actix system on a thread of its own, plus extra arbiters.
    struct Rt {
        system: actix_rt::System,
        arbiters: Vec<ArbiterHandle>,
        main: thread::JoinHandle<()>,
    }

    impl Rt {
        fn start(arbiters: usize) -> Rt {
            let (tx, rx) = mpsc::channel();
            let main = thread::Builder::new()
                .name("actix-system".into())
                .spawn(move || {
                    let runner = actix_rt::System::new();
                    let extra: Vec<actix_rt::Arbiter> = runner.block_on(async {
                        (1..arbiters).map(|_| actix_rt::Arbiter::new()).collect()
                    });
                    let system = actix_rt::System::current();
                    let mut handles = vec![system.arbiter().clone()];
                    handles.extend(extra.iter().map(actix_rt::Arbiter::handle));
                    tx.send((system, handles)).expect("actix handles");
                    let _ = runner.run();
                    for arbiter in extra {
                        arbiter.stop();
                        let _ = arbiter.join();
                    }
                })
                .expect("actix thread");
            let (system, arbiters) = rx.recv().expect("actix system");
            Rt {
                system,
                arbiters,
                main,
            }
        }

        /// The arbiter of the `i`-th actor spawned.
        fn arbiter(&self, i: usize) -> &ArbiterHandle {
            &self.arbiters[i % self.arbiters.len()]
        }

        fn shutdown(self) {
            self.system.stop();
            let _ = self.main.join();
        }
    }

    struct Peer(Addr<Player>);
    impl Message for Peer {
        type Result = ();
    }
    struct Serve(u64, Sender<()>);
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
        fn handle(&mut self, Serve(rounds, done): Serve, _: &mut Context<Self>) {
            self.rally.serve(rounds, done);
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

    pub(crate) fn ping_pong(p: &Params, arbiters: usize) -> RunResult {
        let rt = Rt::start(arbiters);
        let player = |_: &mut Context<Player>| Player {
            peer: None,
            rally: Rally::default(),
        };
        let a = Player::start_in_arbiter(rt.arbiter(0), player);
        let b = Player::start_in_arbiter(rt.arbiter(1), player);
        a.do_send(Peer(b.clone()));
        b.do_send(Peer(a.clone()));
        let r = drive_ping_pong(p.rounds, |n, done| a.do_send(Serve(n, done)));
        rt.shutdown();
        r
    }

    struct Num;
    impl Message for Num {
        type Result = ();
    }

    struct Counter(Tally);
    impl Actor for Counter {
        type Context = Context<Self>;
    }
    impl Handler<Num> for Counter {
        type Result = ();
        fn handle(&mut self, _: Num, _: &mut Context<Self>) {
            self.0.add();
        }
    }

    pub(crate) fn fan_in(p: &Params, arbiters: usize) -> RunResult {
        let rt = Rt::start(arbiters);
        let (tx, rx) = mpsc::channel();
        let total = crate::PRODUCERS * p.fan_per;
        let sink = Counter::start_in_arbiter(rt.arbiter(0), move |_| {
            Counter(Tally {
                left: total,
                done: tx,
            })
        });
        let r = drive_fan_in(p.fan_per, |_| sink.do_send(Num), &rx);
        drop(sink);
        rt.shutdown();
        r
    }

    struct Poke;
    impl Message for Poke {
        type Result = ();
    }

    struct Once {
        shot: OneShot,
        stop_after: bool,
    }
    impl Actor for Once {
        type Context = Context<Self>;
    }
    impl Handler<Poke> for Once {
        type Result = ();
        fn handle(&mut self, _: Poke, ctx: &mut Context<Self>) {
            self.shot.hit();
            if self.stop_after {
                ctx.stop();
            }
        }
    }

    pub(crate) fn spawn_many(p: &Params, arbiters: usize) -> RunResult {
        let rt = Rt::start(arbiters);
        let (shot, rx) = OneShot::new(p.spawn_n);
        let mut i = 0;
        let r = drive_spawn(
            p.spawn_n,
            || {
                let shot = shot.clone();
                let addr = Once::start_in_arbiter(rt.arbiter(i), move |_| Once {
                    shot,
                    stop_after: true,
                });
                addr.do_send(Poke);
                i += 1;
                addr
            },
            &rx,
        );
        rt.shutdown();
        r
    }

    pub(crate) fn rss(n: u64, arbiters: usize) -> Result<f64, String> {
        let rt = Rt::start(arbiters);
        let (shot, rx) = OneShot::new(n);
        let mut i = 0;
        let r = drive_rss(
            n,
            || {
                let shot = shot.clone();
                let addr = Once::start_in_arbiter(rt.arbiter(i), move |_| Once {
                    shot,
                    stop_after: false,
                });
                addr.do_send(Poke);
                i += 1;
                addr
            },
            &rx,
        );
        // Stopping the system stops the actors.
        rt.shutdown();
        r.map(|(per, _refs)| per)
    }

    struct Next(Addr<Link>);
    impl Message for Next {
        type Result = ();
    }
    struct Hop(u64);
    impl Message for Hop {
        type Result = ();
    }

    struct Link {
        next: Option<Addr<Link>>,
        done: Sender<()>,
    }
    impl Actor for Link {
        type Context = Context<Self>;
    }
    impl Handler<Next> for Link {
        type Result = ();
        fn handle(&mut self, Next(next): Next, _: &mut Context<Self>) {
            self.next = Some(next);
        }
    }
    impl Handler<Hop> for Link {
        type Result = ();
        fn handle(&mut self, Hop(n): Hop, _: &mut Context<Self>) {
            if let (Some(n), Some(next)) = (ring_hop(n, &self.done), &self.next) {
                next.do_send(Hop(n));
            }
        }
    }

    pub(crate) fn ring(p: &Params, arbiters: usize) -> RunResult {
        let rt = Rt::start(arbiters);
        let (tx, rx) = mpsc::channel();
        let ring: Vec<Addr<Link>> = (0..RING_ACTORS)
            .map(|i| {
                let done = tx.clone();
                Link::start_in_arbiter(rt.arbiter(i), move |_| Link { next: None, done })
            })
            .collect();
        for (i, link) in ring.iter().enumerate() {
            link.do_send(Next(ring[(i + 1) % RING_ACTORS].clone()));
        }
        let r = drive_ring(p.hops, |n| ring[0].do_send(Hop(n)), &rx);
        drop(ring);
        rt.shutdown();
        r
    }

    struct Get;
    impl Message for Get {
        type Result = u64;
    }

    struct Responder(u64);
    impl Actor for Responder {
        type Context = Context<Self>;
    }
    impl Handler<Get> for Responder {
        type Result = u64;
        fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 {
            self.0 += 1;
            self.0
        }
    }

    struct Flood;
    impl Message for Flood {
        type Result = ();
    }

    struct Flooded(Arc<AtomicU64>);
    impl Actor for Flooded {
        type Context = Context<Self>;
    }
    impl Handler<Flood> for Flooded {
        type Result = ();
        fn handle(&mut self, _: Flood, _: &mut Context<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn ask(p: &Params, arbiters: usize) -> RunResult {
        let rt = Rt::start(arbiters);
        let processed = Arc::new(AtomicU64::new(0));
        let responder = Responder::start_in_arbiter(rt.arbiter(0), |_| Responder(0));
        let counted = processed.clone();
        let flooded = Flooded::start_in_arbiter(rt.arbiter(1), move |_| Flooded(counted));
        let r = drive_ask(
            p.asks,
            |_| flooded.do_send(Flood),
            &processed,
            || block_on(responder.send(Get)).map_err(|e| format!("ask: {e}")),
        );
        drop((responder, flooded));
        rt.shutdown();
        r
    }

    struct Ticker {
        log: TickLog,
        timer: Option<SpawnHandle>,
    }

    impl Actor for Ticker {
        type Context = Context<Self>;
        fn started(&mut self, ctx: &mut Context<Self>) {
            // Fixed rate: actix's IntervalFunc moves its deadline on by one
            // interval per tick.
            self.log.started();
            self.timer = Some(ctx.run_interval(TIMER_INTERVAL, |act, ctx| {
                if act.log.tick() {
                    if let Some(timer) = act.timer.take() {
                        ctx.cancel_future(timer);
                    }
                }
            }));
        }
    }

    pub(crate) fn timers(p: &Params, arbiters: usize) -> RunResult {
        let rt = Rt::start(arbiters);
        let mut refs = Vec::new();
        let ticks = p.timer_ticks;
        let r = drive_timers(p, |sink| {
            let sink = sink.clone();
            let i = refs.len();
            refs.push(Ticker::start_in_arbiter(rt.arbiter(i), move |_| Ticker {
                log: TickLog::new(ticks, true, &sink),
                timer: None,
            }));
        });
        drop(refs);
        rt.shutdown();
        r
    }

    struct Idle {
        started: OneShot,
        stopped: OneShot,
    }
    impl Actor for Idle {
        type Context = Context<Self>;
        fn stopped(&mut self, _: &mut Context<Self>) {
            self.stopped.hit();
        }
    }
    impl Handler<Poke> for Idle {
        type Result = ();
        fn handle(&mut self, _: Poke, _: &mut Context<Self>) {
            self.started.hit();
        }
    }

    pub(crate) fn stop(p: &Params, arbiters: usize) -> RunResult {
        let rt = Rt::start(arbiters);
        let (started, started_rx) = OneShot::new(p.stop_n);
        let (stopped, stopped_rx) = OneShot::new(p.stop_n);
        let mut i = 0;
        let r = drive_stop(
            p.stop_n,
            || {
                let (started, stopped) = (started.clone(), stopped.clone());
                let addr =
                    Idle::start_in_arbiter(rt.arbiter(i), move |_| Idle { started, stopped });
                addr.do_send(Poke);
                i += 1;
                addr
            },
            &started_rx,
            // An actix actor stops once no address to it is left (and its
            // mailbox is empty): actix's way to stop an actor from outside
            // (`System::stop` ends the arbiters' event loops instead).
            Vec::clear,
            &stopped_rx,
        );
        rt.shutdown();
        r
    }
}

// ---------------------------------------------------------------------------
// ractor

mod rac {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::mpsc::{self, Sender};
    use std::sync::Arc;

    use ractor::factory::queues::DefaultQueue;
    use ractor::factory::routing::RoundRobinRouting;
    use ractor::factory::{
        Factory, FactoryArguments, FactoryMessage, Job, JobOptions, Worker, WorkerBuilder, WorkerId,
    };
    use ractor::rpc::CallResult;
    use ractor::{Actor, ActorProcessingErr, ActorRef, ActorRuntime, RpcReplyPort};
    use tokio::task::JoinHandle;

    use crate::{
        drive_ask, drive_fan_in, drive_ping_pong, drive_ring, drive_router, drive_rss, drive_spawn,
        drive_stop, drive_timers, ring_hop, sent, tokio_runtime, tokio_shutdown, OneShot, Params,
        Rally, RunResult, Tally, TickLog, TimerSink, RING_ACTORS, ROUTEES, TIMER_INTERVAL,
    };

    fn spawn<A: Actor>(
        rt: &tokio::runtime::Runtime,
        actor: A,
        args: A::Arguments,
    ) -> ActorRef<A::Msg> {
        rt.block_on(Actor::spawn(None, actor, args))
            .expect("ractor spawn")
            .0
    }

    enum Pp {
        Peer(ActorRef<Pp>),
        Serve(u64, Sender<()>),
        Hit,
    }

    struct Player;

    struct PlayerState {
        peer: Option<ActorRef<Pp>>,
        rally: Rally,
    }

    impl PlayerState {
        fn hit_back(&self) {
            if let Some(peer) = &self.peer {
                sent(peer.cast(Pp::Hit));
            }
        }
    }

    impl Actor for Player {
        type Msg = Pp;
        type State = PlayerState;
        type Arguments = ();

        async fn pre_start(
            &self,
            _: ActorRef<Pp>,
            _: (),
        ) -> Result<PlayerState, ActorProcessingErr> {
            Ok(PlayerState {
                peer: None,
                rally: Rally::default(),
            })
        }

        async fn handle(
            &self,
            _: ActorRef<Pp>,
            msg: Pp,
            state: &mut PlayerState,
        ) -> Result<(), ActorProcessingErr> {
            match msg {
                Pp::Peer(peer) => state.peer = Some(peer),
                Pp::Serve(rounds, done) => {
                    state.rally.serve(rounds, done);
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

    pub(crate) fn ping_pong(p: &Params) -> RunResult {
        let rt = tokio_runtime();
        let a = spawn(&rt, Player, ());
        let b = spawn(&rt, Player, ());
        sent(a.cast(Pp::Peer(b.clone())));
        sent(b.cast(Pp::Peer(a.clone())));
        let r = drive_ping_pong(p.rounds, |n, done| sent(a.cast(Pp::Serve(n, done))));
        a.stop(None);
        b.stop(None);
        tokio_shutdown(rt);
        r
    }

    struct Counter;

    impl Actor for Counter {
        type Msg = u64;
        type State = Tally;
        type Arguments = Tally;

        async fn pre_start(
            &self,
            _: ActorRef<u64>,
            tally: Tally,
        ) -> Result<Tally, ActorProcessingErr> {
            Ok(tally)
        }

        async fn handle(
            &self,
            _: ActorRef<u64>,
            _: u64,
            tally: &mut Tally,
        ) -> Result<(), ActorProcessingErr> {
            tally.add();
            Ok(())
        }
    }

    struct Handler;

    impl Actor for Handler {
        type Msg = u64;
        type State = (Tally, bool);
        type Arguments = (Tally, bool);

        async fn pre_start(
            &self,
            _: ActorRef<u64>,
            args: (Tally, bool),
        ) -> Result<(Tally, bool), ActorProcessingErr> {
            Ok(args)
        }

        async fn handle(
            &self,
            _: ActorRef<u64>,
            _: u64,
            (tally, pend): &mut (Tally, bool),
        ) -> Result<(), ActorProcessingErr> {
            if *pend {
                crate::YieldOnce::default().await;
            }
            tally.add();
            Ok(())
        }
    }

    pub(crate) fn handler(p: &Params, pend: bool) -> RunResult {
        let rt = tokio_runtime();
        let (tx, rx) = mpsc::channel();
        let tally = Tally {
            left: p.handler_n,
            done: tx,
        };
        let sink = spawn(&rt, Handler, (tally, pend));
        let r = crate::drive_handler(p.handler_n, |i| sent(sink.cast(i)), &rx);
        sink.stop(None);
        tokio_shutdown(rt);
        r
    }

    pub(crate) fn fan_in(p: &Params) -> RunResult {
        let rt = tokio_runtime();
        let (tx, rx) = mpsc::channel();
        let sink = spawn(
            &rt,
            Counter,
            Tally {
                left: crate::PRODUCERS * p.fan_per,
                done: tx,
            },
        );
        let r = drive_fan_in(p.fan_per, |i| sent(sink.cast(i)), &rx);
        sink.stop(None);
        tokio_shutdown(rt);
        r
    }

    struct Once;

    struct OnceArgs {
        shot: OneShot,
        stop_after: bool,
    }

    impl Actor for Once {
        type Msg = ();
        type State = OnceArgs;
        type Arguments = OnceArgs;

        async fn pre_start(
            &self,
            _: ActorRef<()>,
            args: OnceArgs,
        ) -> Result<OnceArgs, ActorProcessingErr> {
            Ok(args)
        }

        async fn handle(
            &self,
            myself: ActorRef<()>,
            _: (),
            state: &mut OnceArgs,
        ) -> Result<(), ActorProcessingErr> {
            state.shot.hit();
            if state.stop_after {
                myself.stop(None);
            }
            Ok(())
        }
    }

    fn spawn_instant(args: OnceArgs) -> ActorRef<()> {
        ActorRuntime::<Once>::spawn_instant(None, Once, args)
            .expect("ractor spawn")
            .0
    }

    pub(crate) fn spawn_many(p: &Params) -> RunResult {
        let rt = tokio_runtime();
        let (shot, rx) = OneShot::new(p.spawn_n);
        let r = {
            let _enter = rt.enter();
            drive_spawn(
                p.spawn_n,
                || {
                    let r = spawn_instant(OnceArgs {
                        shot: shot.clone(),
                        stop_after: true,
                    });
                    sent(r.cast(()));
                    r
                },
                &rx,
            )
        };
        tokio_shutdown(rt);
        r
    }

    pub(crate) fn rss(n: u64) -> Result<f64, String> {
        let rt = tokio_runtime();
        let (shot, rx) = OneShot::new(n);
        let r = {
            let _enter = rt.enter();
            drive_rss(
                n,
                || {
                    let r = spawn_instant(OnceArgs {
                        shot: shot.clone(),
                        stop_after: false,
                    });
                    sent(r.cast(()));
                    r
                },
                &rx,
            )
        };
        if let Ok((_, refs)) = &r {
            refs.iter().for_each(|r| r.stop(None));
        }
        tokio_shutdown(rt);
        r.map(|(per, _)| per)
    }

    enum Tok {
        Next(ActorRef<Tok>),
        Hop(u64),
    }

    struct Link;

    struct LinkState {
        next: Option<ActorRef<Tok>>,
        done: Sender<()>,
    }

    impl Actor for Link {
        type Msg = Tok;
        type State = LinkState;
        type Arguments = Sender<()>;

        async fn pre_start(
            &self,
            _: ActorRef<Tok>,
            done: Sender<()>,
        ) -> Result<LinkState, ActorProcessingErr> {
            Ok(LinkState { next: None, done })
        }

        async fn handle(
            &self,
            _: ActorRef<Tok>,
            msg: Tok,
            state: &mut LinkState,
        ) -> Result<(), ActorProcessingErr> {
            match msg {
                Tok::Next(next) => state.next = Some(next),
                Tok::Hop(n) => {
                    if let (Some(n), Some(next)) = (ring_hop(n, &state.done), &state.next) {
                        sent(next.cast(Tok::Hop(n)));
                    }
                }
            }
            Ok(())
        }
    }

    pub(crate) fn ring(p: &Params) -> RunResult {
        let rt = tokio_runtime();
        let (tx, rx) = mpsc::channel();
        let ring: Vec<ActorRef<Tok>> = (0..RING_ACTORS)
            .map(|_| spawn(&rt, Link, tx.clone()))
            .collect();
        for (i, link) in ring.iter().enumerate() {
            sent(link.cast(Tok::Next(ring[(i + 1) % RING_ACTORS].clone())));
        }
        let r = drive_ring(p.hops, |n| sent(ring[0].cast(Tok::Hop(n))), &rx);
        ring.iter().for_each(|l| l.stop(None));
        tokio_shutdown(rt);
        r
    }

    struct Responder;

    impl Actor for Responder {
        type Msg = RpcReplyPort<u64>;
        type State = u64;
        type Arguments = ();

        async fn pre_start(
            &self,
            _: ActorRef<Self::Msg>,
            _: (),
        ) -> Result<u64, ActorProcessingErr> {
            Ok(0)
        }

        async fn handle(
            &self,
            _: ActorRef<Self::Msg>,
            reply: RpcReplyPort<u64>,
            n: &mut u64,
        ) -> Result<(), ActorProcessingErr> {
            *n += 1;
            let _ = reply.send(*n);
            Ok(())
        }
    }

    struct Flooded;

    impl Actor for Flooded {
        type Msg = u64;
        type State = Arc<AtomicU64>;
        type Arguments = Arc<AtomicU64>;

        async fn pre_start(
            &self,
            _: ActorRef<u64>,
            c: Arc<AtomicU64>,
        ) -> Result<Arc<AtomicU64>, ActorProcessingErr> {
            Ok(c)
        }

        async fn handle(
            &self,
            _: ActorRef<u64>,
            _: u64,
            c: &mut Arc<AtomicU64>,
        ) -> Result<(), ActorProcessingErr> {
            c.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }

    pub(crate) fn ask(p: &Params) -> RunResult {
        let rt = tokio_runtime();
        let processed = Arc::new(AtomicU64::new(0));
        let responder = spawn(&rt, Responder, ());
        let flooded = spawn(&rt, Flooded, processed.clone());
        let handle = rt.handle().clone();
        let r = drive_ask(
            p.asks,
            |i| sent(flooded.cast(i)),
            &processed,
            || match handle.block_on(responder.call(|reply| reply, None)) {
                Ok(CallResult::Success(v)) => Ok(v),
                Ok(_) => Err("ask: no answer".to_owned()),
                Err(_) => Err("ask: send failed".to_owned()),
            },
        );
        responder.stop(None);
        flooded.stop(None);
        tokio_shutdown(rt);
        r
    }

    /// A routee of the factory (ractor's worker pool).
    struct Routee;

    impl Worker for Routee {
        type Key = ();
        type Message = u64;
        type Arguments = OneShot;
        type State = OneShot;

        async fn pre_start(
            &self,
            _: WorkerId,
            _: &ActorRef<FactoryMessage<(), u64>>,
            shot: OneShot,
        ) -> Result<OneShot, ActorProcessingErr> {
            Ok(shot)
        }

        async fn handle(
            &self,
            _: WorkerId,
            _: &ActorRef<FactoryMessage<(), u64>>,
            _: Job<(), u64>,
            shot: &mut OneShot,
        ) -> Result<(), ActorProcessingErr> {
            shot.hit();
            Ok(())
        }
    }

    struct Routees(OneShot);

    impl WorkerBuilder<Routee, OneShot> for Routees {
        fn build(&mut self, _: WorkerId) -> (Routee, OneShot) {
            (Routee, self.0.clone())
        }
    }

    pub(crate) fn router(p: &Params) -> RunResult {
        let rt = tokio_runtime();
        let (shot, rx) = OneShot::new(0);
        let args = FactoryArguments::builder()
            .worker_builder(Box::new(Routees(shot.clone())))
            .num_initial_workers(ROUTEES)
            .router(RoundRobinRouting::default())
            .queue(DefaultQueue::default())
            .build();
        let factory =
            spawn(
                &rt,
                Factory::<
                    (),
                    u64,
                    OneShot,
                    Routee,
                    RoundRobinRouting<(), u64>,
                    DefaultQueue<(), u64>,
                >::default(),
                args,
            );
        let r = drive_router(p.router_n, &shot, &rx, |i| {
            sent(factory.cast(FactoryMessage::Dispatch(Job {
                key: (),
                msg: i,
                options: JobOptions::default(),
                accepted: None,
            })))
        });
        factory.stop(None);
        tokio_shutdown(rt);
        r
    }

    struct Ticker;

    struct TickerState {
        log: TickLog,
        timer: Option<JoinHandle<()>>,
    }

    impl Actor for Ticker {
        type Msg = ();
        type State = TickerState;
        type Arguments = (u64, Arc<TimerSink>);

        async fn pre_start(
            &self,
            _: ActorRef<()>,
            (ticks, sink): (u64, Arc<TimerSink>),
        ) -> Result<TickerState, ActorProcessingErr> {
            Ok(TickerState {
                log: TickLog::new(ticks, true, &sink),
                timer: None,
            })
        }

        async fn post_start(
            &self,
            myself: ActorRef<()>,
            state: &mut TickerState,
        ) -> Result<(), ActorProcessingErr> {
            // Fixed rate: `send_interval` runs a tokio `interval` (its
            // missed ticks burst to catch up).
            state.log.started();
            state.timer = Some(myself.send_interval(TIMER_INTERVAL, || ()));
            Ok(())
        }

        async fn handle(
            &self,
            _: ActorRef<()>,
            (): (),
            state: &mut TickerState,
        ) -> Result<(), ActorProcessingErr> {
            if state.log.tick() {
                if let Some(timer) = state.timer.take() {
                    timer.abort();
                }
            }
            Ok(())
        }
    }

    pub(crate) fn timers(p: &Params) -> RunResult {
        let rt = tokio_runtime();
        let mut refs = Vec::new();
        let r = {
            let _enter = rt.enter();
            drive_timers(p, |sink| {
                let (r, _) = ActorRuntime::<Ticker>::spawn_instant(
                    None,
                    Ticker,
                    (p.timer_ticks, sink.clone()),
                )
                .expect("ractor spawn");
                refs.push(r);
            })
        };
        refs.iter().for_each(|r| r.stop(None));
        tokio_shutdown(rt);
        r
    }

    struct Idle;

    impl Actor for Idle {
        type Msg = ();
        type State = (OneShot, OneShot);
        type Arguments = (OneShot, OneShot);

        async fn pre_start(
            &self,
            _: ActorRef<()>,
            shots: (OneShot, OneShot),
        ) -> Result<(OneShot, OneShot), ActorProcessingErr> {
            Ok(shots)
        }

        async fn handle(
            &self,
            _: ActorRef<()>,
            (): (),
            (started, _): &mut (OneShot, OneShot),
        ) -> Result<(), ActorProcessingErr> {
            started.hit();
            Ok(())
        }

        async fn post_stop(
            &self,
            _: ActorRef<()>,
            (_, stopped): &mut (OneShot, OneShot),
        ) -> Result<(), ActorProcessingErr> {
            stopped.hit();
            Ok(())
        }
    }

    pub(crate) fn stop(p: &Params) -> RunResult {
        let rt = tokio_runtime();
        let (started, started_rx) = OneShot::new(p.stop_n);
        let (stopped, stopped_rx) = OneShot::new(p.stop_n);
        let r = {
            let _enter = rt.enter();
            drive_stop(
                p.stop_n,
                || {
                    let (r, _) = ActorRuntime::<Idle>::spawn_instant(
                        None,
                        Idle,
                        (started.clone(), stopped.clone()),
                    )
                    .expect("ractor spawn");
                    sent(r.cast(()));
                    r
                },
                &started_rx,
                // No actor system: each actor is stopped.
                |refs| refs.iter().for_each(|r| r.stop(None)),
                &stopped_rx,
            )
        };
        tokio_shutdown(rt);
        r
    }
}

// ---------------------------------------------------------------------------
// kameo

mod kam {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::mpsc::{self, Sender};
    use std::sync::Arc;

    use kameo::error::{ActorStopReason, Infallible};
    use kameo::mailbox;
    use kameo::message::{Context, Message};
    use kameo::prelude::{Actor, ActorRef, Spawn, WeakActorRef};

    use crate::{
        block_on, drive_ask, drive_fan_in, drive_ping_pong, drive_ring, drive_rss, drive_spawn,
        drive_stop, ring_hop, sent, tokio_runtime, tokio_shutdown, OneShot, Params, Rally,
        RunResult, Tally, RING_ACTORS,
    };

    /// Spawns with an unbounded mailbox; needs the runtime entered.
    fn spawn<A: Actor<Args = A>>(actor: A) -> ActorRef<A> {
        A::spawn_with_mailbox(actor, mailbox::unbounded())
    }

    struct Player {
        peer: Option<ActorRef<Player>>,
        rally: Rally,
    }

    impl Player {
        fn hit_back(&self) {
            if let Some(peer) = &self.peer {
                sent(peer.tell(Hit).try_send());
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
    struct Serve(u64, Sender<()>);
    struct Hit;

    impl Message<Peer> for Player {
        type Reply = ();
        async fn handle(&mut self, Peer(peer): Peer, _: &mut Context<Self, ()>) {
            self.peer = Some(peer);
        }
    }

    impl Message<Serve> for Player {
        type Reply = ();
        async fn handle(&mut self, Serve(rounds, done): Serve, _: &mut Context<Self, ()>) {
            self.rally.serve(rounds, done);
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

    pub(crate) fn ping_pong(p: &Params) -> RunResult {
        let rt = tokio_runtime();
        let (a, b) = {
            let _enter = rt.enter();
            let player = || Player {
                peer: None,
                rally: Rally::default(),
            };
            (spawn(player()), spawn(player()))
        };
        sent(a.tell(Peer(b.clone())).try_send());
        sent(b.tell(Peer(a.clone())).try_send());
        let r = drive_ping_pong(p.rounds, |n, done| sent(a.tell(Serve(n, done)).try_send()));
        a.kill();
        b.kill();
        tokio_shutdown(rt);
        r
    }

    struct Counter(Tally);

    impl Actor for Counter {
        type Args = Self;
        type Error = Infallible;
        async fn on_start(state: Self, _: ActorRef<Self>) -> Result<Self, Infallible> {
            Ok(state)
        }
    }

    impl Message<u64> for Counter {
        type Reply = ();
        async fn handle(&mut self, _: u64, _: &mut Context<Self, ()>) {
            self.0.add();
        }
    }

    struct Handler {
        tally: Tally,
        pend: bool,
    }

    impl Actor for Handler {
        type Args = Self;
        type Error = Infallible;
        async fn on_start(state: Self, _: ActorRef<Self>) -> Result<Self, Infallible> {
            Ok(state)
        }
    }

    impl Message<u64> for Handler {
        type Reply = ();
        async fn handle(&mut self, _: u64, _: &mut Context<Self, ()>) {
            if self.pend {
                crate::YieldOnce::default().await;
            }
            self.tally.add();
        }
    }

    pub(crate) fn handler(p: &Params, pend: bool) -> RunResult {
        let rt = tokio_runtime();
        let (tx, rx) = mpsc::channel();
        let sink = {
            let _enter = rt.enter();
            spawn(Handler {
                tally: Tally {
                    left: p.handler_n,
                    done: tx,
                },
                pend,
            })
        };
        let r = crate::drive_handler(p.handler_n, |i| sent(sink.tell(i).try_send()), &rx);
        sink.kill();
        tokio_shutdown(rt);
        r
    }

    pub(crate) fn fan_in(p: &Params) -> RunResult {
        let rt = tokio_runtime();
        let (tx, rx) = mpsc::channel();
        let sink = {
            let _enter = rt.enter();
            spawn(Counter(Tally {
                left: crate::PRODUCERS * p.fan_per,
                done: tx,
            }))
        };
        let r = drive_fan_in(p.fan_per, |i| sent(sink.tell(i).try_send()), &rx);
        sink.kill();
        tokio_shutdown(rt);
        r
    }

    struct Once {
        shot: OneShot,
        stop_after: bool,
    }

    impl Actor for Once {
        type Args = Self;
        type Error = Infallible;
        async fn on_start(state: Self, _: ActorRef<Self>) -> Result<Self, Infallible> {
            Ok(state)
        }
    }

    struct Poke;

    impl Message<Poke> for Once {
        type Reply = ();
        async fn handle(&mut self, _: Poke, ctx: &mut Context<Self, ()>) {
            self.shot.hit();
            if self.stop_after {
                ctx.stop();
            }
        }
    }

    pub(crate) fn spawn_many(p: &Params) -> RunResult {
        let rt = tokio_runtime();
        let (shot, rx) = OneShot::new(p.spawn_n);
        let r = {
            let _enter = rt.enter();
            drive_spawn(
                p.spawn_n,
                || {
                    let r = spawn(Once {
                        shot: shot.clone(),
                        stop_after: true,
                    });
                    sent(r.tell(Poke).try_send());
                    r
                },
                &rx,
            )
        };
        tokio_shutdown(rt);
        r
    }

    pub(crate) fn rss(n: u64) -> Result<f64, String> {
        let rt = tokio_runtime();
        let (shot, rx) = OneShot::new(n);
        let r = {
            let _enter = rt.enter();
            drive_rss(
                n,
                || {
                    let r = spawn(Once {
                        shot: shot.clone(),
                        stop_after: false,
                    });
                    sent(r.tell(Poke).try_send());
                    r
                },
                &rx,
            )
        };
        if let Ok((_, refs)) = &r {
            refs.iter().for_each(ActorRef::kill);
        }
        tokio_shutdown(rt);
        r.map(|(per, _)| per)
    }

    struct Link {
        next: Option<ActorRef<Link>>,
        done: Sender<()>,
    }

    impl Actor for Link {
        type Args = Self;
        type Error = Infallible;
        async fn on_start(state: Self, _: ActorRef<Self>) -> Result<Self, Infallible> {
            Ok(state)
        }
    }

    struct Next(ActorRef<Link>);
    struct Hop(u64);

    impl Message<Next> for Link {
        type Reply = ();
        async fn handle(&mut self, Next(next): Next, _: &mut Context<Self, ()>) {
            self.next = Some(next);
        }
    }

    impl Message<Hop> for Link {
        type Reply = ();
        async fn handle(&mut self, Hop(n): Hop, _: &mut Context<Self, ()>) {
            if let (Some(n), Some(next)) = (ring_hop(n, &self.done), &self.next) {
                sent(next.tell(Hop(n)).try_send());
            }
        }
    }

    pub(crate) fn ring(p: &Params) -> RunResult {
        let rt = tokio_runtime();
        let (tx, rx) = mpsc::channel();
        let ring: Vec<ActorRef<Link>> = {
            let _enter = rt.enter();
            (0..RING_ACTORS)
                .map(|_| {
                    spawn(Link {
                        next: None,
                        done: tx.clone(),
                    })
                })
                .collect()
        };
        for (i, link) in ring.iter().enumerate() {
            sent(
                link.tell(Next(ring[(i + 1) % RING_ACTORS].clone()))
                    .try_send(),
            );
        }
        let r = drive_ring(p.hops, |n| sent(ring[0].tell(Hop(n)).try_send()), &rx);
        ring.iter().for_each(ActorRef::kill);
        tokio_shutdown(rt);
        r
    }

    struct Responder(u64);

    impl Actor for Responder {
        type Args = Self;
        type Error = Infallible;
        async fn on_start(state: Self, _: ActorRef<Self>) -> Result<Self, Infallible> {
            Ok(state)
        }
    }

    struct Get;

    impl Message<Get> for Responder {
        type Reply = u64;
        async fn handle(&mut self, _: Get, _: &mut Context<Self, u64>) -> u64 {
            self.0 += 1;
            self.0
        }
    }

    struct Flooded(Arc<AtomicU64>);

    impl Actor for Flooded {
        type Args = Self;
        type Error = Infallible;
        async fn on_start(state: Self, _: ActorRef<Self>) -> Result<Self, Infallible> {
            Ok(state)
        }
    }

    impl Message<u64> for Flooded {
        type Reply = ();
        async fn handle(&mut self, _: u64, _: &mut Context<Self, ()>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn ask(p: &Params) -> RunResult {
        let rt = tokio_runtime();
        let processed = Arc::new(AtomicU64::new(0));
        let (responder, flooded) = {
            let _enter = rt.enter();
            (spawn(Responder(0)), spawn(Flooded(processed.clone())))
        };
        let r = drive_ask(
            p.asks,
            |i| sent(flooded.tell(i).try_send()),
            &processed,
            || {
                responder
                    .ask(Get)
                    .blocking_send()
                    .map_err(|_| "ask failed".to_owned())
            },
        );
        responder.kill();
        flooded.kill();
        tokio_shutdown(rt);
        r
    }

    struct Idle {
        started: OneShot,
        stopped: OneShot,
    }

    impl Actor for Idle {
        type Args = Self;
        type Error = Infallible;
        async fn on_start(state: Self, _: ActorRef<Self>) -> Result<Self, Infallible> {
            Ok(state)
        }
        async fn on_stop(
            &mut self,
            _: WeakActorRef<Self>,
            _: ActorStopReason,
        ) -> Result<(), Infallible> {
            self.stopped.hit();
            Ok(())
        }
    }

    impl Message<Poke> for Idle {
        type Reply = ();
        async fn handle(&mut self, _: Poke, _: &mut Context<Self, ()>) {
            self.started.hit();
        }
    }

    pub(crate) fn stop(p: &Params) -> RunResult {
        let rt = tokio_runtime();
        let (started, started_rx) = OneShot::new(p.stop_n);
        let (stopped, stopped_rx) = OneShot::new(p.stop_n);
        let r = {
            let _enter = rt.enter();
            drive_stop(
                p.stop_n,
                || {
                    let r = spawn(Idle {
                        started: started.clone(),
                        stopped: stopped.clone(),
                    });
                    sent(r.tell(Poke).try_send());
                    r
                },
                &started_rx,
                // No actor system: each actor is stopped (after the
                // messages already in its mailbox, of which there are none).
                |refs| {
                    refs.iter()
                        .for_each(|r| sent(block_on(r.stop_gracefully())))
                },
                &stopped_rx,
            )
        };
        tokio_shutdown(rt);
        r
    }
}

// ---------------------------------------------------------------------------
// Dispatch, the child process, and the report

fn run(w: Workload, c: Contender, p: &Params) -> RunResult {
    match (w, c) {
        (Workload::Rss, c) => rss_in_child(c, p),
        (Workload::PingPong, Contender::Proscenium) => pro::ping_pong(p),
        (Workload::PingPong, Contender::Actix) => act::ping_pong(p, workers()),
        (Workload::PingPong, Contender::Actix1) => act::ping_pong(p, 1),
        (Workload::PingPong, Contender::Ractor) => rac::ping_pong(p),
        (Workload::PingPong, Contender::Kameo) => kam::ping_pong(p),
        (Workload::FanIn, Contender::Proscenium) => pro::fan_in(p),
        (Workload::FanIn, Contender::Actix) => act::fan_in(p, workers()),
        (Workload::FanIn, Contender::Actix1) => act::fan_in(p, 1),
        (Workload::FanIn, Contender::Ractor) => rac::fan_in(p),
        (Workload::FanIn, Contender::Kameo) => kam::fan_in(p),
        (Workload::Spawn, Contender::Proscenium) => pro::spawn_many(p),
        (Workload::Spawn, Contender::Actix) => act::spawn_many(p, workers()),
        (Workload::Spawn, Contender::Actix1) => act::spawn_many(p, 1),
        (Workload::Spawn, Contender::Ractor) => rac::spawn_many(p),
        (Workload::Spawn, Contender::Kameo) => kam::spawn_many(p),
        (Workload::Ring, Contender::Proscenium) => pro::ring(p),
        (Workload::Ring, Contender::Actix) => act::ring(p, workers()),
        (Workload::Ring, Contender::Actix1) => act::ring(p, 1),
        (Workload::Ring, Contender::Ractor) => rac::ring(p),
        (Workload::Ring, Contender::Kameo) => kam::ring(p),
        (Workload::Ask, Contender::Proscenium) => pro::ask(p),
        (Workload::Ask, Contender::Actix) => act::ask(p, workers()),
        (Workload::Ask, Contender::Actix1) => act::ask(p, 1),
        (Workload::Ask, Contender::Ractor) => rac::ask(p),
        (Workload::Ask, Contender::Kameo) => kam::ask(p),
        (Workload::Router, Contender::Proscenium) => pro::router(p),
        (Workload::Router, Contender::Actix | Contender::Actix1) => no_feature(
            "actix has no router; its SyncArbiter runs N threads of one sync actor type off one queue (a thread pool, not a router of actors)",
        ),
        (Workload::Router, Contender::Ractor) => rac::router(p),
        (Workload::Router, Contender::Kameo) => no_feature(
            "kameo 0.22 has no router; kameo_actors' ActorPool is least-connections, not round-robin, and needs kameo's default features (tracing) for every kameo workload",
        ),
        (Workload::Timers, Contender::Proscenium) => pro::timers(p),
        (Workload::Timers, Contender::Actix) => act::timers(p, workers()),
        (Workload::Timers, Contender::Actix1) => act::timers(p, 1),
        (Workload::Timers, Contender::Ractor) => rac::timers(p),
        (Workload::Timers, Contender::Kameo) => no_feature(
            "kameo 0.22 has no actor timer (kameo_actors' Scheduler actor is a separate crate needing kameo's default features)",
        ),
        (Workload::Stop, Contender::Proscenium) => pro::stop(p),
        (Workload::Stop, Contender::Actix) => act::stop(p, workers()),
        (Workload::Stop, Contender::Actix1) => act::stop(p, 1),
        (Workload::Stop, Contender::Ractor) => rac::stop(p),
        (Workload::Stop, Contender::Kameo) => kam::stop(p),
        (Workload::HandlerSync, Contender::Proscenium) => pro::handler_sync(p),
        (Workload::AsyncReady, Contender::Proscenium) => pro::handler_async(p, false),
        (Workload::AsyncYield, Contender::Proscenium) => pro::handler_async(p, true),
        (Workload::HandlerSync | Workload::AsyncReady, Contender::Ractor) => {
            rac::handler(p, false)
        }
        (Workload::AsyncYield, Contender::Ractor) => rac::handler(p, true),
        (Workload::HandlerSync | Workload::AsyncReady, Contender::Kameo) => {
            kam::handler(p, false)
        }
        (Workload::AsyncYield, Contender::Kameo) => kam::handler(p, true),
        (
            Workload::HandlerSync | Workload::AsyncReady | Workload::AsyncYield,
            Contender::Actix | Contender::Actix1,
        ) => no_feature(
            "not measured: actix's async handlers are ResponseActFutures, not an async fn per message",
        ),
    }
}

/// Runs the memory measurement of one contender in a fresh process.
fn rss_in_child(c: Contender, p: &Params) -> RunResult {
    let exe = env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let out = Command::new(exe)
        .env(RSS_CHILD_ENV, c.name())
        .env(RSS_N_ENV, p.rss_n.to_string())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("child: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(RSS_LINE))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(Sample::BytesPerActor)
        .ok_or_else(|| format!("child failed ({}): {}", out.status, stdout.trim()))
}

fn child_main(name: &str) {
    let c = Contender::from_name(name).expect("known contender");
    let n: u64 = env::var(RSS_N_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .expect("COMPARE_RSS_N");
    let r = match c {
        Contender::Proscenium => pro::rss(n),
        Contender::Actix => act::rss(n, workers()),
        Contender::Actix1 => act::rss(n, 1),
        Contender::Ractor => rac::rss(n),
        Contender::Kameo => kam::rss(n),
    };
    match r {
        Ok(per) => println!("{RSS_LINE}{per}"),
        Err(e) => {
            eprintln!("rss child for {name}: {e}");
            std::process::exit(1);
        }
    }
}

#[derive(Clone, Copy)]
enum Better {
    Lower,
    Higher,
}

struct Row {
    workload: String,
    metric: &'static str,
    better: Better,
    /// "faster"/"slower" or "smaller"/"larger".
    words: (&'static str, &'static str),
    /// Per contender (in `contenders` order): the value, or why there is none.
    values: Vec<Result<f64, String>>,
}

fn median_by<T: Copy>(mut v: Vec<T>, key: impl Fn(&T) -> f64) -> T {
    v.sort_by(|a, b| key(a).total_cmp(&key(b)));
    v[v.len() / 2]
}

/// The median sample of each contender, or the first error.
fn medians(samples: &[Vec<RunResult>]) -> Vec<Result<Sample, String>> {
    samples
        .iter()
        .map(|runs| {
            if let Some(Err(e)) = runs.iter().find(|r| r.is_err()) {
                return Err(e.clone());
            }
            let ok: Vec<Sample> = runs.iter().filter_map(|r| r.clone().ok()).collect();
            if ok.is_empty() {
                return Err("no run".to_owned());
            }
            Ok(match ok[0] {
                Sample::Elapsed(_) => median_by(ok, |s| match s {
                    Sample::Elapsed(d) => d.as_secs_f64(),
                    _ => f64::NAN,
                }),
                Sample::BytesPerActor(_) => median_by(ok, |s| match s {
                    Sample::BytesPerActor(b) => *b,
                    _ => f64::NAN,
                }),
                Sample::Latency(_) | Sample::Timers(_) => {
                    // Each figure's median on its own.
                    let all: Vec<[f64; 4]> = ok
                        .iter()
                        .filter_map(|s| match s {
                            Sample::Latency([a, b, c]) => Some([*a, *b, *c, 0.0]),
                            Sample::Timers(l) => Some(*l),
                            _ => None,
                        })
                        .collect();
                    let pick = |i: usize| median_by(all.iter().map(|l| l[i]).collect(), |x| *x);
                    match ok[0] {
                        Sample::Timers(_) => Sample::Timers([pick(0), pick(1), pick(2), pick(3)]),
                        _ => Sample::Latency([pick(0), pick(1), pick(2)]),
                    }
                }
            })
        })
        .collect()
}

fn rows_for(w: Workload, p: &Params, med: &[Result<Sample, String>]) -> Vec<Row> {
    let elapsed = |f: &dyn Fn(f64) -> f64| -> Vec<Result<f64, String>> {
        med.iter()
            .map(|m| match m {
                Ok(Sample::Elapsed(d)) => Ok(f(d.as_secs_f64())),
                Ok(_) => Err("wrong sample".to_owned()),
                Err(e) => Err(e.clone()),
            })
            .collect()
    };
    let time = ("faster", "slower");
    let row = |workload: String, metric, better, words, values| Row {
        workload,
        metric,
        better,
        words,
        values,
    };
    match w {
        Workload::PingPong => {
            let n = p.rounds as f64;
            vec![
                row(
                    format!("ping-pong ({} round trips)", p.rounds),
                    "ns / round trip",
                    Better::Lower,
                    time,
                    elapsed(&|s| s * 1e9 / n),
                ),
                row(
                    String::new(),
                    "M msgs/s",
                    Better::Higher,
                    time,
                    elapsed(&|s| 2.0 * n / s / 1e6),
                ),
            ]
        }
        Workload::FanIn => {
            let n = (PRODUCERS * p.fan_per) as f64;
            vec![row(
                format!("fan-in ({PRODUCERS} threads x {})", p.fan_per),
                "M msgs/s",
                Better::Higher,
                time,
                elapsed(&|s| n / s / 1e6),
            )]
        }
        Workload::Spawn => {
            let n = p.spawn_n as f64;
            vec![
                row(
                    format!("spawn ({} actors, 1 msg each)", p.spawn_n),
                    "ms total",
                    Better::Lower,
                    time,
                    elapsed(&|s| s * 1e3),
                ),
                row(
                    String::new(),
                    "M actors/s",
                    Better::Higher,
                    time,
                    elapsed(&|s| n / s / 1e6),
                ),
            ]
        }
        Workload::Rss => vec![row(
            format!("idle-actor RSS ({} actors)", p.rss_n),
            "bytes / actor",
            Better::Lower,
            ("smaller", "larger"),
            med.iter()
                .map(|m| match m {
                    Ok(Sample::BytesPerActor(b)) => Ok(*b),
                    Ok(_) => Err("wrong sample".to_owned()),
                    Err(e) => Err(e.clone()),
                })
                .collect(),
        )],
        Workload::Ring => {
            let n = p.hops as f64;
            vec![row(
                format!("thread ring ({RING_ACTORS} actors, {} hops)", p.hops),
                "ns / hop",
                Better::Lower,
                time,
                elapsed(&|s| s * 1e9 / n),
            )]
        }
        Workload::Ask => {
            let pct = |i: usize| -> Vec<Result<f64, String>> {
                med.iter()
                    .map(|m| match m {
                        Ok(Sample::Latency(l)) => Ok(l[i]),
                        Ok(_) => Err("wrong sample".to_owned()),
                        Err(e) => Err(e.clone()),
                    })
                    .collect()
            };
            vec![
                row(
                    format!("ask under load ({} asks)", p.asks),
                    "p50 µs",
                    Better::Lower,
                    time,
                    pct(0),
                ),
                row(String::new(), "p99 µs", Better::Lower, time, pct(1)),
                row(String::new(), "p99.9 µs", Better::Lower, time, pct(2)),
            ]
        }
        Workload::Router => {
            let n = p.router_n as f64;
            vec![
                row(
                    format!("router pool ({ROUTEES} routees, {} msgs)", p.router_n),
                    "M msgs/s",
                    Better::Higher,
                    time,
                    elapsed(&|s| n / s / 1e6),
                ),
                row(
                    String::new(),
                    "ns / msg",
                    Better::Lower,
                    time,
                    elapsed(&|s| s * 1e9 / n),
                ),
            ]
        }
        Workload::Timers => {
            let part = |i: usize| -> Vec<Result<f64, String>> {
                med.iter()
                    .map(|m| match m {
                        Ok(Sample::Timers(l)) => Ok(l[i]),
                        Ok(_) => Err("wrong sample".to_owned()),
                        Err(e) => Err(e.clone()),
                    })
                    .collect()
            };
            vec![
                row(
                    format!(
                        "actor timers ({} actors x {} ticks, {} ms)",
                        p.timer_actors,
                        p.timer_ticks,
                        TIMER_INTERVAL.as_millis()
                    ),
                    "tick lateness p50 µs",
                    Better::Lower,
                    time,
                    part(0),
                ),
                row(
                    String::new(),
                    "tick lateness p99 µs",
                    Better::Lower,
                    time,
                    part(1),
                ),
                row(
                    String::new(),
                    "CPU µs / tick",
                    Better::Lower,
                    ("cheaper", "dearer"),
                    part(2),
                ),
                row(
                    String::new(),
                    "ms to the last tick",
                    Better::Lower,
                    time,
                    part(3),
                ),
            ]
        }
        Workload::Stop => vec![row(
            format!("stop ({} idle actors)", p.stop_n),
            "ms to all stop hooks",
            Better::Lower,
            time,
            elapsed(&|s| s * 1e3),
        )],
        Workload::HandlerSync | Workload::AsyncReady | Workload::AsyncYield => {
            let n = p.handler_n as f64;
            let what = match w {
                Workload::HandlerSync => "handler: proscenium sync receive",
                Workload::AsyncReady => "async handler, no await",
                _ => "async handler, one pending await",
            };
            vec![row(
                format!("{what} ({} msgs)", p.handler_n),
                "ns / msg",
                Better::Lower,
                time,
                elapsed(&|s| s * 1e9 / n),
            )]
        }
    }
}

fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn verdict(row: &Row, contenders: &[Contender]) -> String {
    let Some(pi) = contenders.iter().position(|c| *c == Contender::Proscenium) else {
        return "-".to_owned();
    };
    let Ok(ours) = row.values[pi] else {
        return "-".to_owned();
    };
    let best = contenders
        .iter()
        .zip(&row.values)
        .filter(|(c, _)| **c != Contender::Proscenium)
        .filter_map(|(c, v)| v.as_ref().ok().map(|v| (*c, *v)))
        .reduce(|a, b| {
            let b_better = match row.better {
                Better::Lower => b.1 < a.1,
                Better::Higher => b.1 > a.1,
            };
            if b_better {
                b
            } else {
                a
            }
        });
    let Some((peer, theirs)) = best else {
        return "-".to_owned();
    };
    if ours <= 0.0 || theirs <= 0.0 {
        return format!("n/a (vs {})", peer.name());
    }
    let ours_better = match row.better {
        Better::Lower => ours <= theirs,
        Better::Higher => ours >= theirs,
    };
    let ratio = if ours > theirs {
        ours / theirs
    } else {
        theirs / ours
    };
    let word = if ours_better {
        row.words.0
    } else {
        row.words.1
    };
    format!("{ratio:.2}x {word} (vs {})", peer.name())
}

fn machine() -> (usize, String) {
    let cores = thread::available_parallelism().map_or(0, |n| n.get());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    (cores, cpu)
}

fn main() {
    if let Ok(name) = env::var(RSS_CHILD_ENV) {
        child_main(&name);
        return;
    }
    let p = Params::from_env();
    let workloads: Vec<Workload> = match env_list("COMPARE_ONLY") {
        Some(names) => {
            for n in &names {
                assert!(
                    WORKLOADS.iter().any(|w| w.name() == n),
                    "COMPARE_ONLY: unknown workload {n:?}"
                );
            }
            WORKLOADS
                .into_iter()
                .filter(|w| names.iter().any(|n| n == w.name()))
                .collect()
        }
        None => WORKLOADS.to_vec(),
    };
    let contenders: Vec<Contender> = match env_list("COMPARE_PEERS") {
        Some(names) => {
            for n in &names {
                assert!(
                    Contender::from_name(n).is_some(),
                    "COMPARE_PEERS: unknown contender {n:?}"
                );
            }
            CONTENDERS
                .into_iter()
                .filter(|c| names.iter().any(|n| n == c.name()))
                .collect()
        }
        None => CONTENDERS.to_vec(),
    };

    let started = Instant::now();
    let mut rows = Vec::new();
    for &w in &workloads {
        let mut samples: Vec<Vec<RunResult>> = vec![Vec::new(); contenders.len()];
        for rep in 0..p.reps {
            for (ci, &c) in contenders.iter().enumerate() {
                let t = Instant::now();
                let r = run(w, c, &p);
                eprintln!(
                    "[{:>7.1}s] {} rep {}/{} {}: {:?} (run took {:.2?})",
                    started.elapsed().as_secs_f64(),
                    w.name(),
                    rep + 1,
                    p.reps,
                    c.name(),
                    r,
                    t.elapsed()
                );
                samples[ci].push(r);
            }
        }
        rows.extend(rows_for(w, &p, &medians(&samples)));
    }

    let (cores, cpu) = machine();
    println!("## proscenium vs actix, ractor, kameo (`benches/benches/compare.rs`)");
    println!();
    println!("`actix`: {} arbiters (threads), actors placed round-robin; `actix-1arb`: every actor on the System's arbiter (one thread). Both are actix; \"best peer\" takes the better of the two.", workers());
    println!();
    println!(
        "Machine: {cores} cores (available_parallelism), CPU `{cpu}`. COMPARE_SCALE={}, COMPARE_REPS={} (median). Total {:.0} s.",
        p.scale,
        p.reps,
        started.elapsed().as_secs_f64()
    );
    println!();
    let mut header = String::from("| workload | metric |");
    let mut rule = String::from("|---|---|");
    for c in &contenders {
        header.push_str(&format!(" {} |", c.name()));
        rule.push_str("---:|");
    }
    header.push_str(" proscenium vs best peer |");
    rule.push_str("---|");
    println!("{header}");
    println!("{rule}");
    let mut notes = Vec::new();
    for row in &rows {
        let mut line = format!("| {} | {} |", row.workload, row.metric);
        for (c, v) in contenders.iter().zip(&row.values) {
            match v {
                Ok(v) => line.push_str(&format!(" {} |", fmt_value(*v))),
                Err(e) if e.starts_with(NO_FEATURE) => {
                    line.push_str(&format!(" {NO_FEATURE} |"));
                    let note = format!("{}: {e}", c.name());
                    if !notes.contains(&note) {
                        notes.push(note);
                    }
                }
                Err(e) => {
                    line.push_str(" n/a |");
                    let note = format!("{} / {}: {e}", c.name(), row.metric);
                    if !notes.contains(&note) {
                        notes.push(note);
                    }
                }
            }
        }
        line.push_str(&format!(" {} |", verdict(row, &contenders)));
        println!("{line}");
    }
    if !notes.is_empty() {
        println!();
        for n in notes {
            println!("- n/a: {n}");
        }
    }
}
