//! loom models of the submit gate alone (`SubmitGate`,
//! `scheduler/src/submit_gate.rs`): what an admitted submit writes before
//! it drops its admission happens before whatever the close's caller does
//! once `close` returns, and a refused submit writes nothing.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 cargo test -p proscenium-loom-tests --release --test submit_gate`.
//!
//! Each submitter's push is a write to a loom cell of its own; the closing
//! thread reads every cell once `close` returns, before it joins the
//! submitters. A write that does not happen before that read (an admitted
//! submit still under way, or one whose push is not ordered before the
//! close's return) is a causality violation, which loom reports; a write
//! it does see must belong to an admitted submit.
//!
//! `scheduler_close.rs` runs the same gate inside the real quiesce and
//! worker loop, where the park handshake (a submitter's wake-up, the
//! quiesce's wait for every worker to park) orders most of what the gate
//! orders, so there a weakened ordering of the gate went unseen. Here
//! nothing else orders the two sides.
//!
//! Mutations checked to be caught (each applied alone, seen to fail,
//! reverted):
//! - `close` not waiting for the count: "Causality violation: Concurrent
//!   read and write accesses" in both models;
//! - `Admitted`'s take-back Relaxed: the same;
//! - `close`'s wait loading the count Relaxed: the same (the reads come
//!   before the model's `is_closed`, an Acquire load of the same word that
//!   would order them by itself);
//! - `close`'s RMW Relaxed, or Release without Acquire (the close then
//!   returns at once when no submit is in flight, without acquiring the
//!   last take-back): the same;
//! - a refused submit keeping its unit: the close never returns ("Model
//!   exceeded maximum number of branches") in
//!   `submit_gate_close_sees_two_admitted_pushes`.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use proscenium_scheduler::__loom::SubmitGate;

/// `submitters` threads each try one submit (its push: writing `true` into
/// its cell) while the main thread closes the gate, then reads the cells.
fn close_against(submitters: usize) {
    let gate = Arc::new(SubmitGate::new());
    let cells: Arc<Vec<UnsafeCell<bool>>> =
        Arc::new((0..submitters).map(|_| UnsafeCell::new(false)).collect());
    let threads: Vec<_> = (0..submitters)
        .map(|i| {
            let gate = Arc::clone(&gate);
            let cells = Arc::clone(&cells);
            thread::spawn(move || {
                let Some(admitted) = gate.enter() else {
                    return false;
                };
                // The model checks this: loom reports a write that does not
                // happen before the closing thread's read.
                // SAFETY: each submitter writes only its own cell; it is read
                // only after `close`, which waits for this admission's drop.
                cells[i].with_mut(|p| unsafe { *p = true });
                drop(admitted);
                true
            })
        })
        .collect();
    gate.close();
    // Read at once: nothing but the close orders the reads after the
    // writes (`is_closed` below is an Acquire load of the same word, which
    // would order them by itself).
    let pushed: Vec<bool> = cells
        .iter()
        // SAFETY: see the write above.
        .map(|c| c.with(|p| unsafe { *p }))
        .collect();
    assert!(gate.is_closed());
    assert!(gate.enter().is_none(), "admitted after the close");
    for (t, pushed) in threads.into_iter().zip(pushed) {
        let admitted = t.join().expect("submitter");
        assert_eq!(
            admitted, pushed,
            "an admitted push was not seen after the close, or a refused one was"
        );
    }
}

/// One submit against the close.
#[test]
fn submit_gate_close_sees_an_admitted_push() {
    proscenium_loom_tests::model("submit_gate_close_sees_an_admitted_push", || {
        close_against(1)
    });
}

/// Two submits against the close: two units in the count at once, and a
/// refused submit's take-back among the admitted ones'.
#[test]
fn submit_gate_close_sees_two_admitted_pushes() {
    proscenium_loom_tests::model("submit_gate_close_sees_two_admitted_pushes", || {
        close_against(2)
    });
}
