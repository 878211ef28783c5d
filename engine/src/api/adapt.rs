//! Narrowed references: an [`ActorRef<N>`] in front of an actor whose
//! messages are `M`, made by [`ActorRef::adapt`] or
//! [`Context::message_adapter`] (Akka's message adapters).
//!
//! An adapted reference is the reference of a small forwarding actor: it
//! maps each `N` to an `M` and tells it to the target. So an adapted ref is
//! an `ActorRef<N>` like any other (tell, ask, watch, stop, timers), and
//! the references that are not adapted pay nothing: their `tell` stays one
//! node, one swap and one run-state check, with no dynamic dispatch. The
//! price is on the adapted path only: one extra hop (the message is
//! handled by the adapter, then told again; about twice the work of a
//! tell: 0.63x the straight tell rate from one thread, BENCHMARKS.md
//! "Narrowed references"), and one small actor per adapter.
//!
//! Lifetime: an adapter made with [`Context::message_adapter`] is a child
//! of the actor that made it, so it stops with it (and with its restart,
//! as every child does under the default `pre_restart`: make adapters in
//! `pre_start`, which runs again after a restart); one made with
//! [`ActorRef::adapt`] is a child of `/system` that watches its target and
//! stops when the target terminates. Messages to a stopped adapter go to
//! dead letters, as `N`s.
//!
//! A panic in the mapping fails the adapter, not the target (its
//! supervisor, the creator or `/system`, restarts it by default: the
//! message is lost, as a failing message is).

use std::sync::Arc;

use crate::api::actor::{Actor, Props};
use crate::api::actor_ref::{ActorId, ActorRef};
use crate::api::context::{spawn, Context};
use crate::error::SpawnError;
use crate::runtime::large;
use crate::supervision::failure::Outcome;

type Map<N, M> = Arc<dyn Fn(N) -> M + Send + Sync>;

/// The forwarding actor behind an adapted reference.
struct Adapter<N, M: Send + 'static> {
    target: ActorRef<M>,
    map: Map<N, M>,
    /// Watch the target and stop with it (not needed for a child of the
    /// target, which stops with its parent anyway).
    watch: bool,
}

impl<N: Send + 'static, M: Send + 'static> Actor for Adapter<N, M> {
    type Msg = N;

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        if self.watch {
            ctx.watch(&self.target.id());
        }
        Ok(())
    }

    fn receive(&mut self, _ctx: &mut Context<Self>, msg: N) -> Outcome {
        // The mapped message lives in this frame: with room for it, if it
        // is large (the run has room for an `N` only).
        let (target, map) = (&self.target, &self.map);
        large::with_room_if_large::<M, _>(move || target.tell(map(msg)));
        Ok(())
    }

    fn on_terminated(&mut self, ctx: &mut Context<Self>, _who: ActorId) -> Outcome {
        ctx.stop_self();
        Ok(())
    }
}

fn props<N: Send + 'static, M: Send + 'static>(
    target: ActorRef<M>,
    map: Map<N, M>,
    watch: bool,
) -> Props<Adapter<N, M>> {
    Props::new(move || Adapter {
        target: target.clone(),
        map: Arc::clone(&map),
        watch,
    })
}

impl<M: Send + 'static> ActorRef<M> {
    /// A reference that takes `N`s and hands this actor `map(n)`: for
    /// giving an actor a narrower (or different) protocol than its own,
    /// such as a `Reply` type's sender. Usable anywhere an
    /// `ActorRef<N>` is (tell, ask, watch, ...).
    ///
    /// It is the reference of a forwarding actor under `/system` that
    /// watches this actor and stops when it terminates; each call makes a
    /// new one (make it once and clone it). A message through it costs one
    /// extra hop; references that are not adapted pay nothing. Per sender,
    /// messages through one adapter keep their order, but not relative to
    /// messages sent to the target directly or through another adapter.
    /// Fails once the system has terminated.
    ///
    /// ```
    /// use proscenium::prelude::*;
    /// use std::time::Duration;
    ///
    /// enum Cmd { Add(u64), Get(Reply<u64>) }
    /// struct Counter(u64);
    /// impl Actor for Counter {
    ///     type Msg = Cmd;
    ///     fn receive(&mut self, _: &mut Context<Self>, msg: Cmd) -> Outcome {
    ///         match msg {
    ///             Cmd::Add(n) => self.0 += n,
    ///             Cmd::Get(r) => r.send(self.0),
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
    /// let counter = system.spawn(Props::new(|| Counter(0)), "counter")?;
    /// // Whoever holds this can only add.
    /// let adder: ActorRef<u64> = counter.adapt(Cmd::Add)?;
    /// adder.tell(2);
    /// adder.tell(3);
    /// // The adds take one more hop than a direct message: a message sent
    /// // straight to the counter now could overtake them. Once the adapter
    /// // has stopped (after what was queued before the PoisonPill), they
    /// // have been passed on.
    /// assert!(adder.graceful_stop(Duration::from_secs(1)).wait());
    /// assert_eq!(counter.ask(Cmd::Get, Duration::from_secs(1)).wait(), Ok(5));
    /// # system.terminate().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn adapt<N: Send + 'static>(
        &self,
        map: impl Fn(N) -> M + Send + Sync + 'static,
    ) -> Result<ActorRef<N>, SpawnError> {
        let system = &self.cell.core().system;
        let (_, _, parent) = system.guardian_ids().ok_or(SpawnError::SystemTerminated)?;
        spawn(&parent, props(self.clone(), Arc::new(map), true), None)
    }
}

impl<A: Actor> Context<A> {
    /// A reference that takes `N`s and hands this actor `map(n)` (Akka's
    /// message adapter): give it to actors that speak another protocol,
    /// for instance as the reply-to of their answers.
    ///
    /// It is the reference of a forwarding child of this actor (listed in
    /// [`children`](Self::children), stopped with this actor, and by the
    /// default `pre_restart`: make adapters in `pre_start`). Each call
    /// makes a new one. A message through it costs one extra hop; see
    /// [`ActorRef::adapt`].
    pub fn message_adapter<N: Send + 'static>(
        &mut self,
        map: impl Fn(N) -> A::Msg + Send + Sync + 'static,
    ) -> Result<ActorRef<N>, SpawnError> {
        spawn(
            &self.id(),
            props(self.self_ref(), Arc::new(map), false),
            None,
        )
    }
}
