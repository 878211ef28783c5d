//! Idle/searching accounting and the park/unpark handshake.
//!
//! This module is the part of the scheduler that a loom model checks
//! (`loom-tests/tests/scheduler_idle.rs`), so it knows nothing of deques:
//! the worker passes "is there shared work?" in as a closure.
//!
//! # The protocol
//!
//! One word, [`Idle::state`], counts the *unparked* workers and, of those,
//! the *searching* ones (looking for work to steal, not yet running any).
//!
//! * **Submit** (anyone): make the work visible (push to a queue), then
//!   [`Idle::notify_one`]: a `SeqCst` fence, read `state`, and only if no
//!   worker is searching and some worker is parked, take the sleeper lock,
//!   pop one sleeper, count it as unparked *and searching*, and unpark it.
//!   Counting it as searching at once is what stops a burst of submits from
//!   waking every worker (no thundering herd): the next submit sees a
//!   searcher and leaves the others asleep.
//! * **Park** (a worker that found nothing): [`Idle::park`] takes the
//!   sleeper lock, subtracts itself from `state` (and from the searchers if
//!   it was one), registers as a sleeper, then issues a `SeqCst` fence and
//!   **re-checks every shared queue**. Only if they are all empty does it
//!   block on its [`Parker`].
//!
//! Why no wake-up is lost: the submitter does *push; fence; read state* and
//! the parking worker does *write state; fence; read queues*. The two fences
//! are totally ordered (store-buffer / Dekker). If the worker's fence comes
//! second, its re-check sees the pushed work and it does not sleep. If the
//! submitter's fence comes second, it reads a state in which this worker is
//! already parked: either it finds no searcher and wakes a sleeper, or it
//! finds a searcher, which itself will either run work or go through this
//! same park path (and its re-check, ordered after the push, sees the work).
//!
//! A searcher that finds work stops searching; if it was the last searcher
//! it must call [`Idle::notify_one`] so that the rest of the work (stealing
//! takes a batch; more may be queued) finds a worker too.
//!
//! # Parking in the I/O driver
//!
//! [`Idle::park_with`] lets the worker choose how to block once the
//! re-check found nothing: once the I/O reactor runs, each worker blocks in
//! its own shard's poll ([`Parker::park_driver`]) instead of on its
//! condvar. That
//! changes only *how* it sleeps, not the handshake: the announcement, the
//! fence and the re-check come first, exactly as above, and a notifier that
//! pops this worker unparks its [`Parker`], which reports that the worker
//! waits in the driver; `notify_one` then runs the driver wake-up given to
//! [`Idle::with_driver_wake`] with that worker's index (its shard's
//! `mio::Waker`). The poll also
//! returns on I/O events; the worker dispatches them itself and, if that
//! woke a task (into its own queue), leaves the park as
//! [`Unparked::Polled`].

use crate::park::Parker;
use crate::sync::{fence, lock, AtomicBool, AtomicUsize, Mutex, Ordering};
use crossbeam_utils::CachePadded;

/// Bits of [`Idle::state`] that count searching workers.
const SEARCHING_MASK: usize = (1 << UNPARKED_SHIFT) - 1;
/// Shift of the unparked-worker count in [`Idle::state`].
const UNPARKED_SHIFT: usize = 16;
/// One unparked worker, in [`Idle::state`] units.
const UNPARKED_ONE: usize = 1 << UNPARKED_SHIFT;
/// Most workers [`Idle`] can count (the searching field must not overflow).
pub const MAX_WORKERS: usize = SEARCHING_MASK;

/// How a worker's [`Idle::park`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Unparked {
    /// The re-check after announcing the park found shared work; the worker
    /// did not sleep. It is now counted as unparked and searching.
    WorkFound,
    /// A submitter (or a worker handing on the search) woke it. It is
    /// counted as unparked and searching.
    Notified,
    /// [`Idle::shutdown`] was called. The worker should exit.
    Shutdown,
    /// The worker's blocking step (see [`Idle::park_with`]) polled the I/O
    /// driver and woke tasks. It is counted as unparked and *not*
    /// searching: the work is in its own queue.
    Polled,
}

/// A decoded view of [`Idle::state`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleSnapshot {
    /// Workers not parked (running, searching, or about to park).
    pub unparked: usize,
    /// Unparked workers that are looking for work.
    pub searching: usize,
}

impl IdleSnapshot {
    fn decode(state: usize) -> IdleSnapshot {
        IdleSnapshot {
            unparked: state >> UNPARKED_SHIFT,
            searching: state & SEARCHING_MASK,
        }
    }
}

/// Idle/searching accounting for a fixed set of workers, with one
/// [`Parker`] each.
#[derive(Debug)]
pub struct Idle {
    /// `unparked << UNPARKED_SHIFT | searching`. Written (read-modify-write
    /// only) by workers changing their own status and by notifiers waking a
    /// sleeper; the unparked count changes only under `sleepers`' lock.
    state: CachePadded<AtomicUsize>,
    /// Indices of parked workers. Only touched on the slow paths (park,
    /// wake-up), never on a submit that finds a searcher or no sleeper.
    sleepers: Mutex<Vec<usize>>,
    /// Set once by [`Idle::shutdown`]; read by workers between runs (padded:
    /// away from the sleeper lock, which parks and wakes write).
    shutdown: CachePadded<AtomicBool>,
    parkers: Box<[CachePadded<Parker>]>,
    num_workers: usize,
    /// Wakes a worker's I/O driver, for a sleeper that blocks in it.
    driver_wake: Option<DriverWake>,
}

/// Wakes worker `i` (the argument) blocked in its I/O driver's poll.
struct DriverWake(Box<dyn Fn(usize) + Send + Sync>);

impl std::fmt::Debug for DriverWake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DriverWake(..)")
    }
}

impl Idle {
    /// Accounting for `num_workers` workers, all unparked, none searching.
    ///
    /// # Panics
    ///
    /// If `num_workers` is 0 or above [`MAX_WORKERS`] (the builder rejects
    /// both before getting here).
    pub fn new(num_workers: usize) -> Idle {
        assert!(
            (1..=MAX_WORKERS).contains(&num_workers),
            "worker count out of range"
        );
        Idle {
            state: CachePadded::new(AtomicUsize::new(num_workers << UNPARKED_SHIFT)),
            sleepers: Mutex::new(Vec::with_capacity(num_workers)),
            shutdown: CachePadded::new(AtomicBool::new(false)),
            parkers: (0..num_workers)
                .map(|_| CachePadded::new(Parker::new()))
                .collect(),
            num_workers,
            driver_wake: None,
        }
    }

    /// As [`Idle::new`], for workers that may block in an I/O driver (see
    /// [`Idle::park_with`]): `driver_wake(worker)` wakes the poll that
    /// worker `worker` blocks in.
    pub fn with_driver_wake(
        num_workers: usize,
        driver_wake: impl Fn(usize) + Send + Sync + 'static,
    ) -> Idle {
        Idle {
            driver_wake: Some(DriverWake(Box::new(driver_wake))),
            ..Idle::new(num_workers)
        }
    }

    /// Unparks `worker`, through the I/O driver if it blocks there.
    fn unpark(&self, worker: usize) {
        if self.parkers[worker].unpark() {
            if let Some(wake) = &self.driver_wake {
                (wake.0)(worker);
            }
        }
    }

    /// Wakes every parked worker's blocking step once, without waking it
    /// as a worker: it is still a sleeper, so it blocks again (`park_with`
    /// treats the return as a stale token), through its `block` closure,
    /// which may now choose another way to sleep. The reactor's first
    /// registration calls it, so that workers parked on their condvars
    /// move into their shards' polls. Changes no count.
    pub fn nudge_all(&self) {
        for worker in 0..self.parkers.len() {
            self.unpark(worker);
        }
    }

    /// The current counts (a racy snapshot, for metrics and quiesce).
    pub fn snapshot(&self) -> IdleSnapshot {
        // SeqCst: quiesce reads this after its own SeqCst store of the
        // "quiescing" flag; paired with the SeqCst RMW in `park`, so that a
        // worker that parked without seeing the flag is counted here.
        IdleSnapshot::decode(self.state.load(Ordering::SeqCst))
    }

    /// The number of unparked workers, read with a read-modify-write (adding
    /// nothing), so that it reads the latest state: the stall monitor's
    /// look before it sleeps (`MonitorSleep::try_sleep`), which must see a
    /// worker's wake-up or be seen by it. Rare (once per monitor sleep).
    pub fn unparked_latest(&self) -> usize {
        // SeqCst RMW: same total order as the other state changes; its
        // release half hands the monitor's flag to the wake-up that reads it.
        IdleSnapshot::decode(self.state.fetch_add(0, Ordering::SeqCst)).unparked
    }

    /// Called after new work was made visible: wakes one parked worker if no
    /// worker is searching. Returns whether it woke one.
    pub fn notify_one(&self) -> bool {
        // SeqCst fence: the submitter's half of the Dekker pair with the
        // fence in `park` (push; fence; read state) vs (write state; fence;
        // re-check queues). Without it the load below may read a state from
        // before a worker parked while that worker's re-check misses the push.
        fence(Ordering::SeqCst);
        // SeqCst (not Relaxed): ordered after the fence above in the single
        // total order; pairs with the SeqCst RMWs of `park`.
        if !self.should_wake(self.state.load(Ordering::SeqCst)) {
            return false;
        }
        let mut sleepers = lock(&self.sleepers);
        // Re-read under the lock: the unparked count only changes under it.
        if !self.should_wake(self.state.load(Ordering::SeqCst)) {
            return false;
        }
        let Some(worker) = sleepers.pop() else {
            return false;
        };
        // SeqCst RMW: part of the total order that `notify_one`'s fence and
        // `park`'s fence rely on. The woken worker counts as searching from
        // now on, so later submits do not wake more workers.
        self.state.fetch_add(UNPARKED_ONE | 1, Ordering::SeqCst);
        drop(sleepers);
        self.unpark(worker);
        true
    }

    fn should_wake(&self, state: usize) -> bool {
        let snap = IdleSnapshot::decode(state);
        snap.searching == 0 && snap.unparked < self.num_workers
    }

    /// A worker with no local work asks to search. Refused when half of the
    /// unparked workers already search (they would only contend).
    pub fn transition_to_searching(&self) -> bool {
        // SeqCst: keeps every access to `state` in the one total order the
        // handshake is argued in (see the module docs).
        let snap = IdleSnapshot::decode(self.state.load(Ordering::SeqCst));
        if snap.searching > 0 && 2 * snap.searching >= snap.unparked {
            return false;
        }
        self.state.fetch_add(1, Ordering::SeqCst);
        true
    }

    /// A searching worker found work. Returns `true` if it was the last
    /// searcher: the caller **must** then call [`Idle::notify_one`].
    pub fn transition_from_searching(&self) -> bool {
        // SeqCst: same total order as `notify_one`'s read of the count.
        let prev = self.state.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(prev & SEARCHING_MASK > 0, "not searching");
        prev & SEARCHING_MASK == 1
    }

    /// Parks worker `worker`, unless `has_shared_work` finds work after the
    /// park was announced. `was_searching` says whether the worker is counted
    /// as searching. Whatever the outcome, the worker returns counted as
    /// unparked and searching (except on shutdown, where it does not matter).
    ///
    /// `on_parked` runs after the announcement with the number of workers
    /// still unparked (quiesce uses it to learn that all are parked).
    // The workers use `park_with`; the loom models use this.
    #[cfg_attr(not(loom), allow(dead_code))]
    pub fn park(
        &self,
        worker: usize,
        was_searching: bool,
        has_shared_work: impl Fn() -> bool,
        on_parked: impl FnOnce(usize),
    ) -> Unparked {
        self.park_with(
            worker,
            was_searching,
            has_shared_work,
            on_parked,
            |parker| {
                parker.park();
                false
            },
        )
    }

    /// [`Idle::park`], blocking through `block` instead of the condvar
    /// alone: `block` gets this worker's [`Parker`] and must return when it
    /// is unparked (it may return earlier: every return is re-checked). It
    /// may block in the I/O driver instead ([`Parker::park_driver`]), and
    /// returns `true` if it dispatched I/O events that woke tasks: the park
    /// then ends as [`Unparked::Polled`].
    ///
    /// `block` runs only after the announcement, the fence and the re-check
    /// (see the module docs): blocking in the driver's poll is just another
    /// way to sleep, woken by `unpark` through the driver wake-up.
    pub fn park_with(
        &self,
        worker: usize,
        was_searching: bool,
        has_shared_work: impl Fn() -> bool,
        on_parked: impl FnOnce(usize),
        mut block: impl FnMut(&Parker) -> bool,
    ) -> Unparked {
        let unparked_now = {
            let mut sleepers = lock(&self.sleepers);
            let dec = UNPARKED_ONE + usize::from(was_searching);
            // SeqCst RMW: the worker's "write state" of the Dekker pair.
            let prev = self.state.fetch_sub(dec, Ordering::SeqCst);
            sleepers.push(worker);
            (prev >> UNPARKED_SHIFT) - 1
        };
        // SeqCst fence: the worker's half of the Dekker pair with the fence
        // in `notify_one`; orders the state write above before the queue
        // re-check below, so a push that `notify_one` did not wake for is
        // seen here.
        fence(Ordering::SeqCst);
        on_parked(unparked_now);
        if has_shared_work() {
            self.unregister(worker);
            return Unparked::WorkFound;
        }
        loop {
            // Acquire: pairs with the Release store in `shutdown`.
            if self.shutdown.load(Ordering::Acquire) {
                return Unparked::Shutdown;
            }
            let polled = block(&self.parkers[worker]);
            if self.shutdown.load(Ordering::Acquire) {
                return Unparked::Shutdown;
            }
            if polled {
                // Woke tasks into this worker's queue: leave the park
                // (unless a notifier popped us meanwhile and counted us as
                // searching; then we are searching).
                let mut sleepers = lock(&self.sleepers);
                return match sleepers.iter().position(|&w| w == worker) {
                    Some(pos) => {
                        sleepers.swap_remove(pos);
                        // SeqCst RMW: same total order as the other state
                        // changes. Unparked, not searching.
                        self.state.fetch_add(UNPARKED_ONE, Ordering::SeqCst);
                        Unparked::Polled
                    }
                    None => Unparked::Notified,
                };
            }
            if !lock(&self.sleepers).contains(&worker) {
                // A notifier popped us and counted us as searching.
                return Unparked::Notified;
            }
            // A stale token from an earlier wake-up: still a sleeper.
        }
    }

    /// Takes `worker` off the sleeper list if it is still there, counting it
    /// as unparked and searching; if a notifier already popped it, the
    /// notifier did the counting.
    fn unregister(&self, worker: usize) {
        let mut sleepers = lock(&self.sleepers);
        if let Some(pos) = sleepers.iter().position(|&w| w == worker) {
            sleepers.swap_remove(pos);
            // SeqCst RMW: same total order as the other state changes.
            self.state.fetch_add(UNPARKED_ONE | 1, Ordering::SeqCst);
        }
    }

    /// Makes every current and future [`Idle::park`] return
    /// [`Unparked::Shutdown`].
    pub fn shutdown(&self) {
        // Release: pairs with the Acquire loads in `park`; whatever the
        // caller wrote before shutting down is visible to exiting workers.
        self.shutdown.store(true, Ordering::Release);
        for worker in 0..self.parkers.len() {
            self.unpark(worker);
        }
    }

    /// Whether [`Idle::shutdown`] was called.
    pub fn is_shutdown(&self) -> bool {
        // Acquire: pairs with the Release store in `shutdown`.
        self.shutdown.load(Ordering::Acquire)
    }
}
