//! Scheduled messages and the receive timeout.
//!
//! Three ways to get a message later, all on the scheduler's timer wheel:
//!
//! - from anywhere, to any actor: [`ActorRef::tell_after`],
//!   [`ActorRef::tell_every`] (Akka's `scheduleTellOnce`,
//!   `scheduleTellRepeatedly`);
//! - an actor's own timers, through its [`Context`]: unkeyed
//!   ([`Context::tell_after`], [`Context::tell_every`]) and keyed
//!   ([`Context::start_single_timer`],
//!   [`Context::start_timer_with_fixed_delay`], Akka's `Timers`). They are
//!   cancelled when the actor stops or restarts: no timer outlives its
//!   actor incarnation;
//! - the receive timeout ([`Context::set_receive_timeout`]).
//!
//! How it works: a scheduled message lives in a shared slot
//! (`TimerSlot`), not in the timer. When the timer fires (on a worker), it
//! queues a small `Envelope::Timer(slot)` in the target's user lane, in
//! order with the other user messages. Only when the target handles that
//! envelope is the message taken from the slot, and only if the slot is
//! still active: a message from a cancelled or replaced timer that was
//! already queued is not delivered. A repeating timer is re-armed when its
//! message is taken for handling (fixed delay, measured from there), so at most one
//! of its messages is ever queued, however slow the actor.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proscenium_mailbox::{Enqueued, TrySendError};
use proscenium_scheduler::TimerHandle;

use crate::api::actor::Actor;
use crate::api::actor_ref::ActorRef;
use crate::api::context::Context;
use crate::patterns::stash::Stash;
use crate::patterns::timer_state::{Disarm, Payload, SlotState, CANCELLED, DONE};
use crate::runtime::contain::contain;
use crate::runtime::large;
use crate::runtime::signal::Envelope;

impl Disarm for TimerHandle {
    fn disarm(self) {
        self.cancel();
    }
}

/// One scheduled message (single or repeating) and its state, shared by
/// the timer callback, the queued envelope, the owner's [`Context`] and
/// the user's [`Cancellable`].
pub(crate) struct TimerSlot<M: Send + 'static> {
    target: ActorRef<M>,
    /// The state word (`ACTIVE`, then `CANCELLED` or `DONE`), the payload
    /// and the timer armed now: the protocol, in a module of its own so
    /// that loom models it (`timer_state.rs`).
    core: SlotState<M, TimerHandle>,
    /// The fixed delay of a repeating timer (and of the receive timeout).
    interval: Option<Duration>,
    /// The key of a keyed timer, to forget it once delivered.
    key: Option<TimerKey>,
    /// The receive timeout's slot: delivered only after idleness, never to
    /// dead letters.
    receive_timeout: bool,
}

impl<M: Send + 'static> TimerSlot<M> {
    fn new(
        target: ActorRef<M>,
        payload: Payload<M>,
        interval: Option<Duration>,
        key: Option<TimerKey>,
        receive_timeout: bool,
    ) -> Arc<TimerSlot<M>> {
        Arc::new(TimerSlot {
            target,
            core: SlotState::new(payload),
            interval,
            key,
            receive_timeout,
        })
    }

    pub(crate) fn is_active(&self) -> bool {
        self.core.is_active()
    }

    /// Arms the timer to fire after `delay`, unless the slot is no longer
    /// active (`SlotState::arm_with`): scheduled without the slot's lock
    /// held, the handle then stored under it if the slot is still active
    /// (a cancel either finds the handle or is seen there), else cancelled.
    ///
    /// Once the system has terminated, its scheduler no longer fires
    /// timers: the message goes to dead letters at once instead (every
    /// actor has terminated by then, the target too).
    fn arm(self: &Arc<Self>, delay: Duration) {
        self.core.arm_with(|| {
            let scheduler = self.target.cell.core().system.scheduler_handle();
            // Without the slot's lock held: a scheduler that has stopped
            // drops the callback at once, inside this call, and
            // `Unfired`'s drop then hands the message to dead letters,
            // which takes that lock.
            let unfired = Unfired::new(Arc::clone(self));
            scheduler.schedule_inline(delay, move || unfired.take().fire_inline())
        });
    }

    /// The timer fired, on the timer thread: queue the envelope in the
    /// target's user lane, and submit the cell if that won its run. Only
    /// that runs here (no user code: the message is made when the actor
    /// takes the envelope); a full or closed mailbox, whose handling makes
    /// the message for dead letters, is left to a worker.
    fn fire_inline(self: Arc<Self>) {
        // Here and below: the envelope and the message are as large as the
        // actor's messages; with room for them, if they are large.
        large::with_room_if_large::<M, _>(move || self.fire_inline_here())
    }

    fn fire_inline_here(self: Arc<Self>) {
        if self.try_enqueue().is_err() {
            let handle = self.target.cell.core().system.scheduler_handle().clone();
            let unfired = Unfired::new(self);
            handle.spawn_detached(async move { unfired.take().fire() });
        }
    }

    /// The target is gone, or its system: ends the slot, handing its
    /// message to dead letters (as `take_for_dead_letter` says).
    fn dead_letter_now(&self) {
        large::with_room_if_large::<M, _>(|| self.dead_letter_now_here())
    }

    fn dead_letter_now_here(&self) {
        if let Some(msg) = self.take_for_dead_letter() {
            let cell = &self.target.cell;
            cell.core()
                .system
                .dead_envelope(cell.id(), Envelope::Msg(msg));
        }
    }

    /// Queues the envelope in the target's user lane, scheduling the cell
    /// if that won its run; `Ok` also when the slot is no longer active
    /// (nothing to deliver). `Err` for a full or closed mailbox.
    fn try_enqueue(self: &Arc<Self>) -> Result<(), TrySendError<Envelope<M>>> {
        if !self.is_active() {
            return Ok(());
        }
        let cell = &self.target.cell;
        match cell
            .mailbox
            .enqueue_user(Envelope::Timer(Arc::clone(self)))?
        {
            Enqueued::AlreadyScheduled => {}
            Enqueued::MustSchedule => cell.schedule(),
        }
        Ok(())
    }

    /// Queues the envelope in the target's user lane (on a worker), or
    /// hands the message to dead letters when the mailbox is full or
    /// closed.
    fn fire(self: Arc<Self>) {
        large::with_room_if_large::<M, _>(move || self.fire_here())
    }

    fn fire_here(self: Arc<Self>) {
        let cell = &self.target.cell;
        match self.try_enqueue() {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                // A full bounded mailbox: the actor is not idle, so a receive
                // timeout just waits another round; a message goes to dead
                // letters as any other would, and a repeating timer goes on.
                let dead = match self.interval {
                    _ if self.receive_timeout => None,
                    None if self.core.transition(DONE) => self.produce_caught(),
                    None => None,
                    Some(_) => self.produce_caught(),
                };
                if let Some(msg) = dead {
                    let id = cell.id();
                    cell.core().system.dead_envelope(id, Envelope::Msg(msg));
                }
                if let Some(interval) = self.interval {
                    self.arm(interval);
                }
            }
            Err(TrySendError::Closed(_)) => self.dead_letter_now(),
        }
    }

    /// The next message: the single one (once), or a fresh one. Runs user
    /// code (a `Clone` or a closure): call it under `catch_unwind`.
    pub(crate) fn produce(&self) -> Option<M> {
        self.core.produce()
    }

    fn produce_caught(&self) -> Option<M> {
        catch_unwind(AssertUnwindSafe(|| self.produce())).unwrap_or_else(|_| {
            tracing::error!(actor = %self.target.path(), "a scheduled message's producer panicked");
            None
        })
    }

    /// The target is gone: ends the slot and returns its message for dead
    /// letters, unless it was cancelled (a cancelled timer sends nothing,
    /// not even to dead letters) or is a receive timeout.
    pub(crate) fn take_for_dead_letter(&self) -> Option<M> {
        if self.receive_timeout || !self.core.end() {
            return None;
        }
        self.produce_caught()
    }

    fn cancel(&self) -> bool {
        large::with_room_if_large::<M, _>(|| {
            let Some(payload) = self.core.cancel() else {
                return false;
            };
            // The message is dropped outside the lock, and its `Drop` is
            // user code: a panic there must not cut short the stop or
            // restart that cancels every timer of an actor.
            contain("dropping a cancelled timer's message", || drop(payload));
            true
        })
    }
}

impl<M: Send + 'static> Drop for TimerSlot<M> {
    fn drop(&mut self) {
        // A repeating timer's closure, or a single message never taken
        // (the last reference may go on any thread, a worker's included).
        large::with_room_if_large::<M, _>(|| {
            let payload = self.core.take_payload();
            contain("dropping a timer's message", || drop(payload));
        });
    }
}

/// A slot on its way to being fired: held by its timer's callback, then by
/// the task that fires it on a worker. Dropped unused (the scheduler shut
/// down and dropped its pending timers and tasks), it hands the message to
/// dead letters, so a scheduled message never vanishes silently; a
/// cancelled slot sends nothing.
struct Unfired<M: Send + 'static>(Option<Arc<TimerSlot<M>>>);

impl<M: Send + 'static> Unfired<M> {
    fn new(slot: Arc<TimerSlot<M>>) -> Unfired<M> {
        Unfired(Some(slot))
    }

    /// The slot, to fire it.
    fn take(mut self) -> Arc<TimerSlot<M>> {
        self.0.take().expect("taken once, by value")
    }
}

impl<M: Send + 'static> Drop for Unfired<M> {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            slot.dead_letter_now();
        }
    }
}

/// A slot seen without its message type, for [`Cancellable`].
trait Cancel: Send + Sync {
    fn cancel(&self) -> bool;
    fn is_cancelled(&self) -> bool;
}

impl<M: Send + 'static> Cancel for TimerSlot<M> {
    fn cancel(&self) -> bool {
        TimerSlot::cancel(self)
    }

    fn is_cancelled(&self) -> bool {
        self.core.state() == CANCELLED
    }
}

/// A handle on a scheduled message: cancel it. Dropping the handle does not
/// cancel it.
///
/// A cancelled message is never delivered, not even when it is already
/// queued in the target's mailbox (the envelope is skipped when reached),
/// and it does not go to dead letters.
#[must_use = "dropping a Cancellable does not cancel it; keep it to cancel"]
pub struct Cancellable {
    slot: Arc<dyn Cancel>,
}

impl Cancellable {
    fn new<M: Send + 'static>(slot: &Arc<TimerSlot<M>>) -> Cancellable {
        Cancellable {
            slot: Arc::clone(slot) as Arc<dyn Cancel>,
        }
    }

    /// Cancels it. Returns `true` if this call cancelled it, `false` if it
    /// was already cancelled, or delivered (a single message), or its
    /// target had stopped.
    pub fn cancel(&self) -> bool {
        self.slot.cancel()
    }

    /// Whether it was cancelled (by [`cancel`](Self::cancel), by a keyed
    /// timer that replaced it, or by its actor's stop or restart).
    pub fn is_cancelled(&self) -> bool {
        self.slot.is_cancelled()
    }
}

impl fmt::Debug for Cancellable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cancellable")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

/// The key of an actor's keyed timer: a name or a number.
///
/// ```
/// use proscenium::TimerKey;
/// let a: TimerKey = "tick".into();
/// let b: TimerKey = String::from("tick").into();
/// let c: TimerKey = 7u64.into();
/// assert_eq!(a, b);
/// assert_ne!(a, c);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TimerKey(KeyRepr);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum KeyRepr {
    Name(Cow<'static, str>),
    Id(u64),
}

impl From<&'static str> for TimerKey {
    fn from(name: &'static str) -> TimerKey {
        TimerKey(KeyRepr::Name(Cow::Borrowed(name)))
    }
}

impl From<String> for TimerKey {
    fn from(name: String) -> TimerKey {
        TimerKey(KeyRepr::Name(Cow::Owned(name)))
    }
}

impl From<u64> for TimerKey {
    fn from(id: u64) -> TimerKey {
        TimerKey(KeyRepr::Id(id))
    }
}

impl fmt::Display for TimerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            KeyRepr::Name(n) => f.write_str(n),
            KeyRepr::Id(id) => write!(f, "#{id}"),
        }
    }
}

/// What an actor keeps for its timers, receive timeout and stash: boxed
/// in the [`Context`] and allocated on first use (most actors use none).
pub(crate) struct Extras<M: Send + 'static> {
    keyed: HashMap<TimerKey, Arc<TimerSlot<M>>>,
    /// Unkeyed timers started through the context; ended ones are pruned
    /// when the list doubles.
    unkeyed: Vec<Arc<TimerSlot<M>>>,
    prune_at: usize,
    receive_timeout: Option<ReceiveTimeout<M>>,
    pub(crate) stash: Stash<M>,
}

struct ReceiveTimeout<M: Send + 'static> {
    timeout: Duration,
    /// When the last user message was handled (or the timeout set, or
    /// last signalled).
    last: Instant,
    slot: Arc<TimerSlot<M>>,
}

impl<M: Send + 'static> Extras<M> {
    pub(crate) fn new(stash_capacity: Option<usize>) -> Extras<M> {
        Extras {
            keyed: HashMap::new(),
            unkeyed: Vec::new(),
            prune_at: 16,
            receive_timeout: None,
            stash: Stash::new(stash_capacity),
        }
    }

    fn track(&mut self, slot: &Arc<TimerSlot<M>>) {
        if self.unkeyed.len() >= self.prune_at {
            self.unkeyed.retain(|s| s.is_active());
            self.prune_at = (self.unkeyed.len() * 2).max(16);
        }
        self.unkeyed.push(Arc::clone(slot));
    }

    /// Cancels every timer and the receive timeout (stop and restart).
    pub(crate) fn cancel_timers(&mut self) {
        for (_, slot) in self.keyed.drain() {
            slot.cancel();
        }
        for slot in self.unkeyed.drain(..) {
            slot.cancel();
        }
        self.prune_at = 16;
        if let Some(rt) = self.receive_timeout.take() {
            rt.slot.cancel();
        }
    }
}

fn start<M: Send + 'static>(
    target: &ActorRef<M>,
    initial: Duration,
    payload: Payload<M>,
    interval: Option<Duration>,
    key: Option<TimerKey>,
    receive_timeout: bool,
) -> Arc<TimerSlot<M>> {
    let slot = TimerSlot::new(target.clone(), payload, interval, key, receive_timeout);
    slot.arm(initial);
    slot
}

impl<M: Send + 'static> ActorRef<M> {
    /// Sends `msg` to this actor once `delay` has passed (millisecond
    /// resolution, never early): Akka's `scheduleTellOnce`. If the actor
    /// has terminated by then, the message goes to dead letters (at once
    /// if its whole system has already terminated); if the returned handle
    /// cancels it first, it is never delivered.
    ///
    /// Not tied to any actor's life: use [`Context::tell_after`] for a timer
    /// that is cancelled when the actor that started it stops.
    ///
    /// ```
    /// # use proscenium::prelude::*;
    /// # use std::time::Duration;
    /// # struct Echo(std::sync::mpsc::Sender<&'static str>);
    /// # impl Actor for Echo {
    /// #     type Msg = &'static str;
    /// #     fn receive(&mut self, _: &mut Context<Self>, m: &'static str) -> Outcome { let _ = self.0.send(m); Ok(()) }
    /// # }
    /// # let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let echo = system.spawn(Props::new(move || Echo(tx.clone())), "echo")?;
    /// let _timer = echo.tell_after(Duration::from_millis(5), "later");
    /// assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok("later"));
    /// # system.terminate().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tell_after(&self, delay: Duration, msg: M) -> Cancellable {
        if const { large::is_large::<M>() } {
            // Boxed at once, and the slot made with room for the message.
            let msg = Box::new(msg);
            return large::with_room_for::<M, _>(move || self.tell_after_here(delay, *msg));
        }
        self.tell_after_here(delay, msg)
    }

    fn tell_after_here(&self, delay: Duration, msg: M) -> Cancellable {
        let slot = start(self, delay, Payload::Once(Some(msg)), None, None, false);
        Cancellable::new(&slot)
    }

    /// Sends a clone of `msg` after `initial`, then again `interval` after
    /// each one starts being handled (fixed delay), until
    /// cancelled or the actor terminates: Akka's `scheduleTellRepeatedly`,
    /// except that at most one of these messages is ever queued, however
    /// slow the actor. Once the actor has terminated, one last message goes
    /// to dead letters and the timer ends.
    pub fn tell_every(&self, initial: Duration, interval: Duration, msg: M) -> Cancellable
    where
        M: Clone,
    {
        if const { large::is_large::<M>() } {
            // The closure holds the message boxed: it is moved a few times.
            let msg = Box::new(msg);
            return self.tell_every_with(initial, interval, move || M::clone(&msg));
        }
        self.tell_every_with(initial, interval, move || msg.clone())
    }

    /// Like [`tell_every`](Self::tell_every), with each message made by
    /// `make` (for messages that are not `Clone`, or that carry a count).
    pub fn tell_every_with(
        &self,
        initial: Duration,
        interval: Duration,
        make: impl FnMut() -> M + Send + 'static,
    ) -> Cancellable {
        let payload = Payload::Every(Box::new(make));
        let slot = start(self, initial, payload, Some(interval), None, false);
        Cancellable::new(&slot)
    }
}

/// An actor's own timers and its receive timeout.
impl<A: Actor> Context<A> {
    /// Sends `msg` to this actor after `delay`, unless cancelled first; the
    /// timer is cancelled when this actor stops or restarts (and then its
    /// message is neither delivered nor sent to dead letters).
    ///
    /// ```
    /// # #![allow(dead_code)]
    /// # use proscenium::prelude::*;
    /// # use std::time::Duration;
    /// enum Msg { Start, Timeout }
    /// struct Waiter;
    /// impl Actor for Waiter {
    ///     type Msg = Msg;
    ///     fn receive(&mut self, ctx: &mut Context<Self>, msg: Msg) -> Outcome {
    ///         match msg {
    ///             Msg::Start => {
    ///                 let _timer = ctx.tell_after(Duration::from_millis(10), Msg::Timeout);
    ///             }
    ///             Msg::Timeout => ctx.stop_self(),
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// # let _ = Props::new(|| Waiter);
    /// ```
    pub fn tell_after(&mut self, delay: Duration, msg: A::Msg) -> Cancellable {
        let me = self.self_ref();
        let slot = start(&me, delay, Payload::Once(Some(msg)), None, None, false);
        self.extras_mut().track(&slot);
        Cancellable::new(&slot)
    }

    /// Sends a clone of `msg` to this actor after `initial`, then `interval`
    /// after each one starts being handled (fixed delay: never more than one queued),
    /// until cancelled, or this actor stops or restarts.
    pub fn tell_every(&mut self, initial: Duration, interval: Duration, msg: A::Msg) -> Cancellable
    where
        A::Msg: Clone,
    {
        self.tell_every_with(initial, interval, move || msg.clone())
    }

    /// Like [`tell_every`](Self::tell_every), with each message made by
    /// `make`.
    pub fn tell_every_with(
        &mut self,
        initial: Duration,
        interval: Duration,
        make: impl FnMut() -> A::Msg + Send + 'static,
    ) -> Cancellable {
        let me = self.self_ref();
        let payload = Payload::Every(Box::new(make));
        let slot = start(&me, initial, payload, Some(interval), None, false);
        self.extras_mut().track(&slot);
        Cancellable::new(&slot)
    }

    /// Starts a keyed timer that sends `msg` to this actor once, after
    /// `delay` (Akka's `startSingleTimer`). A timer already running under
    /// `key` is cancelled and replaced: its message is not delivered, even
    /// if already queued.
    ///
    /// ```
    /// # #![allow(dead_code)]
    /// # use proscenium::prelude::*;
    /// # use std::time::Duration;
    /// enum Msg { Poke, Tick }
    /// struct Debounce;
    /// impl Actor for Debounce {
    ///     type Msg = Msg;
    ///     fn receive(&mut self, ctx: &mut Context<Self>, msg: Msg) -> Outcome {
    ///         match msg {
    ///             // Each poke pushes the tick back: only the last one counts.
    ///             Msg::Poke => ctx.start_single_timer("tick", Msg::Tick, Duration::from_millis(20)),
    ///             Msg::Tick => assert!(!ctx.is_timer_active("tick")),
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// # let _ = Props::new(|| Debounce);
    /// ```
    pub fn start_single_timer(&mut self, key: impl Into<TimerKey>, msg: A::Msg, delay: Duration) {
        self.start_keyed(key.into(), delay, Payload::Once(Some(msg)), None);
    }

    /// Starts a keyed timer that sends a clone of `msg` to this actor after
    /// `delay`, then `delay` after each one starts being handled (Akka's
    /// `startTimerWithFixedDelay`: never more than one queued). Replaces a
    /// timer already running under `key`, as
    /// [`start_single_timer`](Self::start_single_timer).
    pub fn start_timer_with_fixed_delay(
        &mut self,
        key: impl Into<TimerKey>,
        msg: A::Msg,
        delay: Duration,
    ) where
        A::Msg: Clone,
    {
        let payload = Payload::Every(Box::new(move || msg.clone()));
        self.start_keyed(key.into(), delay, payload, Some(delay));
    }

    fn start_keyed(
        &mut self,
        key: TimerKey,
        initial: Duration,
        payload: Payload<A::Msg>,
        interval: Option<Duration>,
    ) {
        let me = self.self_ref();
        let slot = start(&me, initial, payload, interval, Some(key.clone()), false);
        if let Some(old) = self.extras_mut().keyed.insert(key, slot) {
            old.cancel();
        }
    }

    /// Cancels the keyed timer `key`: its message is not delivered, even if
    /// already queued. Returns whether such a timer was active.
    pub fn cancel_timer(&mut self, key: impl Into<TimerKey>) -> bool {
        let key = key.into();
        self.extras_if_any()
            .and_then(|x| x.keyed.remove(&key))
            .is_some_and(|slot| slot.cancel())
    }

    /// Whether the keyed timer `key` is active: started, and neither
    /// delivered (a single timer), cancelled, nor replaced.
    pub fn is_timer_active(&self, key: impl Into<TimerKey>) -> bool {
        let key = key.into();
        self.extras()
            .and_then(|x| x.keyed.get(&key))
            .is_some_and(|slot| slot.is_active())
    }

    /// Cancels every timer this actor started through its context, keyed
    /// or not (not the receive timeout).
    pub fn cancel_all_timers(&mut self) {
        if let Some(x) = self.extras_if_any() {
            let rt = x.receive_timeout.take();
            x.cancel_timers();
            x.receive_timeout = rt;
        }
    }

    /// Sets the receive timeout: when this actor has handled no user
    /// message for `timeout`, it is sent the message `make` returns, and
    /// again after each further `timeout` of idleness (Akka's
    /// `setReceiveTimeout`, with the typed API's message). Any user message
    /// handled resets the clock, timer messages included; the timeout
    /// message itself does not. Replaces an earlier setting; cancelled by
    /// [`cancel_receive_timeout`](Self::cancel_receive_timeout) and when
    /// the actor stops or restarts.
    ///
    /// Cheap: one timer per actor, armed when it is set and re-armed when
    /// it fires, never per message; a handled message only stores the time.
    ///
    /// ```
    /// # #![allow(dead_code)]
    /// # use proscenium::prelude::*;
    /// # use std::time::Duration;
    /// enum Msg { Work, Idle }
    /// struct Session;
    /// impl Actor for Session {
    ///     type Msg = Msg;
    ///     fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
    ///         ctx.set_receive_timeout(Duration::from_secs(30), || Msg::Idle);
    ///         Ok(())
    ///     }
    ///     fn receive(&mut self, ctx: &mut Context<Self>, msg: Msg) -> Outcome {
    ///         if let Msg::Idle = msg {
    ///             ctx.stop_self();
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// # let _ = Props::new(|| Session);
    /// ```
    pub fn set_receive_timeout(
        &mut self,
        timeout: Duration,
        make: impl FnMut() -> A::Msg + Send + 'static,
    ) {
        let me = self.self_ref();
        let payload = Payload::Every(Box::new(make));
        let slot = start(&me, timeout, payload, Some(timeout), None, true);
        let new = ReceiveTimeout {
            timeout,
            last: Instant::now(),
            slot,
        };
        if let Some(old) = self.extras_mut().receive_timeout.replace(new) {
            old.slot.cancel();
        }
    }

    /// Cancels the receive timeout.
    pub fn cancel_receive_timeout(&mut self) {
        if let Some(rt) = self
            .extras_if_any()
            .and_then(|x| x.receive_timeout.take())
        {
            rt.slot.cancel();
        }
    }

    /// The receive timeout set now, if any.
    pub fn receive_timeout(&self) -> Option<Duration> {
        self.extras()
            .and_then(|x| x.receive_timeout.as_ref())
            .map(|rt| rt.timeout)
    }

    // ---- for the driver ----------------------------------------------------

    /// A user message is being handled: resets the receive timeout's clock.
    #[inline]
    pub(crate) fn touch_receive(&mut self) {
        if let Some(rt) = self
            .extras_if_any()
            .and_then(|x| x.receive_timeout.as_mut())
        {
            rt.last = Instant::now();
        }
    }

    /// A timer envelope was dequeued: whether its message is to be handled
    /// now. Skips cancelled and replaced timers; ends a single timer (and
    /// forgets its key); re-arms a receive timeout for the rest of the idle
    /// time when a message came meanwhile.
    pub(crate) fn timer_due(&mut self, slot: &Arc<TimerSlot<A::Msg>>) -> bool {
        if slot.receive_timeout {
            let Some(rt) = self
                .extras_if_any()
                .and_then(|x| x.receive_timeout.as_mut())
            else {
                return false;
            };
            if !Arc::ptr_eq(&rt.slot, slot) || !slot.is_active() {
                return false;
            }
            let idle = rt.last.elapsed();
            if idle < rt.timeout {
                slot.arm(rt.timeout - idle);
                return false;
            }
            rt.last = Instant::now();
            return true;
        }
        if slot.interval.is_none() {
            if !slot.core.transition(DONE) {
                return false;
            }
            if let (Some(key), Some(x)) = (&slot.key, self.extras_if_any()) {
                if x.keyed.get(key).is_some_and(|s| Arc::ptr_eq(s, slot)) {
                    x.keyed.remove(key);
                }
            }
        } else if !slot.is_active() {
            return false;
        }
        self.touch_receive();
        true
    }

    /// A timer's message was taken for handling: re-arms a repeating timer.
    pub(crate) fn timer_handled(&mut self, slot: &Arc<TimerSlot<A::Msg>>) {
        if let Some(interval) = slot.interval {
            slot.arm(interval);
        }
    }

    /// Cancels every timer and the receive timeout (stop and restart).
    pub(crate) fn cancel_timers(&mut self) {
        if let Some(x) = self.extras_if_any() {
            x.cancel_timers();
        }
    }
}
