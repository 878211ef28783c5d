//! What a router is told: [`RouterMsg`] (a message to route, a
//! [`Broadcast`], or a management message), and [`RouterRef`], a typed
//! reference that sends them with plain calls.

use std::fmt;
use std::time::Duration;

use crate::api::actor_ref::{ActorId, ActorRef};
use crate::api::ask::{Ask, GracefulStop, Reply};
use crate::error::SpawnError;

/// A message to a router.
///
/// A router's reference is an `ActorRef<RouterMsg<M>>`, where `M` is its
/// routees' message type. `M` converts into `RouterMsg::Route(M)`, so
/// `router.tell(msg.into())` routes a plain message; [`RouterRef`] wraps
/// the reference for `router.tell(msg)` and `router.broadcast(msg)`.
///
/// Why a message type of its own rather than an `ActorRef<M>` in disguise:
/// a router is told more than `M` (broadcasts, management messages), and
/// an `ActorRef<M>` has no way to intercept what is told to it. The cost is `RouterMsg::Route` around each
/// message, which `From<M>` and [`RouterRef`] hide.
///
/// PoisonPill, Kill and Stop sent to the router itself (with
/// [`ActorRef::poison_pill`] and the like) are for the router, as in Akka:
/// they are not passed on. To reach the routees, wrap them:
/// [`Broadcast::poison_pill`], [`Broadcast::kill`].
pub enum RouterMsg<M: Send + 'static> {
    /// Route `M` to one routee chosen by the routing logic (to every routee
    /// for the broadcast logic); to dead letters when there is none.
    Route(M),
    /// Send to every routee.
    Broadcast(Broadcast<M>),
    /// Reply with the current routees, in routing-table order.
    GetRoutees(Reply<Vec<ActorRef<M>>>),
    /// Add a routee (watched; removed when it terminates). A pool router
    /// does not supervise a routee added this way.
    AddRoutee(ActorRef<M>),
    /// Remove a routee from the table (a pool's own routee also gets a
    /// PoisonPill, after what was routed to it). A pool router without a
    /// resizer stops once no routee is left.
    RemoveRoutee(ActorId),
    /// Grow (positive) or shrink (negative) a pool by that many routees;
    /// removed routees get a PoisonPill after what was routed to them.
    /// Ignored by group routers.
    AdjustPoolSize(isize),
}

impl<M: Send + 'static> From<M> for RouterMsg<M> {
    fn from(msg: M) -> RouterMsg<M> {
        RouterMsg::Route(msg)
    }
}

impl<M: Send + 'static> RouterMsg<M> {
    /// `RouterMsg::Broadcast` of a message.
    pub fn broadcast(msg: M) -> RouterMsg<M>
    where
        M: Clone,
    {
        RouterMsg::Broadcast(Broadcast::new(msg))
    }
}

impl<M: Send + 'static> fmt::Debug for RouterMsg<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouterMsg::Route(_) => f.write_str("Route(..)"),
            RouterMsg::Broadcast(b) => f.debug_tuple("Broadcast").field(b).finish(),
            RouterMsg::GetRoutees(_) => f.write_str("GetRoutees"),
            RouterMsg::AddRoutee(r) => f.debug_tuple("AddRoutee").field(r).finish(),
            RouterMsg::RemoveRoutee(id) => f.debug_tuple("RemoveRoutee").field(id).finish(),
            RouterMsg::AdjustPoolSize(n) => f.debug_tuple("AdjustPoolSize").field(n).finish(),
        }
    }
}

/// What a [`RouterMsg::Broadcast`] carries to every routee: a user message
/// (cloned for each; only `M: Clone` can be broadcast, checked at compile
/// time), or a PoisonPill or Kill for each routee's user lane, after what
/// it already has.
///
/// The graceful way to stop a group router (whose routees are not its
/// children) is a broadcast PoisonPill, then a PoisonPill to the router:
///
/// ```
/// # use proscenium::prelude::*;
/// # use std::time::Duration;
/// # struct W;
/// # impl Actor for W { type Msg = u32; fn receive(&mut self, _: &mut Context<Self>, _: u32) -> Outcome { Ok(()) } }
/// # let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
/// let a = system.spawn(Props::new(|| W), "a")?;
/// let group = system.spawn(Group::round_robin(vec![a.clone()]).into_props(), "group")?;
/// group.tell(RouterMsg::Route(1));
/// group.tell(RouterMsg::Broadcast(Broadcast::poison_pill()));
/// assert!(group.graceful_stop(Duration::from_secs(5)).wait());
/// assert!(a.graceful_stop(Duration::from_secs(5)).wait());
/// # system.terminate().wait();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Broadcast<M>(pub(crate) BroadcastKind<M>);

pub(crate) enum BroadcastKind<M> {
    Msg { msg: M, clone: fn(&M) -> M },
    PoisonPill,
    Kill,
}

impl<M> Broadcast<M> {
    /// A user message for every routee.
    pub fn new(msg: M) -> Broadcast<M>
    where
        M: Clone,
    {
        Broadcast(BroadcastKind::Msg {
            msg,
            clone: M::clone,
        })
    }

    /// A PoisonPill for every routee: each stops after the messages queued
    /// ahead of it.
    pub fn poison_pill() -> Broadcast<M> {
        Broadcast(BroadcastKind::PoisonPill)
    }

    /// Kill for every routee: each fails with [`Killed`](crate::Killed).
    pub fn kill() -> Broadcast<M> {
        Broadcast(BroadcastKind::Kill)
    }
}

impl<M> fmt::Debug for Broadcast<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            BroadcastKind::Msg { .. } => "Msg(..)",
            BroadcastKind::PoisonPill => "PoisonPill",
            BroadcastKind::Kill => "Kill",
        })
    }
}

/// A router's reference with the routing calls spelled out: `tell(m)`
/// routes, `broadcast(m)` reaches every routee. A thin wrapper over the
/// `ActorRef<RouterMsg<M>>` that spawning the router returns (no extra
/// cost: `tell` is that reference's `tell` of `RouterMsg::Route`).
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
/// let pool = system.spawn(Pool::round_robin(4).props(Props::new(|| Echo)), "echoes")?;
/// let pool = RouterRef::new(pool);
/// assert_eq!(pool.ask(|r| (7, r), Duration::from_secs(1)).wait(), Ok(7));
/// assert_eq!(pool.routees(Duration::from_secs(1)).wait()?.len(), 4);
/// # system.terminate().wait();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RouterRef<M: Send + 'static> {
    router: ActorRef<RouterMsg<M>>,
}

impl<M: Send + 'static> RouterRef<M> {
    /// Wraps a router's reference.
    pub fn new(router: ActorRef<RouterMsg<M>>) -> RouterRef<M> {
        RouterRef { router }
    }

    /// Routes `msg` (as `RouterMsg::Route`).
    #[inline]
    pub fn tell(&self, msg: M) {
        self.router.tell(RouterMsg::Route(msg));
    }

    /// Sends `msg` to every routee.
    pub fn broadcast(&self, msg: M)
    where
        M: Clone,
    {
        self.router.tell(RouterMsg::broadcast(msg));
    }

    /// Routes a request built around a [`Reply`]; the routee that gets it
    /// answers (see [`ActorRef::ask`]).
    pub fn ask<R: Send + 'static>(
        &self,
        make: impl FnOnce(Reply<R>) -> M,
        timeout: Duration,
    ) -> Ask<R> {
        self.router
            .ask(|reply| RouterMsg::Route(make(reply)), timeout)
    }

    /// The current routees.
    pub fn routees(&self, timeout: Duration) -> Ask<Vec<ActorRef<M>>> {
        self.router.ask(RouterMsg::GetRoutees, timeout)
    }

    /// Sends a PoisonPill to the router itself (after its queue). A pool
    /// router's routees stop with it (they are its children).
    pub fn poison_pill(&self) {
        self.router.poison_pill();
    }

    /// Sends a PoisonPill to every routee (after what each has queued).
    pub fn broadcast_poison_pill(&self) {
        self.router
            .tell(RouterMsg::Broadcast(Broadcast::poison_pill()));
    }

    /// A PoisonPill to the router, completing once it has terminated.
    pub fn graceful_stop(&self, timeout: Duration) -> GracefulStop {
        self.router.graceful_stop(timeout)
    }

    /// A plain `ActorRef<M>` that routes, for code that should not see the
    /// router behind it; as the router reference's own `message_ref`
    /// (below), whose doc gives the cost.
    pub fn message_ref(&self) -> Result<ActorRef<M>, SpawnError> {
        self.router.message_ref()
    }

    /// The wrapped reference.
    pub fn actor_ref(&self) -> &ActorRef<RouterMsg<M>> {
        &self.router
    }

    /// The router's id.
    pub fn id(&self) -> ActorId {
        self.router.id()
    }
}

impl<M: Send + 'static> ActorRef<RouterMsg<M>> {
    /// A plain `ActorRef<M>` in front of this router: what it is told or
    /// asked is routed (as [`RouterMsg::Route`]), so whoever holds it sees
    /// an actor of `M`s, not a router. It stops when the router terminates.
    ///
    /// Cost: it is an adapter ([`ActorRef::adapt`]): a small forwarding
    /// actor under `/system` that watches the router. Each message through
    /// it takes one extra hop (handled by the adapter, then told to the
    /// router: about twice the work of a tell; BENCHMARKS.md, "Narrowed
    /// references"), and each call makes a new adapter: make it once and
    /// clone it. The hop-free route, the router's own cell taking `M`s, is
    /// not open: an `ActorRef<M>` is the cell of an actor of `M`s, and a
    /// cell that took another type would need a conversion (dynamic
    /// dispatch or a stored function) in every reference's `tell`, which
    /// every actor would pay. Per sender, messages through this reference
    /// keep their order, but one sent to the router directly may overtake
    /// them; a PoisonPill or stop sent through it stops the adapter only.
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
    /// let pool = system.spawn(Pool::round_robin(4).props(Props::new(|| Echo)), "echoes")?;
    /// let echoes: ActorRef<(u32, Reply<u32>)> = pool.message_ref()?;
    /// assert_eq!(echoes.ask(|r| (7, r), Duration::from_secs(1)).wait(), Ok(7));
    /// # system.terminate().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn message_ref(&self) -> Result<ActorRef<M>, SpawnError> {
        self.adapt(RouterMsg::Route)
    }
}

impl<M: Send + 'static> From<ActorRef<RouterMsg<M>>> for RouterRef<M> {
    fn from(router: ActorRef<RouterMsg<M>>) -> RouterRef<M> {
        RouterRef::new(router)
    }
}

impl<M: Send + 'static> Clone for RouterRef<M> {
    fn clone(&self) -> RouterRef<M> {
        RouterRef {
            router: self.router.clone(),
        }
    }
}

impl<M: Send + 'static> fmt::Debug for RouterRef<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RouterRef").field(&self.router).finish()
    }
}
