//! The stall monitor's sleep handshake with the workers (the monitor runs
//! on the timer thread, see `timer.rs`): the monitor stops ticking once
//! every worker has been parked for a while, so an idle scheduler costs
//! nothing, and the first worker to wake restarts it. The monitor must
//! not sleep while a worker runs (a runnable stuck behind a long run would
//! not be rescued) unless that worker wakes it.
//!
//! Compiled under loom too, where `loom-tests/tests/monitor_sleep.rs`
//! drives it with the real [`Idle`].

use crate::idle::Idle;
use crate::sync::{AtomicBool, Ordering};

/// Whether the stall monitor stopped ticking.
#[derive(Debug, Default)]
pub struct MonitorSleep {
    /// Set by the monitor when it stops ticking; cleared by the first
    /// worker to wake, which then unparks it (or by the monitor itself, if
    /// it sees a worker awake after setting it).
    asleep: AtomicBool,
}

impl MonitorSleep {
    /// Ticking.
    pub fn new() -> MonitorSleep {
        MonitorSleep {
            asleep: AtomicBool::new(false),
        }
    }

    /// Whether the monitor stopped ticking (until a worker wakes it).
    #[inline]
    pub fn is_asleep(&self) -> bool {
        // SeqCst: a load of the flag of the handshake (see `try_sleep`);
        // the monitor reads its own store or a worker's clear.
        self.asleep.load(Ordering::SeqCst)
    }

    /// The monitor saw every worker parked for a while: stops ticking,
    /// unless a worker is awake once the flag is published. Returns whether
    /// it stopped; the monitor then sleeps until a worker's [`wake`](Self::wake)
    /// returns `true` and that worker unparks it.
    pub fn try_sleep(&self, idle: &Idle) -> bool {
        // Publish the flag, then look at the workers again. The look is a
        // read-modify-write of the idle state (`Idle::unparked_latest`),
        // and so is every worker's wake-up (before its `wake`): either the
        // look comes after a worker's wake-up in the state's modification
        // order and sees it awake, or that wake-up reads the look's write,
        // which releases this store to it, and its `wake` sees the flag.
        // (A SeqCst load for the look is correct under the C++ model's
        // single total order too, but loom does not model that order for
        // loads and stores, so the RMW is what lets loom check this.)
        self.asleep.store(true, Ordering::SeqCst);
        if idle.unparked_latest() > 0 {
            // SeqCst: as above; a worker that cleared it first only made a
            // spurious unpark.
            self.asleep.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// A worker woke (left a park, or gave it up), after its wake-up changed
    /// the idle state: returns whether the caller must unpark the monitor
    /// (it cleared the flag).
    #[inline]
    pub fn wake(&self) -> bool {
        // SeqCst: the worker's half of the handshake (see `try_sleep`): its
        // wake-up's RMW of the idle state happens before this load. The
        // load first, so that a running scheduler's wake-ups only read.
        self.asleep.load(Ordering::SeqCst) && self.asleep.swap(false, Ordering::SeqCst)
    }
}
