//! The [`Actor`] trait and [`Props`], the recipe a parent (or a restart)
//! creates an actor from.

use std::fmt;
use std::sync::Arc;

use crate::api::actor_ref::ActorId;
use crate::api::context::Context;
use crate::runtime::signal::Receipt;
use crate::supervision::failure::{ActorError, DeathPact, Failure, Outcome};
use crate::supervision::own::Supervision;
use crate::supervision::strategy::SupervisorStrategy;

/// An actor: state plus a handler for its messages.
///
/// Handlers run on the scheduler's workers, one message at a time, and must
/// not block. An `Err` or a panic from any handler fails the actor and hands
/// the [`Failure`] to its parent's [`SupervisorStrategy`].
///
/// ```
/// # #![allow(dead_code)]
/// use proscenium::prelude::*;
///
/// struct Counter { n: u64 }
/// enum CounterMsg { Add(u64), Get(Reply<u64>) }
///
/// impl Actor for Counter {
///     type Msg = CounterMsg;
///     fn receive(&mut self, _ctx: &mut Context<Self>, msg: CounterMsg) -> Outcome {
///         match msg {
///             CounterMsg::Add(k) => self.n += k,
///             CounterMsg::Get(reply) => reply.send(self.n),
///         }
///         Ok(())
///     }
/// }
/// # let _ = Props::new(|| Counter { n: 0 });
/// ```
pub trait Actor: Send + Sized + 'static {
    /// The user messages this actor handles.
    type Msg: Send + 'static;

    /// Handles one user message.
    fn receive(&mut self, ctx: &mut Context<Self>, msg: Self::Msg) -> Outcome;

    /// Runs once per incarnation before the first message (and, by default,
    /// from [`post_restart`](Self::post_restart)). An error here is an
    /// initialization failure, which the default decider answers with Stop.
    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        let _ = ctx;
        Ok(())
    }

    /// Runs exactly once per incarnation when it ends: after the actor's
    /// children have stopped, or (by default) from
    /// [`pre_restart`](Self::pre_restart). Panics are logged and ignored.
    fn post_stop(&mut self, ctx: &mut Context<Self>) {
        let _ = ctx;
    }

    /// Runs on the failed instance before it is replaced. The default stops
    /// every child and calls [`post_stop`](Self::post_stop); the restart then
    /// waits for those children to terminate. The failing message is not
    /// handed back: `receive` took it by value.
    fn pre_restart(&mut self, ctx: &mut Context<Self>, failure: &Failure) {
        let _ = failure;
        ctx.stop_all_children();
        self.post_stop(ctx);
    }

    /// Runs on the fresh instance after a restart. The default calls
    /// [`pre_start`](Self::pre_start). An error here is an initialization
    /// failure.
    fn post_restart(&mut self, ctx: &mut Context<Self>, failure: &Failure) -> Outcome {
        let _ = failure;
        self.pre_start(ctx)
    }

    /// Handles the termination of an actor this one watches (at most once per
    /// watch). The default fails the actor with [`DeathPact`].
    fn on_terminated(&mut self, ctx: &mut Context<Self>, who: ActorId) -> Outcome {
        let _ = ctx;
        Err(Box::new(DeathPact(who)))
    }

    /// How this actor supervises its children. Asked once per child failure.
    fn supervisor_strategy(&self) -> SupervisorStrategy {
        SupervisorStrategy::default()
    }

    /// The engine's hook for [`AsyncActor`](crate::AsyncActor)'s adapter:
    /// a future it runs was woken (an `Envelope::Wake` in the user lane).
    /// Not for user code; the default ignores the wake.
    #[doc(hidden)]
    fn wake(&mut self, ctx: &mut Context<Self>) -> Outcome {
        let _ = ctx;
        Ok(())
    }

    /// The engine's hook for [`AsyncActor`](crate::AsyncActor)'s adapter:
    /// `true` if it took a PoisonPill to handle after the messages that
    /// wait for its running handler. The default stops at once.
    #[doc(hidden)]
    fn defer_poison_pill(&mut self) -> bool {
        false
    }

    /// Takes a receipt to run after the messages that wait for its
    /// running handler (`None`), or hands it back to run now. The default
    /// runs it now: a plain actor has handled everything ahead of it.
    #[doc(hidden)]
    fn defer_receipt(&mut self, receipt: Receipt) -> Option<Receipt> {
        Some(receipt)
    }
}

pub(crate) type Factory<A> = dyn Fn() -> Result<A, ActorError> + Send + Sync;

/// How to create an actor: a factory, called again on every restart,
/// mailbox settings, and how the actor's own failures are handled
/// ([`with_supervision`](Self::with_supervision); by default, by its
/// parent's strategy).
///
/// ```
/// # #![allow(dead_code)]
/// use proscenium::prelude::*;
/// # struct Worker { id: u32 }
/// # impl Actor for Worker { type Msg = (); fn receive(&mut self, _: &mut Context<Self>, _: ()) -> Outcome { Ok(()) } }
/// let id = 7;
/// let props = Props::new(move || Worker { id }).with_mailbox_capacity(1024);
/// let fallible = Props::try_new(|| -> Result<Worker, std::io::Error> { Ok(Worker { id: 1 }) });
/// # let _ = (props, fallible);
/// ```
pub struct Props<A: Actor> {
    factory: Arc<Factory<A>>,
    capacity: Capacities,
    supervision: Option<Arc<Supervision>>,
}

/// The mailbox and stash bounds, `UNSET` for none: packed in two words
/// (two `Option<usize>` would take four, in every actor's driver).
#[derive(Clone, Copy)]
struct Capacities {
    mailbox: usize,
    stash: usize,
}

const UNSET: usize = usize::MAX;

impl Capacities {
    const NONE: Capacities = Capacities {
        mailbox: UNSET,
        stash: UNSET,
    };

    fn get(v: usize) -> Option<usize> {
        (v != UNSET).then_some(v)
    }
}

impl<A: Actor> Props<A> {
    /// Props from an infallible factory.
    pub fn new(factory: impl Fn() -> A + Send + Sync + 'static) -> Props<A> {
        Props {
            factory: Arc::new(move || Ok(factory())),
            capacity: Capacities::NONE,
            supervision: None,
        }
    }

    /// Props from a fallible factory: an `Err` (or a panic) is an
    /// initialization failure.
    pub fn try_new<E>(factory: impl Fn() -> Result<A, E> + Send + Sync + 'static) -> Props<A>
    where
        E: Into<ActorError>,
    {
        Props {
            factory: Arc::new(move || factory().map_err(Into::into)),
            capacity: Capacities::NONE,
            supervision: None,
        }
    }

    /// Bounds the user lane: a `tell` to a full mailbox goes to dead letters
    /// and [`try_tell`](crate::ActorRef::try_tell) hands the message back.
    /// A capacity of zero is refused by `spawn` with
    /// [`SpawnError::ZeroCapacity`](crate::SpawnError::ZeroCapacity);
    /// `usize::MAX` (or any capacity from `u32::MAX` up) means unbounded.
    pub fn with_mailbox_capacity(mut self, capacity: usize) -> Props<A> {
        self.capacity.mailbox = capacity;
        self
    }

    /// Bounds the actor's stash (see [`Context::stash`]): stashing more
    /// fails with [`StashOverflowError`](crate::StashOverflowError), which
    /// hands the message back. Unbounded by default (as Akka's default
    /// `stash-capacity`); `usize::MAX` means unbounded.
    pub fn with_stash_capacity(mut self, capacity: usize) -> Props<A> {
        self.capacity.stash = capacity;
        self
    }

    /// Handles this actor's own failures with `supervision` (restart, with
    /// a limit and a window or with backoff, stop, resume) instead of
    /// handing them to its parent's [`SupervisorStrategy`]: the way to
    /// bound one top-level actor's restarts without writing a parent for
    /// it. What `supervision` does not take (see [`Supervision`]) still
    /// goes to the parent, whose strategy also still covers its other
    /// children.
    ///
    /// ```
    /// use proscenium::prelude::*;
    /// use std::time::Duration;
    ///
    /// struct Flaky;
    /// impl Actor for Flaky {
    ///     type Msg = ();
    ///     fn receive(&mut self, _: &mut Context<Self>, _: ()) -> Outcome {
    ///         Err("flaky".into())
    ///     }
    /// }
    ///
    /// let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
    /// // Restarted twice at most within a minute: the third failure stops it.
    /// let props = Props::new(|| Flaky)
    ///     .with_supervision(Supervision::restart().with_limit(2, Duration::from_secs(60)));
    /// let flaky = system.spawn(props, "flaky")?;
    /// for _ in 0..3 {
    ///     flaky.tell(());
    /// }
    /// assert!(flaky.id().when_terminated().wait_timeout(Duration::from_secs(10)));
    /// system.terminate().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_supervision(mut self, supervision: Supervision) -> Props<A> {
        self.supervision = Some(Arc::new(supervision));
        self
    }

    pub(crate) fn stash_capacity(&self) -> Option<usize> {
        Capacities::get(self.capacity.stash)
    }

    pub(crate) fn mailbox_capacity(&self) -> Option<usize> {
        Capacities::get(self.capacity.mailbox)
    }

    /// The factory and the supervision: what a spawned actor keeps of its
    /// props (the capacities are used when it is spawned). The factory
    /// lives in the driver, 8 bytes; the supervision, when there is one,
    /// with the actor's seldom-used state.
    pub(crate) fn into_parts(self) -> (Arc<Factory<A>>, Option<Arc<Supervision>>) {
        (self.factory, self.supervision)
    }
}

impl<A: Actor> Clone for Props<A> {
    fn clone(&self) -> Props<A> {
        Props {
            factory: Arc::clone(&self.factory),
            capacity: self.capacity,
            supervision: self.supervision.clone(),
        }
    }
}

impl<A: Actor> fmt::Debug for Props<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Props")
            .field("actor", &std::any::type_name::<A>())
            .field("mailbox_capacity", &self.mailbox_capacity())
            .field("stash_capacity", &self.stash_capacity())
            .field("supervision", &self.supervision)
            .finish()
    }
}
