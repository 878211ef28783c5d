//! loom models of a worker's LIFO slot (`scheduler/src/lifo.rs`): the
//! owning worker puts and takes, the stall monitor steals; every occupant
//! is handed out exactly once, and no access to the occupant races (loom's
//! `UnsafeCell` reports a read or write that is not ordered after the last
//! one by the state word's synchronisation).
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release`.
//!
//! Mutations of `lifo.rs` checked to be caught (each as a causality
//! violation on the occupant or a lost/duplicated value): the thief's CAS
//! from FULL with Relaxed success ordering; the thief's store of EMPTY
//! Relaxed; `write`'s store of FULL Relaxed; the owner's `put` writing the
//! occupant while the state is TAKING (instead of handing the value back);
//! the owner's `take` reading the occupant after a plain load instead of
//! its CAS.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use proscenium_scheduler::__loom::LifoSlot;

/// The owner puts two values (the second displaces the first unless the
/// thief took it) and then takes what is left; the thief steals once. Each
/// value comes out exactly once, from one of the three places.
#[test]
fn lifo_owner_and_thief_hand_out_each_value_once() {
    loom::model(|| {
        let slot: Arc<LifoSlot<u32>> = Arc::new(LifoSlot::new());
        let thief = {
            let slot = Arc::clone(&slot);
            thread::spawn(move || slot.steal())
        };
        let mut out = Vec::new();
        // SAFETY: this thread is the slot's only owner.
        unsafe {
            out.extend(slot.put(1));
            out.extend(slot.put(2));
            out.extend(slot.take());
        }
        out.extend(thief.join().expect("thief"));
        out.sort_unstable();
        assert_eq!(out, vec![1, 2]);
        assert!(!slot.is_full());
    });
}

/// The occupant is a heap value: a racing move would be a use-after-free
/// or a double drop, which loom's leak and causality checks report.
#[test]
fn lifo_a_stolen_box_is_moved_once() {
    loom::model(|| {
        let slot: Arc<LifoSlot<Box<u32>>> = Arc::new(LifoSlot::new());
        // SAFETY: this thread is the slot's only owner.
        unsafe { assert!(slot.put(Box::new(7)).is_none()) };
        let thief = {
            let slot = Arc::clone(&slot);
            thread::spawn(move || slot.steal())
        };
        // SAFETY: as above.
        let mine = unsafe { slot.take() };
        let stolen = thief.join().expect("thief");
        let got: Vec<u32> = mine.into_iter().chain(stolen).map(|b| *b).collect();
        assert_eq!(got, vec![7]);
        // The owner fills it again after the thief emptied it.
        // SAFETY: as above.
        unsafe {
            let spilled = slot.put(Box::new(8));
            assert!(spilled.is_none());
            assert_eq!(slot.take().map(|b| *b), Some(8));
        }
    });
}

/// Two thieves (the monitor looks at every slot; a second look overlaps
/// the first only in this model, but the protocol must hold for any
/// number of thieves) and an owner that takes: one winner.
#[test]
fn lifo_two_thieves_and_the_owner_one_winner() {
    loom::model(|| {
        let slot: Arc<LifoSlot<u32>> = Arc::new(LifoSlot::new());
        // SAFETY: this thread is the slot's only owner.
        unsafe { assert!(slot.put(5).is_none()) };
        let thieves: Vec<_> = (0..2)
            .map(|_| {
                let slot = Arc::clone(&slot);
                thread::spawn(move || slot.steal())
            })
            .collect();
        // SAFETY: as above.
        let mut got: Vec<u32> = unsafe { slot.take() }.into_iter().collect();
        for t in thieves {
            got.extend(t.join().expect("thief"));
        }
        assert_eq!(got, vec![5]);
    });
}
