//! Multi-threaded stress tests of the mailbox protocol, without loom: the
//! same properties as the loom models (`loom-tests/tests/mailbox.rs`), at a
//! scale of millions of messages, with a real pool of worker threads.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;

use proscenium_mailbox::{Dequeued, Enqueued, Mailbox, Release, TrySendError};

/// Messages sent by each producer in the big runs.
fn per_producer() -> usize {
    if cfg!(miri) {
        50
    } else {
        500_000
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sys {
    /// Sent by `producer` just before its user message `seq`.
    Before {
        producer: usize,
        seq: usize,
    },
    Close,
}

type Msg = (usize, usize);

/// An owner of a mailbox, run by a pool of workers that pass run tokens.
struct Owner {
    mailbox: Mailbox<Sys, Msg>,
    running: AtomicBool,
    /// Per producer: the next user sequence number expected, and the latest
    /// system message seen. Touched only inside runs (the mutex never
    /// blocks; it is there to make a broken exclusivity visible, not to
    /// provide it).
    progress: Mutex<Vec<(usize, Option<usize>)>>,
    /// One slot per message id: how many fates it met (must end at 1).
    fates: Vec<AtomicU8>,
    handled: AtomicUsize,
    dead_letters: AtomicUsize,
    close_after: Option<usize>,
}

const BUDGET: usize = 32;

impl Owner {
    fn new(producers: usize, close_after: Option<usize>) -> Arc<Owner> {
        let ids = producers * per_producer();
        Arc::new(Owner {
            mailbox: Mailbox::new(),
            running: AtomicBool::new(false),
            progress: Mutex::new(vec![(0, None); producers]),
            fates: (0..ids).map(|_| AtomicU8::new(0)).collect(),
            handled: AtomicUsize::new(0),
            dead_letters: AtomicUsize::new(0),
            close_after,
        })
    }

    fn fate(&self, (producer, seq): Msg) {
        let id = producer * per_producer() + seq;
        let before = self.fates[id].fetch_add(1, Ordering::Relaxed);
        assert_eq!(before, 0, "message {producer}/{seq} met a second fate");
    }

    /// One run of at most BUDGET messages. Returns whether it must be
    /// submitted again.
    fn run(&self) -> bool {
        assert!(
            !self.running.swap(true, Ordering::Acquire),
            "overlapping runs"
        );
        let mut progress = self.progress.lock().expect("no poisoned runs");
        let mut budget = BUDGET;
        let mut yielded = false;
        loop {
            if budget == 0 {
                yielded = true;
                break;
            }
            // SAFETY: this worker holds the run: it received the token that
            // the winner of MustSchedule or Reschedule sent.
            match unsafe { self.mailbox.dequeue() } {
                Dequeued::System(Sys::Before { producer, seq }) => {
                    progress[producer].1 = Some(seq);
                }
                Dequeued::System(Sys::Close) => {
                    // SAFETY: as above.
                    unsafe { self.mailbox.close() };
                }
                Dequeued::User(msg) if self.mailbox.is_closed() => {
                    self.fate(msg);
                    self.dead_letters.fetch_add(1, Ordering::Relaxed);
                }
                Dequeued::User(msg @ (producer, seq)) => {
                    let (next, sys) = &mut progress[producer];
                    assert_eq!(seq, *next, "producer {producer}: user lane out of order");
                    *next += 1;
                    // The system lane may run far ahead of the user lane,
                    // but never behind it.
                    assert!(
                        sys.is_some_and(|latest| latest >= seq - seq % 1000),
                        "user message {seq} handled before the system message sent before it \
                         (latest system message seen: {sys:?})"
                    );
                    self.fate(msg);
                    let n = self.handled.fetch_add(1, Ordering::Relaxed) + 1;
                    if Some(n) == self.close_after {
                        // SAFETY: as above.
                        unsafe { self.mailbox.close() };
                    }
                }
                Dequeued::Empty => break,
                Dequeued::Retry => {
                    yielded = true;
                    break;
                }
            }
            budget -= 1;
        }
        drop(progress);
        self.running.store(false, Ordering::Release);
        // Keep the run and go to the back of the queue after a spent budget
        // or a half-done push; otherwise give the run up.
        // SAFETY: as above.
        yielded || unsafe { self.mailbox.release() } == Release::Reschedule
    }
}

/// A pool of `workers` threads sharing one run-token channel.
fn pool(owner: &Arc<Owner>, workers: usize) -> (Sender<Option<()>>, Vec<thread::JoinHandle<()>>) {
    let (tx, rx) = channel::<Option<()>>();
    let rx = Arc::new(Mutex::new(rx));
    let handles = (0..workers)
        .map(|_| {
            let (owner, rx, tx) = (owner.clone(), rx.clone(), tx.clone());
            thread::spawn(move || worker(&owner, &rx, &tx))
        })
        .collect();
    (tx, handles)
}

fn worker(owner: &Owner, rx: &Mutex<Receiver<Option<()>>>, tx: &Sender<Option<()>>) {
    loop {
        let token = rx.lock().expect("no poisoned workers").recv();
        match token {
            Ok(Some(())) => {
                if owner.run() {
                    tx.send(Some(())).expect("pool alive");
                }
            }
            Ok(None) | Err(_) => return,
        }
    }
}

fn submit_if_won(e: Enqueued, tx: &Sender<Option<()>>) {
    if e == Enqueued::MustSchedule {
        tx.send(Some(())).expect("pool alive");
    }
}

fn produce(owner: &Arc<Owner>, tx: &Sender<Option<()>>, producers: usize) -> usize {
    let rejected = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..producers)
        .map(|p| {
            let (owner, tx, rejected) = (owner.clone(), tx.clone(), rejected.clone());
            thread::spawn(move || {
                for seq in 0..per_producer() {
                    if seq % 1000 == 0 {
                        // A closed mailbox refuses it; that is all right here:
                        // the ordering check only concerns handled messages.
                        let sys = Sys::Before { producer: p, seq };
                        if let Ok(e) = owner.mailbox.enqueue_system(sys) {
                            submit_if_won(e, &tx);
                        }
                    }
                    match owner.mailbox.enqueue_user((p, seq)) {
                        Ok(e) => submit_if_won(e, &tx),
                        Err(TrySendError::Closed(m)) => {
                            owner.fate(m);
                            rejected.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(TrySendError::Full(_)) => unreachable!("unbounded"),
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("producer panicked");
    }
    rejected.load(Ordering::Relaxed)
}

/// Waits until every message met its fate, then stops the pool.
fn finish(owner: &Arc<Owner>, tx: Sender<Option<()>>, workers: Vec<thread::JoinHandle<()>>) {
    // The mailbox is quiescent once every id has a fate and nobody holds the
    // run; the pool keeps running until then. Waiting here is on an event
    // (all fates recorded), checked as the workers make progress.
    while owner.fates.iter().any(|f| f.load(Ordering::Relaxed) == 0)
        || owner.mailbox.snapshot().is_scheduled()
    {
        // A worker that died (an assertion inside a run) would leave fates
        // unrecorded forever: fail instead of waiting.
        if workers.iter().any(|w| w.is_finished()) {
            let panic = workers
                .into_iter()
                .filter(|w| w.is_finished())
                .find_map(|w| w.join().err());
            panic!("a worker stopped early: {panic:?}");
        }
        thread::yield_now();
    }
    for _ in &workers {
        tx.send(None).expect("pool alive");
    }
    for w in workers {
        w.join().expect("worker panicked");
    }
    assert!(owner.fates.iter().all(|f| f.load(Ordering::Relaxed) == 1));
}

/// Invariants 1, 2, 3 and 4 at scale: four producers, two workers, one
/// mailbox: every message handled exactly once, per-producer FIFO, system
/// messages ahead of later user messages, runs never overlap.
#[test]
fn millions_of_messages_exactly_once_in_order() {
    let producers = 4;
    let owner = Owner::new(producers, None);
    let (tx, workers) = pool(&owner, 2);
    let rejected = produce(&owner, &tx, producers);
    finish(&owner, tx, workers);
    assert_eq!(rejected, 0);
    assert_eq!(
        owner.handled.load(Ordering::Relaxed),
        producers * per_producer()
    );
}

/// Close racing with senders at scale: each message is handled, passed to
/// dead letters by the run holder, or handed back to its sender; exactly one
/// of the three, exactly once.
#[test]
fn close_racing_with_senders_at_scale() {
    let producers = 3;
    let close_after = producers * per_producer() / 3;
    let owner = Owner::new(producers, Some(close_after));
    let (tx, workers) = pool(&owner, 2);
    let rejected = produce(&owner, &tx, producers);
    finish(&owner, tx, workers);
    let handled = owner.handled.load(Ordering::Relaxed);
    let dead = owner.dead_letters.load(Ordering::Relaxed);
    assert_eq!(handled, close_after);
    assert_eq!(handled + dead + rejected, producers * per_producer());
    assert!(owner.mailbox.is_closed());
}

/// A system-lane Close sent while producers flood the user lane.
#[test]
fn system_close_during_a_flood() {
    let producers = 2;
    let owner = Owner::new(producers, None);
    let (tx, workers) = pool(&owner, 2);
    let closer = {
        let (owner, tx) = (owner.clone(), tx.clone());
        thread::spawn(move || {
            while owner.handled.load(Ordering::Relaxed) < per_producer() / 2 {
                thread::yield_now();
            }
            submit_if_won(owner.mailbox.enqueue_system(Sys::Close).expect("open"), &tx);
        })
    };
    let rejected = produce(&owner, &tx, producers);
    closer.join().expect("closer panicked");
    finish(&owner, tx, workers);
    let handled = owner.handled.load(Ordering::Relaxed);
    let dead = owner.dead_letters.load(Ordering::Relaxed);
    assert!(handled >= per_producer() / 2);
    assert_eq!(handled + dead + rejected, producers * per_producer());
}
