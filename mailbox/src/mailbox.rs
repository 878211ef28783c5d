//! The two-lane mailbox and its run-state protocol.

use crate::error::{SendError, TrySendError, ZeroCapacityError};
use crate::queue::{ends, Head, Pop, Tail};
use crate::state::{Snapshot, CLOSED, SCHEDULED};
use crate::sync::{dekker_fence, AtomicU32, Ordering, UnsafeCell};

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
/// and one run-state word. 48 bytes (six words), word-aligned: first what
/// every send touches, then the run holder's words (and the system lane's
/// head, for the rare system sends). No cache-line boundary is forced
/// between the two halves (that alignment was dropped: decision record
/// 0002); the test `mailbox_fits_in_48_bytes_without_forcing_alignment`
/// keeps it so.
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
///
/// # The owner's words between the halves
///
/// `X` is stored between the senders' words and the run holder's (see
/// [`with_middle`](Self::with_middle)): an owner that puts 64 bytes or more
/// of words that neither side writes per message there (the engine puts
/// its actor's 64-byte core) keeps the holder's words off the cache line
/// that every send writes, wherever the mailbox starts, with no padding
/// (the senders' words end at byte 15, the holder's start at
/// [`MIDDLE_OFFSET`](Self::MIDDLE_OFFSET) plus the size of `X`). With nothing between them the
/// holder's per-message reads miss that line whenever a sender on another
/// core wrote it, which made a cross-thread flood about 4x slower
/// (decision record 0002).
#[repr(C)] // the senders' words first, then the owner's, then the holder's
pub struct Mailbox<S, U, X = ()> {
    // What senders touch on every send.
    /// Run-state bits (see `state.rs`). Senders set `SCHEDULED`; only the
    /// run holder clears it and sets `CLOSED`.
    state: AtomicU32,
    /// [`UNBOUNDED`] for an unbounded user lane.
    capacity: u32,
    user: Head<U>,
    /// The owner's words (see the type's docs).
    middle: X,
    // What the run holder touches (and, for a bounded lane, `user_len`).
    holder: Holder<S, U>,
}

/// The run holder's side of a mailbox, after the senders' words and the
/// owner's. Not aligned to a cache line of its own: that alignment made
/// every cell 64-byte aligned and cost about 190 bytes of RSS per idle
/// actor (decision record 0002); the owner's words between the halves
/// separate them instead.
struct Holder<S, U> {
    /// The system lane's producer end lives here, with the holder, not
    /// among the senders' words: system messages are rare, while the holder
    /// looks at this lane (and, when it is empty, at its head) before every
    /// message. On the senders' cache line it would be a miss per message,
    /// because every user send writes that line. With no line boundary
    /// forced between the halves it may still share that line, depending on
    /// where the mailbox sits in its cell (decision record 0002).
    system_head: Head<S>,
    system: Tail<S>,
    user: Tail<U>,
    /// Read and written only by the run holder; handed from one holder to
    /// the next by the run-state word (release's Release, claim's Acquire).
    flags: UnsafeCell<HolderFlags>,
    /// User messages reserved or queued; kept only when bounded. Senders
    /// increment, the run holder decrements. Here, beside the flags, to
    /// share their word.
    user_len: AtomicU32,
}

// SAFETY: the flags are only touched by the run holder, one thread at a
// time, handed over through the run-state word (release's Release, claim's
// Acquire); the queue ends are Send + Sync for `S, U: Send` by their own
// impls. So sharing `&Mailbox` shares no unsynchronised access.
unsafe impl<S: Send, U: Send> Sync for Holder<S, U> {}

/// The run holder's flags in one `u32`: the nested suspensions not yet
/// resumed (the user lane is paused while this is not zero) in bits 0-29,
/// in bit 30 whether the user lane is bounded, and in bit 31 the holder's
/// copy of `CLOSED`, so that dequeue never reads the senders' words (the
/// run-state word, `capacity`).
#[derive(Clone, Copy)]
struct HolderFlags(u32);

impl HolderFlags {
    const CLOSED: u32 = 1 << 31;
    /// Set once, at construction, for a bounded user lane.
    const BOUNDED: u32 = 1 << 30;
    /// The suspension count's bits.
    const SUSPENDED: u32 = Self::BOUNDED - 1;

    fn suspended(self) -> u32 {
        self.0 & Self::SUSPENDED
    }

    fn bounded(self) -> bool {
        self.0 & Self::BOUNDED != 0
    }

    /// Whether the holder may take user messages: not suspended, or closed
    /// (a closed mailbox is drained whatever its suspension). One mask and
    /// one compare: without `BOUNDED`, `CLOSED` is the sign bit, so the
    /// word is at most zero as an `i32` exactly when it is closed or holds
    /// no suspension.
    #[inline]
    fn user_lane_open(self) -> bool {
        ((self.0 & !Self::BOUNDED) as i32) <= 0
    }
}

/// The `capacity` of an unbounded user lane (any capacity from `u32::MAX`
/// up is unbounded: more messages than that could not fit in memory).
const UNBOUNDED: u32 = u32::MAX;

impl<S, U> Mailbox<S, U> {
    /// Creates an open, idle mailbox with an unbounded user lane.
    pub fn new() -> Mailbox<S, U> {
        Mailbox::with_middle(None, ()).expect("an unbounded lane")
    }

    /// Creates a mailbox whose user lane holds at most `capacity` messages;
    /// the system lane is never bounded. A capacity of `u32::MAX` or more
    /// is unbounded (the count is kept in 32 bits).
    pub fn bounded(capacity: usize) -> Result<Mailbox<S, U>, ZeroCapacityError> {
        Mailbox::with_middle(Some(capacity), ())
    }
}

impl<S, U, X> Mailbox<S, U, X> {
    /// The offset of the owner's words ([`middle`](Self::middle)) in the
    /// mailbox: the same for every `S` and `U` (the senders' words before
    /// them are two `u32`s and a pointer).
    pub const MIDDLE_OFFSET: usize = std::mem::offset_of!(Self, middle);

    /// Creates an open, idle mailbox that stores `middle` between the
    /// senders' words and the run holder's (see the type's docs), with a
    /// user lane bounded to `capacity` messages (`None`: unbounded; as
    /// [`bounded`](Mailbox::bounded) otherwise).
    pub fn with_middle(
        capacity: Option<usize>,
        middle: X,
    ) -> Result<Mailbox<S, U, X>, ZeroCapacityError> {
        let capacity = match capacity {
            Some(0) => return Err(ZeroCapacityError),
            Some(c) => u32::try_from(c).unwrap_or(UNBOUNDED),
            None => UNBOUNDED,
        };
        let (system_head, system_tail) = ends();
        let (user_head, user_tail) = ends();
        let flags = if capacity == UNBOUNDED {
            HolderFlags(0)
        } else {
            HolderFlags(HolderFlags::BOUNDED)
        };
        Ok(Mailbox {
            state: AtomicU32::new(0),
            capacity,
            user: user_head,
            middle,
            holder: Holder {
                system_head,
                system: system_tail,
                user: user_tail,
                flags: UnsafeCell::new(flags),
                user_len: AtomicU32::new(0),
            },
        })
    }

    /// The owner's words stored between the halves.
    #[inline(always)]
    pub fn middle(&self) -> &X {
        &self.middle
    }

    /// The owner's words stored between the halves, mutably (the mailbox is
    /// not shared while this borrow lasts).
    pub fn middle_mut(&mut self) -> &mut X {
        &mut self.middle
    }

    /// The capacity of the user lane, if bounded.
    pub fn capacity(&self) -> Option<usize> {
        (self.capacity != UNBOUNDED).then_some(self.capacity as usize)
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
        if self.is_closed() {
            return Err(SendError(msg));
        }
        self.holder.system_head.push(&self.holder.system, msg);
        Ok(self.claim_after_push())
    }

    /// Enqueues a user message.
    ///
    /// Fails when the mailbox is closed, or when a bounded user lane is
    /// full, handing the message back.
    pub fn enqueue_user(&self, msg: U) -> Result<Enqueued, TrySendError<U>> {
        if self.is_closed() {
            return Err(TrySendError::Closed(msg));
        }
        if self.capacity != UNBOUNDED && !self.reserve_user_slot() {
            return Err(TrySendError::Full(msg));
        }
        self.user.push(&self.holder.user, msg);
        Ok(self.claim_after_push())
    }

    fn reserve_user_slot(&self) -> bool {
        // Relaxed throughout: the count is a budget, not a publication; the
        // queue's own atomics order the messages.
        let mut len = self.holder.user_len.load(Ordering::Relaxed);
        loop {
            if len >= self.capacity {
                return false;
            }
            match self.holder.user_len.compare_exchange_weak(
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

    /// After a push: learns whether the owner is already scheduled, and if
    /// not, tries to take the run.
    ///
    /// A sender that finds `SCHEDULED` set writes nothing to the run-state
    /// word, so a flooded owner's senders share its cache line instead of
    /// fighting over it. That is safe because of a store-load pairing with
    /// `release` (the Dekker pattern), made of four `SeqCst` accesses: our
    /// push (the swap of the lane's head) and our load of the run-state
    /// word; the releaser's `fetch_and` of that word and its load of the
    /// head (`nonempty_since`). All four are in the single total order S.
    /// If our load read a value from before the releaser's `fetch_and` (we
    /// saw `SCHEDULED` and rely on the releaser), it precedes that
    /// `fetch_and` in S, so our push precedes the releaser's load of the
    /// head in S, and that load cannot read a head from before our push.
    /// Otherwise our load sees the clear of `SCHEDULED` (and we claim) or a
    /// later claim (whose own release's `fetch_and` comes after our load in
    /// S, and so sees our push by the same argument). The full argument,
    /// and why loom checks it with fences instead, is in decision record
    /// 0019. No fence: on x86-64 a `SeqCst` load is a plain `mov`, where
    /// the fence was a locked instruction on every send.
    #[inline]
    fn claim_after_push(&self) -> Enqueued {
        // Under loom only: the fence that stands in for the SeqCst accesses
        // there (loom treats those as AcqRel). See `sync::dekker_fence`.
        dekker_fence();
        // SeqCst: the sender's load of the Dekker pairing (above).
        if self.state.load(Ordering::SeqCst) & SCHEDULED != 0 {
            return Enqueued::AlreadyScheduled;
        }
        self.claim()
    }

    /// Tries to take the run: sets `SCHEDULED` and reports whether this call
    /// is the one that set it.
    fn claim(&self) -> Enqueued {
        // Acquire: pairs with the Release of `release`'s fetch_and, so if we
        // win, the previous run (its holder flags, its pops) happened-before
        // the run we are about to start. Release: a winner's own earlier
        // writes reach the worker that runs the owner (the scheduler's
        // hand-off orders that too).
        let prev = self.state.fetch_or(SCHEDULED, Ordering::AcqRel);
        if prev & SCHEDULED == 0 {
            Enqueued::MustSchedule
        } else {
            Enqueued::AlreadyScheduled
        }
    }

    /// The run holder's flags.
    ///
    /// # Safety
    ///
    /// The caller holds the run.
    #[inline]
    unsafe fn flags(&self) -> HolderFlags {
        // SAFETY: only the run holder touches the flags (caller's contract),
        // and the run-state hand-off orders one holder after the other.
        self.holder.flags.with(|f| unsafe { *f })
    }

    /// # Safety
    ///
    /// The caller holds the run.
    unsafe fn update_flags(&self, f: impl FnOnce(&mut HolderFlags)) {
        // SAFETY: as in `flags`.
        self.holder.flags.with_mut(|p| f(unsafe { &mut *p }));
    }

    /// Takes the next message: system lane first, then the user lane unless
    /// suspended (a closed mailbox hands out both, for dead letters).
    ///
    /// # Safety
    ///
    /// The caller holds the run: it (or the sender that handed it the run
    /// through a scheduler) received [`Enqueued::MustSchedule`] or
    /// [`Release::Reschedule`], and has not released since.
    // Inlined into the run loop: called twice per message when messages
    // come one per run (the handled one, then `Empty`), it cost about 30
    // instructions a call in saving and restoring registers and returning
    // the `Dequeued` through memory (callgrind, decision 0020).
    #[inline(always)]
    pub unsafe fn dequeue(&self) -> Dequeued<S, U> {
        // The user lane is looked at *before* the system lane (invariant 3).
        // If a user message was sent after a system message (by the same
        // sender, or by anyone who had seen that system message), the Acquire
        // inside `peek` that finds the user message makes the system message
        // visible to the system pop below, so it is handed out first. Had we
        // looked at the system lane first, both could have arrived between
        // the two looks and the user message would have jumped the queue.
        // SAFETY: we hold the run (caller's contract) for all of the below.
        let flags = unsafe { self.flags() };
        let user_open = flags.user_lane_open();
        let user = if user_open {
            // SAFETY: the run holder is the single consumer of both queues.
            unsafe { self.holder.user.peek(&self.user) }
        } else {
            Pop::Empty
        };
        // SAFETY: as above.
        match unsafe { self.holder.system.pop(&self.holder.system_head) } {
            Pop::Data(m) => return Dequeued::System(m),
            Pop::Inconsistent => return Dequeued::Retry,
            Pop::Empty => {}
        }
        match user {
            // A value seen at the peek is still there: we are its only consumer.
            // SAFETY: as above.
            Pop::Data(()) => match unsafe { self.holder.user.pop(&self.user) } {
                Pop::Data(m) => {
                    // The holder's copy of "bounded": `capacity` is on the
                    // senders' cache line.
                    if flags.bounded() {
                        // Relaxed: see reserve_user_slot.
                        self.holder.user_len.fetch_sub(1, Ordering::Relaxed);
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
        // An idle mailbox holds no node: each lane that is empty gets its
        // stub back, and its last popped node is freed (`Tail::recycle`).
        // Then marks and flags are read while we are still the run holder;
        // afterwards we may only look at the producers' end of each queue.
        // SAFETY: we hold the run.
        let (system_mark, user_mark, flags) = unsafe {
            self.holder.system.recycle(&self.holder.system_head);
            self.holder.user.recycle(&self.user);
            (
                self.holder.system.mark(),
                self.holder.user.mark(),
                self.flags(),
            )
        };
        // Release (within SeqCst): everything this run did (pops, flags)
        // happens-before the next holder's run, whose claim reads this write
        // with Acquire. SeqCst: the releaser's write of the Dekker pairing
        // with `claim_after_push` (see there): a sender that saw SCHEDULED
        // still set relies on us, and its push is visible to the SeqCst loads
        // of the heads below.
        let prev = self.state.fetch_and(!SCHEDULED, Ordering::SeqCst);
        debug_assert!(prev & SCHEDULED != 0, "release without holding the run");
        // Under loom only (see `claim_after_push`).
        dekker_fence();
        // A mark is null (the lane is at its stub: `head` is null only while
        // the lane is empty, and is null again after a push only when a
        // later holder's `recycle` put the stub back, having popped it), a
        // tagged node (the stub with a value linked: no `head` equals it)
        // or a node address, and the node cache hands a freed address out
        // again at once, so `head` can equal a mark after it has moved
        // (ABA): we may then report Idle with messages queued. That strands
        // nothing: the marked node was freed, so a later holder popped past
        // it, and that holder's release `fetch_and`, like every later
        // holder's, comes after the load of any sender that relied on us in
        // S (that load read a value from before our `fetch_and`, so from
        // before theirs). So each later holder pops such a message or
        // re-checks after its push. The full argument is in decision record
        // 0002 ("`release` re-checks from marks"), in terms of SeqCst
        // accesses in 0019.
        let pending = self.holder.system_head.nonempty_since(system_mark)
            || (flags.user_lane_open() && self.user.nonempty_since(user_mark));
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
        // SAFETY: we hold the run (caller's contract).
        unsafe {
            self.update_flags(|f| {
                debug_assert!(
                    f.suspended() < HolderFlags::SUSPENDED,
                    "suspensions overflow"
                );
                f.0 += 1;
            })
        };
    }

    /// Undoes one [`suspend`](Self::suspend); returns whether the user lane
    /// is open again. A resume without a matching suspend does nothing.
    ///
    /// # Safety
    ///
    /// The caller holds the run.
    pub unsafe fn resume(&self) -> bool {
        // SAFETY: we hold the run (caller's contract).
        unsafe {
            self.update_flags(|f| {
                if f.suspended() != 0 {
                    f.0 -= 1;
                }
            });
            self.flags().suspended() == 0
        }
    }

    /// Undoes every [`suspend`](Self::suspend) at once: for a holder that
    /// is about to drain what is queued (say, into dead letters) before it
    /// [`close`](Self::close)s the mailbox.
    ///
    /// # Safety
    ///
    /// The caller holds the run.
    pub unsafe fn resume_all(&self) {
        // SAFETY: we hold the run (caller's contract).
        unsafe { self.update_flags(|f| f.0 &= HolderFlags::CLOSED | HolderFlags::BOUNDED) };
    }

    /// Whether the user lane is paused.
    ///
    /// # Safety
    ///
    /// The caller holds the run.
    pub unsafe fn is_suspended(&self) -> bool {
        // SAFETY: we hold the run (caller's contract).
        unsafe { self.flags() }.suspended() != 0
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
        // SAFETY: we hold the run (caller's contract).
        unsafe { self.update_flags(|f| f.0 |= HolderFlags::CLOSED) };
        // Relaxed: senders read CLOSED only as a hint (a sender that misses it
        // enqueues, and the holder drains its message); nothing is published.
        self.state.fetch_or(CLOSED, Ordering::Relaxed);
    }

    /// Whether the mailbox has been closed: exact for the run holder, a hint
    /// (possibly stale) for senders.
    pub fn is_closed(&self) -> bool {
        self.snapshot().is_closed()
    }

    /// Number of user messages queued or being enqueued, for a bounded
    /// mailbox; `None` when unbounded (the count is not kept then, to keep
    /// the hot path short).
    pub fn user_len(&self) -> Option<usize> {
        // Relaxed: a reading for routers and metrics.
        (self.capacity != UNBOUNDED).then(|| self.holder.user_len.load(Ordering::Relaxed) as usize)
    }
}

impl<S, U> Default for Mailbox<S, U> {
    fn default() -> Self {
        Mailbox::new()
    }
}

impl<S, U, X> std::fmt::Debug for Mailbox<S, U, X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailbox")
            .field("state", &self.snapshot())
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
