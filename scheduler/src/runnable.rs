//! What the scheduler runs: the [`Runnable`] trait, its [`Budget`] and its
//! [`RunOutcome`].

use crate::sync::Arc;

/// Something the scheduler can run: an actor cell, a future task, a timer
/// callback.
///
/// A submission is run at most once, by one worker: once, unless the
/// workers stop first (a quiesce that reached its deadline, or a dropped
/// [`Scheduler`](crate::Scheduler)), in which case it is dropped without
/// running and counted in the [`QuiesceReport`](crate::QuiesceReport). The
/// scheduler never runs the same submission twice concurrently and never
/// drops one while it is running. Submitting the same `Arc` again while it is queued or running is
/// the caller's business: an actor cell's run-state word guarantees that only
/// one winner submits it at a time.
pub trait Runnable: Send + Sync + 'static {
    /// Does up to `budget` units of work (an actor: messages).
    ///
    /// Return [`RunOutcome::Done`] once the runnable released itself (it will
    /// be submitted again by whoever wins its run-state), or
    /// [`RunOutcome::Yield`] when it used its budget and still has work: the
    /// scheduler then puts it at the back of the worker's local queue.
    ///
    /// A panic is caught, logged and counted; the runnable is then dropped
    /// (as if it returned `Done`) and the worker goes on.
    fn run(self: Arc<Self>, budget: &mut Budget) -> RunOutcome;
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum RunOutcome {
    /// The runnable released itself; the scheduler forgets it.
    Done,
    /// The runnable used its budget and has more work: requeue it at the back
    /// of the local queue (never the LIFO slot, so it cannot starve others).
    Yield,
}

/// How much work one run may do before it yields.
///
/// The scheduler gives each run a budget of `throughput` units
/// ([`crate::Builder::throughput`]); a runnable spends one per message.
///
/// A budget is plain data: it holds no reference to its worker, so one kept
/// past its run (cloned, or moved out with `mem::replace`) is harmless.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    remaining: u32,
    units: u32,
    /// Made by a worker for a run: from the second unit on, `consume` makes
    /// the LIFO slot of the worker it runs on stealable (see
    /// [`Budget::consume`]).
    on_worker: bool,
}

impl Budget {
    /// A budget of `units`.
    pub fn new(units: u32) -> Budget {
        Budget {
            remaining: units,
            units,
            on_worker: false,
        }
    }

    /// A budget for a run on a worker.
    pub(crate) fn on_worker(units: u32) -> Budget {
        Budget {
            remaining: units,
            units,
            on_worker: true,
        }
    }

    /// Units left.
    pub fn remaining(&self) -> u32 {
        self.remaining
    }

    /// Spends one unit if there is one. Returns `false` when the budget is
    /// already exhausted (the caller should stop and yield).
    ///
    /// Call it with the next unit of work in hand (check
    /// [`is_exhausted`](Self::is_exhausted) before fetching it): from the
    /// second unit on, a runnable that this run woke and that
    /// waits in the worker's LIFO slot moves to the worker's stealable
    /// queue: the slot is for "run it right after me", and this run is
    /// going on, possibly for long (a slow or blocking handler), so another
    /// worker may take it rather than let it wait behind us.
    #[inline]
    pub fn consume(&mut self) -> bool {
        if self.remaining == 0 {
            return false;
        }
        if self.remaining != self.units && self.on_worker {
            // The worker is found through this thread's current-worker
            // pointer, never through the budget: a budget kept past its
            // run, or moved to another thread, at worst shares the LIFO
            // slot of whatever worker spends it (always harmless).
            crate::worker::share_current_lifo();
        }
        self.remaining -= 1;
        true
    }

    /// Whether no units are left.
    pub fn is_exhausted(&self) -> bool {
        self.remaining == 0
    }
}

/// The text of a panic payload, when it is a string.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "Box<dyn Any>".to_owned()
    }
}
