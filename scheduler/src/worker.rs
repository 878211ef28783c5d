//! A worker thread: its queues, the find-work order, the run loop, and the
//! thread-local pointer that lets code running on a worker find it.
//!
//! Compiled under `--cfg loom` too, on the stand-in queues of `deque` and
//! without the reactor, the timer thread and the counters (see
//! `Shared::poll_io_now`, `Shared::park_worker`, `Shared::wake_monitor`,
//! `Counters::bump`): the models in `loom-tests/tests/worker.rs` run this
//! loop (see docs/decisions/0018-loom-worker-loop.md).
// Under loom the public items (`WorkerId`, `assert_not_on_worker`) are not
// exported.
#![cfg_attr(loom, allow(dead_code, unreachable_pub))]

use crate::deque::{Steal, Worker as Deque};
use crate::idle::Unparked;
use crate::lifo::LifoSlot;
use crate::metrics::Counters;
pub(crate) use crate::runnable::panic_message;
use crate::runnable::{Budget, RunOutcome};
use crate::scheduler::{Job, Shared};
use crate::sync::{Arc, Ordering};
use crossbeam_utils::{Backoff, CachePadded};
use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

/// How many times in a row the LIFO slot may be served before its occupant
/// goes to the back of the local queue (so two runnables waking each other
/// cannot starve the rest). tokio uses 3.
const LIFO_STREAK_LIMIT: u32 = 3;

/// How many find-work rounds a searching worker makes before it parks.
const SEARCH_ROUNDS: u32 = 4;

/// How often (in runs) a worker polls the global injector before its own
/// queues, so external submissions never starve behind local work. A prime,
/// as in tokio, so it does not beat in step with periodic workloads.
pub(crate) const INJECTOR_INTERVAL: u32 = 61;

/// The identity of a worker thread within its scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkerId(pub(crate) usize);

impl WorkerId {
    /// The worker's index, `0..workers`.
    pub fn index(self) -> usize {
        self.0
    }
}

/// The parts of a worker that code running on it may touch (through
/// [`CURRENT`]): only shared references, and only the LIFO slot's and the
/// deque's `&self` methods, so re-entrant submits from inside a run are
/// fine. Not `Sync` (the deque's `Worker` is not), so a `&Local` never
/// leaves its worker's thread: this thread is the LIFO slot's owner.
pub(crate) struct Local {
    pub(crate) shared: Arc<Shared>,
    pub(crate) index: usize,
    /// The runnable the current run woke last. This worker runs it next;
    /// the timer thread's stall monitor takes it if this worker's run goes
    /// on for too long (see `timer.rs`). Also in `Shared::lifos`.
    lifo: Arc<CachePadded<LifoSlot<Job>>>,
    deque: Deque<Job>,
}

#[cfg(not(loom))]
thread_local! {
    /// The worker running on this thread, or null. Set by `run` for the
    /// whole life of the worker loop, to a `Local` on that loop's stack;
    /// cleared (by `CurrentGuard`) before the `Local` is dropped.
    static CURRENT: Cell<*const Local> = const { Cell::new(ptr::null()) };
}

#[cfg(loom)]
loom::thread_local! {
    /// As above, per loom thread.
    static CURRENT: Cell<*const Local> = Cell::new(ptr::null());
}

/// Clears [`CURRENT`] on drop, even when unwinding.
struct CurrentGuard;

impl Drop for CurrentGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(ptr::null()));
    }
}

/// Runs `f` with the current worker, if this thread is one.
#[inline]
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&Local>) -> R) -> R {
    CURRENT.with(|c| {
        let p = c.get();
        // `CURRENT` is non-null only while `run` executes on this thread, and
        // points to the `Local` that `run` keeps alive on its stack until
        // `CurrentGuard` resets it; `Local` is only used through `&` (its
        // mutable parts are `Cell`s).
        // SAFETY: the reference does not escape `f`, which runs on this
        // thread inside that window (see above).
        let local = unsafe { p.as_ref() };
        f(local)
    })
}

/// The worker this thread is, if it is a scheduler worker.
pub fn current_worker() -> Option<WorkerId> {
    with_current(|l| l.map(|l| WorkerId(l.index)))
}

/// Panics if this thread is a scheduler worker (of any scheduler): every
/// blocking wait in proscenium calls it first, so that blocking inside an
/// actor's handler or a task fails at once with a message that says what
/// to do instead, rather than holding the worker until a timeout or
/// deadlocking the pool (tokio refuses `block_on` inside a runtime for the
/// same reason).
///
/// `what` names the blocking call, such as `"Ask::wait"`.
#[track_caller]
pub fn assert_not_on_worker(what: &str) {
    if let Some(worker) = current_worker() {
        panic!(
            "{what} called on scheduler worker {} (inside an actor's handler or a task): \
             blocking there holds the worker and can deadlock the scheduler. \
             Await the future in a task instead (`Handle::spawn`), or have the \
             result sent to the actor as a message.",
            worker.index()
        );
    }
}

/// Makes the LIFO slot of the worker this thread is, if any, stealable
/// (see [`Budget::consume`](crate::Budget::consume)).
#[inline]
pub(crate) fn share_current_lifo() {
    with_current(|local| {
        if let Some(local) = local {
            local.share_lifo();
        }
    });
}

impl Local {
    /// Submits from inside a run: into the LIFO slot, displacing the
    /// previous occupant to the back of the local queue.
    #[inline]
    pub(crate) fn push_lifo(&self, job: Job) {
        // SAFETY: `Local` is not `Sync` and lives on its worker's stack:
        // this is the worker's thread, the slot's owner (see `Local`).
        if let Some(spill) = unsafe { self.lifo.put(job) } {
            // The local queue now has stealable work: wake a sleeper if no
            // worker is searching. Only on the empty -> non-empty edge: work
            // that was already queued was announced when it came, and a
            // worker that parks re-checks every queue anyway, so this is for
            // parallelism, not liveness (it saves a SeqCst fence per submit
            // when a run wakes many runnables).
            self.push_local(spill);
        }
    }

    /// Pushes to the back of the local (stealable) queue, waking a sleeper
    /// if that queue was empty (see `push_lifo`).
    #[inline]
    fn push_local(&self, job: Job) {
        let was_empty = self.deque.is_empty();
        self.deque.push(job);
        if was_empty {
            self.shared.idle.notify_one();
        }
    }

    /// Takes the LIFO slot's occupant, if any.
    #[inline]
    fn take_lifo(&self) -> Option<Job> {
        // SAFETY: as in `push_lifo`: this thread owns the slot.
        unsafe { self.lifo.take() }
    }

    /// Moves the LIFO slot's occupant, if any, to the back of the local
    /// (stealable) queue, waking a sleeper if that queue was empty.
    #[inline]
    pub(crate) fn share_lifo(&self) {
        if let Some(job) = self.take_lifo() {
            self.push_local(job);
        }
    }

    /// Whether the LIFO slot holds a runnable.
    #[inline]
    fn has_lifo(&self) -> bool {
        self.lifo.is_full()
    }

    fn counters(&self) -> &Counters {
        &self.shared.counters[self.index]
    }
}

/// Logs and counts a panic caught while running `what` on this thread.
pub(crate) fn report_panic(payload: &(dyn Any + Send), what: &str) {
    let message = panic_message(payload);
    with_current(|local| match local {
        Some(local) => {
            Counters::bump(&local.counters().panics);
            tracing::error!(worker = local.index, panic = %message, "{what} panicked");
        }
        None => tracing::error!(panic = %message, "{what} panicked off the scheduler"),
    });
}

/// One urgent runnable, if any. Looked at before every run, where in the
/// common case the hint is zero: one load of a cache line that nobody
/// writes. A searching worker (`by_hint` false) looks at the queue itself,
/// as `has_shared_work` does, so a job pushed but not yet counted is not
/// missed there.
///
/// The hint can briefly wrap below zero (a worker takes a job whose
/// submitter has not counted it yet): that only costs a few empty steals
/// until the submitter's increment lands.
#[inline]
fn take_urgent(shared: &Shared, by_hint: bool) -> Option<Job> {
    if by_hint {
        // Relaxed: a hint (see `Shared::urgent_hint`).
        if shared.urgent_hint.load(Ordering::Relaxed) == 0 {
            return None;
        }
    } else if shared.urgent.is_empty() {
        return None;
    }
    loop {
        match shared.urgent.steal() {
            Steal::Success(job) => {
                // Relaxed: a hint; pairs with nothing.
                shared.urgent_hint.fetch_sub(1, Ordering::Relaxed);
                return Some(job);
            }
            Steal::Empty => return None,
            Steal::Retry => {}
        }
    }
}

/// The worker loop. Returns how many runnables were left in this worker's
/// own queues when it was told to stop (they are dropped).
pub(crate) fn run(shared: Arc<Shared>, index: usize, deque: Deque<Job>) -> usize {
    let local = Local {
        lifo: Arc::clone(&shared.lifos[index]),
        shared,
        index,
        deque,
    };
    CURRENT.with(|c| c.set(&local));
    let _guard = CurrentGuard;
    let mut state = LoopState {
        local: &local,
        tick: 0,
        lifo_streak: 0,
        searching: false,
        rng: XorShift::new(index),
    };
    state.main_loop();
    let mut left = 0;
    if local.take_lifo().is_some() {
        left += 1;
    }
    while local.deque.pop().is_some() {
        left += 1;
    }
    left
}

struct LoopState<'a> {
    local: &'a Local,
    /// Runs so far, for the periodic injector poll.
    tick: u32,
    /// Consecutive runs served from the LIFO slot.
    lifo_streak: u32,
    /// Whether this worker is counted as searching in `Idle`.
    searching: bool,
    rng: XorShift,
}

impl LoopState<'_> {
    fn main_loop(&mut self) {
        let shared = &*self.local.shared;
        loop {
            if let Some(job) = self.next_local() {
                self.run_job(job);
                continue;
            }
            // Checked here and every `INJECTOR_INTERVAL` runs (in
            // `next_local`), not on every run: it is a shared cache line.
            if shared.idle.is_shutdown() {
                return;
            }
            // This worker's own sockets first: events that came while it
            // ran wake their tasks into its queues, without the park's
            // handshake (a system call, where the park would take the
            // sleeper lock, write the shared idle word and fence first).
            // One load when the reactor never started.
            if shared.poll_io_now(self.local.index) {
                continue;
            }
            if !self.searching {
                self.searching = shared.idle.transition_to_searching();
            }
            if self.searching {
                if let Some(job) = self.search() {
                    self.run_job(job);
                    continue;
                }
            }
            Counters::bump(&self.local.counters().parks);
            // Blocks in the I/O reactor's poll instead of on the condvar if
            // no other worker holds it (`Reactor::park`); either way only
            // after `park_with` announced the park, fenced and re-checked
            // the queues (see idle.rs: the poll is just another way to
            // sleep, woken through its waker).
            let index = self.local.index;
            let outcome = shared.idle.park_with(
                index,
                self.searching,
                || shared.has_shared_work(),
                |unparked| {
                    if unparked == 0 {
                        shared.all_parked();
                    }
                },
                |parker| shared.park_worker(parker, index),
            );
            match outcome {
                Unparked::Shutdown => return,
                Unparked::Polled => {
                    // Its I/O events woke tasks into this worker's queue.
                    self.searching = false;
                    shared.wake_monitor();
                }
                Unparked::WorkFound | Unparked::Notified => {
                    self.searching = true;
                    // The stall monitor stops ticking once every worker has
                    // been parked a while; a worker that wakes restarts it.
                    shared.wake_monitor();
                }
            }
        }
    }

    /// LIFO slot (at most `LIFO_STREAK_LIMIT` times in a row), then the
    /// urgent queue, then the local queue, polling the injector first every
    /// `INJECTOR_INTERVAL` runs.
    #[inline]
    fn next_local(&mut self) -> Option<Job> {
        let local = self.local;
        self.tick = self.tick.wrapping_add(1);
        if self.tick.is_multiple_of(INJECTOR_INTERVAL) {
            if local.shared.idle.is_shutdown() {
                return None;
            }
            // I/O that came for this worker's shard while it was busy (one
            // load when the reactor was never started).
            local.shared.poll_io_now(local.index);
            if let Some(job) = self.steal_injector() {
                return Some(job);
            }
        }
        if let Some(job) = local.take_lifo() {
            if self.lifo_streak < LIFO_STREAK_LIMIT {
                self.lifo_streak += 1;
                return Some(job);
            }
            // Served from the LIFO slot too often in a row: to the back.
            local.deque.push(job);
        }
        self.lifo_streak = 0;
        // Urgent work overtakes the local queue. Not checked ahead of the
        // LIFO slot (a request/reply pair's hot path), whose streak is
        // capped, so the wait is at most that many runs.
        if let Some(job) = take_urgent(&local.shared, true) {
            return Some(job);
        }
        local.deque.pop()
    }

    fn steal_injector(&mut self) -> Option<Job> {
        let local = self.local;
        loop {
            match local.shared.injector.steal_batch_and_pop(&local.deque) {
                Steal::Success(job) => {
                    Counters::bump(&local.counters().injector_pulls);
                    return Some(job);
                }
                Steal::Empty => return None,
                Steal::Retry => {}
            }
        }
    }

    /// Injector, then every other worker from a random start; a few rounds
    /// with a spin/snooze backoff between them.
    fn search(&mut self) -> Option<Job> {
        let local = self.local;
        let shared = &*local.shared;
        let n = shared.stealers.len();
        let backoff = Backoff::new();
        for _ in 0..SEARCH_ROUNDS {
            if let Some(job) = take_urgent(shared, false) {
                return Some(job);
            }
            let mut retry = false;
            match shared.injector.steal_batch_and_pop(&local.deque) {
                Steal::Success(job) => {
                    Counters::bump(&local.counters().injector_pulls);
                    return Some(job);
                }
                Steal::Retry => retry = true,
                Steal::Empty => {}
            }
            let start = self.rng.next_below(n);
            for k in 0..n {
                let victim = (start + k) % n;
                if victim == local.index {
                    continue;
                }
                match shared.stealers[victim].steal_batch_and_pop(&local.deque) {
                    Steal::Success(job) => {
                        Counters::bump(&local.counters().steals);
                        return Some(job);
                    }
                    Steal::Retry => retry = true,
                    Steal::Empty => {}
                }
            }
            if !retry {
                backoff.snooze();
            }
            if shared.idle.is_shutdown() {
                break;
            }
        }
        None
    }

    fn run_job(&mut self, job: Job) {
        let local = self.local;
        let shared = &*local.shared;
        if self.searching {
            self.searching = false;
            if shared.idle.transition_from_searching() {
                // The last searcher found work; there may be more, and the
                // submitters of what is queued may have left the wake-up to
                // the searcher they saw (us): hand the search on. This also
                // wakes a worker when nothing else is queued (a sequential
                // ask sends one job at a time), which is wasted if nothing
                // comes; but that worker searches for a while before it
                // parks, and the next request finds it warm instead of
                // waking it from its futex. Measured (benches/ask_latency,
                // this 2-vCPU VM): waking only when a shared queue held work
                // took sequential asks from a plain thread from 6-12 us to
                // 35 us at the median.
                shared.idle.notify_one();
            }
        }
        Counters::bump(&local.counters().runs);
        let mut budget = Budget::on_worker(shared.throughput);
        // Kept to requeue on `Yield`: `run` consumes its `Arc`.
        let again = Arc::clone(&job);
        match catch_unwind(AssertUnwindSafe(|| job.run(&mut budget))) {
            Ok(RunOutcome::Done) => {}
            Ok(RunOutcome::Yield) => {
                // Wake a sleeper only if other work waits in this queue:
                // then a second worker can run the two in parallel. Alone in
                // the queue, the yielder is popped again by this worker at
                // once; waking another only to steal it would move one busy
                // actor between workers (a futex wake per budget, both cores
                // awake for one core's work). Liveness does not depend on
                // this: work already queued was announced when it came.
                let mut others_waiting = !local.deque.is_empty() || local.has_lifo();
                if !others_waiting && !shared.injector.is_empty() {
                    // A busy actor alone on this worker, and work submitted
                    // from outside: take it now, ahead of the yielder, not
                    // after up to `INJECTOR_INTERVAL` more budgets of the
                    // busy actor. The worker a submitter woke may not get a
                    // core soon when every core is busy (compare's ask
                    // under load: p99 53 -> 28 µs, BENCHMARKS.md). One look
                    // at the injector's indices per budget used, and only
                    // when nothing else is queued here.
                    if let Some(taken) = self.steal_injector() {
                        local.deque.push(taken);
                        others_waiting = true;
                    }
                }
                local.deque.push(again);
                if others_waiting {
                    shared.idle.notify_one();
                }
            }
            Err(payload) => report_panic(&*payload, "runnable"),
        }
    }
}

/// Victim selection: xorshift64*, seeded per worker. Not cryptographic.
struct XorShift(u64);

impl XorShift {
    fn new(seed: usize) -> XorShift {
        XorShift(0x9E37_79B9_7F4A_7C15 ^ (seed as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9))
    }

    fn next_below(&mut self, n: usize) -> usize {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        ((x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as usize) % n
    }
}
