//! loom models of the engine's result slot (`engine/src/api/promise.rs`),
//! the machinery behind `ask`, `graceful_stop` and termination: a reply
//! (`Slot::complete`) races the timeout (`Expiry::fire`, on the timer
//! thread) or the timer's drop unfired (`Expiry`'s `Drop`, when the
//! scheduler stops), while the asker waits as a thread (`wait_take`) or as
//! a future (`poll_take`). Checked: the first completion wins and the
//! others get their value back, the waiter always wakes with the winner's
//! value, and the timeout timer is cancelled whoever wins, also when the
//! reply comes before the timer is attached (`set_timer`).
//!
//! The slot's lock and condvar come from loom under `--cfg loom`
//! (`engine/src/sync.rs`); the timer is the shim's `ModelTimer`, whose
//! `cancel` sets a flag.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release`.
//!
//! Mutations checked to be caught (each applied alone, then reverted):
//!
//! - `complete` without `notify_all` (a missing wake):
//!   `reply_races_the_timeout_and_a_blocked_waiter_gets_the_first` and
//!   `a_timer_dropped_unfired_still_ends_the_wait` fail (loom reports the
//!   waiter blocked forever).
//! - `complete` reading `blocked` under a separate, earlier lock, before
//!   it sets `completed` (a check-then-act split): the same two models
//!   fail (the waiter blocks between the two and is never notified).
//! - `set_timer` storing the timer without checking `completed`:
//!   `reply_races_the_timeout_and_a_blocked_waiter_gets_the_first` fails
//!   (a reply that came first leaves the timer armed).
//! - `poll_take` registering its waker under a second lock, after the one
//!   that found no value: `a_future_waiter_wakes_for_a_reply_or_the_drop`
//!   fails (a lost wake-up; loom reports the future never woken).
//! - `Expiry`'s `Drop` not completing the slot:
//!   `a_timer_dropped_unfired_still_ends_the_wait` fails (the waiter
//!   blocks forever).
#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;
use proscenium::__loom::{Expiry, ModelTimer, Slot};

const REPLY: u32 = 0;
const TIMEOUT: u32 = 1;
const DROPPED: u32 = 2;

/// The asker's future over the slot (as `Ask`'s `poll`).
struct Take(Arc<Slot<u32>>);

impl Future for Take {
    type Output = u32;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
        self.0.poll_take(cx)
    }
}

/// The reply and the timeout race; the asker attaches the timer (after the
/// request went out, as `ask::request` does) and blocks for the answer.
#[test]
fn reply_races_the_timeout_and_a_blocked_waiter_gets_the_first() {
    loom::model(|| {
        let slot = Arc::new(Slot::new());
        let expiry = Expiry::new(Arc::clone(&slot), TIMEOUT, DROPPED);
        let replier = {
            let slot = Arc::clone(&slot);
            thread::spawn(move || slot.complete(REPLY))
        };
        let timer_thread = thread::spawn(move || expiry.fire());
        let cancelled = Arc::new(AtomicBool::new(false));
        slot.set_timer(ModelTimer::new(Arc::clone(&cancelled)));
        let got = slot.wait_take();
        let replied = replier.join().expect("replier");
        timer_thread.join().expect("timer thread");
        match got {
            REPLY => assert_eq!(replied, Ok(())),
            TIMEOUT => assert_eq!(replied, Err(REPLY), "the late reply is handed back"),
            other => panic!("unexpected value {other}"),
        }
        assert!(
            cancelled.load(Ordering::SeqCst),
            "the timeout timer outlived the completion"
        );
        assert_eq!(slot.complete(3), Err(3), "completed once");
        assert!(slot.try_take().is_none(), "taken once");
    });
}

/// The reply races the timer's drop unfired (the scheduler stopped); the
/// asker awaits the slot as a future.
#[test]
fn a_future_waiter_wakes_for_a_reply_or_the_drop() {
    loom::model(|| {
        let slot = Arc::new(Slot::new());
        let expiry = Expiry::new(Arc::clone(&slot), TIMEOUT, DROPPED);
        let replier = {
            let slot = Arc::clone(&slot);
            thread::spawn(move || slot.complete(REPLY))
        };
        let stopper = thread::spawn(move || drop(expiry));
        let got = loom::future::block_on(Take(Arc::clone(&slot)));
        let replied = replier.join().expect("replier");
        stopper.join().expect("stopper");
        match got {
            REPLY => assert_eq!(replied, Ok(())),
            DROPPED => assert_eq!(replied, Err(REPLY)),
            other => panic!("unexpected value {other}"),
        }
    });
}

/// Nobody replies and the scheduler drops the timer unfired: the waiter
/// still wakes, with the fallback (an `ask` fails with `NoReply` rather
/// than hanging).
#[test]
fn a_timer_dropped_unfired_still_ends_the_wait() {
    loom::model(|| {
        let slot = Arc::new(Slot::new());
        let expiry = Expiry::new(Arc::clone(&slot), TIMEOUT, DROPPED);
        let stopper = thread::spawn(move || drop(expiry));
        assert_eq!(slot.wait_take(), DROPPED);
        stopper.join().expect("stopper");
    });
}
