//! The admission of submits from outside the workers, and the close that
//! ends it: the first step of a quiesce, after which nothing from outside
//! reaches the shared queues (docs/decisions/0026-loom-issue-28.md, "a
//! submit can be accepted after the quiesce's last drain").
//!
//! One word, [`SubmitGate`]'s `state`: bit 0 is [`CLOSED`]; the bits above
//! count the external submits admitted and not done pushing
//! ([`SUBMIT_ONE`] each).
//!
//! * **Submit** (any thread but this scheduler's workers):
//!   [`SubmitGate::enter`] adds `SUBMIT_ONE`. If the value it replaced has
//!   `CLOSED`, it takes its unit back and the submit is refused (the
//!   runnable is handed back); otherwise the submit is admitted, pushes,
//!   and then drops its [`Admitted`], which takes the unit back.
//! * **Close** (the quiesce): [`SubmitGate::close`] sets `CLOSED`, then
//!   waits until the count is zero.
//!
//! Why an admitted push is never missed: the additions, the take-backs and
//! the close are read-modify-writes of one word, so they have one order,
//! the word's modification order, whatever their memory orderings. A submit
//! whose addition comes after the close's RMW reads `CLOSED` and is
//! refused. One whose addition comes before it is counted in the value the
//! close's RMW reads, and a value in which the count is zero again comes
//! only after that submit's take-back (every take-back follows its own
//! addition). The take-back is a Release, every later write of the word is
//! a read-modify-write and so continues its release sequence, and the
//! close reads the zero with an Acquire: the push happens before whatever
//! the quiesce does once `close` returns (its emptiness checks, the drop of
//! the shared queues). So an accepted submit's runnable runs or is counted
//! in the report's `runnables_left`, and a refused one is handed back.
//!
//! A submit that already sees `CLOSED` in a plain load is refused without
//! writing the word, so the submits the close can wait for are the ones
//! that looked before it: finitely many, each a push into a lock-free queue
//! (no lock, no user code) away from done. The wait is short unless such a
//! submitter's thread is descheduled in the middle of its push.
//!
//! A worker's own submits (its LIFO slot; the urgent queue while the drain
//! runs) do not pass here: the quiesce joins the workers before it drops
//! the shared queues. Cost: two read-modify-writes of this word per
//! external submit, on a line that only external submitters and the close
//! write (BENCHMARKS.md, "Submits from outside: the quiesce waits for the
//! admitted ones").

use crate::sync::{AtomicUsize, Ordering};
use crossbeam_utils::CachePadded;

/// Set in the state once the gate is closed (by [`SubmitGate::close`]).
pub(crate) const CLOSED: usize = 1;
/// One admitted external submit that has not finished its push.
pub(crate) const SUBMIT_ONE: usize = 2;

/// Admits external submits until a quiesce closes it (see the module docs).
#[derive(Debug, Default)]
pub struct SubmitGate {
    /// `count * SUBMIT_ONE | CLOSED`. Written only by read-modify-writes:
    /// by external submitters (their unit, added and taken back) and, once,
    /// by the close (`CLOSED`). Padded: a submitter writes it twice per
    /// submit, and the injector's and idle state's lines are busy enough.
    state: CachePadded<AtomicUsize>,
}

/// An admitted external submit; dropping it says its push is done.
#[derive(Debug)]
#[must_use = "the submit is done pushing when this is dropped"]
pub struct Admitted<'a>(&'a SubmitGate);

impl SubmitGate {
    /// An open gate.
    pub fn new() -> SubmitGate {
        SubmitGate::default()
    }

    /// Admits an external submit, unless the gate is closed (`None`: the
    /// submit is refused).
    #[inline]
    pub fn enter(&self) -> Option<Admitted<'_>> {
        // Relaxed: only a shortcut, so that submits after the close do not
        // write the word (the close waits for the count to be zero); what
        // admits a submit is the RMW below.
        if self.state.load(Ordering::Relaxed) & CLOSED != 0 {
            return None;
        }
        // Relaxed: the admission is decided by where this RMW falls in the
        // word's modification order relative to the close's RMW, whatever
        // the ordering; nothing is read on the strength of it (the push is
        // published by `Admitted`'s take-back).
        let before = self.state.fetch_add(SUBMIT_ONE, Ordering::Relaxed);
        if before & CLOSED != 0 {
            // Relaxed: nothing to publish (nothing was pushed); as an RMW
            // it continues the release sequences the close acquires.
            self.state.fetch_sub(SUBMIT_ONE, Ordering::Relaxed);
            return None;
        }
        Some(Admitted(self))
    }

    /// Refuses every later external submit, then waits until the submits
    /// admitted before have pushed: once it returns, whatever they pushed
    /// is visible to the caller.
    pub fn close(&self) {
        // AcqRel: Acquire, so that if no submit is in flight (the count is
        // zero in the value replaced) this synchronises with the last
        // take-back (the Release in `Admitted::drop`, through its release
        // sequence); Release pairs with the Acquire in `is_closed`.
        let before = self.state.fetch_or(CLOSED, Ordering::AcqRel);
        if before < SUBMIT_ONE {
            return;
        }
        #[cfg(not(loom))]
        let backoff = crossbeam_utils::Backoff::new();
        // Acquire: pairs with the Release take-backs (see the module docs).
        while self.state.load(Ordering::Acquire) >= SUBMIT_ONE {
            #[cfg(loom)]
            crate::sync::thread::yield_now();
            // Spins a few times, then yields the thread (never parks).
            #[cfg(not(loom))]
            backoff.snooze();
        }
    }

    /// Whether [`close`](Self::close) has started.
    #[inline]
    pub fn is_closed(&self) -> bool {
        // Acquire: pairs with the close's Release (a thread that sees the
        // gate closed sees what the quiescing thread did before closing).
        self.state.load(Ordering::Acquire) & CLOSED != 0
    }
}

impl Drop for Admitted<'_> {
    #[inline]
    fn drop(&mut self) {
        // Release: publishes the push before it to the close, whose Acquire
        // load of a zero count (or whose AcqRel RMW) reads this write or a
        // later RMW in its release sequence.
        self.0.state.fetch_sub(SUBMIT_ONE, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may unwrap

    use super::SubmitGate;
    use std::sync::{mpsc, Arc};
    use std::thread;
    use std::time::Duration;

    #[test]
    fn admits_until_closed_then_refuses() {
        let gate = SubmitGate::new();
        assert!(!gate.is_closed());
        drop(gate.enter().expect("open"));
        drop(gate.enter().expect("still open"));
        gate.close();
        assert!(gate.is_closed());
        assert!(gate.enter().is_none());
        // A second close finds nothing in flight.
        gate.close();
    }

    #[test]
    fn close_waits_for_the_submits_admitted_before_it() {
        let gate = Arc::new(SubmitGate::new());
        let first = gate.enter().expect("open");
        let (closed_tx, closed_rx) = mpsc::channel();
        let closer = {
            let gate = Arc::clone(&gate);
            thread::spawn(move || {
                gate.close();
                closed_tx.send(()).unwrap();
            })
        };
        while !gate.is_closed() {
            thread::yield_now();
        }
        // Refused from now on, and a refused submit does not hold the close.
        assert!(gate.enter().is_none());
        // A bounded wait for what must not happen: the close returning while
        // an admitted submit has not finished.
        assert!(
            closed_rx.recv_timeout(Duration::from_millis(100)).is_err(),
            "the close returned while an admitted submit was under way"
        );
        drop(first);
        closed_rx.recv_timeout(Duration::from_secs(60)).unwrap();
        closer.join().unwrap();
    }
}
