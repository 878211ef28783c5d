//! References to actors: the typed [`ActorRef`] that carries messages, and
//! the untyped [`ActorId`] used to watch, stop and identify any actor.

use std::any::TypeId;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Duration;

use proscenium_mailbox::{Enqueued, SendError, TrySendError};
use proscenium_scheduler::Runnable;

use crate::api::ask::{self, Ask, GracefulStop};
use crate::runtime::cell::{
    schedule_runnable, schedule_runnable_urgent, undeliverable_system, CellCore, CellRef,
    CellVtable,
};
use crate::runtime::large;
use crate::runtime::signal::{AutoMsg, Envelope, Receipt, SystemMsg};

/// A typed reference to an actor whose messages are `M`: cheap to clone,
/// `Send` and `Sync`, valid after the actor is gone (messages then go to
/// dead letters).
pub struct ActorRef<M: Send + 'static> {
    pub(crate) cell: CellRef<M>,
}

impl<M: Send + 'static> ActorRef<M> {
    /// Sends `msg` (fire and forget). If the actor has terminated, or its
    /// bounded mailbox is full, the message goes to dead letters.
    ///
    /// A message of any size can be sent by value: for a message type over
    /// 8 KiB the send goes on a stack grown for it when this one lacks the
    /// room (the engine's frames keep copies of a message, enough to
    /// overflow a thread's stack; decision 0022). This thread's stack must
    /// hold the caller's own copies, and in a debug build one more.
    #[inline]
    pub fn tell(&self, msg: M) {
        // One call with `msg`: a debug build copies an argument into this
        // frame once per call site, so two sites would cost a large message
        // two copies here. The choice is a constant (a direct call, inlined,
        // in an optimised build).
        let send = if const { large::is_large::<M>() } {
            large_tell::<M>()
        } else {
            tell_here::<M>
        };
        send(&self.cell, msg)
    }

    /// Sends `msg`, or hands it back: [`TrySendError::Full`] for a full
    /// bounded mailbox, [`TrySendError::Closed`] for a terminated actor.
    /// Nothing goes to dead letters. Any size, as for [`tell`](Self::tell).
    pub fn try_tell(&self, msg: M) -> Result<(), TrySendError<M>> {
        // One call with `msg`, as in `tell`.
        let send = if const { large::is_large::<M>() } {
            large_try_tell::<M>()
        } else {
            Self::try_tell_here
        };
        send(self, msg)
    }

    /// `try_tell` on this stack.
    fn try_tell_here(&self, msg: M) -> Result<(), TrySendError<M>> {
        match self.cell.mailbox.enqueue_user(Envelope::Msg(msg)) {
            Ok(Enqueued::AlreadyScheduled) => Ok(()),
            Ok(Enqueued::MustSchedule) => {
                self.cell.schedule();
                Ok(())
            }
            Err(TrySendError::Full(e)) => Err(TrySendError::Full(unwrap_msg(e))),
            Err(TrySendError::Closed(e)) => Err(TrySendError::Closed(unwrap_msg(e))),
        }
    }

    /// Request-reply: builds a message around a [`Reply`](crate::Reply),
    /// sends it, and returns a future of the answer. The future fails with
    /// [`AskError::Timeout`](crate::AskError::Timeout) after `timeout`, and
    /// with [`AskError::NoReply`](crate::AskError::NoReply) as soon as the
    /// request is dropped unanswered: with
    /// [`NoReplyReason::DeadLetter`](crate::NoReplyReason::DeadLetter) if
    /// the actor is gone (the request became a dead letter),
    /// [`Dropped`](crate::NoReplyReason::Dropped) if it dropped the
    /// [`Reply`](crate::Reply). A reply that comes after the timeout goes to
    /// dead letters.
    ///
    /// ```
    /// # use proscenium::prelude::*;
    /// # use std::time::Duration;
    /// # struct Echo;
    /// # impl Actor for Echo {
    /// #     type Msg = (u32, Reply<u32>);
    /// #     fn receive(&mut self, _: &mut Context<Self>, (n, r): Self::Msg) -> Outcome { r.send(n); Ok(()) }
    /// # }
    /// # let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
    /// let echo = system.spawn(Props::new(|| Echo), "echo")?;
    /// let answer = echo.ask(|reply| (7, reply), Duration::from_secs(1)).wait();
    /// assert_eq!(answer, Ok(7));
    /// # system.terminate().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// `make` takes a [`Reply`](crate::Reply), or any type built from one
    /// ([`FromReply`](crate::FromReply): proscenium-remote's
    /// `RemoteReply`), so a message made for remote asks is asked locally
    /// the same way.
    pub fn ask<P: crate::FromReply>(
        &self,
        make: impl FnOnce(P) -> M,
        timeout: Duration,
    ) -> Ask<P::Value> {
        let (reply, ask) = ask::request(&self.cell.core().system, timeout);
        // `make` builds the message here: with room for it, if it is large.
        large::with_room_if_large::<M, _>(move || self.tell(make(P::from_reply(reply))));
        ask
    }

    /// Stops the actor after its current message, as
    /// [`ActorId::stop`].
    pub fn stop(&self) {
        self.cell.id().stop();
    }

    /// Sends a PoisonPill (user lane, after what is queued), as
    /// [`ActorId::poison_pill`].
    pub fn poison_pill(&self) {
        large::with_room_if_large::<M, _>(|| self.cell.send_user(Envelope::PoisonPill));
    }

    /// Queues `f` in the actor's mailbox behind what this thread sent it
    /// before: `f` runs once the actor has handled all of that, and before
    /// anything queued after. It runs on the actor's worker, in the
    /// actor's turn (keep it short: a tell, a counter); a panic in it is
    /// logged, and the actor does not fail. An [`AsyncActor`](crate::AsyncActor)
    /// has handled a message once its handler's future has completed.
    ///
    /// If the actor never gets to it (it terminates first, a PoisonPill
    /// ahead of it stops it, or its bounded mailbox is full), `f` is
    /// dropped without being called: a receipt says that what came before
    /// it was handled, never that it may have been. A message that failed
    /// its handler counts as handled (it is not handled again).
    ///
    /// ```
    /// use proscenium::prelude::*;
    /// use std::sync::mpsc;
    ///
    /// struct Sum(u64);
    /// impl Actor for Sum {
    ///     type Msg = u64;
    ///     fn receive(&mut self, _: &mut Context<Self>, n: u64) -> Outcome {
    ///         self.0 += n;
    ///         Ok(())
    ///     }
    /// }
    ///
    /// # let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
    /// let sum = system.spawn(Props::new(|| Sum(0)), "sum")?;
    /// let (tx, rx) = mpsc::channel();
    /// for n in 1..=3 {
    ///     sum.tell(n);
    /// }
    /// sum.tell_receipt(move || tx.send("handled 1, 2 and 3").unwrap());
    /// assert_eq!(rx.recv()?, "handled 1, 2 and 3");
    /// # system.terminate().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tell_receipt(&self, f: impl FnOnce() + Send + 'static) {
        self.send_receipt(Receipt::new(f));
    }

    /// Queues a receipt made already (an async actor's adapter re-sends
    /// the ones it held on a restart).
    pub(crate) fn send_receipt(&self, receipt: Receipt) {
        large::with_room_if_large::<M, _>(|| self.cell.send_user(Envelope::Receipt(receipt)));
    }

    /// Sends Kill (user lane): the actor fails with [`Killed`](crate::Killed).
    pub fn kill(&self) {
        large::with_room_if_large::<M, _>(|| self.cell.send_user(Envelope::Kill));
    }

    /// Sends a PoisonPill and completes with `true` once the actor has
    /// terminated, or with `false` if it has not after `timeout`. A full
    /// bounded mailbox that refuses the PoisonPill gets a stop on the
    /// system lane instead, as [`ActorId::graceful_stop`] says.
    pub fn graceful_stop(&self, timeout: Duration) -> GracefulStop {
        self.id().graceful_stop(timeout)
    }

    /// Like [`graceful_stop`](Self::graceful_stop) with another stop signal,
    /// as [`ActorId::graceful_stop_by`].
    pub fn graceful_stop_by(&self, signal: StopSignal, timeout: Duration) -> GracefulStop {
        self.id().graceful_stop_by(signal, timeout)
    }

    /// Like [`graceful_stop`](Self::graceful_stop), with `msg` sent instead of
    /// a PoisonPill (a message the actor answers by stopping itself).
    pub fn graceful_stop_with(&self, msg: M, timeout: Duration) -> GracefulStop {
        let id = self.id();
        let stop = ask::graceful_stop_watch(&id, timeout);
        if !stop.already_terminated() {
            self.tell(msg);
        }
        stop
    }

    /// The untyped id of this actor.
    pub fn id(&self) -> ActorId {
        self.cell.id()
    }

    /// The actor's path, such as `/user/parent/child`.
    pub fn path(&self) -> String {
        self.id().path()
    }

    /// A diagnostic reading of the actor's mailbox run-state (whether the
    /// cell is scheduled or running, whether it is closed), for a soak's
    /// stall report; a hint, stale as soon as it is read. Not an API.
    #[doc(hidden)]
    pub fn debug_run_state(&self) -> String {
        format!("{:?}", self.cell.mailbox.snapshot())
    }

    /// The actor's name (the last path element).
    pub fn name(&self) -> &str {
        &self.cell.core().name
    }

    /// Whether the actor has terminated (a hint: it may terminate right
    /// after this returns `false`).
    pub fn is_terminated(&self) -> bool {
        self.cell.mailbox.is_closed()
    }
}

/// `tell` on this stack.
#[inline(always)]
fn tell_here<M: Send + 'static>(cell: &CellRef<M>, msg: M) {
    cell.send_user(Envelope::Msg(msg))
}

/// `tell` of a message over `LARGE_MESSAGE` bytes, as a `fn(&CellRef<M>,
/// M)`: the message stays where the caller put it (an argument this size
/// is passed by address) until the send, with room for the copies it
/// makes, takes it from there.
fn large_tell<M: Send + 'static>() -> fn(&CellRef<M>, M) {
    /// Takes the message as `ManuallyDrop`, so that taking it out by
    /// address leaves nothing to drop here: a parameter of type `M` could
    /// not be given up without a move, which a debug build makes a copy.
    #[inline(never)]
    fn send<M: Send + 'static>(cell: &CellRef<M>, mut msg: ManuallyDrop<M>) {
        large::with_room_for::<M, _>(|| {
            // SAFETY: taken once, here; `msg` is not used after.
            let msg = unsafe { ManuallyDrop::take(&mut msg) };
            cell.send_user(Envelope::Msg(msg))
        });
    }
    let send: fn(&CellRef<M>, ManuallyDrop<M>) = send::<M>;
    // `ManuallyDrop<M>` is `#[repr(transparent)]` over `M`, so
    // `fn(&CellRef<M>, ManuallyDrop<M>)` and `fn(&CellRef<M>, M)` are
    // ABI-compatible (std's `fn` documentation, "ABI compatibility": a
    // `repr(transparent)` wrapper and its field).
    // SAFETY: ABI-compatible (above); a call through either passes the
    // same `M`, which the callee does not drop.
    unsafe { std::mem::transmute::<fn(&CellRef<M>, ManuallyDrop<M>), fn(&CellRef<M>, M)>(send) }
}

/// `try_tell` of a message over `LARGE_MESSAGE` bytes, as `large_tell`
/// does; a message handed back comes back boxed from the grown stack, in
/// its result, which is moved from the box into the caller's.
/// `try_tell`'s signature, with the message as `T` (`M`, or `ManuallyDrop<M>`).
type TryTell<M, T> = fn(&ActorRef<M>, T) -> Result<(), TrySendError<M>>;

fn large_try_tell<M: Send + 'static>() -> TryTell<M, M> {
    /// As in `large_tell`.
    #[inline(never)]
    fn send<M: Send + 'static>(
        to: &ActorRef<M>,
        mut msg: ManuallyDrop<M>,
    ) -> Result<(), TrySendError<M>> {
        let refused = large::with_room_for::<M, _>(|| {
            // SAFETY: taken once, here; `msg` is not used after.
            let msg = unsafe { ManuallyDrop::take(&mut msg) };
            to.try_tell_here(msg).err().map(|e| Box::new(Err(e)))
        });
        // The whole result is made in the box, so that moving it out is
        // one copy into the caller's, with no temporary in this frame.
        match refused {
            None => Ok(()),
            Some(refused) => *refused,
        }
    }
    let send: TryTell<M, ManuallyDrop<M>> = send::<M>;
    // SAFETY: as in `large_tell`: the two signatures differ only in an
    // argument's `ManuallyDrop`, a `repr(transparent)` wrapper.
    unsafe { std::mem::transmute::<TryTell<M, ManuallyDrop<M>>, TryTell<M, M>>(send) }
}

fn unwrap_msg<M: Send + 'static>(e: Envelope<M>) -> M {
    match e {
        Envelope::Msg(m) => m,
        _ => unreachable!("try_tell only enqueues user messages"),
    }
}

impl<M: Send + 'static> Clone for ActorRef<M> {
    fn clone(&self) -> ActorRef<M> {
        ActorRef {
            cell: self.cell.clone(),
        }
    }
}

impl<M: Send + 'static> fmt::Debug for ActorRef<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ActorRef({}#{})", self.path(), self.cell.core().uid)
    }
}

impl<M: Send + 'static> PartialEq for ActorRef<M> {
    fn eq(&self, other: &ActorRef<M>) -> bool {
        self.cell.core().uid == other.cell.core().uid
    }
}

impl<M: Send + 'static> Eq for ActorRef<M> {}

impl<M: Send + 'static> Hash for ActorRef<M> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.cell.core().uid.hash(state);
    }
}

impl<M: Send + 'static> From<ActorRef<M>> for ActorId {
    fn from(r: ActorRef<M>) -> ActorId {
        r.cell.id()
    }
}

/// An untyped reference to any actor: to watch it, stop it, compare it,
/// and print its path. Equal ids name the same incarnation of the same
/// actor (a new actor under a reused name has a different id).
///
/// One pointer: a counted reference to the actor's cell, seen through its
/// core, whose table does what needs the actor's type (`CellVtable`).
pub struct ActorId {
    /// The core of a live `ActorCell` (`CORE_OFFSET` bytes into it), with
    /// provenance over the whole cell (from `Arc::into_raw`); this id owns
    /// one count.
    core: NonNull<CellCore>,
}

// SAFETY: an id is a counted reference to a cell (as an `Arc` would be),
// and cells are `Send + Sync`: the reference counts are atomic, and what an
// id reaches through `&self` (the core, the mailbox's senders' side) is
// `Sync`.
unsafe impl Send for ActorId {}
// SAFETY: as for `Send`.
unsafe impl Sync for ActorId {}

impl ActorId {
    /// Takes over one count of a cell.
    ///
    /// # Safety
    ///
    /// `core` is the core of a live `ActorCell` (its data pointer, from
    /// `Arc::into_raw` of an `Arc<ActorCell<A>>`, unsized or not), and the
    /// caller hands this id one count of it.
    pub(crate) unsafe fn from_raw(core: NonNull<CellCore>) -> ActorId {
        ActorId { core }
    }

    /// The cell's core.
    pub(crate) fn core(&self) -> &CellCore {
        // SAFETY: the cell lives while this id's count does.
        unsafe { self.core.as_ref() }
    }

    fn vtable(&self) -> &'static CellVtable {
        self.core().vtable
    }

    /// Another count of the cell, as the scheduler's runnable.
    fn runnable(&self) -> Arc<dyn Runnable> {
        // SAFETY: our pointer and count (the `CellVtable` contract).
        unsafe { (self.vtable().runnable)(self.core) }
    }

    /// The typed reference, if this actor's messages are `M`.
    pub(crate) fn downcast<M: Send + 'static>(&self) -> Option<ActorRef<M>> {
        if (self.vtable().msg_type)() != TypeId::of::<M>() {
            return None;
        }
        // SAFETY: the cell is an `ActorCell<A>` whose `A::Msg` is `M`
        // (checked above), as a runnable.
        let cell = unsafe { CellRef::from_runnable(self.runnable()) };
        Some(ActorRef { cell })
    }

    /// Sends a system message; schedules the actor if this send won its
    /// run; a message to a terminated actor is answered as
    /// `undeliverable_system` says.
    pub(crate) fn send_system(&self, msg: SystemMsg) {
        // SAFETY: our pointer and count (the `CellVtable` contract).
        match unsafe { (self.vtable().enqueue_system)(self.core, msg) } {
            Ok(Enqueued::AlreadyScheduled) => {}
            Ok(Enqueued::MustSchedule) => schedule_runnable_urgent(self.core(), self.runnable()),
            Err(SendError(msg)) => undeliverable_system(self, msg),
        }
    }

    fn send_auto(&self, msg: AutoMsg) {
        if let Err(refused) = self.try_send_auto(msg) {
            let msg = refused.into_inner();
            self.core().system.dead_auto(self.clone(), msg);
        }
    }

    /// Enqueues PoisonPill or Kill in the user lane (scheduling the actor
    /// if this send won its run), or hands it back: the mailbox is full or
    /// closed.
    fn try_send_auto(&self, msg: AutoMsg) -> Result<(), TrySendError<AutoMsg>> {
        // SAFETY: our pointer and count (the `CellVtable` contract).
        match unsafe { (self.vtable().enqueue_auto)(self.core, msg) }? {
            Enqueued::AlreadyScheduled => {}
            Enqueued::MustSchedule => schedule_runnable(self.core(), self.runnable()),
        }
        Ok(())
    }

    /// Stops the actor: on its system lane, so after the message it is
    /// handling now and before any queued one; its children stop first, then
    /// its `post_stop` runs; what is still queued goes to dead letters.
    pub fn stop(&self) {
        self.send_system(SystemMsg::Terminate);
    }

    /// Sends a PoisonPill on the user lane: the actor handles what is queued
    /// ahead of it, then stops; messages behind it go to dead letters. A
    /// full bounded mailbox refuses it like any message (a dead letter);
    /// [`graceful_stop`](Self::graceful_stop) stops the actor even then.
    pub fn poison_pill(&self) {
        self.send_auto(AutoMsg::PoisonPill);
    }

    /// Sends Kill on the user lane: the actor fails with
    /// [`Killed`](crate::Killed), which its supervisor logs and (by default)
    /// answers with Stop.
    pub fn kill(&self) {
        self.send_auto(AutoMsg::Kill);
    }

    /// Sends a PoisonPill; completes with `true` once the actor has
    /// terminated, or `false` if it has not after `timeout`.
    ///
    /// If the actor's bounded mailbox is full, the PoisonPill cannot be
    /// queued: the actor is then stopped on its system lane instead (as
    /// [`stop`](Self::stop): after the message it is handling now, and what
    /// is queued goes to dead letters), so a graceful stop always stops.
    pub fn graceful_stop(&self, timeout: Duration) -> GracefulStop {
        self.graceful_stop_by(StopSignal::PoisonPill, timeout)
    }

    /// Like [`graceful_stop`](Self::graceful_stop) with a stop signal other
    /// than a PoisonPill: [`StopSignal::Stop`] or [`StopSignal::Kill`]. A
    /// PoisonPill or a Kill that a full bounded mailbox refuses is replaced
    /// by a stop on the system lane (after the current message).
    pub fn graceful_stop_by(&self, signal: StopSignal, timeout: Duration) -> GracefulStop {
        let stop = ask::graceful_stop_watch(self, timeout);
        if stop.already_terminated() {
            return stop;
        }
        let auto = match signal {
            StopSignal::PoisonPill => AutoMsg::PoisonPill,
            StopSignal::Kill => AutoMsg::Kill,
            StopSignal::Stop => {
                self.stop();
                return stop;
            }
        };
        match self.try_send_auto(auto) {
            Ok(()) => {}
            // The user lane is full: it cannot take the signal now, and the
            // caller asked for a stop, not a dead letter.
            Err(TrySendError::Full(auto)) => {
                tracing::debug!(actor = %self, signal = ?auto, "the mailbox is full: stopping on the system lane instead");
                self.stop();
            }
            Err(TrySendError::Closed(auto)) => {
                self.core().system.dead_auto(self.clone(), auto)
            }
        }
        stop
    }

    /// The actor's path, such as `/user/parent/child` (`/` for the root).
    pub fn path(&self) -> String {
        // A loop up the parent chain, not a recursion: a hierarchy can be
        // deep enough (tens of thousands of levels) to overflow a stack.
        let mut names: Vec<&str> = Vec::new();
        let mut core = self.core();
        while let Some(parent) = &core.parent {
            names.push(&core.name);
            core = parent.core();
        }
        if names.is_empty() {
            return "/".to_owned();
        }
        let mut path = String::with_capacity(names.iter().map(|n| n.len() + 1).sum());
        for name in names.iter().rev() {
            path.push('/');
            path.push_str(name);
        }
        path
    }

    /// The actor's name (the last element of its path).
    pub fn name(&self) -> &str {
        &self.core().name
    }

    /// A number unique to this actor incarnation in the process.
    pub fn uid(&self) -> u64 {
        self.core().uid
    }

    /// Whether the actor has terminated (a hint, as
    /// [`ActorRef::is_terminated`]).
    pub fn is_terminated(&self) -> bool {
        // SAFETY: our pointer and count (the `CellVtable` contract).
        unsafe { (self.vtable().is_closed)(self.core) }
    }

    /// User messages queued, for an actor with a bounded mailbox.
    pub fn queued(&self) -> Option<usize> {
        // SAFETY: our pointer and count (the `CellVtable` contract).
        unsafe { (self.vtable().queued)(self.core) }
    }
}

/// Which stop signal [`ActorId::graceful_stop_by`] sends.
///
/// A graceful stop always stops: when a full bounded mailbox refuses a
/// PoisonPill or a Kill, the actor is stopped on its system lane instead
/// (as with [`StopSignal::Stop`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// User lane, after what is queued (the default of `graceful_stop`);
    /// with a full bounded mailbox, a stop after the current message.
    PoisonPill,
    /// System lane, after the current message.
    Stop,
    /// User lane; fails the actor with `Killed`. With a full bounded
    /// mailbox, a stop after the current message (not logged as killed).
    Kill,
}

impl Clone for ActorId {
    fn clone(&self) -> ActorId {
        // SAFETY: our pointer and count (the `CellVtable` contract); the new
        // count is the clone's.
        unsafe { (self.vtable().retain)(self.core) };
        ActorId { core: self.core }
    }
}

impl Drop for ActorId {
    fn drop(&mut self) {
        let release = self.vtable().release;
        // SAFETY: our pointer, and our count, given up here (the cell may go
        // with it: nothing reads it afterwards).
        unsafe { release(self.core) };
    }
}

impl fmt::Debug for ActorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ActorId({}#{})", self.path(), self.uid())
    }
}

impl fmt::Display for ActorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.path())
    }
}

impl PartialEq for ActorId {
    fn eq(&self, other: &ActorId) -> bool {
        self.uid() == other.uid()
    }
}

impl Eq for ActorId {}

impl Hash for ActorId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.uid().hash(state);
    }
}
