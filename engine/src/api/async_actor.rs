//! [`AsyncActor`]: an actor whose handler is an `async fn`, run by the
//! [`Async`] adapter, which is an ordinary [`Actor`] (decision 0034).
//!
//! The adapter owns the actor's state in a heap allocation of its own and
//! the running handler's future, which borrows that state. The future is
//! polled inside the actor's own runs (never on another thread, never
//! outside the actor), with a waker that queues a wake-up in the actor's
//! user lane. While it runs, the user messages that reach the adapter wait
//! in its backlog, in mailbox order; system messages (stop, restart,
//! supervision) are handled as for any actor, and drop the future first.

use std::cell::Cell;
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context as TaskContext, Poll, Wake, Waker};

use proscenium_mailbox::{Enqueued, TrySendError};

use crate::api::actor::Actor;
use crate::api::actor_ref::{ActorId, ActorRef};
use crate::api::context::Context;
use crate::runtime::large;
use crate::runtime::signal::{Envelope, Receipt};
use crate::supervision::failure::{DeathPact, Failure, Outcome};
use crate::supervision::strategy::SupervisorStrategy;
use crate::sync::{AtomicBool, Arc, Ordering};

/// An actor whose handler is asynchronous: one message at a time, in
/// mailbox order; the next message is not handled until the handler's
/// future completes (as kameo's and ractor's `async fn handle`).
///
/// Spawn it through the [`Async`] adapter: `Props::new(|| Async::new(a))`
/// gives an `ActorRef<A::Msg>` like any actor's.
///
/// - An `Err` from the future, or a panic while it is polled, fails the
///   actor; its parent's [`SupervisorStrategy`] (or its own
///   [`Supervision`](crate::Supervision)) decides, as for `receive`.
/// - A stop ([`ActorId::stop`], [`Context::stop_self`]), a `Kill`, and a
///   failure's restart or stop are handled while a future runs: the future
///   is **dropped** at its current `.await` (its locals' destructors run,
///   in the actor), then `post_stop` runs on the state. Messages still
///   waiting behind it go to dead letters on a stop, and are handled by the
///   new incarnation on a restart. A `PoisonPill` waits, as a message
///   does: the actor stops once the running handler and the messages ahead
///   of the pill are done.
/// - Timers, the stash and death watch are the [`Context`]'s, reached
///   through [`AsyncContext`] (it dereferences to it). A termination
///   notification waits, like a message, until the running future is done.
///
/// ```
/// use proscenium::prelude::*;
/// use std::sync::mpsc;
///
/// struct Lookup { out: mpsc::Sender<u64> }
///
/// impl AsyncActor for Lookup {
///     type Msg = u64;
///     async fn handle(&mut self, ctx: &mut AsyncContext<Self>, key: u64) -> Outcome {
///         // Any future: a database client, an HTTP call, an ask.
///         let value = ctx.system().spawn_task(async move { key * 2 }).await?;
///         let _ = self.out.send(value);
///         Ok(())
///     }
/// }
///
/// let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
/// let (tx, rx) = mpsc::channel();
/// let lookup = system.spawn(Props::new(move || Async::new(Lookup { out: tx.clone() })), "lookup")?;
/// lookup.tell(21);
/// assert_eq!(rx.recv()?, 42);
/// system.terminate().wait();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait AsyncActor: Send + Sized + 'static {
    /// The user messages this actor handles.
    type Msg: Send + 'static;

    /// Handles one user message; the next is handled once the returned
    /// future completes. Write it as `async fn handle(..) -> Outcome`.
    fn handle(
        &mut self,
        ctx: &mut AsyncContext<Self>,
        msg: Self::Msg,
    ) -> impl Future<Output = Outcome> + Send;

    /// Runs once per incarnation before the first message (and after a
    /// restart). An error here is an initialization failure.
    fn pre_start(&mut self, ctx: &mut AsyncContext<Self>) -> Outcome {
        let _ = ctx;
        Ok(())
    }

    /// Runs once per incarnation when it ends (also before a restart, after
    /// the children are stopped), after a running future has been dropped.
    fn post_stop(&mut self, ctx: &mut AsyncContext<Self>) {
        let _ = ctx;
    }

    /// Handles the termination of an actor this one watches; the default
    /// fails the actor with [`DeathPact`].
    fn on_terminated(&mut self, ctx: &mut AsyncContext<Self>, who: ActorId) -> Outcome {
        let _ = ctx;
        Err(Box::new(DeathPact(who)))
    }

    /// How this actor supervises its children: asked once per incarnation,
    /// before `pre_start` (a running handler borrows the state when a
    /// child fails).
    fn supervisor_strategy(&self) -> SupervisorStrategy {
        SupervisorStrategy::default()
    }
}

/// What an async handler (and its actor's hooks) can do besides changing
/// the actor's state: it dereferences to the actor's [`Context`] (spawn,
/// watch, stop, timers, stash, `self_ref`, `system`).
///
/// It is valid only while the handler's future is polled, which is always
/// inside the actor's own run; it cannot leave the handler (it is borrowed).
///
/// ```
/// use proscenium::prelude::*;
/// use std::time::Duration;
///
/// struct Ticker;
/// impl AsyncActor for Ticker {
///     type Msg = &'static str;
///     async fn handle(&mut self, ctx: &mut AsyncContext<Self>, msg: &'static str) -> Outcome {
///         if msg == "start" {
///             // The Context's timers, stash, watch, spawn, stop: all here.
///             ctx.start_single_timer("tick", "tick", Duration::from_millis(10));
///         }
///         Ok(())
///     }
/// }
/// # let _ = Props::new(|| Async::new(Ticker));
/// ```
pub struct AsyncContext<A: AsyncActor> {
    _actor: PhantomData<fn() -> A>,
}

impl<A: AsyncActor> fmt::Debug for AsyncContext<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncContext").finish_non_exhaustive()
    }
}

impl<A: AsyncActor> AsyncContext<A> {
    /// The handle handed to `handle` and to the hooks: zero-sized, so a
    /// fresh one costs nothing and borrows nothing.
    fn handle() -> &'static mut AsyncContext<A> {
        // SAFETY: `AsyncContext` is zero-sized; a dangling, aligned,
        // non-null pointer is a valid reference to a zero-sized value, and
        // it aliases nothing.
        unsafe { &mut *NonNull::<AsyncContext<A>>::dangling().as_ptr() }
    }

    fn current() -> NonNull<Context<Async<A>>> {
        let (ptr, actor) = CURRENT
            .get()
            .expect("an AsyncContext is only used inside its actor's handler");
        assert!(
            actor == std::any::TypeId::of::<A>(),
            "an AsyncContext is only used inside its actor's handler"
        );
        ptr.cast()
    }
}

impl<A: AsyncActor> Deref for AsyncContext<A> {
    type Target = Context<Async<A>>;

    fn deref(&self) -> &Context<Async<A>> {
        // `CURRENT` holds the `&mut Context` of the adapter polling this
        // actor's future (or calling its hook) on this thread, set by
        // `Entered` and cleared when the call returns or unwinds; its type
        // is checked by `current`.
        // SAFETY: the adapter does not touch the context while the call
        // runs, and this borrow (of `self`, which the call borrows) ends
        // before it returns.
        unsafe { Self::current().as_ref() }
    }
}

impl<A: AsyncActor> DerefMut for AsyncContext<A> {
    fn deref_mut(&mut self) -> &mut Context<Async<A>> {
        // SAFETY: as `deref`; `&mut self` (there is one `AsyncContext` per
        // call) makes this the only borrow of the context.
        unsafe { Self::current().as_mut() }
    }
}

thread_local! {
    /// The context of the async actor whose code runs on this thread now,
    /// with the actor's type.
    static CURRENT: Cell<Option<(NonNull<()>, std::any::TypeId)>> = const { Cell::new(None) };
}

/// Publishes a context in `CURRENT` until dropped (also by an unwind),
/// restoring what was there.
struct Entered {
    prev: Option<(NonNull<()>, std::any::TypeId)>,
}

impl Entered {
    fn new<A: AsyncActor>(ctx: &mut Context<Async<A>>) -> Entered {
        let ptr = NonNull::from(ctx).cast::<()>();
        let prev = CURRENT.replace(Some((ptr, std::any::TypeId::of::<A>())));
        Entered { prev }
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        CURRENT.set(self.prev);
    }
}

/// A running handler's future: borrows the adapter's state (lifetime
/// erased, see `Async::start`).
type Running = Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// What waits behind a running handler.
enum Backlogged<M> {
    Msg(M),
    Terminated(ActorId),
    /// A PoisonPill: stop once what is ahead of it is handled.
    PoisonPill,
    /// A receipt: run once what is ahead of it is handled.
    Receipt(Receipt),
}

/// The adapter that runs an [`AsyncActor`] as an [`Actor`]: spawn
/// `Props::new(|| Async::new(actor))`. See [`AsyncActor`].
///
/// ```
/// use proscenium::prelude::*;
///
/// struct Echo;
/// impl AsyncActor for Echo {
///     type Msg = (u32, ActorRef<u32>);
///     async fn handle(&mut self, _: &mut AsyncContext<Self>, (n, to): Self::Msg) -> Outcome {
///         to.tell(n);
///         Ok(())
///     }
/// }
///
/// // A `Props<Async<Echo>>`; spawning it gives an `ActorRef<(u32, ActorRef<u32>)>`.
/// let props = Props::new(|| Async::new(Echo)).with_mailbox_capacity(1024);
/// # let _ = props;
/// ```
pub struct Async<A: AsyncActor> {
    /// The actor's state, from `Box::leak`; owned (freed in `Drop`).
    /// While `running` is `Some`, only the future uses it.
    state: NonNull<A>,
    /// The handler's future, if one is running; it borrows `*state`, so
    /// `Drop` drops it first, explicitly.
    running: Option<Running>,
    /// Messages (and termination notices) received while a future runs, in
    /// arrival order.
    backlog: VecDeque<Backlogged<A::Msg>>,
    /// The waker handed to the futures, made on first use.
    waker: Option<(Waker, Arc<WakeActor<A::Msg>>)>,
    /// The actor's strategy, asked of it before `pre_start`: the driver
    /// asks for it while a future borrows the state, which it then cannot
    /// read.
    strategy: Option<SupervisorStrategy>,
}

// SAFETY: `Async` owns `*state` uniquely (no other pointer to it outlives
// a call on the adapter), `A: Send`, and the running future is `Send`: the
// adapter moves between threads as a `Box<A>` and a boxed future would.
unsafe impl<A: AsyncActor> Send for Async<A> {}

impl<A: AsyncActor> Async<A> {
    /// Wraps `actor` to be spawned: `Props::new(|| Async::new(MyActor))`.
    pub fn new(actor: A) -> Async<A> {
        Async {
            state: NonNull::from(Box::leak(Box::new(actor))),
            running: None,
            backlog: VecDeque::new(),
            waker: None,
            strategy: None,
        }
    }

    /// The state, for a synchronous call; never while a future runs.
    fn state(&mut self) -> &mut A {
        assert!(self.running.is_none(), "the state is borrowed by a running handler");
        // SAFETY: `state` is live (freed only in `Drop`) and no future
        // borrows it (`running` is `None`, asserted); `&mut self` makes
        // this the only borrow.
        unsafe { self.state.as_mut() }
    }

    /// Calls a synchronous hook of the actor with its context published.
    fn hook<R>(
        &mut self,
        ctx: &mut Context<Async<A>>,
        f: impl FnOnce(&mut A, &mut AsyncContext<A>) -> R,
    ) -> R {
        let _entered = Entered::new(ctx);
        f(self.state(), AsyncContext::handle())
    }

    /// Starts the handler of `msg` (to be polled by `drive`).
    fn start(&mut self, msg: A::Msg, ctx: &mut Context<Async<A>>) {
        debug_assert!(self.running.is_none());
        let _entered = Entered::new(ctx);
        // The reference is `'static` by erasure; it lives as long as the
        // future, which is dropped before `state` is used again (every
        // other use goes through `state()`, reached only with `running`
        // `None`) or freed (`Drop` drops the future first).
        // SAFETY: as above; and `*state` does not move (its own allocation).
        let state: &'static mut A = unsafe { &mut *self.state.as_ptr() };
        self.running = Some(Box::pin(state.handle(AsyncContext::handle(), msg)));
    }

    /// Polls the running future; once it is done, handles the backlog
    /// until a future is pending or the backlog is empty. On a failure
    /// with messages still waiting, queues a wake-up for them: it is
    /// handled if the actor is resumed (a restart's new instance ignores
    /// it and gets them from the stash, see `pre_restart`).
    fn drive(&mut self, ctx: &mut Context<Async<A>>) -> Outcome {
        let outcome = self.drive_until_pending(ctx);
        if outcome.is_err() && !self.backlog.is_empty() {
            self.waker(ctx).wake_by_ref();
        }
        outcome
    }

    fn drive_until_pending(&mut self, ctx: &mut Context<Async<A>>) -> Outcome {
        loop {
            if let Some(mut future) = self.running.take() {
                let waker = self.waker(ctx);
                let polled = {
                    let _entered = Entered::new(ctx);
                    future.as_mut().poll(&mut TaskContext::from_waker(waker))
                };
                match polled {
                    Poll::Pending => {
                        self.running = Some(future);
                        return Ok(());
                    }
                    Poll::Ready(outcome) => {
                        drop(future);
                        outcome?;
                    }
                }
            }
            match self.backlog.pop_front() {
                None => return Ok(()),
                Some(Backlogged::Msg(msg)) => self.start(msg, ctx),
                Some(Backlogged::Terminated(who)) => {
                    self.hook(ctx, |a, c| a.on_terminated(c, who))?;
                }
                Some(Backlogged::PoisonPill) => {
                    // What follows it goes to dead letters with the stop.
                    ctx.stop_self();
                    return Ok(());
                }
                Some(Backlogged::Receipt(receipt)) => receipt.run(|| ctx.path()),
            }
        }
    }

    /// The futures' waker (lent, not cloned: no count per poll).
    fn waker(&mut self, ctx: &Context<Async<A>>) -> &Waker {
        let (waker, _) = self.waker.get_or_insert_with(|| {
            let wake = Arc::new(WakeActor {
                target: ctx.self_ref(),
                queued: AtomicBool::new(false),
            });
            (Waker::from(Arc::clone(&wake)), wake)
        });
        waker
    }

    /// Drops the running future (its destructors run here, in the actor).
    fn cancel(&mut self) {
        drop(self.running.take());
    }
}

impl<A: AsyncActor> Drop for Async<A> {
    fn drop(&mut self) {
        // The future borrows the state: it goes first.
        self.cancel();
        // SAFETY: `state` came from `Box::leak` and is freed only here; no
        // future borrows it any more.
        drop(unsafe { Box::from_raw(self.state.as_ptr()) });
    }
}

impl<A: AsyncActor> fmt::Debug for Async<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Async")
            .field("actor", &std::any::type_name::<A>())
            .field("running", &self.running.is_some())
            .field("backlog", &self.backlog.len())
            .finish()
    }
}

impl<A: AsyncActor> Actor for Async<A> {
    type Msg = A::Msg;

    fn receive(&mut self, ctx: &mut Context<Self>, msg: A::Msg) -> Outcome {
        if self.running.is_some() || !self.backlog.is_empty() {
            // Behind the running handler (or, after a resumed failure,
            // behind those still waiting; the queued wake-up drives them).
            self.backlog.push_back(Backlogged::Msg(msg));
            return Ok(());
        }
        self.start(msg, ctx);
        self.drive(ctx)
    }

    fn wake(&mut self, ctx: &mut Context<Self>) -> Outcome {
        if let Some((_, wake)) = &self.waker {
            // Pairs with the waker's swap: what the waker's side wrote
            // before it woke us is visible to the poll below.
            wake.queued.swap(false, Ordering::AcqRel);
        }
        if self.running.is_none() && self.backlog.is_empty() {
            return Ok(()); // a late wake-up (the future completed or was dropped)
        }
        self.drive(ctx)
    }

    fn defer_poison_pill(&mut self) -> bool {
        if self.running.is_none() && self.backlog.is_empty() {
            return false;
        }
        self.backlog.push_back(Backlogged::PoisonPill);
        true
    }

    fn defer_receipt(&mut self, receipt: Receipt) -> Option<Receipt> {
        if self.running.is_none() && self.backlog.is_empty() {
            return Some(receipt);
        }
        self.backlog.push_back(Backlogged::Receipt(receipt));
        None
    }

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        self.strategy = Some(self.state().supervisor_strategy());
        self.hook(ctx, |a, c| a.pre_start(c))
    }

    fn post_stop(&mut self, ctx: &mut Context<Self>) {
        self.cancel();
        let me = ctx.id();
        for waiting in self.backlog.drain(..) {
            if let Backlogged::Msg(msg) = waiting {
                ctx.system().dead_envelope(me.clone(), Envelope::Msg(msg));
            }
        }
        self.hook(ctx, |a, c| a.post_stop(c));
    }

    fn pre_restart(&mut self, ctx: &mut Context<Self>, failure: &Failure) {
        let _ = failure;
        self.cancel();
        // The waiting messages are the mailbox's: the restart unstashes them
        // for the new incarnation, ahead of the rest.
        for waiting in self.backlog.drain(..) {
            match waiting {
                Backlogged::Msg(msg) => {
                    if let Err(overflow) = ctx.stash(msg) {
                        let me = ctx.id();
                        ctx.system().dead_envelope(me, Envelope::Msg(overflow.0));
                    }
                }
                // Re-sent: it then follows what is in the mailbox.
                Backlogged::PoisonPill => ctx.self_ref().poison_pill(),
                // Re-sent, as the PoisonPill: later than need be, never
                // ahead of a message it follows (those are stashed, and
                // handled first).
                Backlogged::Receipt(receipt) => ctx.self_ref().send_receipt(receipt),
                // Watch is per incarnation in spirit; the notice is dropped.
                Backlogged::Terminated(_) => {}
            }
        }
        ctx.stop_all_children();
        self.hook(ctx, |a, c| a.post_stop(c));
    }

    fn on_terminated(&mut self, ctx: &mut Context<Self>, who: ActorId) -> Outcome {
        if self.running.is_some() {
            self.backlog.push_back(Backlogged::Terminated(who));
            return Ok(());
        }
        self.hook(ctx, |a, c| a.on_terminated(c, who))
    }

    fn supervisor_strategy(&self) -> SupervisorStrategy {
        match &self.strategy {
            Some(strategy) => strategy.clone(),
            // Not started yet: no future can borrow the state.
            // SAFETY: `running` is `None` before `pre_start` (no handler
            // has run), so nothing else borrows `*state`.
            None => unsafe { self.state.as_ref() }.supervisor_strategy(),
        }
    }
}

/// The waker of an async actor's futures: queues one `Envelope::Wake` in
/// its user lane per wake-up, none while one is queued.
struct WakeActor<M: Send + 'static> {
    target: ActorRef<M>,
    /// A wake-up is queued and not yet handled: set by the waker that
    /// queues it, cleared by the actor when it handles it.
    queued: AtomicBool,
}

impl<M: Send + 'static> Wake for WakeActor<M> {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Pairs with the actor's swap in `Async::wake` (see there).
        if self.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        let cell = &self.target.cell;
        let sent = large::with_room_if_large::<M, _>(|| cell.mailbox.enqueue_user(Envelope::Wake));
        match sent {
            Ok(Enqueued::AlreadyScheduled) => {}
            Ok(Enqueued::MustSchedule) => cell.schedule(),
            // Gone: nothing left to wake.
            Err(TrySendError::Closed(_)) => {}
            // A full bounded mailbox: retry from a task until there is room
            // (a lost wake-up would leave the future pending forever).
            Err(TrySendError::Full(_)) => {
                self.queued.store(false, Ordering::Release);
                let again = Arc::clone(self);
                cell.core()
                    .system
                    .scheduler_handle()
                    .spawn_detached(async move {
                        YieldOnce(false).await;
                        again.wake_by_ref();
                    });
            }
        }
    }
}

/// Yields to the scheduler once.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
