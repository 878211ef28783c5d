//! loom models of the system's one-shot claims (`engine/src/runtime/claim.rs`,
//! used by `engine/src/runtime/system.rs`): `terminate_called`, which only
//! the first `terminate` call wins (the others wait on the same
//! termination), and `reaping`, which only the first report of the root
//! guardian's end wins (the reaper thread is spawned once). The last user
//! handle's drop reads both claims as a hint before it spawns a task that
//! calls `terminate`.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release --test system_claims`.
//!
//! The models drive the real `Claim` as the system's three call sites do:
//! `terminate` (`claim`), `last_user_handle_dropped` (`is_claimed` on both
//! flags, then, through its task, `terminate`) and `root_terminated`
//! (`claim` on `reaping`). What a winner starts (the coordinated-shutdown
//! run, the reaper) is the model's count; the termination's result slot,
//! on which the losers wait, is modelled in `promise.rs`.
//!
//! Mutations of `claim.rs` checked to be caught (each applied alone, seen
//! to fail, reverted):
//! - `claim` as a load and a store (`let was = load(Acquire);
//!   store(true, Release); !was`) instead of one swap: "the termination
//!   was started 3 times" in `terminate_starts_once_whoever_calls_it`,
//!   and "the reaper was spawned 2 times" in
//!   `the_reaper_is_spawned_once`;
//! - `claim` that looks at the hint first and stores without swapping
//!   (`if self.is_claimed() { return false } self.claimed.store(true);
//!   true`): the same two failures.
//!
//! Not caught, by design: the swap made Relaxed. One read-modify-write
//! decides the winner under any ordering, and no caller reads data on the
//! strength of a claim (the AcqRel is there for a future one).
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use proscenium::__loom::Claim;

/// The system's two flags and what their winners start.
struct System {
    terminate_called: Claim,
    reaping: Claim,
    /// How many times the termination was started.
    terminations: AtomicUsize,
    /// How many times the reaper was spawned.
    reapers: AtomicUsize,
}

impl System {
    fn new() -> System {
        System {
            terminate_called: Claim::new(),
            reaping: Claim::new(),
            terminations: AtomicUsize::new(0),
            reapers: AtomicUsize::new(0),
        }
    }

    /// `ActorSystem::terminate`.
    fn terminate(&self) {
        if !self.terminate_called.claim() {
            return;
        }
        // SeqCst: a model's count, read after the joins.
        self.terminations.fetch_add(1, Ordering::SeqCst);
    }

    /// `SystemInner::last_user_handle_dropped`: a hint, then (in its
    /// spawned task) `terminate`.
    fn last_user_handle_dropped(&self) {
        if self.terminate_called.is_claimed() || self.reaping.is_claimed() {
            return;
        }
        self.terminate();
    }

    /// `ActorSystem::root_terminated`.
    fn root_terminated(&self) {
        if !self.reaping.claim() {
            return;
        }
        // SeqCst: a model's count, read after the joins.
        self.reapers.fetch_add(1, Ordering::SeqCst);
    }
}

/// Two `terminate` calls (an application thread, a signal's run) and the
/// last handle's drop: the termination starts exactly once.
#[test]
fn terminate_starts_once_whoever_calls_it() {
    loom::model(|| {
        let system = Arc::new(System::new());
        let threads: Vec<_> = (0..2)
            .map(|i| {
                let system = Arc::clone(&system);
                thread::spawn(move || {
                    if i == 0 {
                        system.terminate();
                    } else {
                        system.last_user_handle_dropped();
                    }
                })
            })
            .collect();
        system.terminate();
        for t in threads {
            t.join().expect("a model thread");
        }
        let started = system.terminations.load(Ordering::SeqCst);
        assert_eq!(started, 1, "the termination was started {started} times");
    });
}

/// The root guardian's end reported twice (its worker, and a terminate
/// that finds the tree already gone) while the last handle is dropped:
/// the reaper is spawned exactly once, and a drop that comes after the
/// reaping began starts no termination.
#[test]
fn the_reaper_is_spawned_once() {
    loom::model(|| {
        let system = Arc::new(System::new());
        let other = {
            let system = Arc::clone(&system);
            thread::spawn(move || system.root_terminated())
        };
        let dropper = {
            let system = Arc::clone(&system);
            thread::spawn(move || system.last_user_handle_dropped())
        };
        system.root_terminated();
        other.join().expect("a model thread");
        dropper.join().expect("a model thread");
        let spawned = system.reapers.load(Ordering::SeqCst);
        assert_eq!(spawned, 1, "the reaper was spawned {spawned} times");
        // A drop after the reaping began (seen through the joins) starts
        // no termination: its hint sees the claim.
        let before = system.terminations.load(Ordering::SeqCst);
        system.last_user_handle_dropped();
        assert_eq!(system.terminations.load(Ordering::SeqCst), before);
    });
}
