//! [`Context`]: what a handler can do besides changing its own state:
//! spawn and stop children, watch other actors, reach itself and the
//! system.

use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use proscenium_mailbox::Enqueued;

use crate::api::actor::{Actor, Props};
use crate::api::actor_ref::{ActorId, ActorRef};
use crate::error::{validate_name, SpawnError};
use crate::patterns::timers::Extras;
use crate::runtime::cell::{ActorCell, CellCore, CellRef, Name};
use crate::runtime::driver::{Awaiting, Driver};
use crate::runtime::signal::{SystemMsg, Watcher};
use crate::runtime::system::ActorSystem;
use crate::supervision::failure::Failure;
use crate::supervision::own::OwnSupervision;

/// An actor's view of itself and its surroundings, handed to every handler.
pub struct Context<A: Actor> {
    /// The cell being run; set for the length of each run (so the cell does
    /// not own a reference to itself between runs) by [`enter`](Self::enter).
    /// It borrows the run's own reference instead of counting one of its
    /// own (two locked instructions per run less), so it is never dropped.
    cell: Option<ManuallyDrop<Arc<ActorCell<A>>>>,
    /// What few actors use, allocated by the first use (one pointer in every
    /// cell instead of five): see [`Rare`].
    pub(crate) rare: Option<Box<Rare<A::Msg>>>,
}

/// An actor's seldom-used state, behind one pointer in its context.
pub(crate) struct Rare<M: Send + 'static> {
    /// Death-watch state: whom this actor watches.
    pub(crate) watch: Watching,
    /// Timers, receive timeout and stash (boxed again: most actors with a
    /// `Rare` only watch), allocated on first use, or at creation for an
    /// actor whose props bound its stash.
    pub(crate) extras: Option<Box<Extras<M>>>,
    /// Who watches this actor, with no duplicate actor (a parent needs no
    /// entry: it hears from its child anyway).
    pub(crate) watchers: Vec<Watcher>,
    /// What a failed actor keeps while it waits for its supervisor.
    pub(crate) awaiting: Awaiting,
    /// The failure a restart in progress hands to `post_restart`; `None`
    /// re-runs `pre_start` instead (a failed creation).
    pub(crate) restart_failure: Option<Failure>,
    /// The actor's own supervision, from its props (`Props::with_supervision`),
    /// with what it counts; set at creation, dropped at termination.
    pub(crate) own: Option<Box<OwnSupervision>>,
}

impl<M: Send + 'static> Default for Rare<M> {
    fn default() -> Rare<M> {
        Rare {
            watch: Watching::default(),
            extras: None,
            watchers: Vec::new(),
            awaiting: Awaiting::default(),
            restart_failure: None,
            own: None,
        }
    }
}

/// What an actor's death watch keeps.
#[derive(Default)]
pub(crate) struct Watching {
    /// Actors this one watches, with no duplicates.
    pub(crate) watching: Vec<ActorId>,
    /// Terminated signals queued in the user lane and not yet handled, by
    /// sequence number; `unwatch` removes them.
    pub(crate) terminated_queued: Vec<(u64, ActorId)>,
    pub(crate) next_terminated: u64,
}

impl<A: Actor> Context<A> {
    pub(crate) fn new() -> Context<A> {
        Context {
            cell: None,
            rare: None,
        }
    }

    /// The seldom-used state, allocated on first use.
    pub(crate) fn rare_mut(&mut self) -> &mut Rare<A::Msg> {
        self.rare.get_or_insert_with(Box::default)
    }

    /// The death-watch state, allocated on first use.
    pub(crate) fn watch_state(&mut self) -> &mut Watching {
        &mut self.rare_mut().watch
    }

    /// The death-watch state, if any.
    pub(crate) fn watch_mut(&mut self) -> Option<&mut Watching> {
        self.rare.as_deref_mut().map(|r| &mut r.watch)
    }

    /// The timers, receive timeout and stash, if any.
    #[inline]
    pub(crate) fn extras(&self) -> Option<&Extras<A::Msg>> {
        self.rare.as_deref()?.extras.as_deref()
    }

    /// The timers, receive timeout and stash, if any, mutably.
    #[inline]
    pub(crate) fn extras_if_any(&mut self) -> Option<&mut Extras<A::Msg>> {
        self.rare.as_deref_mut()?.extras.as_deref_mut()
    }

    /// Points the context at `cell` for one run, until [`leave`](Self::leave).
    ///
    /// # Safety
    ///
    /// `cell` stays alive until `leave` is called (the run holds the
    /// reference that `cell` borrows), and `leave` is called before the
    /// context is used outside this run.
    pub(crate) unsafe fn enter(&mut self, cell: &Arc<ActorCell<A>>) {
        // The `Arc` made here owns no count (it is never dropped:
        // `ManuallyDrop`, and `leave` forgets it), so the count stays the
        // caller's, which outlives it (our contract). The pattern of std's
        // `Wake` for `wake_by_ref`.
        // SAFETY: the pointer comes from a live `Arc` (`as_ptr`), as
        // `from_raw` requires; the count is the caller's (above).
        self.cell = Some(ManuallyDrop::new(unsafe {
            Arc::from_raw(Arc::as_ptr(cell))
        }));
    }

    /// Ends what [`enter`](Self::enter) started (nothing to release: the
    /// borrowed `Arc` owns no count).
    pub(crate) fn leave(&mut self) {
        self.cell = None;
    }

    pub(crate) fn cell(&self) -> &Arc<ActorCell<A>> {
        self.cell
            .as_deref()
            .expect("a context is only reachable from inside its actor's run")
    }

    pub(crate) fn core(&self) -> &CellCore {
        self.cell().core()
    }

    /// This actor's typed reference.
    pub fn self_ref(&self) -> ActorRef<A::Msg> {
        self.cell().actor_ref()
    }

    /// This actor's id.
    pub fn id(&self) -> ActorId {
        self.cell().id()
    }

    /// This actor's path.
    pub fn path(&self) -> String {
        self.id().path()
    }

    /// The actor system this actor lives in. This is the engine's own
    /// reference: neither it nor a clone of it keeps the system alive (as a
    /// tokio `Handle` does not keep its runtime), so an actor may store a
    /// clone without keeping its system from terminating when the user's
    /// last handle is dropped; see [`ActorSystem`]'s lifetime.
    pub fn system(&self) -> &ActorSystem {
        &self.core().system
    }

    /// This actor's parent (`None` only for the root guardian).
    pub fn parent(&self) -> Option<&ActorId> {
        self.core().parent.as_ref()
    }

    /// Creates a child named `name` (unique among this actor's children;
    /// a name is free again once its previous holder has terminated).
    pub fn spawn<B: Actor>(
        &mut self,
        props: Props<B>,
        name: &str,
    ) -> Result<ActorRef<B::Msg>, SpawnError> {
        spawn(&self.id(), props, Some(name))
    }

    /// Creates a child with a generated name: `$` and letters (`$b`,
    /// `$bcd`, ...), made from its uid, so unique in the process.
    pub fn spawn_anonymous<B: Actor>(
        &mut self,
        props: Props<B>,
    ) -> Result<ActorRef<B::Msg>, SpawnError> {
        spawn(&self.id(), props, None)
    }

    /// This actor's children that have not terminated yet (including those
    /// asked to stop).
    pub fn children(&self) -> Vec<ActorId> {
        self.core().children().ids().cloned().collect()
    }

    /// The child named `name`, if it has not terminated.
    pub fn child(&self, name: &str) -> Option<ActorId> {
        self.core().children().by_name(name).cloned()
    }

    /// Stops `who` (this actor, one of its children, or any other actor)
    /// after the message it is handling now; see [`ActorId::stop`].
    pub fn stop(&mut self, who: &ActorId) {
        if let Some(r) = self.core().children().get_mut(who) {
            r.set_stopping();
        }
        who.stop();
    }

    /// Stops this actor after the current message.
    pub fn stop_self(&mut self) {
        self.id().stop();
    }

    /// Stops every child (the default `pre_restart` does this).
    pub fn stop_all_children(&mut self) {
        let ids: Vec<ActorId> = {
            let mut children = self.core().children();
            children
                .iter_mut()
                .filter(|(_, r)| !r.stopping())
                .map(|(id, r)| {
                    r.set_stopping();
                    id.clone()
                })
                .collect()
        };
        for id in ids {
            id.stop();
        }
    }

    /// Watches `who`: [`Actor::on_terminated`] runs once when it terminates,
    /// also when it had already terminated before this call. Watching an
    /// actor twice, or watching oneself, does nothing.
    pub fn watch(&mut self, who: &ActorId) {
        let me = self.id();
        if *who == me || self.is_watching(who) {
            return;
        }
        self.watch_state().watching.push(who.clone());
        who.send_system(SystemMsg::Watch(Watcher::Actor(me)));
    }

    /// Stops watching `who`: no Terminated for it is handled after this
    /// call, even one already queued.
    pub fn unwatch(&mut self, who: &ActorId) {
        let Some(state) = self.watch_mut() else {
            return; // never watched anyone
        };
        state.terminated_queued.retain(|(_, w)| w != who);
        let Some(pos) = state.watching.iter().position(|w| w == who) else {
            return;
        };
        state.watching.swap_remove(pos);
        who.send_system(SystemMsg::Unwatch(self.id()));
    }

    /// Whether this actor watches `who`.
    pub fn is_watching(&self, who: &ActorId) -> bool {
        self.rare
            .as_deref()
            .is_some_and(|r| r.watch.watching.contains(who))
    }
}

impl<A: Actor> fmt::Debug for Context<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Context");
        if let Some(cell) = &self.cell {
            d.field("actor", &cell.id());
        }
        let watching = self.rare.as_deref().map_or(0, |r| r.watch.watching.len());
        d.field("watching", &watching).finish()
    }
}

/// Creates a child of `parent`. The child's `Create` is queued before the
/// child becomes visible to its parent, so no signal can overtake it. The
/// cell is built before the parent's children lock is taken, which is held
/// only to check the name and insert the child (for `/user`, the lock every
/// top-level spawn and every top-level actor's death takes).
pub(crate) fn spawn<B: Actor>(
    parent: &ActorId,
    props: Props<B>,
    name: Option<&str>,
) -> Result<ActorRef<B::Msg>, SpawnError> {
    if let Some(n) = name {
        validate_name(n)?;
    }
    let core = parent.core();
    let system = core.system.clone();
    let uid = system.next_uid();
    let capacity = props.mailbox_capacity();
    if capacity == Some(0) {
        return Err(SpawnError::ZeroCapacity);
    }
    let cell = ActorCell::new(
        uid,
        match name {
            Some(n) => Name::from(n),
            None => Name::anonymous(uid),
        },
        Some(parent.clone()),
        system,
        capacity,
        Driver::new(props),
    )
    .map_err(|_| SpawnError::ZeroCapacity)?;
    let won = cell
        .mailbox
        .enqueue_system(SystemMsg::Create)
        .expect("a new mailbox is open");
    debug_assert_eq!(won, Enqueued::MustSchedule);
    let mut children = core.children();
    if children.closed() {
        return Err(SpawnError::ParentTerminating {
            parent: parent.path(),
        });
    }
    if let Some(n) = name {
        // A child that has terminated frees its name at once, even before
        // this parent has handled the notice of its death (Akka keeps the
        // name reserved until then, a well-known surprise): its record is
        // replaced, and the late notice no longer matches any child.
        if children.by_name(n).is_some_and(|id| !id.is_terminated()) {
            return Err(SpawnError::DuplicateName {
                parent: parent.path(),
                name: n.to_owned(),
            });
        }
    }
    children.insert(cell.id());
    drop(children);
    cell.schedule();
    Ok(ActorRef {
        cell: CellRef::new(cell),
    })
}

/// Creates the root guardian (the only cell without a parent).
pub(crate) fn spawn_root<B: Actor>(system: &ActorSystem, props: Props<B>) -> ActorRef<B::Msg> {
    let cell = ActorCell::new(
        system.next_uid(),
        Name::from(""),
        None,
        system.clone(),
        None,
        Driver::new(props),
    )
    .expect("unbounded mailboxes build");
    let won = cell
        .mailbox
        .enqueue_system(SystemMsg::Create)
        .expect("a new mailbox is open");
    debug_assert_eq!(won, Enqueued::MustSchedule);
    cell.schedule();
    ActorRef {
        cell: CellRef::new(cell),
    }
}
