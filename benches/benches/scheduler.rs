//! Scheduler benchmarks, each with tokio's multi-thread runtime (same worker
//! count) measured in the same run:
//!
//! * `spawn_many`: a root task spawns N trivial tasks and the run ends when
//!   the last one has completed (ours twice: `spawn` dropping the
//!   `JoinHandle`, as the tokio side does, and `spawn_detached`);
//! * `ping_pong`: two tasks waking each other M times;
//! * `fan_out_fan_in`: a coordinator wakes 64 tasks, each wakes it back,
//!   R rounds;
//!
//! plus, on the scheduler only:
//!
//! * `timers_message_path`: two actor-like runnables exchanging messages,
//!   without timers, with 100 000 live timers, and without again (A-B-A);
//! * `throughput`: a ring of actor-like runnables with deep inboxes, for
//!   several budgets (how `DEFAULT_THROUGHPUT` was chosen).
//!
//! Both runtimes wake tasks with the same primitive (`tokio::sync::Notify`,
//! which is runtime-agnostic), so the difference is the scheduler.
//!
//! Sizes: the sizes by default; `SCHED_BENCH_DIV=10` divides every
//! size by 10 (for slow machines). Worker count: `SCHED_BENCH_WORKERS`,
//! default all cores.
#![allow(missing_docs, clippy::unwrap_used)] // a bench binary

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode};
use proscenium_scheduler::{Budget, Handle, RunOutcome, Runnable, Scheduler, TimerHandle};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

fn div() -> u64 {
    std::env::var("SCHED_BENCH_DIV")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

fn workers() -> usize {
    std::env::var("SCHED_BENCH_WORKERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// The two runtimes under test, behind one interface.
trait Rt {
    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, f: F);
    /// Spawns from inside a task.
    fn spawn_here<F: Future<Output = ()> + Send + 'static>(f: F);
}

struct Ours(Scheduler);
/// The same scheduler, spawning with `spawn_detached` (no join state).
struct OursDetached<'a>(&'a Scheduler);
struct Tokio(tokio::runtime::Runtime);

impl Rt for OursDetached<'_> {
    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, f: F) {
        self.0.handle().spawn_detached(f);
    }
    fn spawn_here<F: Future<Output = ()> + Send + 'static>(f: F) {
        Handle::current().expect("on a worker").spawn_detached(f);
    }
}

impl Rt for Ours {
    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, f: F) {
        drop(self.0.handle().spawn(f));
    }
    fn spawn_here<F: Future<Output = ()> + Send + 'static>(f: F) {
        drop(Handle::current().expect("on a worker").spawn(f));
    }
}

impl Rt for Tokio {
    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, f: F) {
        drop(self.0.spawn(f));
    }
    fn spawn_here<F: Future<Output = ()> + Send + 'static>(f: F) {
        drop(tokio::spawn(f));
    }
}

fn ours() -> Ours {
    Ours(
        Scheduler::builder()
            .workers(workers())
            .build()
            .expect("valid configuration"),
    )
}

fn tokio_rt() -> Tokio {
    Tokio(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers())
            .build()
            .expect("tokio runtime"),
    )
}

/// N trivial tasks spawned by a root task; returns when all completed.
fn spawn_many<R: Rt>(rt: &R, n: u64) {
    let (tx, rx) = mpsc::sync_channel(1);
    let left = Arc::new(AtomicU64::new(n));
    rt.spawn(async move {
        for _ in 0..n {
            let left = left.clone();
            let tx = tx.clone();
            R::spawn_here(async move {
                if left.fetch_sub(1, Ordering::AcqRel) == 1 {
                    tx.send(()).unwrap();
                }
            });
        }
    });
    rx.recv().unwrap();
}

/// Two tasks waking each other `m` times in all.
fn ping_pong<R: Rt>(rt: &R, m: u64) {
    let (tx, rx) = mpsc::sync_channel(1);
    let ping = Arc::new(Notify::new());
    let pong = Arc::new(Notify::new());
    let (ping2, pong2) = (ping.clone(), pong.clone());
    rt.spawn(async move {
        for _ in 0..m / 2 {
            ping2.notified().await;
            pong2.notify_one();
        }
    });
    rt.spawn(async move {
        for _ in 0..m / 2 {
            ping.notify_one();
            pong.notified().await;
        }
        tx.send(()).unwrap();
    });
    rx.recv().unwrap();
}

/// A coordinator wakes `fan` tasks, each wakes it back; `rounds` rounds.
fn fan_out_fan_in<R: Rt>(rt: &R, fan: usize, rounds: u64) {
    let (tx, rx) = mpsc::sync_channel(1);
    let leaves: Vec<Arc<Notify>> = (0..fan).map(|_| Arc::new(Notify::new())).collect();
    let back = Arc::new(Notify::new());
    let remaining = Arc::new(AtomicUsize::new(0));
    for leaf in &leaves {
        let (leaf, back, remaining) = (leaf.clone(), back.clone(), remaining.clone());
        rt.spawn(async move {
            for _ in 0..rounds {
                leaf.notified().await;
                if remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
                    back.notify_one();
                }
            }
        });
    }
    rt.spawn(async move {
        for _ in 0..rounds {
            remaining.store(fan, Ordering::Release);
            for leaf in &leaves {
                leaf.notify_one();
            }
            back.notified().await;
        }
        tx.send(()).unwrap();
    });
    rx.recv().unwrap();
}

fn bench_peers(c: &mut Criterion) {
    let d = div();
    let spawn_n = 1_000_000 / d;
    let ping_m = 1_000_000 / d;
    let fan_rounds = 100_000 / d;
    let ours = ours();
    let tokio = tokio_rt();
    let mut g = c.benchmark_group("scheduler/spawn_many");
    g.sampling_mode(SamplingMode::Flat);
    g.bench_function(BenchmarkId::new("proscenium", spawn_n), |b| {
        b.iter(|| spawn_many(&ours, spawn_n))
    });
    g.bench_function(BenchmarkId::new("proscenium_detached", spawn_n), |b| {
        b.iter(|| spawn_many(&OursDetached(&ours.0), spawn_n))
    });
    g.bench_function(BenchmarkId::new("tokio", spawn_n), |b| {
        b.iter(|| spawn_many(&tokio, spawn_n))
    });
    g.finish();
    let mut g = c.benchmark_group("scheduler/ping_pong");
    g.sampling_mode(SamplingMode::Flat);
    g.bench_function(BenchmarkId::new("proscenium", ping_m), |b| {
        b.iter(|| ping_pong(&ours, ping_m))
    });
    g.bench_function(BenchmarkId::new("tokio", ping_m), |b| {
        b.iter(|| ping_pong(&tokio, ping_m))
    });
    g.finish();
    let mut g = c.benchmark_group("scheduler/fan_out_fan_in");
    g.sampling_mode(SamplingMode::Flat);
    g.bench_function(BenchmarkId::new("proscenium", fan_rounds), |b| {
        b.iter(|| fan_out_fan_in(&ours, 64, fan_rounds))
    });
    g.bench_function(BenchmarkId::new("tokio", fan_rounds), |b| {
        b.iter(|| fan_out_fan_in(&tokio, 64, fan_rounds))
    });
    g.finish();
}

/// An actor-like runnable: an inbox counter and a run-state flag; a send
/// bumps the inbox and submits the actor if it wins the idle-to-scheduled
/// flip (as the engine's cells do with the mailbox's run-state word).
struct Actor {
    inbox: AtomicU64,
    scheduled: AtomicBool,
    next: OnceLock<Arc<Actor>>,
    /// Messages handled by all actors of the workload together.
    handled: Arc<AtomicU64>,
    /// The workload ends when `handled` reaches it.
    total: u64,
    done: Arc<Mutex<Option<mpsc::SyncSender<()>>>>,
    handle: Handle,
}

impl Actor {
    fn send(self: &Arc<Self>, k: u64) {
        self.inbox.fetch_add(k, Ordering::Release);
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            self.handle.submit(self.clone()).expect("scheduler open");
        }
    }
}

impl Runnable for Actor {
    fn run(self: Arc<Self>, budget: &mut Budget) -> RunOutcome {
        let next = self.next.get().expect("wired before start");
        loop {
            while self.inbox.load(Ordering::Acquire) > 0 && budget.consume() {
                self.inbox.fetch_sub(1, Ordering::AcqRel);
                let n = self.handled.fetch_add(1, Ordering::Relaxed) + 1;
                if n == self.total {
                    if let Some(tx) = self.done.lock().unwrap().take() {
                        tx.send(()).unwrap();
                    }
                } else if n < self.total {
                    next.send(1);
                }
            }
            if self.inbox.load(Ordering::Acquire) > 0 {
                return RunOutcome::Yield; // budget used, work left
            }
            self.scheduled.store(false, Ordering::SeqCst);
            if self.inbox.load(Ordering::SeqCst) == 0 || self.scheduled.swap(true, Ordering::AcqRel)
            {
                return RunOutcome::Done;
            }
        }
    }
}

/// A ring of `actors` actors; `seed` messages injected into each; `total`
/// messages handled in all. Returns the time from the first send to the
/// last message.
fn ring(handle: &Handle, actors: usize, seed: u64, total: u64) -> Duration {
    let (tx, rx) = mpsc::sync_channel(1);
    let handled = Arc::new(AtomicU64::new(0));
    let done = Arc::new(Mutex::new(Some(tx)));
    let ring: Vec<Arc<Actor>> = (0..actors)
        .map(|_| {
            Arc::new(Actor {
                inbox: AtomicU64::new(0),
                scheduled: AtomicBool::new(false),
                next: OnceLock::new(),
                handled: handled.clone(),
                total,
                done: done.clone(),
                handle: handle.clone(),
            })
        })
        .collect();
    for (i, a) in ring.iter().enumerate() {
        let _ = a.next.set(ring[(i + 1) % actors].clone());
    }
    let start = Instant::now();
    for a in &ring {
        a.send(seed);
    }
    rx.recv().unwrap();
    let elapsed = start.elapsed();
    // Let the messages still in flight drain (each handled message past
    // `total` sends nothing), so the next iteration starts on idle workers.
    let in_flight = actors as u64 * seed - 1;
    while handled.load(Ordering::Acquire) < total + in_flight
        || handle.parked_workers() != handle.num_workers()
    {
        std::thread::yield_now();
    }
    // The ring's `next` links form a cycle: a few hundred bytes per actor
    // are leaked per iteration, on purpose (breaking it would put a lock or
    // a contended Weak upgrade on the measured path).
    elapsed
}

fn bench_timers(c: &mut Criterion) {
    let d = div();
    let total = 1_000_000 / d;
    let live = 100_000;
    let ours = ours();
    let handle = ours.0.handle().clone();
    let mut g = c.benchmark_group("scheduler/timers_message_path");
    g.sampling_mode(SamplingMode::Flat);
    g.bench_function(BenchmarkId::new("no_timers", total), |b| {
        b.iter_custom(|iters| (0..iters).map(|_| ring(&handle, 2, 1, total)).sum())
    });
    let timers: Vec<TimerHandle> = (0..live)
        .map(|i| handle.schedule(Duration::from_secs(3600 + i % 600), || {}))
        .collect();
    g.bench_function(BenchmarkId::new("100k_live_timers", total), |b| {
        b.iter_custom(|iters| {
            assert!(handle.timers_pending() >= live as usize);
            (0..iters).map(|_| ring(&handle, 2, 1, total)).sum()
        })
    });
    for t in &timers {
        t.cancel();
    }
    // A-B-A: the same workload again without live timers, to tell a real
    // difference from drift of a shared machine.
    g.bench_function(BenchmarkId::new("no_timers_again", total), |b| {
        b.iter_custom(|iters| (0..iters).map(|_| ring(&handle, 2, 1, total)).sum())
    });
    g.finish();
}

fn bench_throughput(c: &mut Criterion) {
    let d = div();
    let total = 2_000_000 / d;
    let mut g = c.benchmark_group("scheduler/throughput");
    g.sampling_mode(SamplingMode::Flat);
    for throughput in [1u32, 5, 16, 64, 256] {
        let s = Scheduler::builder()
            .workers(workers())
            .throughput(throughput)
            .build()
            .expect("valid configuration");
        let handle = s.handle().clone();
        g.bench_function(BenchmarkId::new("ring_256x100", throughput), |b| {
            b.iter_custom(|iters| (0..iters).map(|_| ring(&handle, 256, 100, total)).sum())
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench_peers, bench_timers, bench_throughput
}
criterion_main!(benches);
