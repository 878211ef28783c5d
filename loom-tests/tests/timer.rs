//! loom models of a timer entry (`scheduler/src/timer_entry.rs`, used by
//! the timer thread and `Sleep` in `scheduler/src/timer.rs`): firing and
//! cancelling race for the one PENDING -> FIRED/CANCELLED transition; the
//! callback runs at most once and is dropped exactly once; the pending
//! count is settled once; a `Sleep` polled while its entry fires is either
//! ready or woken.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release`.
//!
//! The models call the real `TimerEntry::fire`, `cancel`, `take_callback`
//! and `poll_sleep` (the timer thread's `fire` and `TimerShared::cancel`
//! are these plus the pending count, passed in as `on_won`). The wheel,
//! the intake queue and the timer thread's `sleeping_until` handshake are
//! not modelled here (they sit on crossbeam's injector and on real time).
//!
//! Mutations of `timer_entry.rs` checked to be caught:
//! - `transition` as a load and a store instead of a compare-and-swap
//!   (fire and cancel both win): "both won, or neither" in
//!   `timer_fire_and_cancel_one_winner`, and the winner check of
//!   `timer_a_sleep_dropped_while_it_fires`;
//! - `poll_sleep` without its re-check after registering the waker (a fire
//!   between the first check and the registration takes no waker): "a
//!   pending Sleep was never woken".
//!
//! Not a bug, so not caught: `fire` taking the waker before its transition
//! (a sleep that registers after it still sees FIRED in its re-check).
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use proscenium_scheduler::__loom::{Fired, TimerEntry};
use std::task::{Context, Poll, Wake, Waker};

/// Counts calls and drops of a callback.
struct Witness {
    ran: AtomicUsize,
    dropped: AtomicUsize,
}

/// Owned by a callback: counts its drop.
struct DropGuard(Arc<Witness>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

/// The timer thread fires a callback entry (and, on `Submit`, runs it as a
/// worker would) while a handle cancels it: one winner; the callback runs
/// only if firing won; it is dropped once; the pending count ends at 0.
#[test]
fn timer_fire_and_cancel_one_winner() {
    loom::model(|| {
        let witness = Arc::new(Witness {
            ran: AtomicUsize::new(0),
            dropped: AtomicUsize::new(0),
        });
        let pending = Arc::new(AtomicUsize::new(1));
        let entry = {
            let guard = DropGuard(Arc::clone(&witness));
            Arc::new(TimerEntry::callback(0, move || {
                guard.0.ran.fetch_add(1, Ordering::SeqCst);
            }))
        };
        let firer = {
            let entry = Arc::clone(&entry);
            let pending = Arc::clone(&pending);
            thread::spawn(move || {
                let fired = entry.fire(|| {
                    pending.fetch_sub(1, Ordering::SeqCst);
                });
                if fired == Fired::Submit {
                    // The entry's run on a worker.
                    if let Some(f) = entry.take_callback() {
                        f();
                    }
                    true
                } else {
                    assert_eq!(fired, Fired::Cancelled);
                    false
                }
            })
        };
        let cancelled = entry.cancel(|| {
            pending.fetch_sub(1, Ordering::SeqCst);
        });
        let fired = firer.join().expect("firer");
        assert!(fired != cancelled, "both won, or neither");
        assert_eq!(pending.load(Ordering::SeqCst), 0);
        assert_eq!(witness.ran.load(Ordering::SeqCst), usize::from(fired));
        assert_eq!(witness.dropped.load(Ordering::SeqCst), 1);
        assert_eq!(entry.is_fired(), fired);
        assert!(!entry.is_pending());
    });
}

/// A waker that records that it was woken.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A `Sleep` is polled while the timer thread fires its entry: the poll is
/// ready, or the firer took its waker and woke it.
#[test]
fn timer_a_sleep_polled_while_it_fires_is_woken() {
    loom::model(|| {
        let entry = Arc::new(TimerEntry::sleep(0));
        let firer = {
            let entry = Arc::clone(&entry);
            thread::spawn(move || {
                assert_eq!(entry.fire(|| {}), Fired::Done);
            })
        };
        let flag = std::sync::Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(std::sync::Arc::clone(&flag));
        let first = entry.poll_sleep(&mut Context::from_waker(&waker));
        firer.join().expect("firer");
        if first.is_pending() {
            assert!(
                flag.0.load(Ordering::SeqCst),
                "a pending Sleep was never woken"
            );
        }
        assert_eq!(
            entry.poll_sleep(&mut Context::from_waker(&waker)),
            Poll::Ready(())
        );
    });
}

/// A `Sleep` dropped (cancelled) while the entry fires: one winner, and a
/// waker registered by an earlier poll is woken only if firing won.
#[test]
fn timer_a_sleep_dropped_while_it_fires() {
    loom::model(|| {
        let entry = Arc::new(TimerEntry::sleep(0));
        let flag = std::sync::Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(std::sync::Arc::clone(&flag));
        assert!(entry
            .poll_sleep(&mut Context::from_waker(&waker))
            .is_pending());
        let firer = {
            let entry = Arc::clone(&entry);
            thread::spawn(move || entry.fire(|| {}))
        };
        let cancelled = entry.cancel(|| {});
        let fired = firer.join().expect("firer");
        assert_eq!(cancelled, fired == Fired::Cancelled);
        assert_eq!(flag.0.load(Ordering::SeqCst), !cancelled);
    });
}
