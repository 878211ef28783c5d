//! The two-lane mailbox and its run-state protocol.

use crate::error::{SendError, TrySendError, ZeroCapacityError};
use crate::queue::{MpscQueue, Pop};
use crate::state::{Snapshot, CLOSED, SCHEDULED, SUSPEND_ONE};
use crate::sync::{AtomicUsize, Ordering};

/// What an enqueue means for the caller.
#[must_use = "the sender that wins the run must schedule the mailbox's owner"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    /// The owner was idle and this sender flipped it to scheduled: the caller
    /// now holds the run and must submit the owner to a scheduler.
    MustSchedule,
    /// The owner is already scheduled or running; its current run holder
    /// will see the message.
    AlreadyScheduled,
}

/// What the run holder took from the mailbox.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub enum Dequeued<S, U> {
    /// A system message: always handed out before any user message.
    System(S),
    /// A user message (only while the user lane is not suspended, or after
    /// close).
    User(U),
    /// Nothing the holder may take now.
    Empty,
    /// A push is half-done (see [`Pop::Inconsistent`]): a message is on its
    /// way but not reachable yet. Yield and come back, or call
    /// [`Mailbox::release`], which then reports [`Release::Reschedule`].
    Retry,
}

/// The outcome of [`Mailbox::release`].
#[must_use = "a Reschedule must be submitted again, or its messages are stranded"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// The run is given up and nothing is pending (or a sender has taken the
    /// run over and will schedule the owner).
    Idle,
    /// Messages arrived while the run was being given up, and the caller got
    /// the run back: it must submit the owner again.
    Reschedule,
}

/// A mailbox: a system lane and a user lane, each a wait-free MPSC queue,
/// and one run-state word.
///
/// The protocol:
///
/// 1. Any thread enqueues. An enqueue that returns
///    [`Enqueued::MustSchedule`] has won the run: it submits the owner to a
///    scheduler. At most one thread holds the run at any time.
/// 2. The run holder (the worker running the owner) calls
///    [`dequeue`](Self::dequeue) repeatedly: system messages first, then user
///    messages unless suspended.
/// 3. When it is done (nothing left, or its budget used), it either keeps the
///    run and yields (the scheduler requeues the owner), or calls
///    [`release`](Self::release), which gives the run up and re-checks both
///    lanes so that a message that raced in is never stranded.
///
/// ```
/// use proscenium_mailbox::{Dequeued, Enqueued, Mailbox, Release};
///
/// let mb: Mailbox<&str, u32> = Mailbox::new();
/// assert_eq!(mb.enqueue_user(1).unwrap(), Enqueued::MustSchedule);
/// assert_eq!(mb.enqueue_system("stop").unwrap(), Enqueued::AlreadyScheduled);
/// // SAFETY: the enqueue above won the run, and this thread is now running it.
/// unsafe {
///     assert_eq!(mb.dequeue(), Dequeued::System("stop"));
///     assert_eq!(mb.dequeue(), Dequeued::User(1));
///     assert_eq!(mb.dequeue(), Dequeued::Empty);
///     assert_eq!(mb.release(), Release::Idle);
/// }
/// ```
pub struct Mailbox<S, U> {
    /// Run-state bits (see `state.rs`). Senders set `SCHEDULED`; only the
    /// run holder clears it and writes `CLOSED` and the suspend count.
    state: AtomicUsize,
    system: MpscQueue<S>,
    user: MpscQueue<U>,
    /// `usize::MAX` for an unbounded user lane.
    capacity: usize,
    /// User messages reserved or queued; kept only when bounded. Senders
    /// increment, the run holder decrements.
    user_len: AtomicUsize,
}

const UNBOUNDED: usize = usize::MAX;

impl<S, U> Mailbox<S, U> {
    /// Creates an open, idle mailbox with an unbounded user lane.
    pub fn new() -> Mailbox<S, U> {
        Mailbox::with_capacity(UNBOUNDED)
    }

    /// Creates a mailbox whose user lane holds at most `capacity` messages;
    /// the system lane is never bounded.
    pub fn bounded(capacity: usize) -> Result<Mailbox<S, U>, ZeroCapacityError> {
        if capacity == 0 {
            return Err(ZeroCapacityError);
        }
        Ok(Mailbox::with_capacity(capacity))
    }

    fn with_capacity(capacity: usize) -> Mailbox<S, U> {
        Mailbox {
            state: AtomicUsize::new(0),
            system: MpscQueue::new(),
            user: MpscQueue::new(),
            capacity,
            user_len: AtomicUsize::new(0),
        }
    }

    /// The capacity of the user lane, if bounded.
    pub fn capacity(&self) -> Option<usize> {
        (self.capacity != UNBOUNDED).then_some(self.capacity)
    }

    /// Reads the run-state word (a hint for anyone but the run holder).
    pub fn snapshot(&self) -> Snapshot {
        // Relaxed: a diagnostic reading, it orders nothing.
        Snapshot(self.state.load(Ordering::Relaxed))
    }

    /// Enqueues a system message (lifecycle, supervision).
    ///
    /// Fails only when the mailbox is closed, handing the message back.
    pub fn enqueue_system(&self, msg: S) -> Result<Enqueued, SendError<S>> {
        if self.is_closed_hint() {
            return Err(SendError(msg));
        }
        self.system.push(msg);
        Ok(self.claim())
    }

    /// Enqueues a user message.
    ///
    /// Fails when the mailbox is closed, or when a bounded user lane is
    /// full, handing the message back.
    pub fn enqueue_user(&self, msg: U) -> Result<Enqueued, TrySendError<U>> {
        if self.is_closed_hint() {
            return Err(TrySendError::Closed(msg));
        }
        if self.capacity != UNBOUNDED && !self.reserve_user_slot() {
            return Err(TrySendError::Full(msg));
        }
        self.user.push(msg);
        Ok(self.claim())
    }

    /// Whether the mailbox is closed, as a fast pre-check for senders. A
    /// sender that misses a concurrent close still enqueues; the run holder
    /// then drains its message (see [`close`](Self::close)).
    fn is_closed_hint(&self) -> bool {
        // Relaxed: correctness does not depend on seeing CLOSED here; a
        // message that slips past is drained by the run holder.
        self.state.load(Ordering::Relaxed) & CLOSED != 0
    }

    fn reserve_user_slot(&self) -> bool {
        // Relaxed throughout: the count is a budget, not a publication; the
        // queue's own atomics order the messages.
        let mut len = self.user_len.load(Ordering::Relaxed);
        loop {
            if len >= self.capacity {
                return false;
            }
            match self.user_len.compare_exchange_weak(
                len,
                len + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => len = actual,
            }
        }
    }

    /// Tries to take the run: sets `SCHEDULED` and reports whether this call
    /// is the one that set it.
    fn claim(&self) -> Enqueued {
        // AcqRel. Release: our push (sequenced before) becomes visible to the
        // run holder whose `release` fetch_and reads this write or a later one
        // (RMWs extend the release sequence), so its re-check sees the push.
        // Acquire: pairs with the Release of `release`'s fetch_and, so if we
        // win, the previous run happened-before the one we are about to
        // schedule.
        let prev = self.state.fetch_or(SCHEDULED, Ordering::AcqRel);
        if prev & SCHEDULED == 0 {
            Enqueued::MustSchedule
        } else {
            Enqueued::AlreadyScheduled
        }
    }

    /// Takes the next message: system lane first, then the user lane unless
    /// suspended (a closed mailbox hands out both, for dead letters).
    ///
    /// # Safety
    ///
    /// The caller holds the run: it (or the sender that handed it the run
    /// through a scheduler) received [`Enqueued::MustSchedule`] or
    /// [`Release::Reschedule`], and has not released since.
    pub unsafe fn dequeue(&self) -> Dequeued<S, U> {
        // The user lane is looked at *before* the system lane (invariant 3).
        // If a user message was sent after a system message (by the same
        // sender, or by anyone who had seen that system message), the Acquire
        // inside `peek` that finds the user message makes the system message
        // visible to the system pop below, so it is handed out first. Had we
        // looked at the system lane first, both could have arrived between
        // the two looks and the user message would have jumped the queue.
        let user_open = self.snapshot().user_lane_open();
        let user = if user_open {
            // SAFETY: the run holder is the single consumer of both queues.
            unsafe { self.user.peek() }
        } else {
            Pop::Empty
        };
        // SAFETY: as above.
        match unsafe { self.system.pop() } {
            Pop::Data(m) => return Dequeued::System(m),
            Pop::Inconsistent => return Dequeued::Retry,
            Pop::Empty => {}
        }
        match user {
            // A value seen at the peek is still there: we are its only consumer.
            // SAFETY: as above.
            Pop::Data(()) => match unsafe { self.user.pop() } {
                Pop::Data(m) => {
                    if self.capacity != UNBOUNDED {
                        // Relaxed: see reserve_user_slot.
                        self.user_len.fetch_sub(1, Ordering::Relaxed);
                    }
                    Dequeued::User(m)
                }
                Pop::Empty | Pop::Inconsistent => {
                    unreachable!("a peeked value vanished under its only consumer")
                }
            },
            // A message that arrived after the peek is found by the next
            // dequeue, or by release's re-check.
            Pop::Empty => Dequeued::Empty,
            Pop::Inconsistent => Dequeued::Retry,
        }
    }

    /// Gives the run up, then re-checks both lanes.
    ///
    /// If a message arrived (or is half-pushed) in a lane the holder may
    /// take from, and no sender took the run over, the caller gets the run
    /// back and must submit the owner again: no wake-up is lost, also across
    /// the queue's push-in-progress window.
    ///
    /// # Safety
    ///
    /// The caller holds the run (see [`dequeue`](Self::dequeue)). After an
    /// [`Release::Idle`] it must not touch the consumer side again.
    pub unsafe fn release(&self) -> Release {
        // Marks are taken while we are still the consumer; afterwards we may
        // only look at the producers' end of each queue.
        // SAFETY: we hold the run.
        let (system_mark, user_mark) = unsafe { (self.system.mark(), self.user.mark()) };
        // AcqRel. Release: everything this run did happens-before the next
        // holder's run (its claim's Acquire reads this write). Acquire: pairs
        // with the Release of every sender's claim that precedes this RMW in
        // the modification order of `state`: those senders saw SCHEDULED set
        // and rely on us, and their pushes now happen-before the loads below.
        let prev = Snapshot(self.state.fetch_and(!SCHEDULED, Ordering::AcqRel));
        debug_assert!(prev.is_scheduled(), "release without holding the run");
        // Suspension and closure are written only by the run holder, so
        // `prev` tells exactly which lanes we are answerable for.
        let pending = self.system.nonempty_since(system_mark)
            || (prev.user_lane_open() && self.user.nonempty_since(user_mark));
        if !pending {
            return Release::Idle;
        }
        match self.claim() {
            Enqueued::MustSchedule => Release::Reschedule,
            // A sender took the run after our fetch_and; it schedules.
            Enqueued::AlreadyScheduled => Release::Idle,
        }
    }

    /// Pauses the user lane; the system lane is still served. Suspensions
    /// nest: the lane reopens when every `suspend` is matched by a
    /// [`resume`](Self::resume).
    ///
    /// # Safety
    ///
    /// The caller holds the run.
    pub unsafe fn suspend(&self) {
        // Relaxed: the suspend count is read only by the run holder (in
        // dequeue and release), which is this thread until it releases, and
        // release's AcqRel hands it to the next holder.
        self.state.fetch_add(SUSPEND_ONE, Ordering::Relaxed);
    }

    /// Undoes one [`suspend`](Self::suspend); returns whether the user lane
    /// is open again. A resume without a matching suspend does nothing.
    ///
    /// # Safety
    ///
    /// The caller holds the run.
    pub unsafe fn resume(&self) -> bool {
        // Relaxed: as in suspend. Only the run holder changes the count, so
        // the load and the update cannot be interleaved with another change
        // of it (senders only set SCHEDULED, which fetch_sub leaves alone).
        let now = Snapshot(self.state.load(Ordering::Relaxed));
        if !now.is_suspended() {
            return true;
        }
        let prev = Snapshot(self.state.fetch_sub(SUSPEND_ONE, Ordering::Relaxed));
        prev.suspend_count() == 1
    }

    /// Closes the mailbox: from now on enqueues fail, handing the message
    /// back. Messages already queued, and messages racing in with the close,
    /// are still handed out by [`dequeue`](Self::dequeue) (both lanes,
    /// whatever the suspension) so the holder can pass each one, exactly
    /// once, to dead letters; [`release`](Self::release) keeps rescheduling
    /// while any remain.
    ///
    /// # Safety
    ///
    /// The caller holds the run.
    pub unsafe fn close(&self) {
        // Release: pairs with nothing strictly required (senders' pre-check is
        // a hint); it orders the holder's work before the flag for observers
        // that read snapshots with Acquire.
        self.state.fetch_or(CLOSED, Ordering::Release);
    }

    /// Whether the mailbox has been closed (a hint, unless called by the run
    /// holder).
    pub fn is_closed(&self) -> bool {
        self.snapshot().is_closed()
    }

    /// Number of user messages queued or being enqueued, for a bounded
    /// mailbox; `None` when unbounded (the count is not kept then, to keep
    /// the hot path to one swap and one flag).
    pub fn user_len(&self) -> Option<usize> {
        // Relaxed: a reading for routers and metrics.
        (self.capacity != UNBOUNDED).then(|| self.user_len.load(Ordering::Relaxed))
    }
}

impl<S, U> Default for Mailbox<S, U> {
    fn default() -> Self {
        Mailbox::new()
    }
}

impl<S, U> std::fmt::Debug for Mailbox<S, U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailbox")
            .field("state", &self.snapshot())
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
