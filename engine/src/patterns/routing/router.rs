//! The router actor: keeps the routing table, routes each message with its
//! logic, broadcasts, resizes a pool, and drops routees that terminate.

use std::fmt;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::api::actor::{Actor, Props};
use crate::api::actor_ref::{ActorId, ActorRef};
use crate::api::context::Context;
use crate::patterns::routing::config::{Routees, RouterConfig};
use crate::patterns::routing::logic::{self, Logic, Selection};
use crate::patterns::routing::message::{Broadcast, BroadcastKind, RouterMsg};
use crate::runtime::signal::Envelope;
use crate::supervision::failure::{Failure, Outcome};
use crate::supervision::strategy::SupervisorStrategy;

/// The router actor, made by [`Pool::props`](crate::Pool::props) or
/// [`Group::into_props`](crate::Group::into_props); its messages are
/// [`RouterMsg<M>`].
///
/// Design: the router is an ordinary actor that forwards: one extra hop
/// per message, through its own mailbox, and no engine changes. Routing in
/// the router's handler keeps the routing state single-threaded (a cursor,
/// an RNG, a hash ring as plain fields: no lock, no atomic
/// read-modify-write, no allocation besides the routee's own `tell`), and
/// keeps Akka's ordering for free: a PoisonPill to the router comes after
/// every message sent to it before, and nothing is routed to a routee
/// after the router has removed it. Akka's faster design routes on the
/// sender's thread without the router's mailbox; it needs a routing table
/// that every sender reads (Akka swaps an immutable one atomically, which
/// in Rust needs deferred reclamation of the old table) and a shared
/// round-robin counter (an atomic read-modify-write per message on one
/// cache line). It is not done here: the single router actor is the
/// throughput limit of a pool (see BENCHMARKS.md, "Routers").
pub struct Router<M: Send + 'static> {
    config: Arc<RouterConfig<M>>,
    logic: Logic<M>,
    routees: Vec<ActorRef<M>>,
    /// Messages routed, for the resizer's "every N messages".
    routed: u64,
}

impl<M: Send + 'static> Router<M> {
    pub(crate) fn props(config: RouterConfig<M>) -> Props<Router<M>> {
        let config = Arc::new(config);
        Props::new(move || Router {
            logic: Logic::new(&config.logic, 0),
            config: Arc::clone(&config),
            routees: Vec::new(),
            routed: 0,
        })
    }

    fn is_pool(&self) -> bool {
        matches!(self.config.routees, Routees::Pool { .. })
    }

    fn route(&mut self, ctx: &mut Context<Self>, msg: M) {
        let resize_due = match &self.config.routees {
            Routees::Pool {
                resizer: Some(r), ..
            } => r.is_time_for_resize(self.routed) || self.routees.is_empty(),
            _ => false,
        };
        if resize_due {
            self.resize(ctx);
        }
        self.routed = self.routed.wrapping_add(1);
        match self.logic.select(&msg, &self.routees) {
            Selection::One(i) => self.routees[i].tell(msg),
            Selection::All(clone) => self.send_all(ctx, msg, clone),
            Selection::Nobody => dead_letter(ctx, Envelope::Msg(msg)),
        }
    }

    /// A clone to every routee but the last, which gets `msg` itself.
    fn send_all(&self, ctx: &mut Context<Self>, msg: M, clone: fn(&M) -> M) {
        let Some((last, rest)) = self.routees.split_last() else {
            return dead_letter(ctx, Envelope::Msg(msg));
        };
        for r in rest {
            r.tell(clone(&msg));
        }
        last.tell(msg);
    }

    fn broadcast(&mut self, ctx: &mut Context<Self>, b: Broadcast<M>) {
        match b.0 {
            BroadcastKind::Msg { msg, clone } => self.send_all(ctx, msg, clone),
            BroadcastKind::PoisonPill if self.routees.is_empty() => {
                dead_letter(ctx, Envelope::PoisonPill)
            }
            BroadcastKind::Kill if self.routees.is_empty() => dead_letter(ctx, Envelope::Kill),
            BroadcastKind::PoisonPill => self.routees.iter().for_each(ActorRef::poison_pill),
            BroadcastKind::Kill => self.routees.iter().for_each(ActorRef::kill),
        }
    }

    /// Adds a routee made from the pool's props.
    fn spawn_routee(&mut self, ctx: &mut Context<Self>) -> Outcome {
        let Routees::Pool { spawn, .. } = &self.config.routees else {
            return Ok(());
        };
        let routee = spawn(ctx)?;
        ctx.watch(&routee.id());
        self.routees.push(routee);
        Ok(())
    }

    fn add_routee(&mut self, ctx: &mut Context<Self>, routee: ActorRef<M>) {
        if self.routees.contains(&routee) {
            return;
        }
        ctx.watch(&routee.id());
        self.routees.push(routee);
        self.logic.routees_changed(&self.routees);
    }

    /// Removes the routee at `index`: unwatched, and stopped with a
    /// PoisonPill (after what was routed to it) if it is this pool's child.
    fn remove_at(&mut self, ctx: &mut Context<Self>, index: usize) {
        let routee = self.routees.remove(index);
        let id = routee.id();
        ctx.unwatch(&id);
        if self.is_pool() && id.core().parent.as_ref() == Some(&ctx.id()) {
            routee.poison_pill();
        }
    }

    /// Grows or shrinks a pool by `delta` routees (the last ones go first,
    /// as in Akka).
    fn adjust(&mut self, ctx: &mut Context<Self>, delta: isize) {
        if !self.is_pool() || delta == 0 {
            return;
        }
        if delta > 0 {
            for _ in 0..delta {
                if let Err(e) = self.spawn_routee(ctx) {
                    tracing::warn!(router = %ctx.path(), error = %e, "could not add a routee");
                    break;
                }
            }
        } else {
            for _ in 0..delta.unsigned_abs().min(self.routees.len()) {
                self.remove_at(ctx, self.routees.len() - 1);
            }
        }
        self.logic.routees_changed(&self.routees);
    }

    fn resize(&mut self, ctx: &mut Context<Self>) {
        let Routees::Pool {
            resizer: Some(resizer),
            ..
        } = &self.config.routees
        else {
            return;
        };
        // Busy: running or with messages queued; a terminated routee (still
        // in the table until its Terminated is handled) is not pressure.
        let busy = self
            .routees
            .iter()
            .filter(|r| (1..u64::MAX).contains(&logic::load(r)))
            .count();
        let delta = resizer.capacity_delta(busy, self.routees.len());
        self.adjust(ctx, delta);
    }

    /// A pool without a resizer has nothing left to do once its routees
    /// are all gone: it stops (Akka's `stopRouterWhenAllRouteesRemoved`).
    fn stop_if_all_removed(&self, ctx: &mut Context<Self>) {
        if self.routees.is_empty()
            && matches!(self.config.routees, Routees::Pool { resizer: None, .. })
        {
            ctx.stop_self();
        }
    }
}

fn dead_letter<M: Send + 'static>(ctx: &mut Context<Router<M>>, envelope: Envelope<M>) {
    let me = ctx.id();
    ctx.system().dead_envelope(me, envelope);
}

/// A seed for the random logic: the router's uid mixed with the clock, so
/// routers (and runs) draw differently unless a seed is fixed.
fn seed(ctx: &Context<impl Actor>) -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ ctx.id().uid().rotate_left(32)
}

impl<M: Send + 'static> Actor for Router<M> {
    type Msg = RouterMsg<M>;

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        self.logic = Logic::new(&self.config.logic, seed(ctx));
        match &self.config.routees {
            Routees::Pool { size, resizer, .. } => {
                let size = resizer.as_ref().map_or(*size, |r| r.clamp(*size));
                for _ in 0..size {
                    self.spawn_routee(ctx)?;
                }
            }
            Routees::Group { routees } => {
                for routee in routees.clone() {
                    self.add_routee(ctx, routee);
                }
            }
        }
        self.logic.routees_changed(&self.routees);
        Ok(())
    }

    #[inline]
    fn receive(&mut self, ctx: &mut Context<Self>, msg: RouterMsg<M>) -> Outcome {
        match msg {
            RouterMsg::Route(m) => self.route(ctx, m),
            RouterMsg::Broadcast(b) => self.broadcast(ctx, b),
            RouterMsg::GetRoutees(reply) => reply.send(self.routees.clone()),
            RouterMsg::AddRoutee(routee) => self.add_routee(ctx, routee),
            RouterMsg::RemoveRoutee(id) => {
                if let Some(i) = self.routees.iter().position(|r| r.id() == id) {
                    self.remove_at(ctx, i);
                    self.logic.routees_changed(&self.routees);
                    self.stop_if_all_removed(ctx);
                }
            }
            RouterMsg::AdjustPoolSize(delta) => self.adjust(ctx, delta),
        }
        Ok(())
    }

    fn on_terminated(&mut self, ctx: &mut Context<Self>, who: ActorId) -> Outcome {
        // Not a routee (any more): a routee removed earlier, or one of a
        // previous incarnation's routees.
        if let Some(i) = self.routees.iter().position(|r| r.id() == who) {
            self.routees.remove(i);
            self.logic.routees_changed(&self.routees);
            self.stop_if_all_removed(ctx);
        }
        Ok(())
    }

    /// A pool keeps its routees across its own restart (Akka's router does
    /// not "scrap children" either): they are handed to the new incarnation,
    /// and the engine restarts each of them after `post_restart`, keeping
    /// their mailboxes. A group has no children; it starts over from its
    /// configured routees.
    fn pre_restart(&mut self, ctx: &mut Context<Self>, _failure: &Failure) {
        if self.is_pool() {
            let routees = std::mem::take(&mut self.routees);
            self.config
                .survivors
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((ctx.id().uid(), routees));
        }
    }

    fn post_restart(&mut self, ctx: &mut Context<Self>, _failure: &Failure) -> Outcome {
        let uid = ctx.id().uid();
        let survivors = {
            let mut stash = self
                .config
                .survivors
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let at = stash.iter().position(|(u, _)| *u == uid);
            at.map(|i| stash.swap_remove(i).1).unwrap_or_default()
        };
        // Still watched (the watch outlives the incarnation); one that died
        // meanwhile gets its Terminated handled as usual.
        let survivors: Vec<ActorRef<M>> = survivors
            .into_iter()
            .filter(|r| !r.is_terminated())
            .collect();
        if survivors.is_empty() {
            return self.pre_start(ctx);
        }
        self.logic = Logic::new(&self.config.logic, seed(ctx));
        self.routees = survivors;
        self.logic.routees_changed(&self.routees);
        Ok(())
    }

    fn supervisor_strategy(&self) -> SupervisorStrategy {
        match &self.config.routees {
            Routees::Pool { strategy, .. } => strategy.clone(),
            Routees::Group { .. } => SupervisorStrategy::default(),
        }
    }
}

impl<M: Send + 'static> fmt::Debug for Router<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Router")
            .field("logic", &self.logic)
            .field("routees", &self.routees)
            .field("pool", &self.is_pool())
            .finish()
    }
}
