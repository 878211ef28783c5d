//! loom models of the bounded user lane's reservation (`user_len` in
//! `mailbox/src/mailbox.rs`): a sender reserves a place before it pushes
//! (`reserve_user_slot`, a compare-and-swap loop below the capacity), the
//! run holder gives the place back when it pops the message (`dequeue`).
//! Checked: the capacity is never exceeded, a full lane rejects with the
//! message handed back, and no reservation is leaked (after everything is
//! handled, dead-lettered or rejected, the count is zero again), also when
//! the mailbox closes under its senders.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release`.
//!
//! Mutations checked to be caught (each applied alone, then reverted):
//!
//! - `reserve_user_slot` as a check-then-act (a load, the capacity check,
//!   then `fetch_add` instead of the compare-and-swap):
//!   `a_full_lane_rejects_and_hands_the_message_back` fails (both senders
//!   accepted by a lane of one), and `reservations_follow_the_run_holder`
//!   (capacity exceeded).
//! - `dequeue` without its `fetch_sub` (a reservation leaked by every
//!   handled message): all three models fail (count not zero at the end).
//! - `enqueue_user` reserving before its closed check, returning `Closed`
//!   without giving the place back: `close_leaks_no_reservation` fails.
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;
use proscenium_mailbox::{Dequeued, Enqueued, Mailbox, Release, SendError, TrySendError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fate {
    Handled(usize, usize),
    DeadLetter(usize, usize),
    Full(usize, usize),
    Closed(usize, usize),
}

/// A bounded mailbox whose runs execute inline on the thread that wins
/// them. The system lane carries only `Close`.
struct Actor {
    mailbox: Mailbox<(), (usize, usize)>,
    running: AtomicBool,
}

impl Actor {
    fn new(capacity: usize) -> Arc<Actor> {
        Arc::new(Actor {
            mailbox: Mailbox::bounded(capacity).expect("non-zero"),
            running: AtomicBool::new(false),
        })
    }

    fn capacity(&self) -> usize {
        self.mailbox.capacity().expect("bounded")
    }

    fn len(&self) -> usize {
        self.mailbox.user_len().expect("bounded")
    }

    fn tell(&self, msg: (usize, usize), log: &mut Vec<Fate>) {
        let result = self.mailbox.enqueue_user(msg);
        assert!(self.len() <= self.capacity(), "capacity exceeded");
        match result {
            Ok(Enqueued::MustSchedule) => self.run(log),
            Ok(Enqueued::AlreadyScheduled) => {}
            Err(TrySendError::Full(m)) => log.push(Fate::Full(m.0, m.1)),
            Err(TrySendError::Closed(m)) => log.push(Fate::Closed(m.0, m.1)),
        }
    }

    fn close(&self, log: &mut Vec<Fate>) {
        match self.mailbox.enqueue_system(()) {
            Ok(Enqueued::MustSchedule) => self.run(log),
            Ok(Enqueued::AlreadyScheduled) => {}
            Err(SendError(())) => unreachable!("closed only by this message"),
        }
    }

    fn run(&self, log: &mut Vec<Fate>) {
        loop {
            assert!(
                !self.running.swap(true, Ordering::Relaxed),
                "two runs of one mailbox overlap"
            );
            loop {
                // SAFETY: this thread won the run (MustSchedule or Reschedule).
                match unsafe { self.mailbox.dequeue() } {
                    Dequeued::User(m) if self.mailbox.is_closed() => {
                        log.push(Fate::DeadLetter(m.0, m.1));
                    }
                    Dequeued::User(m) => log.push(Fate::Handled(m.0, m.1)),
                    // SAFETY: as above.
                    Dequeued::System(()) => unsafe { self.mailbox.close() },
                    Dequeued::Empty => break,
                    Dequeued::Retry => {
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

fn join(handles: Vec<thread::JoinHandle<Vec<Fate>>>, mut log: Vec<Fate>) -> Vec<Fate> {
    for h in handles {
        log.extend(h.join().expect("model thread"));
    }
    log.sort_unstable();
    log
}

/// Each message ends exactly once, in one of the four fates.
fn assert_each_once(log: &[Fate], msgs: &[(usize, usize)]) {
    assert_eq!(log.len(), msgs.len(), "{log:?}");
    for &(s, i) in msgs {
        let n = log
            .iter()
            .filter(|f| {
                matches!(f, Fate::Handled(a, b) | Fate::DeadLetter(a, b) | Fate::Full(a, b) | Fate::Closed(a, b) if (*a, *b) == (s, i))
            })
            .count();
        assert_eq!(n, 1, "message {s}.{i}: {log:?}");
    }
}

/// A lane of one, two senders and nobody consuming: one is accepted, the
/// other gets its own message back as `Full`.
#[test]
fn a_full_lane_rejects_and_hands_the_message_back() {
    loom::model(|| {
        let actor = Actor::new(1);
        let handles: Vec<_> = (0..2)
            .map(|s| {
                let actor = Arc::clone(&actor);
                thread::spawn(move || actor.mailbox.enqueue_user((s, 0)))
            })
            .collect();
        let results: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("sender"))
            .collect();
        let accepted = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(accepted, 1, "a lane of one accepted {accepted}");
        for (s, r) in results.iter().enumerate() {
            if let Err(e) = r {
                assert_eq!(*e, TrySendError::Full((s, 0)), "handed back");
            }
        }
        assert_eq!(actor.len(), 1);
        // The accepted sender won the run; this thread takes it over.
        assert!(results.contains(&Ok(Enqueued::MustSchedule)));
        let mut log = Vec::new();
        actor.run(&mut log);
        assert_eq!(log.len(), 1);
        assert_eq!(actor.len(), 0, "reservation leaked");
    });
}

/// A lane of one with runs racing the sends: never more than one message
/// reserved or queued, and every reservation given back.
#[test]
fn reservations_follow_the_run_holder() {
    loom::model(|| {
        let actor = Actor::new(1);
        let a = {
            let actor = Arc::clone(&actor);
            thread::spawn(move || {
                let mut log = Vec::new();
                actor.tell((0, 0), &mut log);
                actor.tell((0, 1), &mut log);
                log
            })
        };
        let b = {
            let actor = Arc::clone(&actor);
            thread::spawn(move || {
                let mut log = Vec::new();
                actor.tell((1, 0), &mut log);
                log
            })
        };
        let log = join(vec![a, b], Vec::new());
        assert_each_once(&log, &[(0, 0), (0, 1), (1, 0)]);
        assert!(log.iter().any(|f| matches!(f, Fate::Handled(..))));
        assert_eq!(actor.len(), 0, "reservation leaked: {log:?}");
        assert!(!actor.mailbox.snapshot().is_scheduled(), "left scheduled");
        // The place is free again.
        let mut log = Vec::new();
        actor.tell((2, 0), &mut log);
        assert_eq!(log, vec![Fate::Handled(2, 0)]);
    });
}

/// Close racing with a sender of a bounded lane: each message is handled,
/// dead-lettered or handed back once, and no place stays reserved.
#[test]
fn close_leaks_no_reservation() {
    loom::model(|| {
        let actor = Actor::new(2);
        let sender = {
            let actor = Arc::clone(&actor);
            thread::spawn(move || {
                let mut log = Vec::new();
                actor.tell((0, 0), &mut log);
                actor.tell((0, 1), &mut log);
                log
            })
        };
        let mut log = Vec::new();
        actor.close(&mut log);
        let log = join(vec![sender], log);
        assert_each_once(&log, &[(0, 0), (0, 1)]);
        assert!(actor.mailbox.is_closed());
        assert_eq!(actor.len(), 0, "reservation leaked: {log:?}");
        assert!(!actor.mailbox.snapshot().is_scheduled(), "left scheduled");
    });
}
