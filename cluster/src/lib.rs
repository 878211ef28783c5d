//! proscenium-cluster: cluster sharding on NATS JetStream, for
//! proscenium's actors.
//!
//! Entities are addressed by (entity type, id); a node starts a
//! [`Region`] per type with a factory of entity props by id, and
//! [`Region::entity_ref`] gives tell and ask from any node, whether the
//! entity runs here or elsewhere. An id belongs to a shard (a stable hash
//! modulo a fixed number of shards per type, [`shard_of`]); a shard is
//! allocated to one node at a time, and its entities run there, started on
//! their first message.
//!
//! Ownership lives in a JetStream key-value bucket and nowhere else: each
//! node holds a lease there, renewed by compare-and-set; each shard's
//! record is changed only by compare-and-set; a node that cannot renew its
//! lease stops its entities (fences itself, on its own clock) before any
//! other node may take its shards, which they do once they have seen its
//! lease unchanged for the lease timeout. So no entity is ever live on two
//! nodes (given clocks that run at about the same rate: the fencing margin
//! is the room for the difference), a crashed node's shards move about a
//! lease timeout after its last renewal, and a key-value outage longer
//! than the lease timeout stops every entity. The revision of a shard's
//! allocation is a fencing token an entity gets when it starts
//! ([`EntityInfo::fencing_token`]), to hand to its own store.
//! docs/decisions/0030-cluster-sharding.md has the design, its failure
//! model, and what is not built yet.
//!
//! ```no_run
//! use proscenium::prelude::*;
//! use proscenium_cluster::{Cluster, ClusterSettings, EntityInfo};
//! use proscenium_remote::{Remote, RemoteReply, RemoteSettings};
//! use serde::{Deserialize, Serialize};
//! use std::time::Duration;
//!
//! #[derive(Serialize, Deserialize)]
//! enum Cmd { Add(u64), Get(RemoteReply<u64>) }
//!
//! struct Counter { n: u64 }
//! impl Actor for Counter {
//!     type Msg = Cmd;
//!     fn receive(&mut self, _: &mut Context<Self>, msg: Cmd) -> Outcome {
//!         match msg {
//!             Cmd::Add(k) => self.n += k,
//!             Cmd::Get(reply) => reply.send(self.n),
//!         }
//!         Ok(())
//!     }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let system = ActorSystem::new("shop")?;
//! let remote = Remote::connect(&system, RemoteSettings::new("nats://127.0.0.1:4222", "shop", "a"))?;
//! let cluster = Cluster::join(&remote, ClusterSettings::default())?;
//! let counters = cluster.start_region("counter", |_: &EntityInfo| Props::new(|| Counter { n: 0 }))?;
//! let c = counters.entity_ref("cart-17");
//! c.tell(Cmd::Add(2));
//! let n = c.ask(Cmd::Get, Duration::from_secs(5)).wait()?;
//! # let _ = n;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod coordinator;
mod error;
mod lease;
mod region;
mod reliable;
mod settings;
mod shard;
mod store;
mod view;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use async_nats::jetstream::kv;
use proscenium::{Actor, Phase, Props, TaskError};
use proscenium_remote::Remote;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::Notify;

pub use crate::coordinator::{LeastShardStrategy, NodeShards, ShardAllocationStrategy};
pub use crate::error::ClusterError;
pub use crate::region::{EntityInfo, EntityRef, HeldOverflow, Region};
pub use crate::reliable::ReliableEntityRef;

/// A cluster singleton, as this node sees it ([`Cluster::start_singleton`]).
/// Cheap to clone.
pub struct Singleton<M: Send + 'static> {
    region: Region<M>,
    proxy: EntityRef<M>,
}

impl<M: Send + 'static> Clone for Singleton<M> {
    fn clone(&self) -> Self {
        Singleton {
            region: self.region.clone(),
            proxy: self.proxy.clone(),
        }
    }
}

impl<M: Serialize + DeserializeOwned + Send + 'static> Singleton<M> {
    /// A reference to the singleton, wherever it runs: tell and ask as to
    /// an entity; messages wait (bounded, as a region's) while it has no
    /// node.
    pub fn proxy(&self) -> EntityRef<M> {
        self.proxy.clone()
    }

    /// The region it runs in (`singleton-<name>`).
    pub fn region(&self) -> &Region<M> {
        &self.region
    }
}

impl<M: Send + 'static> std::fmt::Debug for Singleton<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Singleton")
            .field("region", &self.region)
            .finish()
    }
}
pub use crate::settings::ClusterSettings;

pub use crate::shard::shard_of;

use crate::lease::{LeaseState, Timing};
use crate::region::{region_name, RegionActor, RegionCmd, Wire};
use crate::view::View;

/// A region's hand-off on leaving: told, it answers on the sender once
/// done.
type HandOff = Box<dyn Fn(tokio::sync::oneshot::Sender<()>) + Send + Sync>;

/// What a node's cluster handles and regions share.
pub(crate) struct Core {
    pub(crate) remote: Remote,
    pub(crate) settings: ClusterSettings,
    pub(crate) node: String,
    pub(crate) store: kv::Store,
    pub(crate) view: Arc<View>,
    pub(crate) lease: Arc<LeaseState>,
    leave: Arc<Notify>,
    /// Allocations this node has in flight, by target node.
    pub(crate) allocating: Mutex<std::collections::HashMap<String, usize>>,
    /// Each region's hand-off on leaving (its entities stopped, its
    /// shards freed; the sender hears when it is done).
    regions: Mutex<Vec<HandOff>>,
    region_names: Mutex<HashSet<String>>,
}

/// This node's membership of the cluster's sharding: its lease in the
/// bucket, its view of the others, and its regions. Cheap to clone.
#[derive(Clone)]
pub struct Cluster {
    core: Arc<Core>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("node", &self.core.node)
            .finish()
    }
}

impl Cluster {
    /// Joins the cluster of `remote`'s node: opens (or creates) the
    /// bucket `<cluster>-shards` on the node's NATS connection (JetStream
    /// must be enabled on the server: `nats-server -js`, 2.11 or later),
    /// follows it, and registers this node's lease under a new incarnation.
    /// Blocks until the lease is held: at once, or, if another run of this
    /// node's name still holds it (a process restarted right after a
    /// crash), once that lease has expired (a lease timeout or so). Not on a
    /// scheduler worker (it panics there).
    #[track_caller]
    pub fn join(remote: &Remote, settings: ClusterSettings) -> Result<Cluster, ClusterError> {
        proscenium_scheduler::assert_not_on_worker("Cluster::join");
        settings.validate()?;
        let cluster = remote.settings().cluster.clone();
        crate::error::check_name(&cluster)?;
        crate::error::check_name(remote.node())?;
        let rt = remote.runtime();
        let connect_timeout = remote.settings().connect_timeout;
        let store = block_on(
            &rt,
            store::open_bucket(
                remote.nats_client(),
                &cluster,
                settings.bucket_replicas,
                connect_timeout,
            ),
        )?;
        let view = View::new(settings.lease_timeout);
        rt.spawn(view::follow(
            store.clone(),
            Arc::clone(&view),
            settings.lease_renew_interval,
        ));
        let lease = LeaseState::new();
        let leave = Arc::new(Notify::new());
        rt.spawn(lease::run(
            store.clone(),
            remote.node().to_owned(),
            Timing {
                timeout: settings.lease_timeout,
                renew: settings.lease_renew_interval,
                margin: settings.fence_margin,
            },
            Arc::clone(&lease),
            Arc::clone(&leave),
        ));
        let wait = settings.lease_timeout * 2 + connect_timeout;
        let held = wait_for(&rt, wait, {
            let lease = Arc::clone(&lease);
            move || lease.holds()
        });
        if !held {
            return Err(ClusterError::JetStream(format!(
                "the lease of node `{}` was not registered within {wait:?}",
                remote.node()
            )));
        }
        // This node in its own view too (the watch brings its lease back
        // a moment after the write): until then an allocation here would
        // not count it, and the shards its first messages need would all
        // go to the other nodes (seen in a rolling restart: a restarted
        // node's first messages put its old shards on the next node to
        // restart, which moved them again).
        let seen = wait_for(&rt, wait, {
            let (view, me, inc) = (
                Arc::clone(&view),
                remote.node().to_owned(),
                lease.incarnation(),
            );
            move || {
                let st = view.lock();
                view.members(&st).iter().any(|(n, i)| *n == me && *i == inc)
            }
        });
        if !seen {
            return Err(ClusterError::JetStream(format!(
                "node `{}` did not see its own lease in the bucket within {wait:?}",
                remote.node()
            )));
        }
        Ok(Cluster {
            core: Arc::new(Core {
                remote: remote.clone(),
                node: remote.node().to_owned(),
                settings,
                store,
                view,
                lease,
                leave,
                allocating: Mutex::new(std::collections::HashMap::new()),
                regions: Mutex::new(Vec::new()),
                region_names: Mutex::new(HashSet::new()),
            }),
        })
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.core.node
    }

    /// The nodes whose lease is live as this node sees it, and not leaving
    /// (this one included while it holds its lease).
    pub fn members(&self) -> Vec<String> {
        let st = self.core.view.lock();
        self.core
            .view
            .members(&st)
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    }

    /// Whether this node is fenced now: it does not hold its lease (it
    /// could not renew it in time, or it was taken), and runs no entity.
    /// It registers again under a new incarnation on its own.
    pub fn is_fenced(&self) -> bool {
        !self.core.lease.holds()
    }

    /// This node's current incarnation (a new one after each fence), in
    /// hex.
    pub fn incarnation(&self) -> String {
        format!("{:032x}", self.core.lease.incarnation())
    }

    /// Starts this node's region of `entity_type` (1 to 64 bytes of ASCII
    /// letters, digits, `-` and `_`): entities of the type whose shards are
    /// allocated here run here, made by `factory` from their
    /// [`EntityInfo`] on their first message. The type's number of shards
    /// is checked against the cluster's (the first region of the type
    /// stores it): [`ClusterError::ShardCountMismatch`] if it differs.
    /// Blocks until the region is reachable from the other nodes.
    #[track_caller]
    pub fn start_region<A, F>(
        &self,
        entity_type: &str,
        factory: F,
    ) -> Result<Region<A::Msg>, ClusterError>
    where
        A: Actor,
        A::Msg: Serialize + DeserializeOwned + Send + 'static,
        F: Fn(&EntityInfo) -> Props<A> + Send + Sync + 'static,
    {
        self.start_region_with(entity_type, LeastShardStrategy::default(), factory)
    }

    /// [`start_region`](Self::start_region) with another rebalance
    /// strategy than [`LeastShardStrategy`]'s defaults. The type's
    /// coordinator (a cluster singleton, `coord-<type>`) runs it on the
    /// node that runs the coordinator: every node should pass the same.
    #[track_caller]
    pub fn start_region_with<A, F>(
        &self,
        entity_type: &str,
        strategy: impl ShardAllocationStrategy,
        factory: F,
    ) -> Result<Region<A::Msg>, ClusterError>
    where
        A: Actor,
        A::Msg: Serialize + DeserializeOwned + Send + 'static,
        F: Fn(&EntityInfo) -> Props<A> + Send + Sync + 'static,
    {
        self.start_region_with_options(
            entity_type,
            RegionOptions::new().strategy(strategy),
            factory,
        )
    }

    /// [`start_region`](Self::start_region) with [`RegionOptions`]: the
    /// rebalance strategy, and the message an entity is sent to stop on a
    /// hand-off.
    #[track_caller]
    pub fn start_region_with_options<A, F>(
        &self,
        entity_type: &str,
        options: RegionOptions<A::Msg>,
        factory: F,
    ) -> Result<Region<A::Msg>, ClusterError>
    where
        A: Actor,
        A::Msg: Serialize + DeserializeOwned + Send + 'static,
        F: Fn(&EntityInfo) -> Props<A> + Send + Sync + 'static,
    {
        proscenium_scheduler::assert_not_on_worker("Cluster::start_region");
        crate::error::check_name(entity_type)?;
        let coord_type = format!("coord-{entity_type}");
        crate::error::check_name(&coord_type)
            .map_err(|_| ClusterError::BadName(entity_type.to_owned()))?;
        let RegionOptions {
            strategy,
            stop_message,
        } = options;
        let region = self.region(
            entity_type,
            self.core.settings.shards,
            None,
            stop_message,
            factory,
        )?;
        let (core, ty) = (Arc::clone(&self.core), Arc::<str>::from(entity_type));
        self.region(
            &coord_type,
            1,
            Some(entity_type.to_owned()),
            None,
            move |_: &EntityInfo| {
                let (core, ty, strategy) =
                    (Arc::clone(&core), Arc::clone(&ty), Arc::clone(&strategy));
                Props::new(move || {
                    coordinator::Coordinator::new(
                        Arc::clone(&ty),
                        Arc::clone(&core),
                        Arc::clone(&strategy),
                    )
                })
            },
        )?;
        Ok(region)
    }

    /// Starts this node's part of the cluster singleton `name` (1 to 54
    /// bytes of ASCII letters, digits, `-` and `_`): one instance in the
    /// cluster, made by `factory`, running on one node while that node
    /// holds its lease; when the node dies, on another once its lease has
    /// expired; when it leaves in order (its coordinated shutdown), on
    /// another at once. Every node that may run it starts it; the
    /// [`Singleton::proxy`] reaches it from any of them, and holds messages
    /// while there is none. It is a region of one shard
    /// (`singleton-<name>`) whose entity starts without waiting for a
    /// message and is never passivated; its [`EntityInfo::fencing_token`]
    /// rises with each move.
    #[track_caller]
    pub fn start_singleton<A, F>(
        &self,
        name: &str,
        factory: F,
    ) -> Result<Singleton<A::Msg>, ClusterError>
    where
        A: Actor,
        A::Msg: Serialize + DeserializeOwned + Send + 'static,
        F: Fn(&EntityInfo) -> Props<A> + Send + Sync + 'static,
    {
        proscenium_scheduler::assert_not_on_worker("Cluster::start_singleton");
        let entity_type = format!("singleton-{name}");
        crate::error::check_name(&entity_type)
            .map_err(|_| ClusterError::BadName(name.to_owned()))?;
        let region = self.region(&entity_type, 1, Some(name.to_owned()), None, factory)?;
        Ok(Singleton {
            proxy: region.entity_ref(name),
            region,
        })
    }

    fn region<A, F>(
        &self,
        entity_type: &str,
        shards: u32,
        singleton: Option<String>,
        stop_message: Option<region::StopMessage<A::Msg>>,
        factory: F,
    ) -> Result<Region<A::Msg>, ClusterError>
    where
        A: Actor,
        A::Msg: Serialize + DeserializeOwned + Send + 'static,
        F: Fn(&EntityInfo) -> Props<A> + Send + Sync + 'static,
    {
        let core = &self.core;
        if !core
            .region_names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(entity_type.to_owned())
        {
            return Err(ClusterError::RegionExists(entity_type.to_owned()));
        }
        let rt = core.remote.runtime();
        block_on(&rt, store::check_type(&core.store, entity_type, shards))?;
        let ty: Arc<str> = entity_type.into();
        let factory: region::Factory<A> = Arc::new(factory);
        let (t, c) = (Arc::clone(&ty), Arc::clone(core));
        let unconfirmed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let u = Arc::clone(&unconfirmed);
        let recheck_asked = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ra = Arc::clone(&recheck_asked);
        let props = Props::new(move || {
            let mut region = RegionActor::<A>::new(
                Arc::clone(&t),
                shards,
                Arc::clone(&c),
                Arc::clone(&factory),
                Arc::clone(&u),
            );
            region.stop_message.clone_from(&stop_message);
            region.recheck_asked = Arc::clone(&ra);
            match &singleton {
                Some(id) => region.singleton(id.clone()),
                None => region,
            }
        });
        let system = core.remote.system();
        let actor = system
            .spawn(props, &format!("shard-region-{entity_type}"))
            .map_err(|e| ClusterError::JetStream(format!("the region did not start: {e}")))?;
        // Changes of the view and of the lease: the region looks again.
        let r = actor.clone();
        // One look asked for at a time: a burst of changes (a dead node's
        // shards taken, one bucket entry each) is one look, not hundreds
        // queued behind each other.
        let asked = Arc::clone(&recheck_asked);
        core.view.listen(move || {
            // Acquire/Release: pairs with the region's clearing swap; a
            // change after the clear asks again.
            if !asked.swap(true, std::sync::atomic::Ordering::AcqRel) {
                r.tell(RegionCmd::Recheck);
            }
        });
        let r = actor.clone();
        let asked = Arc::clone(&recheck_asked);
        core.lease.listen(move || {
            // As above.
            if !asked.swap(true, std::sync::atomic::Ordering::AcqRel) {
                r.tell(RegionCmd::Recheck);
            }
        });
        let wire = actor
            .adapt(|w: Wire<A::Msg>| RegionCmd::from(w))
            .map_err(|e| ClusterError::JetStream(format!("the region did not start: {e}")))?;
        core.remote
            .expose(&wire, &region_name(entity_type, &core.node))?;
        let r = actor.clone();
        core.regions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(move |done| r.tell(RegionCmd::HandOffAll(done))));
        Ok(Region {
            actor,
            entity_type: ty,
            unconfirmed,
            limit: core.settings.buffer_size,
        })
    }

    /// Puts this node's leaving into the system's coordinated shutdown:
    ///
    /// * `cluster-sharding-shutdown-region`: each region stops its
    ///   entities and frees their shards (a compare-and-set delete of each
    ///   record): the other nodes take them on their next message; the
    ///   region goes on routing what it is sent to the new owners;
    /// * `cluster-exiting`: the lease is deleted (the other nodes need not
    ///   wait for it to expire).
    pub fn add_to_coordinated_shutdown(&self) -> Result<(), proscenium::AddTaskError> {
        let system = self.core.remote.system().clone();
        let cs = system.coordinated_shutdown();
        let core = Arc::clone(&self.core);
        cs.add_task(
            Phase::CLUSTER_SHARDING_SHUTDOWN_REGION,
            "sharding-hand-off",
            move || {
                core.lease.set_leaving();
                let handing: Vec<_> = core
                    .regions
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .map(|hand_off| {
                        let (tx, rx) = tokio::sync::oneshot::channel();
                        hand_off(tx);
                        rx
                    })
                    .collect();
                let lease = Arc::clone(&core.lease);
                async move {
                    for rx in handing {
                        let _ = rx.await;
                    }
                    // Every shard freed, every entity terminated: the
                    // lease may be deleted on leaving. Not set if the phase
                    // times out first: then the lease is left to expire,
                    // so nobody takes a shard whose entity may still run.
                    lease.set_handed_off();
                    Ok::<(), TaskError>(())
                }
            },
        )?;
        let core = Arc::clone(&self.core);
        cs.add_task(Phase::CLUSTER_EXITING, "sharding-leave", move || {
            core.leave.notify_one();
            let lease = Arc::clone(&core.lease);
            async move {
                // The lease task deletes the lease and fences.
                while !lease.is_fenced() {
                    let changed = lease.changed.notified();
                    if lease.is_fenced() {
                        break;
                    }
                    changed.await;
                }
                Ok::<(), TaskError>(())
            }
        })?;
        Ok(())
    }
}

/// How a region runs, beyond the cluster's settings: for
/// [`Cluster::start_region_with_options`].
///
/// ```
/// use proscenium_cluster::{LeastShardStrategy, RegionOptions};
///
/// #[derive(Debug, serde::Serialize, serde::Deserialize)]
/// enum Cmd {
///     Add(u64),
///     /// Saves and stops: what the entity is sent on a hand-off.
///     Stop,
/// }
///
/// let options = RegionOptions::new()
///     .strategy(LeastShardStrategy {
///         absolute_limit: 10,
///         relative_limit: 0.1,
///     })
///     .hand_off_stop_message(|| Cmd::Stop);
/// # let _ = options;
/// ```
pub struct RegionOptions<M> {
    strategy: Arc<dyn ShardAllocationStrategy>,
    stop_message: Option<region::StopMessage<M>>,
}

impl<M> Default for RegionOptions<M> {
    fn default() -> Self {
        RegionOptions::new()
    }
}

impl<M> std::fmt::Debug for RegionOptions<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegionOptions")
            .field("stop_message", &self.stop_message.is_some())
            .finish_non_exhaustive()
    }
}

impl<M> RegionOptions<M> {
    /// [`LeastShardStrategy`]'s defaults, and a PoisonPill on a hand-off.
    pub fn new() -> RegionOptions<M> {
        RegionOptions {
            strategy: Arc::new(LeastShardStrategy::default()),
            stop_message: None,
        }
    }

    /// The rebalance strategy (every node should pass the same: the
    /// coordinator runs the one of its node).
    pub fn strategy(mut self, strategy: impl ShardAllocationStrategy) -> RegionOptions<M> {
        self.strategy = Arc::new(strategy);
        self
    }

    /// The message an entity is sent to stop on a hand-off (a rebalance,
    /// or its node's leave), instead of a PoisonPill: it comes after what
    /// the entity was sent before, and the entity should stop itself on
    /// it (within [`handoff_timeout`](ClusterSettings::handoff_timeout),
    /// after which it is stopped anyway). Akka's
    /// `handOffStopMessage`.
    pub fn hand_off_stop_message(
        mut self,
        make: impl Fn() -> M + Send + Sync + 'static,
    ) -> RegionOptions<M> {
        self.stop_message = Some(Arc::new(make));
        self
    }
}

/// Whether `ready` holds within `wait`, looked at every 5 ms (join's
/// one-time waits).
fn wait_for(
    rt: &tokio::runtime::Handle,
    wait: std::time::Duration,
    ready: impl Fn() -> bool + Send + Sync,
) -> bool {
    block_on(rt, async move {
        tokio::time::timeout(wait, async {
            while !ready() {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
        .await
        .is_ok()
    })
}

fn block_on<F: std::future::Future + Send>(rt: &tokio::runtime::Handle, f: F) -> F::Output
where
    F::Output: Send,
{
    if tokio::runtime::Handle::try_current().is_ok() {
        std::thread::scope(|s| {
            s.spawn(|| rt.block_on(f))
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    } else {
        rt.block_on(f)
    }
}
