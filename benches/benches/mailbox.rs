//! The mailbox against crossbeam-channel's unbounded channel and
//! `std::sync::mpsc`, measured in the same run.
//!
//! - `mailbox/push_pop/1thread`: one thread enqueues a batch, then drains it.
//! - `mailbox/mpsc/{1,2}_producers`: producer threads flood one consumer,
//!   which spins (with crossbeam's `Backoff`) when it finds nothing; the
//!   same consumer loop for every implementation.
//!
//! `proscenium-mailbox` is the full mailbox (user lane, run-state flip,
//! dequeue with the system-lane check) laid out as in an actor's cell: 64
//! bytes of the owner's words (the cell's core) between the senders' words
//! and the run holder's (`Mailbox::with_middle`); `proscenium-mailbox-bare`
//! the same mailbox with nothing between them (flood only: it shows what
//! the layout is worth); `proscenium-queue` the bare Vyukov queue under it;
//! `box-alloc-free` what allocating and freeing one node costs by itself
//! (the question of a node pool).
//!
//! Run: `cargo bench -p proscenium-benches --bench mailbox`
//! (add `-- --quick` for a fast look).
#![allow(missing_docs)] // criterion's macros generate undocumented items

use std::hint::black_box;
use std::sync::{mpsc as std_mpsc, Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crossbeam_utils::Backoff;
use proscenium_mailbox::{Dequeued, Mailbox, MpscQueue, Pop, Release};

const BATCH: u64 = 1_000;
const FLOOD: u64 = 200_000;

/// The operations every contender offers to the benchmark loops.
trait Channel: Send + Sync + 'static {
    const NAME: &'static str;
    fn new() -> Self;
    fn send(&self, v: u64);
    /// The single consumer's take; `None` when nothing is ready.
    fn recv(&self) -> Option<u64>;
}

/// What the mailbox holds between its halves, and the contender's name.
trait Middle: Default + Send + Sync + 'static {
    const NAME: &'static str;
}

/// The size of an actor cell's core, which the engine stores there.
type CoreSized = [u64; 8];

impl Middle for CoreSized {
    const NAME: &'static str = "proscenium-mailbox";
}

impl Middle for () {
    const NAME: &'static str = "proscenium-mailbox-bare";
}

struct MailboxChannel<X: Middle>(Mailbox<(), u64, X>);

impl<X: Middle> Channel for MailboxChannel<X> {
    const NAME: &'static str = X::NAME;
    fn new() -> Self {
        let mb = Mailbox::with_middle(None, X::default()).expect("unbounded");
        // The benchmark's consumer holds the run for the whole measurement,
        // as a worker running a flooded actor does; senders therefore all see
        // AlreadyScheduled after this first claim.
        let _ = mb.enqueue_system(());
        // SAFETY: the enqueue above won the run for the consumer.
        let _ = unsafe { mb.dequeue() };
        MailboxChannel(mb)
    }
    fn send(&self, v: u64) {
        let _ = self.0.enqueue_user(v).expect("open, unbounded");
    }
    fn recv(&self) -> Option<u64> {
        // SAFETY: only the benchmark's consumer thread calls recv, and it
        // holds the run (see `new`).
        match unsafe { self.0.dequeue() } {
            Dequeued::User(v) => Some(v),
            Dequeued::System(()) | Dequeued::Empty | Dequeued::Retry => None,
        }
    }
}

struct QueueChannel(MpscQueue<u64>);

impl Channel for QueueChannel {
    const NAME: &'static str = "proscenium-queue";
    fn new() -> Self {
        QueueChannel(MpscQueue::new())
    }
    fn send(&self, v: u64) {
        self.0.push(v);
    }
    fn recv(&self) -> Option<u64> {
        // SAFETY: only the benchmark's consumer thread calls recv.
        match unsafe { self.0.pop() } {
            Pop::Data(v) => Some(v),
            Pop::Empty | Pop::Inconsistent => None,
        }
    }
}

struct Crossbeam(
    crossbeam_channel::Sender<u64>,
    crossbeam_channel::Receiver<u64>,
);

impl Channel for Crossbeam {
    const NAME: &'static str = "crossbeam-channel";
    fn new() -> Self {
        let (tx, rx) = crossbeam_channel::unbounded();
        Crossbeam(tx, rx)
    }
    fn send(&self, v: u64) {
        self.0.send(v).expect("receiver alive");
    }
    fn recv(&self) -> Option<u64> {
        self.1.try_recv().ok()
    }
}

struct StdMpsc(
    std_mpsc::Sender<u64>,
    std::sync::Mutex<std_mpsc::Receiver<u64>>,
);

impl Channel for StdMpsc {
    const NAME: &'static str = "std-mpsc";
    fn new() -> Self {
        let (tx, rx) = std_mpsc::channel();
        // std's Receiver is !Sync; the mutex is only ever taken by the one
        // consumer, uncontended (a few ns, the same in every iteration).
        StdMpsc(tx, std::sync::Mutex::new(rx))
    }
    fn send(&self, v: u64) {
        self.0.send(v).expect("receiver alive");
    }
    fn recv(&self) -> Option<u64> {
        self.1.lock().expect("not poisoned").try_recv().ok()
    }
}

fn push_pop_one_thread<C: Channel>(c: &mut Criterion) {
    let mut group = c.benchmark_group("mailbox/push_pop");
    group.throughput(Throughput::Elements(BATCH));
    let ch = C::new();
    group.bench_function(BenchmarkId::new(C::NAME, "1thread"), |b| {
        b.iter(|| {
            for i in 0..BATCH {
                ch.send(black_box(i));
            }
            for _ in 0..BATCH {
                black_box(ch.recv().expect("sent above"));
            }
        })
    });
    group.finish();
}

fn flood<C: Channel>(c: &mut Criterion, producers: u64) {
    let mut group = c.benchmark_group("mailbox/mpsc");
    group.throughput(Throughput::Elements(FLOOD));
    group.bench_function(
        BenchmarkId::new(C::NAME, format!("{producers}_producers")),
        |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += flood_once::<C>(producers);
                }
                total
            })
        },
    );
    group.finish();
}

fn flood_once<C: Channel>(producers: u64) -> Duration {
    let ch = Arc::new(C::new());
    let start = Arc::new(Barrier::new(producers as usize + 1));
    let per = FLOOD / producers;
    let handles: Vec<_> = (0..producers)
        .map(|_| {
            let (ch, start) = (ch.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                for i in 0..per {
                    ch.send(i);
                }
            })
        })
        .collect();
    start.wait();
    let t = Instant::now();
    let backoff = Backoff::new();
    let mut got = 0;
    while got < per * producers {
        match ch.recv() {
            Some(v) => {
                black_box(v);
                got += 1;
                backoff.reset();
            }
            None => backoff.snooze(),
        }
    }
    let elapsed = t.elapsed();
    for h in handles {
        h.join().expect("producer panicked");
    }
    elapsed
}

fn node_alloc(c: &mut Criterion) {
    let mut group = c.benchmark_group("mailbox/push_pop");
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function(BenchmarkId::new("box-alloc-free", "1thread"), |b| {
        let mut keep = Vec::with_capacity(BATCH as usize);
        b.iter(|| {
            // Node<u64> is 16 bytes: a next pointer and the value.
            for i in 0..BATCH {
                keep.push(Box::new([black_box(i), 0u64]));
            }
            keep.clear();
        })
    });
    group.finish();
}

fn release_cycle(c: &mut Criterion) {
    // One message through the whole protocol: enqueue wins the run, dequeue,
    // dequeue finds Empty, release goes Idle. What a lone tell costs an idle
    // actor, scheduler aside.
    let mut group = c.benchmark_group("mailbox/protocol");
    group.throughput(Throughput::Elements(1));
    let mb: Mailbox<(), u64> = Mailbox::new();
    group.bench_function("tell_idle_run_release", |b| {
        b.iter(|| {
            let won = mb.enqueue_user(black_box(1)).expect("open");
            debug_assert_eq!(won, proscenium_mailbox::Enqueued::MustSchedule);
            // SAFETY: the enqueue won the run.
            unsafe {
                assert_eq!(black_box(mb.dequeue()), Dequeued::User(1));
                assert_eq!(mb.dequeue(), Dequeued::Empty);
                assert_eq!(mb.release(), Release::Idle);
            }
        })
    });
    group.finish();
}

fn all(c: &mut Criterion) {
    push_pop_one_thread::<MailboxChannel<CoreSized>>(c);
    push_pop_one_thread::<QueueChannel>(c);
    push_pop_one_thread::<Crossbeam>(c);
    push_pop_one_thread::<StdMpsc>(c);
    node_alloc(c);
    release_cycle(c);
    for producers in [1, 2] {
        flood::<MailboxChannel<CoreSized>>(c, producers);
        flood::<MailboxChannel<()>>(c, producers);
        flood::<QueueChannel>(c, producers);
        flood::<Crossbeam>(c, producers);
        flood::<StdMpsc>(c, producers);
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = all
}
criterion_main!(benches);
