//! loom models of the mailbox: the Vyukov queue and the run-state protocol.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release`.
//!
//! The models drive the real `proscenium-mailbox` code, whose atomics and
//! cells come from loom under `--cfg loom`. Runs are executed inline by the
//! thread that wins them (the simplest scheduler there is); an exclusivity
//! flag proves that two runs never overlap, and loom's own cell tracking
//! proves that each run sees the previous run's writes.
//!
//! Mutations checked to be caught (issue 17, each applied alone, then
//! reverted): removing `dekker_fence()` (the push/release pairing's fence,
//! kept under loom only: decision 0019) from `Mailbox::release`, or from
//! `Mailbox::claim_after_push`: `run_state_never_double_owned_and_never_strands_a_message`,
//! `close_racing_with_senders_accounts_for_every_message_once`,
//! `suspended_means_user_lane_paused` and
//! `system_message_overtakes_later_user_messages` fail.
//!
//! Issue 17, item 4 (`dequeue` reads the system lane's head only when the
//! user lane has nothing ready): `dequeue` handing out a ready user message
//! before it pops the system lane makes
//! `system_message_overtakes_later_user_messages` fail (seen; reverted).
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use proscenium_mailbox::{
    Dequeued, Enqueued, Mailbox, MpscQueue, Pop, Release, SendError, TrySendError,
};

/// What happened to a message, from the point of view of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fate {
    /// Handled by a run; the number is the order of handling across runs.
    Handled(usize, Msg),
    DeadLetter(Msg),
    Rejected(Msg),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Msg {
    User(usize, usize),
    Close,
    Suspend,
    Resume,
    Sys(usize),
}

struct Actor {
    mailbox: Mailbox<Msg, Msg>,
    running: AtomicBool,
    /// Order of handling. Runs are serialised by the run-state protocol, so
    /// the RMW order of this counter is the order messages were handled in.
    handled: AtomicUsize,
}

impl Actor {
    fn new() -> Arc<Actor> {
        Arc::new(Actor {
            mailbox: Mailbox::new(),
            running: AtomicBool::new(false),
            handled: AtomicUsize::new(0),
        })
    }

    fn tell(&self, msg: Msg, log: &mut Vec<Fate>) {
        match self.mailbox.enqueue_user(msg) {
            Ok(Enqueued::MustSchedule) => self.run(log),
            Ok(Enqueued::AlreadyScheduled) => {}
            Err(TrySendError::Closed(m)) => log.push(Fate::Rejected(m)),
            Err(TrySendError::Full(_)) => unreachable!("unbounded"),
        }
    }

    fn signal(&self, msg: Msg, log: &mut Vec<Fate>) {
        match self.mailbox.enqueue_system(msg) {
            Ok(Enqueued::MustSchedule) => self.run(log),
            Ok(Enqueued::AlreadyScheduled) => {}
            Err(SendError(m)) => log.push(Fate::Rejected(m)),
        }
    }

    /// One won run, executed inline, repeated while release says Reschedule.
    fn run(&self, log: &mut Vec<Fate>) {
        loop {
            // Relaxed is enough for the flag: loom would report the overlap
            // itself; the flag makes the failure message plain.
            assert!(
                !self.running.swap(true, Ordering::Relaxed),
                "two runs of one mailbox overlap"
            );
            loop {
                // SAFETY: this thread won the run (MustSchedule or Reschedule).
                match unsafe { self.mailbox.dequeue() } {
                    Dequeued::System(m) | Dequeued::User(m) => {
                        if self.mailbox.is_closed() {
                            log.push(Fate::DeadLetter(m));
                            continue;
                        }
                        let seq = self.handled.fetch_add(1, Ordering::Relaxed);
                        log.push(Fate::Handled(seq, m));
                        // SAFETY: as above.
                        unsafe {
                            match m {
                                Msg::Close => self.mailbox.close(),
                                Msg::Suspend => self.mailbox.suspend(),
                                Msg::Resume => {
                                    let _ = self.mailbox.resume();
                                }
                                Msg::User(..) | Msg::Sys(_) => {}
                            }
                        }
                    }
                    Dequeued::Empty => break,
                    Dequeued::Retry => {
                        // A push is half-done; let its producer finish.
                        thread::yield_now();
                        break;
                    }
                }
            }
            self.running.store(false, Ordering::Relaxed);
            // SAFETY: as above.
            match unsafe { self.mailbox.release() } {
                Release::Idle => return,
                Release::Reschedule => {}
            }
        }
    }
}

/// Joins the model's threads and merges their logs; handled messages come
/// out in the order they were handled.
fn join_logs(handles: Vec<thread::JoinHandle<Vec<Fate>>>, mut log: Vec<Fate>) -> Vec<Fate> {
    for h in handles {
        log.extend(h.join().expect("model thread panicked"));
    }
    log.sort();
    log
}

fn was_handled(log: &[Fate], m: Msg) -> bool {
    log.iter()
        .any(|f| matches!(f, Fate::Handled(_, x) if *x == m))
}

/// Handled user messages of each sender, in the order they were handled.
fn handled_in_order(log: &[Fate], sender: usize) -> Vec<usize> {
    log.iter()
        .filter_map(|f| match f {
            Fate::Handled(_, Msg::User(s, i)) if *s == sender => Some(*i),
            _ => None,
        })
        .collect()
}

fn queue_model(producers: usize, per_producer: usize) {
    loom::model(move || {
        let q = Arc::new(MpscQueue::new());
        let handles: Vec<_> = (0..producers)
            .map(|p| {
                let q = q.clone();
                thread::spawn(move || {
                    for i in 0..per_producer {
                        q.push((p, i));
                    }
                })
            })
            .collect();
        let mut next = vec![0; producers];
        let mut received = 0;
        while received < producers * per_producer {
            // SAFETY: the model's main thread is the only consumer.
            match unsafe { q.pop() } {
                Pop::Data((p, i)) => {
                    assert_eq!(i, next[p], "producer {p}: FIFO broken or duplicate");
                    next[p] += 1;
                    received += 1;
                }
                Pop::Empty | Pop::Inconsistent => thread::yield_now(),
            }
        }
        for h in handles {
            h.join().expect("producer panicked");
        }
        // SAFETY: as above.
        assert_eq!(unsafe { q.pop() }, Pop::Empty, "a value was duplicated");
    });
}

/// Two producers, one consumer: nothing lost, nothing twice, per-producer FIFO.
#[test]
fn queue_two_producers_fifo() {
    queue_model(2, 2);
}

/// Three producers, one consumer, including the push-in-progress window.
#[test]
fn queue_three_producers_fifo() {
    queue_model(3, 1);
}

/// Concurrent senders and inline runs: the run is never held twice, and every
/// message ends in a run (no lost wake-up, also across a half-done push).
#[test]
fn run_state_never_double_owned_and_never_strands_a_message() {
    loom::model(|| {
        let actor = Actor::new();
        let handles: Vec<_> = (0..2)
            .map(|s| {
                let actor = actor.clone();
                thread::spawn(move || {
                    let mut log = Vec::new();
                    actor.tell(Msg::User(s, 0), &mut log);
                    actor.tell(Msg::User(s, 1), &mut log);
                    log
                })
            })
            .collect();
        let log = join_logs(handles, Vec::new());
        for s in 0..2 {
            assert_eq!(handled_in_order(&log, s), vec![0, 1], "sender {s}");
        }
        assert_eq!(log.len(), 4);
        assert!(!actor.mailbox.snapshot().is_scheduled(), "left scheduled");
    });
}

/// Invariant 3: a system message is handed out before any user message sent
/// after it, whoever runs the mailbox.
#[test]
fn system_message_overtakes_later_user_messages() {
    loom::model(|| {
        let actor = Actor::new();
        let a = {
            let actor = actor.clone();
            thread::spawn(move || {
                let mut log = Vec::new();
                actor.signal(Msg::Sys(0), &mut log);
                actor.tell(Msg::User(0, 0), &mut log);
                log
            })
        };
        let b = {
            let actor = actor.clone();
            thread::spawn(move || {
                let mut log = Vec::new();
                actor.tell(Msg::User(1, 0), &mut log);
                log
            })
        };
        let log = join_logs(vec![a, b], Vec::new());
        let pos = |m: Msg| {
            log.iter()
                .position(|f| matches!(f, Fate::Handled(_, x) if *x == m))
        };
        let sys = pos(Msg::Sys(0)).expect("system message handled");
        let user = pos(Msg::User(0, 0)).expect("user message handled");
        assert!(
            sys < user,
            "user message handled before an earlier system message: {log:?}"
        );
        assert!(pos(Msg::User(1, 0)).is_some());
        assert_eq!(log.len(), 3);
    });
}

/// A suspended mailbox serves its system lane only; resume reopens the user
/// lane and nothing queued meanwhile is lost.
#[test]
fn suspended_means_user_lane_paused() {
    loom::model(|| {
        let actor = Actor::new();
        let mut log = Vec::new();
        actor.signal(Msg::Suspend, &mut log);
        let senders: Vec<_> = [Msg::User(0, 0), Msg::Sys(1)]
            .into_iter()
            .map(|m| {
                let actor = actor.clone();
                thread::spawn(move || {
                    let mut log = Vec::new();
                    match m {
                        Msg::User(..) => actor.tell(m, &mut log),
                        _ => actor.signal(m, &mut log),
                    }
                    log
                })
            })
            .collect();
        let log = join_logs(senders, log);
        assert!(was_handled(&log, Msg::Sys(1)), "system lane served");
        assert!(
            !was_handled(&log, Msg::User(0, 0)),
            "user message handled while suspended"
        );
        let mut log = log;
        actor.signal(Msg::Resume, &mut log);
        assert!(was_handled(&log, Msg::User(0, 0)), "lost across resume");
        assert!(!actor.mailbox.snapshot().is_scheduled());
    });
}

/// Close racing with senders: every message is handled, dead-lettered by the
/// run holder, or handed back to its sender: exactly one of these, once.
#[test]
fn close_racing_with_senders_accounts_for_every_message_once() {
    loom::model(|| {
        let actor = Actor::new();
        let handles: Vec<_> = (0..2)
            .map(|s| {
                let actor = actor.clone();
                thread::spawn(move || {
                    let mut log = Vec::new();
                    actor.tell(Msg::User(s, 0), &mut log);
                    log
                })
            })
            .collect();
        let mut log = Vec::new();
        actor.signal(Msg::Close, &mut log);
        let log = join_logs(handles, log);
        let fates_of = |m: Msg| {
            log.iter()
                .filter(|f| {
                    matches!(f, Fate::Handled(_, x) | Fate::DeadLetter(x) | Fate::Rejected(x) if *x == m)
                })
                .count()
        };
        for s in 0..2 {
            assert_eq!(fates_of(Msg::User(s, 0)), 1, "sender {s}: {log:?}");
        }
        assert!(was_handled(&log, Msg::Close));
        assert!(actor.mailbox.is_closed());
        assert!(
            !actor.mailbox.snapshot().is_scheduled(),
            "left scheduled: {log:?}"
        );
    });
}
