//! A region: one per entity type on each node, an actor that routes each
//! message for an entity to the node that runs its shard, runs the
//! shards allocated to this node (their entities are its children), and
//! holds messages while a shard is being allocated or moved.
//!
//! Routing, for a message to entity `id` (shard `s`), by this node's view
//! of the bucket:
//!
//! * `s` allocated to this node's current incarnation, and the node holds
//!   its lease (by its own clock): delivered to the entity, started on its
//!   first message (its props from the type's factory, with the
//!   allocation's revision as its fencing token);
//! * allocated to another node whose lease is live here: sent to that
//!   node's region (a remote tell, signed like every remote message), at
//!   most twice forwarded (a sender's view can lag: the receiver routes by
//!   its own);
//! * free, or allocated to an incarnation that is gone (its lease expired
//!   here, deleted, or replaced): held (bounded: `buffer-size` for all of a
//!   region's shards, past it a dead letter), and the shard allocated by
//!   compare-and-set (below); held messages go on once the view shows the
//!   new owner.
//!
//! A shard this node no longer owns by the view, or runs while it does not
//! hold its lease, has its entities stopped: at a fence, every entity.
//!
//! By concern, beside this file: `region/allocation.rs` (allocation and
//! takeover by compare-and-set), `region/handoff.rs` (rebalance and leave:
//! the draining hand-off, freeing a shard), `region/passivation.rs`
//! (passivation, remember-entities), `region/singleton.rs` (the
//! singleton's eager entity); `crate::reliable` (reliable delivery's
//! producer and dedup state, used by the routing here).

use std::collections::{HashMap, HashSet, VecDeque};
use std::marker::PhantomData;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proscenium::{Actor, ActorId, ActorRef, Context, Outcome, Props};
use proscenium_remote::{RemoteRef, RemoteReply};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::reliable::{Dedup, Producer, ReliableEntityRef, Seq, Verdict};
use crate::shard::shard_of;
use crate::view::Owner;
use crate::Core;
use passivation::Starting;

mod allocation;
mod handoff;
mod passivation;
mod singleton;

/// Reliable delivery: a producer not heard from at a shard for this long
/// is not handed on to the shard's next owner (its messages would be
/// resent within `reliable-resend-after`, long before).
const DEDUP_KEEP: Duration = Duration::from_secs(600);

/// How often the hosted shards' dedup state is pruned of producers not
/// heard from within `DEDUP_KEEP`.
const DEDUP_PRUNE_EVERY: Duration = Duration::from_secs(60);

/// Reliable delivery: the most confirmations in one message (ids of up to
/// a few hundred bytes each, under a 1 MiB payload).
const CONFIRMS_PER_MESSAGE: usize = 1024;

/// Reliable delivery: the most messages per entity sent again at once
/// (from its first unconfirmed one).
const RESEND_BATCH: usize = 1024;

/// How many times a message may be forwarded between regions before it
/// is held where it is (until the view settles).
const MAX_HOPS: u8 = 2;

/// What an entity is told when it starts: who it is, and the fencing token
/// of its shard's allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EntityInfo {
    /// The entity type.
    pub entity_type: String,
    /// The entity's id.
    pub id: String,
    /// Its shard.
    pub shard: u32,
    /// The revision of the shard's allocation to this node: it only rises
    /// for a shard, so a store that keeps an entity's state can refuse
    /// writes with a token older than the newest it has seen (an old owner
    /// that has not noticed its fence).
    pub fencing_token: u64,
}

/// The message of a region between nodes.
#[derive(Serialize, Deserialize)]
pub(crate) enum Wire<M> {
    /// A message for an entity (`seq`: a reliable one's number).
    Send {
        id: String,
        msg: M,
        hops: u8,
        seq: Option<Seq>,
    },
    /// Reliable delivery: each entity `id` has everything of `producer` up
    /// to `upto` (one message per producer for a turn's confirmations).
    Confirm {
        producer: u64,
        upto: Vec<(String, u64)>,
    },
}

/// What a region is told.
pub(crate) enum RegionCmd<M> {
    /// A message for an entity (its id shared with the `EntityRef`: not
    /// copied per message).
    Send {
        id: Arc<str>,
        msg: M,
        hops: u8,
        seq: Option<Seq>,
    },
    /// A reliable message from this node: numbered and kept here until
    /// confirmed.
    SendReliable {
        id: String,
        msg: M,
        clone: fn(&M) -> M,
    },
    /// Reliable delivery: see [`Wire::Confirm`].
    Confirm {
        producer: u64,
        upto: Vec<(String, u64)>,
    },
    /// The confirmations gathered in this turn go out.
    FlushConfirms,
    /// The view or this node's lease changed, or the periodic look.
    Recheck,
    /// An allocation of the shard was tried.
    Allocated(u32),
    /// The node leaves: stop the hosted entities and free their shards.
    HandOffAll(tokio::sync::oneshot::Sender<()>),
    /// A hand-off of the shard has run for `handoff-timeout`: what of its
    /// entities still runs is stopped at once.
    HandOffTimeout(u32),
    /// Reliable delivery: entity `id` of `shard` has handled each
    /// (node, producer)'s messages up to the number given (a receipt
    /// behind them ran).
    Handled {
        shard: u32,
        id: String,
        marks: Vec<(String, u64, u64)>,
    },
    /// Remember-entities: the key of entity `id` of `shard` (hosted at
    /// `token`) written (`ok`) or not; it starts once it is.
    Remembered {
        shard: u32,
        id: String,
        token: u64,
        ok: bool,
    },
}

impl<M> From<Wire<M>> for RegionCmd<M> {
    fn from(w: Wire<M>) -> Self {
        match w {
            Wire::Send { id, msg, hops, seq } => RegionCmd::Send {
                id: id.into(),
                msg,
                hops,
                seq,
            },
            Wire::Confirm { producer, upto } => RegionCmd::Confirm { producer, upto },
        }
    }
}

/// A message on its way to an entity.
struct Pending<M> {
    id: Arc<str>,
    msg: M,
    hops: u8,
    seq: Option<Seq>,
}

impl<M> Pending<M> {
    /// Not forwarded yet.
    fn fresh(id: impl Into<Arc<str>>, msg: M, seq: Option<Seq>) -> Pending<M> {
        Pending {
            id: id.into(),
            msg,
            hops: 0,
            seq,
        }
    }
}

/// A region of one entity type on this node: hands out [`EntityRef`]s.
/// Cheap to clone.
pub struct Region<M: Send + 'static> {
    pub(crate) actor: ActorRef<RegionCmd<M>>,
    pub(crate) entity_type: Arc<str>,
    /// Reliable messages not yet confirmed (the region's producer keeps
    /// them), and the most it may keep.
    pub(crate) unconfirmed: Arc<AtomicUsize>,
    pub(crate) limit: usize,
}

impl<M: Send + 'static> Clone for Region<M> {
    fn clone(&self) -> Self {
        Region {
            actor: self.actor.clone(),
            entity_type: Arc::clone(&self.entity_type),
            unconfirmed: Arc::clone(&self.unconfirmed),
            limit: self.limit,
        }
    }
}

impl<M: Send + 'static> std::fmt::Debug for Region<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("entity_type", &self.entity_type)
            .finish()
    }
}

impl<M: Send + 'static> Region<M> {
    /// The entity type.
    pub fn entity_type(&self) -> &str {
        &self.entity_type
    }

    /// A reference to entity `id`, wherever it runs (or will).
    pub fn entity_ref(&self, id: impl Into<String>) -> EntityRef<M> {
        EntityRef {
            region: self.actor.clone(),
            id: id.into().into(),
        }
    }

    /// A reference to entity `id` with reliable delivery: at least once
    /// across moves, exactly once and in order across a graceful move (see
    /// [`ReliableEntityRef`]). Its messages are kept (cloned) until
    /// confirmed.
    pub fn reliable_entity_ref(&self, id: impl Into<String>) -> ReliableEntityRef<M>
    where
        M: Clone,
    {
        ReliableEntityRef {
            region: self.actor.clone(),
            id: id.into().into(),
            unconfirmed: Arc::clone(&self.unconfirmed),
            limit: self.limit,
            _m: PhantomData,
        }
    }

    /// Reliable messages sent through this region's reliable refs and not
    /// yet confirmed.
    pub fn unconfirmed(&self) -> usize {
        // Relaxed: a statistic (see ReliableEntityRef::tell).
        self.unconfirmed.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A reference to one entity, by id: tell and ask from any node, whether
/// the entity runs here, elsewhere, or not yet. Cheap to clone.
///
/// Delivery is at most once, as a remote tell: a message in flight when
/// its owner crashes, or past a region's buffer, is lost (a dead letter
/// where it is known). Messages from one node to one entity keep their
/// order while its shard stays where it is.
pub struct EntityRef<M: Send + 'static> {
    region: ActorRef<RegionCmd<M>>,
    id: Arc<str>,
}

impl<M: Send + 'static> Clone for EntityRef<M> {
    fn clone(&self) -> Self {
        EntityRef {
            region: self.region.clone(),
            id: Arc::clone(&self.id),
        }
    }
}

impl<M: Send + 'static> std::fmt::Debug for EntityRef<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EntityRef").field("id", &self.id).finish()
    }
}

impl<M: Serialize + DeserializeOwned + Send + 'static> EntityRef<M> {
    /// The entity's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Sends `msg` to the entity (through this node's region).
    pub fn tell(&self, msg: M) {
        self.region.tell(RegionCmd::Send {
            id: Arc::clone(&self.id),
            msg,
            hops: 0,
            seq: None,
        });
    }

    /// Sends `make(reply)` and waits for the reply, up to `timeout`: the
    /// entity answers the [`RemoteReply`] wherever it runs. A future (with
    /// a blocking `wait` for plain threads), as a local ask.
    pub fn ask<R>(
        &self,
        make: impl FnOnce(RemoteReply<R>) -> M,
        timeout: Duration,
    ) -> proscenium::Ask<R>
    where
        R: Serialize + DeserializeOwned + Send + 'static,
    {
        let id = Arc::clone(&self.id);
        self.region.ask(
            move |reply: RemoteReply<R>| RegionCmd::Send {
                id,
                msg: make(reply),
                hops: 0,
                seq: None,
            },
            timeout,
        )
    }
}

/// A shard this node runs.
struct Hosted<M: Send + 'static> {
    inc: u128,
    token: u64,
    /// The view's generation and the lease's epoch when the view last
    /// showed the shard allocated here at (`inc`, `token`) under the
    /// lease's incarnation: while both are unchanged (and the lease
    /// holds), a message for the shard is delivered without the lock.
    seen: Option<(u64, u64)>,
    entities: HashMap<String, Entity<M>>,
    /// Remember-entities: entities waiting for their key to be written
    /// before they start.
    starting: HashMap<String, Starting<M>>,
    /// Reliable delivery: what each entity of the shard was handed.
    dedup: Dedup,
}

/// Reliable delivery: a receipt to queue behind what an entity was
/// handed.
struct Receipt<M: Send + 'static> {
    actor: ActorRef<M>,
    shard: u32,
    id: String,
    /// (node, producer, the last number handed): one entry per producer
    /// sending to the entity, usually one.
    marks: Vec<(String, u64, u64)>,
}

/// Where a shard allocated to another node was, at a generation of the
/// view.
struct Route {
    generation: u64,
    node: Arc<str>,
    /// When the owner's lease expires here, unless renewed (a renewal
    /// changes the generation).
    until: Instant,
}

/// A running entity.
struct Entity<M: Send + 'static> {
    actor: ActorRef<M>,
    /// When it was last sent a message.
    last: Instant,
    /// Sent its PoisonPill: what comes for it waits here for its next
    /// incarnation (a reliable message not yet handed over: its number
    /// with it).
    passivating: Option<VecDeque<(M, Option<Seq>)>>,
}

pub(crate) type Factory<A> = Arc<dyn Fn(&EntityInfo) -> Props<A> + Send + Sync>;

/// The message an entity is sent to stop on a hand-off (instead of a
/// PoisonPill).
pub(crate) type StopMessage<M> = Arc<dyn Fn() -> M + Send + Sync>;

pub(crate) struct RegionActor<A: Actor> {
    pub(crate) entity_type: Arc<str>,
    pub(crate) shards: u32,
    pub(crate) core: Arc<Core>,
    pub(crate) factory: Factory<A>,
    hosted: HashMap<u32, Hosted<A::Msg>>,
    /// Entity actors to their shard and id.
    by_actor: HashMap<ActorId, (u32, String)>,
    held: HashMap<u32, VecDeque<Pending<A::Msg>>>,
    held_count: usize,
    allocating: HashSet<u32>,
    peers: HashMap<String, RemoteRef<Wire<A::Msg>>>,
    /// Shards allocated to another node, as the view showed them at a
    /// generation: while it is unchanged, and the owner's lease live here,
    /// their messages are forwarded without the view's lock.
    routes: HashMap<u32, Route>,
    /// Freed on leaving: never allocated here again.
    leaving: bool,
    /// Entities stopped by `unhost`, not yet terminated, and their shard.
    stopping: HashMap<ActorId, u32>,
    /// How many of `stopping` each shard has (a hand-off of many entities
    /// checks its shard once per termination: a count, not a scan).
    stopping_in: HashMap<u32, usize>,
    /// Shards handed off (a rebalance, or leaving): to free (a
    /// compare-and-set delete of their record at this revision) once their
    /// entities here have terminated; the deletes under way; who waits
    /// for a leave's hand-off to end.
    freeing: HashMap<u32, u64>,
    /// Shards whose record this region is deleting (or has deleted), at
    /// that revision: a rebalance's mark is not taken up twice while the
    /// view still shows it (see `hand_off_asked`).
    freed: HashMap<u32, u64>,
    deleting: Vec<tokio::task::JoinHandle<()>>,
    hand_off_done: Option<tokio::sync::oneshot::Sender<()>>,
    /// A singleton's region: its one entity (this id, shard 0) runs
    /// wherever the shard is, started without waiting for a message, and
    /// is never passivated.
    pub(crate) eager: Option<String>,
    /// Sent to an entity on a hand-off (default: a PoisonPill).
    pub(crate) stop_message: Option<StopMessage<A::Msg>>,
    /// Reliable delivery: this region's sending side; the confirmations
    /// gathered this turn ((node, producer, entity) -> upto), and whether
    /// their flush is asked for; the dedup state of shards being handed
    /// off, written to the bucket before their record is freed.
    producer: Producer<A::Msg>,
    confirms: HashMap<(String, u64, String), u64>,
    confirms_due: bool,
    /// Reliable delivery: the receipts to queue behind what entities were
    /// handed this turn (per entity actor: (node, producer) -> upto).
    receipts: HashMap<ActorId, Receipt<A::Msg>>,
    freeing_dedup: HashMap<u32, Dedup>,
    /// A look (`Recheck`) is asked for and not yet begun: the listeners
    /// ask again only once it has.
    pub(crate) recheck_asked: Arc<std::sync::atomic::AtomicBool>,
    /// When the hosted shards' dedup state was last pruned (once a
    /// minute at most: it walks every entry).
    pruned_at: Instant,
    /// Remember-entities: the writer of entities' keys (started on first
    /// use).
    rememberer: Option<tokio::sync::mpsc::UnboundedSender<passivation::Write>>,
}

impl<A> RegionActor<A>
where
    A: Actor,
    A::Msg: Serialize + DeserializeOwned + Send + 'static,
{
    pub(crate) fn new(
        entity_type: Arc<str>,
        shards: u32,
        core: Arc<Core>,
        factory: Factory<A>,
        unconfirmed: Arc<AtomicUsize>,
    ) -> Self {
        let producer = Producer::new(core.node.clone(), unconfirmed);
        RegionActor {
            entity_type,
            shards,
            core,
            factory,
            hosted: HashMap::new(),
            by_actor: HashMap::new(),
            held: HashMap::new(),
            held_count: 0,
            allocating: HashSet::new(),
            peers: HashMap::new(),
            routes: HashMap::new(),
            leaving: false,
            stopping: HashMap::new(),
            stopping_in: HashMap::new(),
            freeing: HashMap::new(),
            freed: HashMap::new(),
            deleting: Vec::new(),
            hand_off_done: None,
            eager: None,
            stop_message: None,
            producer,
            confirms: HashMap::new(),
            confirms_due: false,
            receipts: HashMap::new(),
            freeing_dedup: HashMap::new(),
            recheck_asked: Arc::default(),
            pruned_at: Instant::now(),
            rememberer: None,
        }
    }

    /// Routes a message; behind the messages held for its shard, if any
    /// (per-sender order: a message never overtakes one held before it).
    fn route(&mut self, ctx: &mut Context<Self>, p: Pending<A::Msg>) {
        let shard = shard_of(&p.id, self.shards);
        if self.held_count > 0 && self.held.contains_key(&shard) {
            self.hold(shard, p);
            self.flush(ctx, shard);
        } else {
            self.route_now(ctx, shard, p);
        }
    }

    /// Routes what is held for `shard`, in order, once it has a live owner
    /// (or allocates it).
    fn flush(&mut self, ctx: &mut Context<Self>, shard: u32) {
        let owner = {
            let st = self.core.view.lock();
            self.core.view.owner(&st, &self.entity_type, shard)
        };
        match owner {
            Owner::Live { .. } => {}
            // Waits until its owner has freed it.
            Owner::HandingOff { .. } => return,
            Owner::Free | Owner::Orphaned { .. } => {
                self.allocate(ctx, shard);
                return;
            }
        }
        if let Some(queue) = self.held.remove(&shard) {
            self.held_count -= queue.len();
            for p in queue {
                self.route_now(ctx, shard, p);
            }
        }
    }

    fn route_now(&mut self, ctx: &mut Context<Self>, shard: u32, p: Pending<A::Msg>) {
        // One clock read a message: the fence's, and the entity's last.
        let now = Instant::now();
        // Read before the view and the lease are looked at: a change after
        // this bumps them, and the next message looks again.
        let seen = (self.core.view.generation(), self.core.lease.epoch());
        if let Some(h) = self.hosted.get(&shard) {
            if h.seen == Some(seen) && !self.leaving && self.core.lease.holds_at(now) {
                // Nothing changed since the view showed it allocated here
                // under this incarnation: the same decision as below.
                let (inc, token) = (h.inc, h.token);
                self.deliver(ctx, shard, inc, token, p, now);
                return;
            }
        }
        if p.hops < MAX_HOPS {
            if let Some(r) = self.routes.get(&shard) {
                if r.generation == seen.0 && now < r.until {
                    // The same owner as the view showed at this generation,
                    // its lease still live here: the same decision as below.
                    let node = Arc::clone(&r.node);
                    self.forward(&node, p);
                    return;
                }
            }
        }
        let me = self.core.node.as_str();
        let (owner, until) = {
            let st = self.core.view.lock();
            let owner = self.core.view.owner(&st, &self.entity_type, shard);
            // Another node's: until when its lease is live here (unless
            // it is renewed).
            let until = match &owner {
                Owner::Live { node, .. } if node != me => self.core.view.live_until(&st, node),
                _ => None,
            };
            (owner, until)
        };
        match owner {
            Owner::Live { node, inc, token } if node == me => {
                if inc == self.core.lease.incarnation()
                    && self.core.lease.holds_at(now)
                    && !self.leaving
                {
                    self.deliver(ctx, shard, inc, token, p, now);
                    if let Some(h) = self.hosted.get_mut(&shard) {
                        if h.inc == inc && h.token == token {
                            h.seen = Some(seen);
                        }
                    }
                } else {
                    // Not ours to run now (fenced, or an older run's): held
                    // until it is allocated again.
                    self.hold(shard, p);
                }
            }
            Owner::Live { node, .. } => {
                if let Some(until) = until {
                    self.routes.insert(
                        shard,
                        Route {
                            generation: seen.0,
                            node: node.as_str().into(),
                            until,
                        },
                    );
                }
                if p.hops >= MAX_HOPS {
                    self.hold(shard, p);
                } else {
                    self.forward(&node, p);
                }
            }
            Owner::HandingOff { .. } => self.hold(shard, p),
            Owner::Free | Owner::Orphaned { .. } => {
                self.hold(shard, p);
                self.allocate(ctx, shard);
            }
        }
    }

    /// The region of `node`, as a remote reference.
    fn peer(&mut self, node: &str) -> Option<&RemoteRef<Wire<A::Msg>>> {
        if !self.peers.contains_key(node) {
            let name = region_name(&self.entity_type, node);
            match self.core.remote.actor_ref::<Wire<A::Msg>>(&name) {
                Ok(r) => {
                    self.peers.insert(node.to_owned(), r);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cluster: no reference to a region");
                    return None;
                }
            }
        }
        self.peers.get(node)
    }

    fn forward(&mut self, node: &str, p: Pending<A::Msg>) {
        let Some(peer) = self.peer(node) else {
            return;
        };
        let wire = Wire::Send {
            id: p.id.to_string(),
            msg: p.msg,
            hops: p.hops + 1,
            seq: p.seq,
        };
        if let Err(e) = peer.tell(wire) {
            // At most once (a reliable message is sent again): counted
            // where remote tells are.
            tracing::debug!(node, error = %e, "cluster: a message to a region was not sent");
        }
    }

    fn hold(&mut self, shard: u32, p: Pending<A::Msg>) {
        if self.held_count >= self.core.settings.buffer_size {
            self.core.remote.system().publish_dead_letter(
                None,
                HeldOverflow {
                    id: p.id.to_string(),
                },
            );
            return;
        }
        self.held_count += 1;
        self.held.entry(shard).or_default().push_back(p);
    }

    /// The shard's hosting here, made (with the dedup state its previous
    /// owner left in the bucket) if it is new.
    fn host(&mut self, shard: u32, inc: u128, token: u64) -> &mut Hosted<A::Msg> {
        let (core, ty) = (&self.core, &self.entity_type);
        self.hosted.entry(shard).or_insert_with(|| {
            let dedup = {
                let st = core.view.lock();
                st.dedup
                    .get(&(ty.to_string(), shard))
                    .map(|b| Dedup::decode(b))
                    .unwrap_or_default()
            };
            Hosted {
                inc,
                token,
                seen: None,
                entities: HashMap::new(),
                starting: HashMap::new(),
                dedup,
            }
        })
    }

    /// Hands `p` to its entity (started if it does not run) in `shard`,
    /// allocated here at (`inc`, `token`); `now`: the clock read of the
    /// routing, the entity's last message.
    #[allow(clippy::too_many_arguments)]
    fn deliver(
        &mut self,
        ctx: &mut Context<Self>,
        shard: u32,
        inc: u128,
        token: u64,
        p: Pending<A::Msg>,
        now: Instant,
    ) {
        if self
            .hosted
            .get(&shard)
            .is_some_and(|h| h.inc != inc || h.token != token)
        {
            // An older allocation of it to this node: its entities go.
            self.unhost(ctx, shard, false);
        }
        let Pending { id, msg, seq, .. } = p;
        let id: &str = &id;
        let hosted = self.host(shard, inc, token);
        if let Some(starting) = hosted.starting.get_mut(id) {
            // Waits (unchecked, as for a passivating entity) until its key
            // is written and it starts.
            starting.waiting.push_back((msg, seq));
            return;
        }
        if let Some(seq) = &seq {
            // A reliable message for a passivating entity waits unchecked
            // (and unconfirmed) for its next incarnation.
            let passivating = hosted
                .entities
                .get(id)
                .is_some_and(|e| e.passivating.is_some());
            if !passivating {
                // (What an incarnation that is gone had not handled was
                // taken back when it terminated: `Dedup::gone`.)
                let running = hosted.entities.get(id).map(|e| e.actor.clone());
                match hosted.dedup.check(id, seq) {
                    Verdict::Next => hosted.dedup.accept(id, seq),
                    Verdict::Duplicate => {
                        let (handled, handed) = (
                            hosted.dedup.handled_upto(id, seq),
                            hosted.dedup.upto(id, seq),
                        );
                        match running {
                            // In the running entity's mailbox: confirmed
                            // once it is handled (a receipt again, in case
                            // the last one was dropped: a full mailbox).
                            Some(actor) if seq.seq > handled => {
                                self.expect_receipt(ctx, &actor, shard, id, seq, handed);
                            }
                            _ => self.confirm(ctx, &seq.node, seq.producer, id, handled),
                        }
                        return;
                    }
                    Verdict::Gap => {
                        let handled = hosted.dedup.handled_upto(id, seq);
                        self.confirm(ctx, &seq.node, seq.producer, id, handled);
                        return;
                    }
                }
            }
        }
        if let Some(e) = hosted.entities.get_mut(id) {
            match &mut e.passivating {
                // Not handed over (nor confirmed): checked again when it is.
                Some(waiting) => waiting.push_back((msg, seq)),
                None => {
                    e.last = now;
                    e.actor.tell(msg);
                    if let Some(seq) = &seq {
                        let actor = e.actor.clone();
                        self.expect_receipt(ctx, &actor, shard, id, seq, seq.seq);
                    }
                }
            }
            return;
        }
        if self.remembering() {
            // Started once its key is written; a reliable message is checked
            // again then (not accepted now).
            if let Some(seq) = &seq {
                self.unaccept(shard, id, seq);
            }
            self.start_remembering(ctx, shard, id.to_owned(), (msg, seq));
            return;
        }
        if let Some(max) = self.core.settings.max_active_entities {
            if self.active() >= max {
                self.passivate_least_recent(ctx);
            }
        }
        if let Some(entity) = self.spawn_entity(ctx, shard, inc, token, id) {
            entity.tell(msg);
            if let Some(seq) = &seq {
                self.expect_receipt(ctx, &entity, shard, id, seq, seq.seq);
            }
        } else if let Some(seq) = &seq {
            // Not handed over: the producer sends it again.
            self.unaccept(shard, id, seq);
        }
    }

    /// Reliable delivery: `seq`, accepted for `id`, was not handed over
    /// after all: the dedup state goes back to the one before it.
    fn unaccept(&mut self, shard: u32, id: &str, seq: &Seq) {
        if let Some(h) = self.hosted.get_mut(&shard) {
            h.dedup.accept(
                id,
                &Seq {
                    seq: seq.seq - 1,
                    ..seq.clone()
                },
            );
        }
    }

    /// Reliable delivery: entity `id` has handled `producer`'s messages up
    /// to `upto` (sent at the end of this turn, one per producer and
    /// entity).
    fn confirm(&mut self, ctx: &mut Context<Self>, node: &str, producer: u64, id: &str, upto: u64) {
        let key = (node.to_owned(), producer, id.to_owned());
        let at = self.confirms.entry(key).or_insert(upto);
        *at = (*at).max(upto);
        self.flush_due(ctx);
    }

    fn flush_due(&mut self, ctx: &mut Context<Self>) {
        if !self.confirms_due {
            self.confirms_due = true;
            ctx.self_ref().tell(RegionCmd::FlushConfirms);
        }
    }

    /// Reliable delivery: `actor` (entity `id` of `shard`) was handed
    /// `seq`'s producer's messages up to `upto`: a receipt goes behind
    /// them at the end of this turn (one per entity), and they are
    /// confirmed once it runs, that is, once the entity has handled them.
    fn expect_receipt(
        &mut self,
        ctx: &mut Context<Self>,
        actor: &ActorRef<A::Msg>,
        shard: u32,
        id: &str,
        seq: &Seq,
        upto: u64,
    ) {
        let r = self.receipts.entry(actor.id()).or_insert_with(|| Receipt {
            actor: actor.clone(),
            shard,
            id: id.to_owned(),
            marks: Vec::new(),
        });
        match r
            .marks
            .iter_mut()
            .find(|(node, producer, _)| *producer == seq.producer && *node == seq.node)
        {
            Some((_, _, at)) => *at = (*at).max(upto),
            None => r.marks.push((seq.node.clone(), seq.producer, upto)),
        }
        self.flush_due(ctx);
    }

    /// The receipts of this turn queued behind what their entities were
    /// handed. Also before an entity is sent its PoisonPill or stop
    /// message: a receipt behind that would never run.
    pub(super) fn send_receipts(&mut self, ctx: &mut Context<Self>) {
        if self.receipts.is_empty() {
            return;
        }
        let region = ctx.self_ref();
        for (_, r) in self.receipts.drain() {
            let Receipt {
                actor,
                shard,
                id,
                marks,
            } = r;
            let region = region.clone();
            actor.tell_receipt(move || region.tell(RegionCmd::Handled { shard, id, marks }));
        }
    }

    /// Reliable delivery: a receipt ran: entity `id` has handled these.
    fn handled(
        &mut self,
        ctx: &mut Context<Self>,
        shard: u32,
        id: &str,
        marks: Vec<(String, u64, u64)>,
    ) {
        let dedup = match self.hosted.get_mut(&shard) {
            Some(h) => Some(&mut h.dedup),
            // Being handed off: the state written for the next owner.
            None => self.freeing_dedup.get_mut(&shard),
        };
        if let Some(dedup) = dedup {
            for (_, producer, upto) in &marks {
                dedup.handled(id, *producer, *upto);
            }
        }
        for (node, producer, upto) in marks {
            self.confirm(ctx, &node, producer, id, upto);
        }
    }

    /// The turn's receipts and confirmations: one confirmation message
    /// per producer.
    fn flush_confirms(&mut self, ctx: &mut Context<Self>) {
        self.confirms_due = false;
        self.send_receipts(ctx);
        let mut by_producer: HashMap<(String, u64), Vec<(String, u64)>> = HashMap::new();
        for ((node, producer, id), upto) in std::mem::take(&mut self.confirms) {
            by_producer
                .entry((node, producer))
                .or_default()
                .push((id, upto));
        }
        for ((node, producer), upto) in by_producer {
            if node == self.core.node && producer == self.producer.id {
                for (id, upto) in upto {
                    self.producer.confirmed(&id, upto);
                }
                continue;
            }
            // At most this many per message (well within a NATS payload).
            for chunk in upto.chunks(CONFIRMS_PER_MESSAGE) {
                let Some(peer) = self.peer(&node) else {
                    break;
                };
                let wire = Wire::Confirm {
                    producer,
                    upto: chunk.to_vec(),
                };
                if let Err(e) = peer.tell(wire) {
                    // Confirmed again at the next duplicate.
                    tracing::debug!(node, error = %e, "cluster: confirmations were not sent");
                }
            }
        }
    }

    /// Starts entity `id` of `shard` (allocated here at `token`).
    fn spawn_entity(
        &mut self,
        ctx: &mut Context<Self>,
        shard: u32,
        inc: u128,
        token: u64,
        id: &str,
    ) -> Option<ActorRef<A::Msg>> {
        let id = id.to_owned();
        let info = EntityInfo {
            entity_type: self.entity_type.to_string(),
            id: id.clone(),
            shard,
            fencing_token: token,
        };
        let props = (self.factory)(&info);
        let e = match ctx.spawn_anonymous(props) {
            Ok(e) => e,
            Err(err) => {
                tracing::warn!(error = %err, "cluster: an entity could not start");
                return None;
            }
        };
        ctx.watch(&e.id());
        self.by_actor.insert(e.id(), (shard, id.clone()));
        self.host(shard, inc, token).entities.insert(
            id,
            Entity {
                actor: e.clone(),
                last: Instant::now(),
                passivating: None,
            },
        );
        Some(e)
    }

    fn recheck(&mut self, ctx: &mut Context<Self>) {
        // AcqRel: pairs with the listeners' swap; whatever changed before
        // this clear is seen by this look, and a change after it asks for
        // another.
        self.recheck_asked
            .swap(false, std::sync::atomic::Ordering::AcqRel);
        if self.pruned_at.elapsed() >= DEDUP_PRUNE_EVERY {
            self.pruned_at = Instant::now();
            for h in self.hosted.values_mut() {
                h.dedup.prune(DEDUP_KEEP);
            }
        }
        if self.eager.is_none() && !self.core.settings.remember_entities {
            self.passivate_idle(ctx);
        }
        let holds = self.core.lease.holds() && !self.leaving;
        let my_inc = self.core.lease.incarnation();
        let me = self.core.node.clone();
        let gone: Vec<u32> = {
            let st = self.core.view.lock();
            self.hosted
                .iter()
                .filter(|(shard, h)| {
                    !holds
                        || h.inc != my_inc
                        || !matches!(
                            self.core.view.owner(&st, &self.entity_type, **shard),
                            Owner::Live { ref node, inc, token }
                                if *node == me && inc == h.inc && token == h.token
                        )
                })
                .map(|(s, _)| *s)
                .collect()
        };
        for shard in gone {
            self.unhost(ctx, shard, false);
        }
        if holds {
            self.hand_off_asked(ctx);
        }
        let shards: Vec<u32> = self.held.keys().copied().collect();
        for shard in shards {
            self.flush(ctx, shard);
        }
        self.keep_singleton(ctx);
        self.restart_remembered(ctx);
        self.retry_remembering(ctx);
        // Reliable delivery: what is unconfirmed for too long goes again,
        // to wherever its shard is now.
        let (held, shards) = (&self.held, self.shards);
        let due = self.producer.due(
            self.core.settings.reliable_resend_after,
            RESEND_BATCH,
            |id| held.contains_key(&shard_of(id, shards)),
        );
        for (id, msg, seq) in due {
            self.route(ctx, Pending::fresh(id, msg, Some(seq)));
        }
    }
}

/// A message a region could not hold (its buffer was full): a dead letter.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HeldOverflow {
    /// The entity it was for.
    pub id: String,
}

pub(crate) fn region_name(entity_type: &str, node: &str) -> String {
    format!("shard-{entity_type}-{node}")
}

impl<A> Actor for RegionActor<A>
where
    A: Actor,
    A::Msg: Serialize + DeserializeOwned + Send + 'static,
{
    type Msg = RegionCmd<A::Msg>;

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        // The periodic look: held messages are routed again and allocations
        // retried even when nothing in the view changes.
        let every = self.core.settings.lease_renew_interval;
        let _periodic = ctx.tell_every_with(every, every, || RegionCmd::Recheck);
        Ok(())
    }

    fn receive(&mut self, ctx: &mut Context<Self>, msg: Self::Msg) -> Outcome {
        match msg {
            RegionCmd::Send { id, msg, hops, seq } => {
                self.route(ctx, Pending { id, msg, hops, seq });
            }
            RegionCmd::SendReliable { id, msg, clone } => {
                let (msg, seq) = self.producer.send(&id, msg, clone);
                self.route(ctx, Pending::fresh(id, msg, Some(seq)));
            }
            RegionCmd::Confirm { producer, upto } => {
                if producer == self.producer.id {
                    for (id, upto) in upto {
                        self.producer.confirmed(&id, upto);
                    }
                }
            }
            RegionCmd::FlushConfirms => self.flush_confirms(ctx),
            RegionCmd::Handled { shard, id, marks } => self.handled(ctx, shard, &id, marks),
            RegionCmd::HandOffTimeout(shard) => self.hand_off_timed_out(ctx, shard),
            RegionCmd::Recheck => self.recheck(ctx),
            RegionCmd::Allocated(shard) => {
                self.allocating.remove(&shard);
            }
            RegionCmd::HandOffAll(done) => self.hand_off_all(ctx, done),
            RegionCmd::Remembered {
                shard,
                id,
                token,
                ok,
            } => self.remembered(ctx, shard, id, token, ok),
        }
        Ok(())
    }

    fn on_terminated(&mut self, ctx: &mut Context<Self>, who: ActorId) -> Outcome {
        if let Some(shard) = self.stopping.remove(&who) {
            if let Some(n) = self.stopping_in.get_mut(&shard) {
                *n -= 1;
                if *n == 0 {
                    self.stopping_in.remove(&shard);
                }
            }
            self.free_if_stopped(shard);
            self.free_ready();
        }
        if let Some((shard, id)) = self.by_actor.remove(&who) {
            let ended = self.hosted.get_mut(&shard).and_then(|h| {
                if h.entities.get(&id).is_some_and(|e| e.actor.id() == who) {
                    h.entities.remove(&id)
                } else {
                    None
                }
            });
            if ended.is_some() {
                // Reliable delivery: what it had not handled is lost.
                if let Some(h) = self.hosted.get_mut(&shard) {
                    h.dedup.gone(&id);
                }
            }
            match ended.map(|e| e.passivating) {
                // Passivated: what came meanwhile starts its next
                // incarnation.
                Some(Some(waiting)) => {
                    for (msg, seq) in waiting {
                        self.route(ctx, Pending::fresh(id.clone(), msg, seq));
                    }
                }
                // It stopped itself: not to be started again.
                Some(None) => self.forget(shard, &id),
                None => {}
            }
        }
        Ok(())
    }
}
