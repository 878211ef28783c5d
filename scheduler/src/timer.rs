//! Timers: callbacks and wake-ups after a delay, on a hashed wheel driven by
//! one timer thread, so no worker ever blocks on time.
//!
//! `schedule` allocates one entry, pushes it onto a lock-free intake queue
//! and, only if the timer thread sleeps past the new deadline, unparks it:
//! O(1), no lock. `cancel` is one compare-and-swap (the entry is dropped
//! lazily when its slot comes up). The timer thread moves new entries into
//! its [`Wheel`], advances it every millisecond that has something due, and
//! sleeps until the next occupied slot otherwise. A due callback is submitted
//! to the scheduler's injector (it runs on a worker), except an inline one
//! ([`Handle::schedule_inline`]), which the timer thread runs itself; a due
//! [`Sleep`] has its waker woken.
//!
//! The timer thread also runs the *stall monitor*: while any worker is
//! awake, it looks at each worker's LIFO slot every `MONITOR_LOOK` ms, and
//! `MONITOR_CONFIRM` ms after a look that found one full; it takes the
//! occupant of a slot that stayed full from one look to the next while its
//! worker started no new run (the worker is stuck in a slow or blocking
//! run). The occupant goes to the injector, with a wake-up, so it never
//! waits behind that run while another worker idles: it waits at most
//! `MONITOR_LOOK + MONITOR_CONFIRM` ms. After `MONITOR_IDLE_LOOKS` looks
//! with every worker parked the monitor stops; the first worker to wake
//! restarts it.

use crate::monitor_sleep::MonitorSleep;
use crate::runnable::{Budget, RunOutcome, Runnable};
use crate::scheduler::{Handle, Shared};
use crate::sync::{thread, Arc, AtomicUsize, OnceLock, Ordering};
use crate::timer_entry::{Action, Fired, TimerEntry};
use crate::timer_intake::{Pushed, TimerIntake};
use crate::wheel::{Deadline, Wheel, MAX_TICKS};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// The longest the timer thread sleeps in one go.
const MAX_SLEEP: Duration = Duration::from_secs(3600);

/// How often the stall monitor looks at the workers, in ticks (ms), while
/// no LIFO slot was full at its last look. Each look wakes the timer
/// thread: at 1 ms, sequential asks from a plain thread (100k/s) took
/// 10.5 us at the median instead of 7.5 us on this project's 2-vCPU
/// machine; at 5 ms no cost was measurable (benches/ask_latency).
const MONITOR_LOOK: u64 = 5;

/// How soon the monitor looks again after a look that found a LIFO slot
/// full, in ticks (ms): the occupant is rescued if it is still there and
/// its worker has not started a new run.
const MONITOR_CONFIRM: u64 = 1;

/// Looks with every worker parked after which the monitor stops (so an
/// idle scheduler costs nothing), until a worker wakes.
const MONITOR_IDLE_LOOKS: u32 = 16;

impl Deadline for Arc<TimerEntry> {
    fn when(&self) -> u64 {
        TimerEntry::when(self)
    }

    fn is_dead(&self) -> bool {
        self.is_dead_hint()
    }
}

/// A due callback runs as a runnable on a worker.
impl Runnable for TimerEntry {
    fn run(self: Arc<Self>, _budget: &mut Budget) -> RunOutcome {
        if let Some(f) = self.take_callback() {
            f();
        }
        RunOutcome::Done
    }
}

/// Timer state shared between the scheduler, handles and the timer thread.
pub(crate) struct TimerShared {
    start: Instant,
    /// New entries, lock-free; drained by the timer thread. Holds the
    /// sleep and stop handshakes (see `timer_intake.rs`).
    intake: TimerIntake<Arc<TimerEntry>>,
    /// Timers neither fired nor cancelled. Written by `schedule` (+1) and
    /// by the winner of an entry's state (-1).
    pending: AtomicUsize,
    /// Whether the stall monitor stopped ticking (every worker parked for a
    /// while); the first worker to wake restarts it (see
    /// `monitor_sleep.rs`).
    monitor_sleep: MonitorSleep,
    thread: OnceLock<thread::Thread>,
}

impl TimerShared {
    pub(crate) fn new() -> TimerShared {
        TimerShared {
            start: Instant::now(),
            intake: TimerIntake::new(),
            pending: AtomicUsize::new(0),
            monitor_sleep: MonitorSleep::new(),
            thread: OnceLock::new(),
        }
    }

    /// Milliseconds since start, rounded down.
    fn now_ticks(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// The first tick at or after `now + delay` (rounded up, so a timer
    /// never fires early).
    fn deadline_after(&self, delay: Duration) -> u64 {
        let at = self.start.elapsed().saturating_add(delay);
        let ticks = u64::try_from(at.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
        let now = self.now_ticks();
        ticks.clamp(now, now + MAX_TICKS)
    }

    fn insert(&self, delay: Duration, action: Action) -> Arc<TimerEntry> {
        let entry = Arc::new(TimerEntry::new(self.deadline_after(delay), action));
        // Relaxed: a count for the quiesce report; no memory depends on it.
        self.pending.fetch_add(1, Ordering::Relaxed);
        // The push's handshakes (see `timer_intake.rs`): the timer thread
        // either sees this entry before it sleeps or is woken; and the stop
        // either drains it or this cancels it, so it is never left pending
        // in an intake nobody reads (its action is dropped at once: a timer
        // set on a stopped scheduler never fires, and whatever its callback
        // owns is released).
        match self.intake.push(Arc::clone(&entry), entry.when()) {
            Pushed::Queued => {}
            Pushed::WakeTimer => {
                if let Some(t) = self.thread.get() {
                    t.unpark();
                }
            }
            Pushed::Stopped => {
                self.cancel(&entry);
            }
        }
        entry
    }

    /// Called by a worker that just woke from (or gave up) parking:
    /// restarts the stall monitor if it had stopped ticking.
    pub(crate) fn wake_monitor(&self) {
        // The worker's half of the handshake (`MonitorSleep::wake`): this
        // worker's wake-up changed the idle state (an RMW) before it.
        if self.monitor_sleep.wake() {
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
        }
    }

    fn cancel(&self, entry: &TimerEntry) -> bool {
        entry.cancel(|| {
            // Relaxed: see `insert`.
            self.pending.fetch_sub(1, Ordering::Relaxed);
        })
    }
}

/// The timer thread and how to stop it.
pub(crate) struct TimerThread {
    shared: Arc<Shared>,
    /// Returns the number of timers it dropped unfired when it stopped.
    join: thread::JoinHandle<usize>,
}

impl TimerThread {
    pub(crate) fn spawn(shared: Arc<Shared>, name: String) -> std::io::Result<TimerThread> {
        let for_thread = Arc::clone(&shared);
        let join = thread::Builder::new()
            .name(name)
            .spawn(move || timer_loop(&for_thread))?;
        // Set before any handle exists outside the scheduler's builder, so
        // every `schedule` finds it.
        let _ = shared.timers.thread.set(join.thread().clone());
        Ok(TimerThread { shared, join })
    }

    /// Stops and joins the timer thread; returns the timers left pending
    /// (they are cancelled: dropped without firing).
    pub(crate) fn stop(self) -> usize {
        let timers = &self.shared.timers;
        // The stop's handshake with `TimerShared::insert` (see
        // `timer_intake.rs`): stop, then drain once the thread has exited.
        timers.intake.stop();
        self.join.thread().unpark();
        let mut left = self.join.join().unwrap_or_else(|_| {
            tracing::error!("the scheduler's timer thread panicked");
            0
        });
        while let Some(e) = timers.intake.pop() {
            left += usize::from(timers.cancel(&e));
        }
        left
    }
}

/// The stall monitor's memory, kept by the timer thread (see the module
/// docs).
struct Monitor {
    /// Per worker: its run count at the last tick, if its LIFO slot was
    /// full then.
    seen_full: Vec<Option<u64>>,
    /// Per worker: its run count at the last look.
    seen_runs: Vec<u64>,
    /// Consecutive looks with every worker parked.
    idle_looks: u32,
    /// The tick of the next look.
    next: u64,
}

impl Monitor {
    fn new(workers: usize) -> Monitor {
        Monitor {
            seen_full: vec![None; workers],
            seen_runs: vec![0; workers],
            idle_looks: 0,
            next: 0,
        }
    }

    /// One look at the workers, if it is time and the monitor is ticking.
    /// Returns the tick of the next look (`None`: stopped until a worker
    /// wakes).
    fn tick(&mut self, shared: &Shared, now: u64) -> Option<u64> {
        let timers = &shared.timers;
        if timers.monitor_sleep.is_asleep() {
            return None;
        }
        if now < self.next {
            return Some(self.next);
        }
        let mut any_full = false;
        for (i, slot) in shared.lifos.iter().enumerate() {
            // Relaxed: a statistic; a stale count only makes a run look
            // longer than it was, and taking a runnable from a LIFO slot to
            // the injector is always allowed.
            let runs = shared.counters[i].runs.load(Ordering::Relaxed);
            // No run started since the last look: the worker is in one
            // long run (or parked, or searching). Its shard's events would
            // wait for that run to end: poll them (the rescue does nothing
            // while the worker itself holds its poll, as a parked one
            // does; the tasks woken go to the injector).
            if runs == std::mem::replace(&mut self.seen_runs[i], runs) {
                // Counted before the tasks are woken: whoever sees them run
                // sees the count.
                shared.reactor.rescue(i, || {
                    crate::metrics::Counters::bump(&shared.counters[i].io_rescued);
                });
            }
            if !slot.is_full() {
                self.seen_full[i] = None;
            } else if self.seen_full[i] != Some(runs) {
                self.seen_full[i] = Some(runs);
                any_full = true;
            } else {
                // Full at the last look too, and no run started since: the
                // occupant has waited a whole tick behind one run.
                self.seen_full[i] = None;
                if let Some(job) = slot.steal() {
                    crate::metrics::Counters::bump(&shared.counters[i].lifo_rescued);
                    shared.injector.push(job);
                    shared.idle.notify_one();
                }
            }
        }
        self.next = now
            + if any_full {
                MONITOR_CONFIRM
            } else {
                MONITOR_LOOK
            };
        if shared.idle.snapshot().unparked > 0 {
            self.idle_looks = 0;
            return Some(self.next);
        }
        self.idle_looks += 1;
        if self.idle_looks < MONITOR_IDLE_LOOKS {
            return Some(self.next);
        }
        self.idle_looks = 0;
        // The monitor's half of the handshake with `wake_monitor`.
        if !timers.monitor_sleep.try_sleep(&shared.idle) {
            return Some(self.next);
        }
        None
    }
}

fn timer_loop(shared: &Arc<Shared>) -> usize {
    let timers = &*shared.timers;
    let mut wheel: Wheel<Arc<TimerEntry>> = Wheel::new();
    let mut monitor = Monitor::new(shared.lifos.len());
    let fire = |entry: Arc<TimerEntry>| fire(shared, entry);
    loop {
        if timers.intake.is_stopped() {
            break;
        }
        while let Some(e) = timers.intake.pop() {
            if e.is_pending() {
                if let Err(due) = wheel.insert(e) {
                    fire(due);
                }
            }
        }
        let now = timers.now_ticks();
        wheel.advance(now, fire);
        let next_look = monitor.tick(shared, now);
        let next = match (wheel.next_deadline(), next_look) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // The timer thread's half of the sleep handshake with
        // `TimerShared::insert` (see `timer_intake.rs`): publish the sleep
        // target, then re-check the intake.
        if !timers.intake.may_sleep(next.unwrap_or(u64::MAX)) {
            continue;
        }
        match next {
            None => thread::park(),
            Some(tick) => {
                let at = timers.start + Duration::from_millis(tick);
                let now = Instant::now();
                if at > now {
                    // Capped: a wheel slot years away is re-checked hourly
                    // rather than trusting one enormous timeout.
                    thread::park_timeout((at - now).min(MAX_SLEEP));
                }
            }
        }
    }
    // Dropped without firing, and counted for the quiesce report.
    wheel
        .drain()
        .filter(|entry| shared.timers.cancel(entry))
        .count()
}

fn fire(shared: &Arc<Shared>, entry: Arc<TimerEntry>) {
    let fired = entry.fire(|| {
        // Relaxed: see `TimerShared::insert`.
        shared.timers.pending.fetch_sub(1, Ordering::Relaxed);
    });
    // The timer thread is not a worker: this goes to the injector.
    if fired == Fired::Submit && shared.submit(entry).is_err() {
        tracing::debug!("timer fired on a closed scheduler; callback dropped");
    }
}

/// A handle on a scheduled callback: cancel it, or ask whether it fired.
/// Dropping the handle does not cancel the timer.
pub struct TimerHandle {
    entry: Arc<TimerEntry>,
    timers: Arc<TimerShared>,
}

impl fmt::Debug for TimerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerHandle")
            .field("deadline_ms", &self.entry.when())
            .field("fired", &self.is_fired())
            .finish()
    }
}

impl TimerHandle {
    /// Cancels the timer. Returns `true` if it had neither fired nor been
    /// cancelled (the callback is then dropped without running).
    pub fn cancel(&self) -> bool {
        self.timers.cancel(&self.entry)
    }

    /// Whether the timer has fired (its callback was handed to a worker, or
    /// run on the timer thread for an inline one).
    pub fn is_fired(&self) -> bool {
        self.entry.is_fired()
    }
}

impl Handle {
    /// Runs `callback` on a worker once `delay` has passed (millisecond
    /// resolution, never early). O(1); never blocks.
    ///
    /// A timer that never fires (cancelled, or still pending when the
    /// scheduler stops, or set after it stopped) drops its callback without
    /// running it: put what must happen anyway in the `Drop` of something
    /// the callback owns.
    pub fn schedule(
        &self,
        delay: Duration,
        callback: impl FnOnce() + Send + 'static,
    ) -> TimerHandle {
        self.schedule_action(delay, Action::Callback(Box::new(callback)))
    }

    /// Like [`schedule`](Self::schedule), but `callback` runs on the timer
    /// thread itself, saving the hop through a worker. For callbacks that
    /// only hand something over (push onto a queue, submit a runnable):
    /// they must be short and must not block, or every timer waits; a
    /// panic is caught and logged. The engine uses it to put a timer's
    /// message into its actor's mailbox.
    ///
    /// Hidden from the docs: the engine's plumbing, not part of the API an
    /// application uses (`proscenium::Handle` is this type); it may change
    /// in any release.
    #[doc(hidden)]
    pub fn schedule_inline(
        &self,
        delay: Duration,
        callback: impl FnOnce() + Send + 'static,
    ) -> TimerHandle {
        self.schedule_action(delay, Action::Inline(Box::new(callback)))
    }

    fn schedule_action(&self, delay: Duration, action: Action) -> TimerHandle {
        let timers = &self.shared.timers;
        let entry = timers.insert(delay, action);
        TimerHandle {
            entry,
            timers: Arc::clone(timers),
        }
    }

    /// A future that completes once `delay` has passed. Works on any
    /// executor; dropping it cancels the timer.
    pub fn sleep(&self, delay: Duration) -> Sleep {
        let timers = &self.shared.timers;
        let entry = timers.insert(delay, Action::Wake(None));
        Sleep {
            entry,
            timers: Arc::clone(timers),
        }
    }

    /// Timers neither fired nor cancelled.
    pub fn timers_pending(&self) -> usize {
        // Relaxed: a statistic.
        self.shared.timers.pending.load(Ordering::Relaxed)
    }
}

/// The future of [`Handle::sleep`].
#[must_use = "futures do nothing unless polled"]
pub struct Sleep {
    entry: Arc<TimerEntry>,
    timers: Arc<TimerShared>,
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline_ms", &self.entry.when())
            .finish_non_exhaustive()
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.entry.poll_sleep(cx)
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.timers.cancel(&self.entry);
    }
}
