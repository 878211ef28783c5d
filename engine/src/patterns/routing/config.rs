//! Router configurations: [`Pool`] (the router creates and supervises its
//! routees) and [`Group`] (the router is given existing actors). Both end
//! in the `Props` of a [`Router`], spawned like any actor.

use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use crate::api::actor::{Actor, Props};
use crate::api::actor_ref::ActorRef;
use crate::api::context::Context;
use crate::error::SpawnError;
use crate::patterns::routing::logic::{stable_hash, LogicKind};
use crate::patterns::routing::resizer::Resizer;
use crate::patterns::routing::router::Router;
use crate::supervision::strategy::{Directive, SupervisorStrategy};

/// Akka's default number of virtual nodes per routee on the hash ring.
const DEFAULT_VIRTUAL_NODES: usize = 10;

type SpawnRoutee<M> =
    dyn Fn(&mut Context<Router<M>>) -> Result<ActorRef<M>, SpawnError> + Send + Sync;

/// What a router incarnation is built from (shared by its restarts).
pub(crate) struct RouterConfig<M: Send + 'static> {
    pub(crate) logic: LogicKind<M>,
    pub(crate) routees: Routees<M>,
    /// A restarting pool router's routees, by router uid, handed from the
    /// old incarnation (`pre_restart`) to the new one (`post_restart`). A
    /// lock, taken only on restarts: `Props` may be cloned and spawn several
    /// routers that share this config.
    pub(crate) survivors: Mutex<Vec<(u64, Vec<ActorRef<M>>)>>,
}

pub(crate) enum Routees<M: Send + 'static> {
    Pool {
        size: usize,
        spawn: Box<SpawnRoutee<M>>,
        resizer: Option<Resizer>,
        strategy: SupervisorStrategy,
    },
    Group {
        routees: Vec<ActorRef<M>>,
    },
}

macro_rules! logic_constructors {
    ($ty:ident, $arg:ident: $argty:ty, $build:expr) => {
        impl<M: Send + 'static> $ty<M> {
            /// Round-robin: routee 0, 1, ..., n-1, 0, ...
            pub fn round_robin($arg: $argty) -> $ty<M> {
                $build($arg, LogicKind::RoundRobin)
            }

            /// A routee drawn at random (xorshift64*, seeded per router;
            /// see [`seed`](Self::seed)).
            pub fn random($arg: $argty) -> $ty<M> {
                $build($arg, LogicKind::Random { seed: None })
            }

            /// An idle routee if there is one, else the one with the
            /// fewest queued messages. Queue lengths are only kept by
            /// bounded mailboxes ([`Props::with_mailbox_capacity`]); busy
            /// routees with unbounded mailboxes count as equally loaded.
            pub fn smallest_mailbox($arg: $argty) -> $ty<M> {
                $build($arg, LogicKind::SmallestMailbox)
            }

            /// The routee that owns `key(msg)` on a consistent-hash ring
            /// (10 virtual nodes per routee; see
            /// [`virtual_nodes`](Self::virtual_nodes)): the same key goes
            /// to the same routee while it lives, and a routee joining or
            /// leaving moves only about `1/n` of the keys.
            pub fn consistent_hashing<K: Hash>(
                $arg: $argty,
                key: impl Fn(&M) -> K + Send + Sync + 'static,
            ) -> $ty<M> {
                $build(
                    $arg,
                    LogicKind::ConsistentHashing {
                        key: Arc::new(move |m: &M| stable_hash(&key(m))),
                        virtual_nodes: DEFAULT_VIRTUAL_NODES,
                    },
                )
            }

            /// Every message to every routee (a clone each).
            pub fn broadcast($arg: $argty) -> $ty<M>
            where
                M: Clone,
            {
                $build($arg, LogicKind::Broadcast { clone: M::clone })
            }

            /// A fixed seed for the random logic (reproducible choices);
            /// no effect on the other logics.
            pub fn seed(mut self, seed: u64) -> $ty<M> {
                if let LogicKind::Random { seed: s } = &mut self.logic {
                    *s = Some(seed);
                }
                self
            }

            /// Virtual nodes per routee on the consistent-hash ring (at
            /// least 1): more spread the keys more evenly; no effect on the
            /// other logics.
            pub fn virtual_nodes(mut self, n: usize) -> $ty<M> {
                if let LogicKind::ConsistentHashing { virtual_nodes, .. } = &mut self.logic {
                    *virtual_nodes = n.max(1);
                }
                self
            }
        }
    };
}

/// A pool router: the router creates `size` routees from one `Props` and
/// is their parent and supervisor.
///
/// * A PoisonPill to the router stops it after what is queued ahead of it,
///   and its routees with it (they are its children, so they get Stop:
///   what they still have queued goes to dead letters, as in Akka). For
///   routees that first handle everything they were sent, broadcast the
///   PoisonPill ([`Broadcast::poison_pill`](crate::Broadcast::poison_pill)).
/// * A routee that terminates is removed from the routing table (the
///   router watches its routees). When the last one is gone, a pool
///   without a resizer stops itself (as Akka's); with a resizer, the next
///   routed message grows it back to the lower bound.
/// * A routee's failure goes to the pool's
///   [`supervisor_strategy`](Self::supervisor_strategy): by default
///   Akka's pool default, "always escalate", so the router's own parent
///   decides. As in Akka, a restart of the router keeps its routees (same
///   references, same mailboxes, the pool's size kept) and restarts each
///   of them.
///
/// ```
/// # use proscenium::prelude::*;
/// # struct Worker;
/// # impl Actor for Worker { type Msg = u64; fn receive(&mut self, _: &mut Context<Self>, _: u64) -> Outcome { Ok(()) } }
/// # let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
/// let pool: ActorRef<RouterMsg<u64>> = system.spawn(
///     Pool::round_robin(8)
///         .with_resizer(Resizer::new(2, 16))
///         .supervisor_strategy(SupervisorStrategy::one_for_one())
///         .props(Props::new(|| Worker)),
///     "workers",
/// )?;
/// pool.tell(42.into());
/// # system.terminate().wait();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Pool<M: Send + 'static> {
    size: usize,
    logic: LogicKind<M>,
    resizer: Option<Resizer>,
    strategy: Option<SupervisorStrategy>,
}

fn pool<M: Send + 'static>(size: usize, logic: LogicKind<M>) -> Pool<M> {
    Pool {
        size,
        logic,
        resizer: None,
        strategy: None,
    }
}

logic_constructors!(Pool, size: usize, pool);

impl<M: Send + 'static> Pool<M> {
    /// Resizes the pool with the load, within the resizer's bounds (the
    /// initial size is clamped to them).
    pub fn with_resizer(mut self, resizer: Resizer) -> Pool<M> {
        self.resizer = Some(resizer);
        self
    }

    /// How the router supervises its routees (default:
    /// [`Pool::default_strategy`]).
    pub fn supervisor_strategy(mut self, strategy: SupervisorStrategy) -> Pool<M> {
        self.strategy = Some(strategy);
        self
    }

    /// Akka's pool default: one-for-one, always escalate. A routee's failure
    /// fails the router, and the router's parent decides for the pool as a
    /// whole (its default, Restart, restarts every routee in place).
    pub fn default_strategy() -> SupervisorStrategy {
        SupervisorStrategy::one_for_one().decider(|_| Directive::Escalate)
    }

    /// The router's `Props`, with routees made from `props`.
    pub fn props<A: Actor<Msg = M>>(self, props: Props<A>) -> Props<Router<M>> {
        let config = RouterConfig {
            logic: self.logic,
            routees: Routees::Pool {
                size: self.size,
                spawn: Box::new(move |ctx| ctx.spawn_anonymous(props.clone())),
                resizer: self.resizer,
                strategy: self.strategy.unwrap_or_else(Pool::<M>::default_strategy),
            },
            survivors: Mutex::default(),
        };
        Router::props(config)
    }
}

impl<M: Send + 'static> fmt::Debug for Pool<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("size", &self.size)
            .field("logic", &self.logic)
            .field("resizer", &self.resizer)
            .finish_non_exhaustive()
    }
}

/// A group router: routes to actors it is given (and does not supervise).
///
/// A routee that terminates is removed from the table; a group with no
/// routee stays up (more can be added with [`RouterMsg::AddRoutee`](crate::RouterMsg::AddRoutee))
/// and sends what it is asked to route to dead letters. Stop a group
/// gracefully with a broadcast PoisonPill, then a PoisonPill to the router
/// (see [`Broadcast`](crate::Broadcast)).
///
/// ```
/// # use proscenium::prelude::*;
/// # struct Worker;
/// # impl Actor for Worker { type Msg = u64; fn receive(&mut self, _: &mut Context<Self>, _: u64) -> Outcome { Ok(()) } }
/// # let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
/// let a = system.spawn(Props::new(|| Worker), "a")?;
/// let b = system.spawn(Props::new(|| Worker), "b")?;
/// let group = RouterRef::new(system.spawn(Group::random(vec![a, b]).into_props(), "group")?);
/// group.tell(1);
/// # system.terminate().wait();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Group<M: Send + 'static> {
    routees: Vec<ActorRef<M>>,
    logic: LogicKind<M>,
}

fn group<M: Send + 'static>(routees: Vec<ActorRef<M>>, logic: LogicKind<M>) -> Group<M> {
    Group { routees, logic }
}

logic_constructors!(Group, routees: Vec<ActorRef<M>>, group);

impl<M: Send + 'static> Group<M> {
    /// The router's `Props`.
    pub fn into_props(self) -> Props<Router<M>> {
        Router::props(RouterConfig {
            logic: self.logic,
            routees: Routees::Group {
                routees: self.routees,
            },
            survivors: Mutex::default(),
        })
    }
}

impl<M: Send + 'static> fmt::Debug for Group<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Group")
            .field("routees", &self.routees)
            .field("logic", &self.logic)
            .finish()
    }
}
