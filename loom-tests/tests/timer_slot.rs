//! loom models of a scheduled message's slot: the state machine that
//! `TimerSlot` (`engine/src/patterns/timers.rs`) keeps in a `SlotState`
//! (`engine/src/patterns/timer_state.rs`) and calls for every step: arm
//! (`TimerSlot::arm` is `arm_with` around the scheduler call), cancel
//! (`Cancellable::cancel`, a keyed timer replaced, the actor stopping),
//! delivery (`Context::timer_due` moves a single timer `ACTIVE -> DONE`
//! before the driver `produce`s its message) and the end for dead letters
//! (`take_for_dead_letter` is `end` then `produce`). The scheduler's timer
//! handle is the shim's `ModelTimer`, whose cancel sets a flag.
//!
//! Checked: a cancel racing a (re-)arm never leaves a timer armed; of a
//! delivery, a cancel and an end for dead letters racing on one slot,
//! exactly one wins, and the message goes to that one only (a cancelled
//! message is neither delivered nor dead-lettered, as decision 0008 says);
//! a timer still armed is disarmed by a winning cancel or end.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release`.
//!
//! Mutations checked to be caught (each applied alone, then reverted):
//!
//! - `arm_with` storing the handle without re-checking `is_active` under
//!   the lock: `a_cancel_racing_a_rearm_leaves_no_timer_armed` fails (the
//!   cancel ran between the first check and the store, and the new timer
//!   stays armed).
//! - `transition` as a load and a store instead of a compare-and-swap (a
//!   check-then-act split): `delivery_cancel_and_end_have_one_winner`
//!   fails (two winners, the message delivered and cancelled).
//! - `end` without disarming the armed timer: the same model fails.
//! - `cancel` taking the armed timer before its transition, outside the
//!   lock: `a_cancel_racing_a_rearm_leaves_no_timer_armed` fails.
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;
use proscenium::__loom::{ModelTimer, Payload, SlotState, CANCELLED, DONE};

type Slot = SlotState<u32, ModelTimer>;

fn flag() -> Arc<AtomicBool> {
    Arc::new(AtomicBool::new(false))
}

fn set(f: &AtomicBool) -> bool {
    f.load(Ordering::SeqCst)
}

/// A repeating timer re-arms (its message was taken for handling) while
/// the actor cancels it: whichever handle ends up stored is cancelled.
#[test]
fn a_cancel_racing_a_rearm_leaves_no_timer_armed() {
    loom::model(|| {
        let slot: Arc<Slot> = Arc::new(SlotState::new(Payload::Every(Box::new(|| 7))));
        // The first arm (`start`), before anyone else sees the slot.
        let first = flag();
        slot.arm_with(|| ModelTimer::new(Arc::clone(&first)));
        let second = flag();
        let scheduled = flag();
        let rearm = {
            let slot = Arc::clone(&slot);
            let second = Arc::clone(&second);
            let scheduled = Arc::clone(&scheduled);
            thread::spawn(move || {
                slot.arm_with(|| {
                    scheduled.store(true, Ordering::SeqCst);
                    ModelTimer::new(second)
                })
            })
        };
        let cancel = {
            let slot = Arc::clone(&slot);
            thread::spawn(move || slot.cancel().is_some())
        };
        rearm.join().expect("re-arm");
        assert!(cancel.join().expect("cancel"), "the only cancel wins");
        assert_eq!(slot.state(), CANCELLED);
        if set(&scheduled) {
            assert!(set(&second), "the re-armed timer outlived the cancel");
        } else {
            assert!(set(&first), "the first timer outlived the cancel");
        }
        // The first timer fired (that is what re-arms); only a cancel that
        // came before the re-arm's store finds it.
    });
}

/// A single timer's message: the run holder delivers it (`timer_due`'s
/// transition, then `produce`), the actor cancels it, and the timer
/// callback, finding the target gone, ends it for dead letters; all at
/// once. Exactly one wins, and only the winner gets the message.
#[test]
fn delivery_cancel_and_end_have_one_winner() {
    loom::model(|| {
        let slot: Arc<Slot> = Arc::new(SlotState::new(Payload::Once(Some(7))));
        let armed = flag();
        slot.arm_with(|| ModelTimer::new(Arc::clone(&armed)));
        let deliver = {
            let slot = Arc::clone(&slot);
            thread::spawn(move || {
                if slot.transition(DONE) {
                    slot.produce()
                } else {
                    None
                }
            })
        };
        let cancel = {
            let slot = Arc::clone(&slot);
            thread::spawn(move || match slot.cancel() {
                Some(Payload::Once(msg)) => Some(msg),
                Some(Payload::Every(_)) => unreachable!("a single timer"),
                None => None,
            })
        };
        let dead = if slot.end() { slot.produce() } else { None };
        let delivered = deliver.join().expect("deliver");
        let cancelled = cancel.join().expect("cancel");
        let winners = usize::from(delivered.is_some())
            + usize::from(cancelled.is_some())
            + usize::from(dead.is_some());
        assert_eq!(
            winners, 1,
            "delivered {delivered:?}, cancelled {cancelled:?}, dead {dead:?}"
        );
        match cancelled {
            // The cancel holds the message (to drop it) and nobody else.
            Some(msg) => assert_eq!(msg, Some(7)),
            None => assert_eq!(delivered.or(dead), Some(7)),
        }
        if delivered.is_none() {
            assert!(set(&armed), "a cancel or end left the timer armed");
        }
        assert!(!slot.is_active());
        assert_eq!(slot.produce(), None, "the message was taken once");
    });
}
