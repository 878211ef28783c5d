//! loom models of the run holder's mailbox steps around a stop and the
//! stash (`engine/src/runtime/drain.rs`, called by the driver):
//!
//! - `close_and_drain` (`Driver::finish_terminate`): drain the user lane
//!   into dead letters with the mailbox still open, holding system
//!   messages back, then close, drain what raced in, and answer the held
//!   system messages last;
//! - `drain_closed` (the runs of a terminated actor, `Driver::run`): what
//!   raced in after that, system messages last;
//! - `dequeue_system_only` (`Driver::next_unstashed`): suspend the user
//!   lane for one dequeue, so a system message comes before the unstashed
//!   messages, and these before anything in the user lane.
//!
//! They run on a real mailbox; runs execute inline on the thread that wins
//! them, as in `mailbox.rs`.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release`.
//!
//! Mutations checked to be caught (each applied alone, then reverted):
//!
//! - `drain_into` answering system messages at once (the code before this
//!   model, which found the defect: decision record 0015):
//!   `a_watch_is_answered_after_the_dead_letters_queued_before_it` fails
//!   (`[Answered(Watch(0)), DeadLetter((0, 0)), ..]`).
//! - `close_and_drain` answering system messages at once instead of
//!   holding them: `a_watch_is_answered_after_the_dead_letters_queued_before_it`
//!   fails (a sender's watch answered before the message it sent first
//!   was dead-lettered).
//! - `dequeue_system_only` resuming before its dequeue:
//!   `a_system_only_dequeue_takes_no_user_message_and_keeps_the_suspension`
//!   fails (a user message taken ahead of the unstashed one).
//! - `dequeue_system_only` with `resume_all` instead of `resume`: the same
//!   model fails ("the suspension was lost").
//!
//! Not caught, and why: `close_and_drain` without its first loop (closing
//! at once). Since the post-close drain holds system messages too, that
//! only moves messages from "dead-lettered by the holder" to "handed back
//! to the sender", both of which the model accepts; what the open drain
//! buys (a queued message's dead letter published by the actor, not by
//! each sender) is not something the model tells apart.
//!
//! Each model runs in a child process of this binary
//! (`proscenium_loom_tests::model`, issue 28): a deadlock aborts the
//! process while unwinding, which then fails only that model.
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use proscenium::__loom::{close_and_drain, dequeue_system_only, drain_closed, DRAIN_BEFORE_CLOSE};
use proscenium_mailbox::{Dequeued, Enqueued, Mailbox, Release, SendError, TrySendError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Sys {
    /// Starts the model's first run (stop, or a plain start).
    Begin,
    /// A sender's watch, after its user message.
    Watch(usize),
}

/// What became of a message, numbered in the order it happened (runs are
/// serialised by the run-state word; a rejection is numbered by its
/// sender).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fate {
    Handled(usize, (usize, usize)),
    DeadLetter(usize, (usize, usize)),
    Answered(usize, Sys),
    Rejected(usize, (usize, usize)),
    RejectedSys(usize, Sys),
    HandledSys(usize, Sys),
    Unstashed(usize),
}

struct Actor {
    mailbox: Mailbox<Sys, (usize, usize)>,
    running: AtomicBool,
    terminated: AtomicBool,
    seq: AtomicUsize,
}

impl Actor {
    fn new() -> Arc<Actor> {
        Arc::new(Actor {
            mailbox: Mailbox::new(),
            running: AtomicBool::new(false),
            terminated: AtomicBool::new(false),
            seq: AtomicUsize::new(0),
        })
    }

    fn next(&self) -> usize {
        self.seq.fetch_add(1, Ordering::SeqCst)
    }

    fn tell(&self, msg: (usize, usize), log: &mut Vec<Fate>) {
        match self.mailbox.enqueue_user(msg) {
            Ok(Enqueued::MustSchedule) => self.run(log),
            Ok(Enqueued::AlreadyScheduled) => {}
            Err(TrySendError::Closed(m)) => log.push(Fate::Rejected(self.next(), m)),
            Err(TrySendError::Full(_)) => unreachable!("unbounded"),
        }
    }

    fn signal(&self, msg: Sys, log: &mut Vec<Fate>) {
        match self.mailbox.enqueue_system(msg) {
            Ok(Enqueued::MustSchedule) => self.run(log),
            Ok(Enqueued::AlreadyScheduled) => {}
            Err(SendError(m)) => log.push(Fate::RejectedSys(self.next(), m)),
        }
    }

    /// Takes a message as the run holder: a terminated actor drains
    /// everything (the driver's `drain`), a live one handles it.
    fn take(&self, d: Dequeued<Sys, (usize, usize)>, log: &mut Vec<Fate>) {
        let seq = self.next();
        let terminated = self.terminated.load(Ordering::Relaxed);
        log.push(match d {
            Dequeued::User(m) if terminated => Fate::DeadLetter(seq, m),
            Dequeued::User(m) => Fate::Handled(seq, m),
            Dequeued::System(s) if terminated => Fate::Answered(seq, s),
            Dequeued::System(s) => Fate::HandledSys(seq, s),
            Dequeued::Empty | Dequeued::Retry => unreachable!("not a message"),
        });
    }

    fn enter(&self) {
        assert!(
            !self.running.swap(true, Ordering::Relaxed),
            "two runs of one mailbox overlap"
        );
    }

    /// Dequeues until empty, releases, and runs again on Reschedule; a
    /// terminated actor's run drains as the driver's does (`drain_closed`).
    fn run(&self, log: &mut Vec<Fate>) {
        self.enter();
        self.finish_run(log);
    }

    fn finish_run(&self, log: &mut Vec<Fate>) {
        loop {
            loop {
                // SAFETY: this thread holds the run.
                match unsafe { self.mailbox.dequeue() } {
                    Dequeued::Empty => break,
                    Dequeued::Retry => {
                        thread::yield_now();
                        break;
                    }
                    d if self.terminated.load(Ordering::Relaxed) => {
                        // SAFETY: as above; a terminated actor's mailbox
                        // is closed.
                        unsafe { drain_closed(&self.mailbox, d, |d| self.take(d, log)) };
                        break;
                    }
                    d => self.take(d, log),
                }
            }
            self.running.store(false, Ordering::Relaxed);
            // SAFETY: as above.
            match unsafe { self.mailbox.release() } {
                Release::Idle => return,
                Release::Reschedule => self.enter(),
            }
        }
    }

    /// The model's first run: begun by `Begin`, which this thread sent
    /// before the others started.
    fn begin(&self) {
        assert_eq!(
            self.mailbox.enqueue_system(Sys::Begin),
            Ok(Enqueued::MustSchedule)
        );
        self.enter();
        // SAFETY: this thread holds the run (MustSchedule above).
        match unsafe { self.mailbox.dequeue() } {
            Dequeued::System(Sys::Begin) => {}
            other => panic!("the first message is Begin: {other:?}"),
        }
    }
}

fn join(handles: Vec<thread::JoinHandle<Vec<Fate>>>, mut log: Vec<Fate>) -> Vec<Fate> {
    for h in handles {
        log.extend(h.join().expect("model thread"));
    }
    log.sort_unstable_by_key(|f| match *f {
        Fate::Handled(s, _)
        | Fate::DeadLetter(s, _)
        | Fate::Answered(s, _)
        | Fate::Rejected(s, _)
        | Fate::RejectedSys(s, _)
        | Fate::HandledSys(s, _)
        | Fate::Unstashed(s) => s,
    });
    log
}

/// A stopping actor (the run holder, suspended as `terminate` leaves it)
/// closes and drains while sender 0 tells a message and then watches it,
/// and sender 1 tells one. Each message is dead-lettered or handed back
/// once, each watch answered or handed back once, and a watch is answered
/// only after the message its sender sent before it was dead-lettered:
/// whoever learns of the end has seen the dead letters of what was queued.
#[test]
fn a_watch_is_answered_after_the_dead_letters_queued_before_it() {
    proscenium_loom_tests::model(
        "a_watch_is_answered_after_the_dead_letters_queued_before_it",
        || {
            let actor = Actor::new();
            let mut log = Vec::new();
            actor.begin();
            let a = {
                let actor = Arc::clone(&actor);
                thread::spawn(move || {
                    let mut log = Vec::new();
                    actor.tell((0, 0), &mut log);
                    actor.signal(Sys::Watch(0), &mut log);
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
            // `terminate`: the user lane is suspended; `finish_terminate`.
            // SAFETY: this thread holds the run (begin).
            unsafe { actor.mailbox.suspend() };
            actor.terminated.store(true, Ordering::Relaxed);
            let held = {
                let actor = &actor;
                let log = &mut log;
                // SAFETY: as above.
                unsafe {
                    close_and_drain(&actor.mailbox, DRAIN_BEFORE_CLOSE, |d| actor.take(d, log))
                }
            };
            for s in held {
                log.push(Fate::Answered(actor.next(), s));
            }
            actor.finish_run(&mut log);
            let log = join(vec![a, b], log);

            let fates =
                |m: (usize, usize)| {
                    log.iter()
                .filter(|f| matches!(f, Fate::DeadLetter(_, x) | Fate::Rejected(_, x) if *x == m))
                .count()
                };
            assert_eq!(fates((0, 0)), 1, "{log:?}");
            assert_eq!(fates((1, 0)), 1, "{log:?}");
            assert!(
                !log.iter()
                    .any(|f| matches!(f, Fate::Handled(..) | Fate::HandledSys(..))),
                "a stopped actor handled a message: {log:?}"
            );
            let watch = log
                .iter()
                .filter(|f| {
                    matches!(
                        f,
                        Fate::Answered(_, Sys::Watch(0)) | Fate::RejectedSys(_, Sys::Watch(0))
                    )
                })
                .count();
            assert_eq!(watch, 1, "the watch: {log:?}");
            if let Some(w) = log
                .iter()
                .position(|f| matches!(f, Fate::Answered(_, Sys::Watch(0))))
            {
                let dead = log
                    .iter()
                    .position(|f| matches!(f, Fate::DeadLetter(_, (0, 0))));
                assert!(
                dead.is_some_and(|d| d < w),
                "the watch was answered before the message sent ahead of it was dead-lettered: {log:?}"
            );
            }
            assert!(actor.mailbox.is_closed());
            assert!(
                !actor.mailbox.snapshot().is_scheduled(),
                "left scheduled: {log:?}"
            );
        },
    );
}

/// A run holder with an unstashed message waiting, first while the actor
/// is suspended (failed), then running, while a user message and a system
/// message race in. The system-only dequeue never takes the user message,
/// leaves the suspension as it was, and the unstashed message is handled
/// before the user message; everything is handled once.
#[test]
fn a_system_only_dequeue_takes_no_user_message_and_keeps_the_suspension() {
    proscenium_loom_tests::model(
        "a_system_only_dequeue_takes_no_user_message_and_keeps_the_suspension",
        || {
            let actor = Actor::new();
            let mut log = Vec::new();
            actor.begin();
            let a = {
                let actor = Arc::clone(&actor);
                thread::spawn(move || {
                    let mut log = Vec::new();
                    actor.tell((0, 0), &mut log);
                    log
                })
            };
            let b = {
                let actor = Arc::clone(&actor);
                thread::spawn(move || {
                    let mut log = Vec::new();
                    actor.signal(Sys::Watch(1), &mut log);
                    log
                })
            };
            // Suspended (a failure): the dequeue keeps the suspension.
            // SAFETY: this thread holds the run (begin), for all of the below.
            unsafe {
                actor.mailbox.suspend();
                let (suspended, d) = dequeue_system_only(&actor.mailbox);
                assert!(suspended, "it was suspended");
                assert!(
                    !matches!(d, Dequeued::User(_)),
                    "a suspended lane handed out a user message"
                );
                assert!(actor.mailbox.is_suspended(), "the suspension was lost");
                if !matches!(d, Dequeued::Empty | Dequeued::Retry) {
                    actor.take(d, &mut log);
                }
                // Resumed: the unstashed message goes first, after any system
                // message.
                assert!(actor.mailbox.resume(), "one resume reopens the lane");
                loop {
                    let (suspended, d) = dequeue_system_only(&actor.mailbox);
                    assert!(!suspended);
                    assert!(!actor.mailbox.is_suspended(), "left suspended");
                    match d {
                        Dequeued::User(_) => panic!("a user message ahead of the unstashed one"),
                        Dequeued::Empty => break,
                        Dequeued::Retry => thread::yield_now(),
                        d => actor.take(d, &mut log),
                    }
                }
            }
            log.push(Fate::Unstashed(actor.next()));
            actor.finish_run(&mut log);
            let log = join(vec![a, b], log);
            let user = log
                .iter()
                .position(|f| matches!(f, Fate::Handled(_, (0, 0))))
                .expect("the user message was handled");
            let unstashed = log
                .iter()
                .position(|f| matches!(f, Fate::Unstashed(_)))
                .expect("unstashed");
            assert!(unstashed < user, "{log:?}");
            assert_eq!(
                log.iter()
                    .filter(|f| matches!(f, Fate::HandledSys(_, Sys::Watch(1))))
                    .count(),
                1,
                "{log:?}"
            );
            assert_eq!(log.len(), 3, "{log:?}");
            assert!(!actor.mailbox.snapshot().is_scheduled(), "left scheduled");
        },
    );
}
