//! The run holder's side of a cell: the actor instance and its lifecycle
//! state machine (create, fail, suspend, resume, restart, terminate), after
//! Akka's `ActorCell` and its fault-handling rules.
//!
//! Everything here runs on the worker that holds the cell's run, one
//! message at a time, so the state needs no synchronisation. Every call into
//! user code is wrapped in `catch_unwind`: a panic in a handler fails the
//! actor, never the worker; one in other user code the driver runs (a
//! `Drop` of a message, of the props, of a timer's payload) is contained
//! (`contain.rs`), so each lifecycle step runs to its end. What still
//! escapes is caught by `Cell::run`, which never leaves the cell held.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

use proscenium_mailbox::{Dequeued, TrySendError};
use proscenium_scheduler::Budget;

use crate::api::actor::{Actor, Factory, Props};
use crate::api::actor_ref::ActorId;
use crate::api::context::Context;
use crate::observe::events::{
    publish_lifecycle, publish_supervision, LifecycleKind, SupervisionReason,
};
use crate::patterns::backoff::publish_restart_scheduled;
use crate::patterns::timers::{Extras, TimerSlot};
use crate::runtime::cell::{run_callback, undeliverable_system, ActorCell, RunEnd};
use crate::runtime::contain::contain;
use crate::runtime::drain::{close_and_drain, dequeue_system_only, drain_closed, DRAIN_BEFORE_CLOSE};
use crate::runtime::signal::{Envelope, SystemMsg, Watcher};
use crate::supervision::failure::{Failure, Killed, Outcome};
use crate::supervision::own::{OwnDecision, OwnSupervision};
use crate::supervision::strategy::{Directive, StrategyKind, SupervisorStrategy};

/// Where an actor is in its life.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Life {
    /// Waiting for `Create`.
    New,
    /// Handling messages (or suspended, waiting for its supervisor, when
    /// `failed` is set).
    Running,
    /// Restarting: waiting for the children stopped by `pre_restart` (or,
    /// after a failed creation, by the re-creation) to terminate. The
    /// failure for `post_restart` waits in `Rare::restart_failure`; `None`
    /// re-runs `pre_start` instead.
    Restarting,
    /// Stopping: waiting for every child to terminate.
    Terminating,
    /// Gone: the mailbox is closed and drains into dead letters.
    Terminated,
}

/// A failed actor's pending business with its children, while it waits for
/// its supervisor's directive.
#[derive(Default)]
pub(crate) struct Awaiting {
    /// The child whose failure this actor escalated (it gets the Resume that
    /// clears its own failure when this actor is resumed).
    pub(crate) perpetrator: Option<ActorId>,
    /// Failures of other children that arrived meanwhile, handled once this
    /// actor is resumed or restarted. As Akka's `Failed`, which a failed
    /// actor stashes (`StashWhenFailed`): decided now, an Escalate could
    /// not be carried out (this actor is failed already), and that child,
    /// suspended by its own failure and by this actor's `Suspend`, would
    /// get one resume for two suspensions and never run again.
    pub(crate) deferred: Vec<(ActorId, Failure)>,
}

/// Which children a failure suspends.
enum SuspendChildren {
    All,
    AllBut(ActorId),
    None,
}

pub(crate) struct Driver<A: Actor> {
    actor: Option<A>,
    /// The props' factory (called again on every restart); dropped at
    /// termination (it may hold references).
    factory: Option<Arc<Factory<A>>>,
    ctx: Context<A>,
    life: Life,
    /// Failed and suspended, waiting for the supervisor's directive (what
    /// it keeps meanwhile is in `Rare::awaiting`).
    failed: bool,
}

impl<A: Actor> Driver<A> {
    pub(crate) fn new(props: Props<A>) -> Driver<A> {
        let mut ctx = Context::new();
        if let Some(capacity) = props.stash_capacity() {
            ctx.rare_mut().extras = Some(Box::new(Extras::new(Some(capacity))));
        }
        let (factory, supervision) = props.into_parts();
        if let Some(supervision) = supervision {
            ctx.rare_mut().own = Some(Box::new(OwnSupervision::new(supervision)));
        }
        Driver {
            actor: None,
            factory: Some(factory),
            ctx,
            life: Life::New,
            failed: false,
        }
    }

    fn cell(&self) -> &Arc<ActorCell<A>> {
        self.ctx.cell()
    }

    fn me(&self) -> ActorId {
        self.ctx.id()
    }

    fn path(&self) -> String {
        self.me().path()
    }

    fn actor_system(&self) -> &crate::runtime::system::ActorSystem {
        &self.cell().core().system
    }

    /// What a failed actor kept while it waited, taken (empty if nothing).
    fn take_awaiting(&mut self) -> Awaiting {
        (self.ctx.rare.as_deref_mut())
            .map(|r| std::mem::take(&mut r.awaiting))
            .unwrap_or_default()
    }

    fn is_stopping(&self) -> bool {
        matches!(self.life, Life::Terminating | Life::Terminated)
    }

    /// The actor's own supervision, if its props gave it one.
    fn own_mut(&mut self) -> Option<&mut OwnSupervision> {
        self.ctx.rare.as_deref_mut()?.own.as_deref_mut()
    }

    // ---- user code, always behind catch_unwind -------------------------

    /// Calls `f` on the instance, turning an `Err` or a panic into a
    /// failure. Without an instance there is nothing to call.
    fn call(&mut self, f: impl FnOnce(&mut A, &mut Context<A>) -> Outcome) -> Result<(), Failure> {
        let Some(actor) = self.actor.as_mut() else {
            return Ok(());
        };
        let ctx = &mut self.ctx;
        match catch_unwind(AssertUnwindSafe(|| f(actor, ctx))) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Failure::from_error(self.path(), e)),
            Err(payload) => Err(Failure::panic(self.path(), payload)),
        }
    }

    /// Runs a hook whose failure is only logged (`post_stop`, `pre_restart`).
    fn call_logged(&mut self, hook: &str, f: impl FnOnce(&mut A, &mut Context<A>)) {
        if let Err(failure) = self.call(|a, ctx| {
            f(a, ctx);
            Ok(())
        }) {
            tracing::error!(actor = %self.path(), hook, %failure, "lifecycle hook failed");
        }
    }

    /// A new instance from the factory.
    fn new_instance(&mut self) -> Result<(), Failure> {
        let factory = self
            .factory
            .as_ref()
            .expect("the factory lives until the actor terminates");
        match catch_unwind(AssertUnwindSafe(|| factory())) {
            Ok(Ok(actor)) => {
                self.actor = Some(actor);
                Ok(())
            }
            Ok(Err(e)) => Err(Failure::from_error(self.path(), e).into_initialization()),
            Err(payload) => Err(Failure::panic(self.path(), payload).into_initialization()),
        }
    }

    /// Drops the instance; a panic in its `Drop` is logged.
    fn drop_instance(&mut self) {
        if let Some(actor) = self.actor.take() {
            if catch_unwind(AssertUnwindSafe(move || drop(actor))).is_err() {
                tracing::error!(actor = %self.path(), "dropping the actor panicked");
            }
        }
    }

    // ---- the user lane --------------------------------------------------

    fn invoke(&mut self, envelope: Envelope<A::Msg>) {
        let msg = match envelope {
            Envelope::Msg(msg) => msg,
            // The message a timer delivers takes the same path as any
            // other: one call site of `receive`, which the compiler then
            // inlines into the run loop (a second one costs the message
            // path about 40 instructions; callgrind, see decision 0008).
            Envelope::Timer(slot) => match self.timer_message(slot) {
                Some(msg) => msg,
                None => return,
            },
            other => return self.invoke_auto(other),
        };
        if self.actor.is_none() {
            // Unreachable in practice: the user lane is suspended whenever
            // there is no instance. Never lose the message.
            let me = self.me();
            self.cell()
                .core()
                .system
                .dead_envelope(me, Envelope::Msg(msg));
            return;
        }
        if let Err(failure) = self.call(|a, ctx| a.receive(ctx, msg)) {
            self.fail(failure, SuspendChildren::All);
        }
    }

    /// The auto-handled envelopes.
    #[cold]
    #[inline(never)]
    fn invoke_auto(&mut self, envelope: Envelope<A::Msg>) {
        match envelope {
            Envelope::Msg(_) | Envelope::Timer(_) => unreachable!("handled by invoke"),
            Envelope::PoisonPill => {
                // An async actor's adapter queues it behind the messages
                // that wait for its running handler (it stops itself then).
                if !self.actor.as_mut().is_some_and(A::defer_poison_pill) {
                    self.terminate();
                }
            }
            Envelope::Kill => {
                let failure = Failure::from_error(self.path(), Box::new(Killed));
                self.fail(failure, SuspendChildren::All);
            }
            Envelope::Terminated(seq) => {
                let Some(state) = self.ctx.watch_mut() else {
                    return; // stopped watching meanwhile
                };
                let Some(pos) = state.terminated_queued.iter().position(|(s, _)| *s == seq) else {
                    return; // unwatched meanwhile
                };
                let (_, who) = state.terminated_queued.swap_remove(pos);
                if let Err(failure) = self.call(|a, ctx| a.on_terminated(ctx, who)) {
                    self.fail(failure, SuspendChildren::All);
                }
            }
            Envelope::Wake => {
                if let Err(failure) = self.call(|a, ctx| a.wake(ctx)) {
                    self.fail(failure, SuspendChildren::All);
                }
            }
            Envelope::Receipt(receipt) => {
                // An async actor's adapter keeps it behind the messages that
                // wait for its running handler (run when it reaches them).
                let Some(actor) = self.actor.as_mut() else {
                    return; // no instance: nothing was handled
                };
                if let Some(receipt) = actor.defer_receipt(receipt) {
                    receipt.run(|| self.path());
                }
            }
        }
    }

    /// The message of a timer's envelope, if it is to be handled now
    /// (the timer was neither cancelled nor replaced; a receive timeout
    /// found the actor idle long enough). A repeating timer is re-armed
    /// here, as its message is taken: its next one is queued no sooner than
    /// one interval after this one starts being handled, and never while
    /// this one is still queued. A panic in the user's message producer
    /// (a `Clone`, a closure) fails the actor.
    #[cold]
    #[inline(never)]
    fn timer_message(&mut self, slot: Arc<TimerSlot<A::Msg>>) -> Option<A::Msg> {
        if self.actor.is_none() {
            let me = self.me();
            self.cell()
                .core()
                .system
                .dead_envelope(me, Envelope::Timer(slot));
            return None;
        }
        if !self.ctx.timer_due(&slot) {
            return None; // cancelled, replaced, or not idle long enough
        }
        let produced = catch_unwind(AssertUnwindSafe(|| slot.produce()));
        self.ctx.timer_handled(&slot);
        match produced {
            Ok(msg) => msg,
            Err(payload) => {
                self.fail(Failure::panic(self.path(), payload), SuspendChildren::All);
                None
            }
        }
    }

    // ---- the system lane ------------------------------------------------

    fn system(&mut self, msg: SystemMsg) {
        match msg {
            SystemMsg::Create => self.create(),
            SystemMsg::Recreate(failure) => self.fault_recreate(failure),
            SystemMsg::Suspend => self.fault_suspend(),
            SystemMsg::Resume { by_failure } => self.fault_resume(by_failure),
            SystemMsg::Terminate => self.terminate(),
            SystemMsg::Failed { child, failure } => self.handle_failure(child, failure),
            SystemMsg::Watch(watcher) => self.add_watcher(watcher),
            SystemMsg::Unwatch(watcher) => {
                if let Some(rare) = self.ctx.rare.as_deref_mut() {
                    rare.watchers
                        .retain(|w| !matches!(w, Watcher::Actor(id) if *id == watcher));
                }
            }
            SystemMsg::DeathWatchNotification(who) => self.death_notification(who),
            SystemMsg::RestartDue(token) => self.own_restart_due(token),
        }
    }

    fn create(&mut self) {
        if !matches!(self.life, Life::New) {
            return;
        }
        self.life = Life::Running;
        let created = self
            .new_instance()
            .and_then(|()| self.call(|a, ctx| a.pre_start(ctx)));
        if let Err(failure) = created {
            self.drop_instance();
            self.fail(failure.into_initialization(), SuspendChildren::All);
        } else {
            self.own_started();
            publish_lifecycle(self.actor_system(), || self.me(), LifecycleKind::Started);
        }
    }

    /// A failure in this actor: suspend it (and, by default, its children)
    /// and report to the parent on its system lane, unless the actor's own
    /// supervision decides it (`decide_own`). The root has no parent: it
    /// stops ("the bubble walker").
    fn fail(&mut self, failure: Failure, children: SuspendChildren) {
        if self.failed || self.is_stopping() {
            tracing::debug!(actor = %self.path(), %failure, "failure while already failed or stopping");
            return;
        }
        // SAFETY: we hold the run (this runs inside `Driver::run`).
        unsafe { self.cell().mailbox.suspend() };
        self.failed = true;
        match children {
            SuspendChildren::None => {}
            SuspendChildren::All => {
                self.each_child(|_| true, |c| c.send_system(SystemMsg::Suspend))
            }
            SuspendChildren::AllBut(skip) => {
                self.each_child(|c| *c != skip, |c| c.send_system(SystemMsg::Suspend))
            }
        }
        if self.decide_own(&failure) {
            return;
        }
        let me = self.me();
        match &self.cell().core().parent {
            Some(parent) => parent.send_system(SystemMsg::Failed { child: me, failure }),
            None => {
                tracing::error!(%failure, "the root guardian failed; stopping it");
                self.terminate();
            }
        }
    }

    /// The actor's own supervision (`Props::with_supervision`) decides
    /// `failure` if it takes it (see `Supervision`): the decision is
    /// published and logged as a parent's would be (the actor is both
    /// supervisor and child), and carried out with the system message a
    /// parent would send, sent to this actor itself, so it takes the same
    /// path (after what is already queued on the system lane). `false`:
    /// not its to take, the parent decides.
    fn decide_own(&mut self, failure: &Failure) -> bool {
        let now = Instant::now();
        let Some((decision, logs, max_retries)) = self.own_mut().map(|own| {
            let decision = own.decide(failure, now);
            let s = own.supervision();
            (decision, s.logs(), s.retry_limit())
        }) else {
            return false;
        };
        let (directive, reason) = match decision {
            OwnDecision::Parent => return false,
            OwnDecision::Resume => (Directive::Resume, SupervisionReason::Decided),
            OwnDecision::Restart | OwnDecision::RestartAfter { .. } => {
                (Directive::Restart, SupervisionReason::Decided)
            }
            OwnDecision::Stop(reason) => (Directive::Stop, reason),
        };
        let me = self.me();
        publish_supervision(
            self.actor_system(),
            || me.clone(),
            &me,
            failure,
            directive,
            reason,
        );
        log_decision(logs, &me, failure, directive, reason, max_retries);
        match decision {
            OwnDecision::Parent => unreachable!("returned above"),
            OwnDecision::Resume => me.send_system(SystemMsg::Resume { by_failure: true }),
            OwnDecision::Restart => me.send_system(SystemMsg::Recreate(failure.clone())),
            OwnDecision::RestartAfter { attempt, delay } => {
                // Suspended until then: the messages wait in the mailbox.
                let token = OwnSupervision::next_token();
                let target = me.clone();
                let timer = (self.actor_system().scheduler_handle()).schedule(delay, move || {
                    target.send_system(SystemMsg::RestartDue(token));
                });
                if let Some(own) = self.own_mut() {
                    own.arm(token, timer, failure.clone());
                }
                // Published once armed, as the BackoffSupervisor does.
                publish_restart_scheduled(self.actor_system(), || me.clone(), attempt, delay);
            }
            OwnDecision::Stop(_) => me.stop(),
        }
        true
    }

    /// A delayed restart's timer fired: restart, unless the restart was
    /// cancelled meanwhile (the actor was restarted by its parent, or is
    /// stopping).
    fn own_restart_due(&mut self, token: u64) {
        if self.is_stopping() {
            return;
        }
        if let Some(failure) = self.own_mut().and_then(|own| own.take_due(token)) {
            self.fault_recreate(failure);
        }
    }

    /// A new incarnation started: its own supervision's backoff measures
    /// its stable period from now.
    fn own_started(&mut self) {
        if let Some(own) = self.own_mut() {
            own.started(Instant::now());
        }
    }

    /// A restart or a stop came from elsewhere: a delayed restart of the
    /// actor's own supervision is moot. `true` if one was pending.
    fn cancel_own_restart(&mut self) -> bool {
        self.own_mut().is_some_and(OwnSupervision::cancel_pending)
    }

    /// Calls `f` on every child that `filter` keeps (outside the lock).
    fn each_child(&self, filter: impl Fn(&ActorId) -> bool, f: impl Fn(&ActorId)) {
        let ids: Vec<ActorId> = self
            .cell()
            .core()
            .children()
            .ids()
            .filter(|id| filter(id))
            .cloned()
            .collect();
        for id in &ids {
            f(id);
        }
    }

    fn fault_suspend(&mut self) {
        if self.is_stopping() {
            return;
        }
        // SAFETY: we hold the run.
        unsafe { self.cell().mailbox.suspend() };
        self.each_child(|_| true, |c| c.send_system(SystemMsg::Suspend));
    }

    fn fault_resume(&mut self, by_failure: bool) {
        if self.is_stopping() {
            return;
        }
        if by_failure && self.actor.is_none() && matches!(self.life, Life::Running) {
            // Resuming an actor whose creation failed: create it again.
            self.fault_create();
            return;
        }
        // SAFETY: we hold the run.
        unsafe { self.cell().mailbox.resume() };
        let awaiting = if by_failure {
            self.failed = false;
            self.take_awaiting()
        } else {
            Awaiting::default()
        };
        let perpetrator = awaiting.perpetrator;
        self.each_child(
            |_| true,
            |c| {
                c.send_system(SystemMsg::Resume {
                    by_failure: perpetrator.as_ref() == Some(c),
                })
            },
        );
        self.handle_deferred(awaiting.deferred);
    }

    /// Handles the children's failures that arrived while this actor was
    /// failed (see `Awaiting::deferred`), in their order, now that it is
    /// not. One of them may fail it again: the rest are deferred again.
    fn handle_deferred(&mut self, deferred: Vec<(ActorId, Failure)>) {
        for (child, failure) in deferred {
            self.handle_failure(child, failure);
        }
    }

    /// Restart, steps 2 and 3: `pre_restart` on the old instance, then wait
    /// for the children it stopped.
    fn fault_recreate(&mut self, failure: Failure) {
        if self.is_stopping() {
            return;
        }
        if self.cancel_own_restart() {
            // This restart (a parent's, after its Suspend: an all-for-one
            // restart, or a restarting parent's) takes the place of the
            // delayed one, which was to lift the suspension of this
            // actor's own failure: lift it here, as the restart's resume
            // lifts its sender's Suspend. The failed flag is cleared by
            // the restart.
            // SAFETY: we hold the run.
            unsafe { self.cell().mailbox.resume() };
        }
        if self.actor.is_none() {
            self.fault_create();
            return;
        }
        self.call_logged("pre_restart", |a, ctx| a.pre_restart(ctx, &failure));
        self.restart_extras();
        self.drop_instance();
        let rare = self.ctx.rare_mut();
        rare.awaiting.perpetrator = None;
        rare.restart_failure = Some(failure);
        self.life = Life::Restarting;
        self.restart_progress();
    }

    /// Re-creation after a failed creation: stop whatever children the
    /// failed attempt made, wait for them, then create again.
    fn fault_create(&mut self) {
        self.restart_extras();
        let ctx = &mut self.ctx;
        ctx.stop_all_children();
        if let Some(rare) = ctx.rare.as_deref_mut() {
            rare.restart_failure = None;
        }
        self.life = Life::Restarting;
        self.restart_progress();
    }

    /// As Akka: a restart cancels the timers and the receive timeout of the
    /// old incarnation, and unstashes its stash for the new one.
    fn restart_extras(&mut self) {
        self.ctx.cancel_timers();
        self.ctx.unstash_all();
    }

    /// Finishes a restart once no child is still stopping.
    fn restart_progress(&mut self) {
        if self.life != Life::Restarting {
            return;
        }
        if self.cell().core().children().iter().any(|(_, r)| r.stopping()) {
            return;
        }
        self.life = Life::Running;
        let failure = (self.ctx.rare.as_deref_mut()).and_then(|r| r.restart_failure.take());
        self.finish_recreate(failure);
    }

    /// Restart, steps 4 to 7: new instance, `post_restart`, restart the
    /// surviving children, resume.
    fn finish_recreate(&mut self, failure: Option<Failure>) {
        // Step 6 restarts "all children which were not killed in step 3":
        // the children there are now, before the new instance runs. One
        // that `post_restart` (or the `pre_start` it calls) creates is not
        // a survivor: it starts once and is not restarted (Akka's
        // `finishRecreate` takes `val survivors = children` first too).
        // None of them is stopping: `restart_progress` waited for those.
        let survivors: Vec<ActorId> = match failure {
            Some(_) => self.cell().core().children().ids().cloned().collect(),
            None => Vec::new(),
        };
        // SAFETY: we hold the run.
        unsafe { self.cell().mailbox.resume() };
        self.failed = false;
        let started = self.new_instance().and_then(|()| match &failure {
            Some(f) => self.call(|a, ctx| a.post_restart(ctx, f)),
            None => self.call(|a, ctx| a.pre_start(ctx)),
        });
        if let Err(init) = started {
            self.drop_instance();
            // The survivors are still suspended from the first failure.
            self.fail(init.into_initialization(), SuspendChildren::None);
            return;
        }
        let kind = match failure {
            Some(_) => LifecycleKind::Restarted,
            None => LifecycleKind::Started, // the first creation had failed
        };
        #[cfg(feature = "metrics")]
        if kind == LifecycleKind::Restarted {
            self.actor_system().metrics_state().restarted();
        }
        self.own_started();
        publish_lifecycle(self.actor_system(), || self.me(), kind);
        if let Some(failure) = failure {
            // Less any survivor the new instance has stopped meanwhile.
            let survivors: Vec<ActorId> = {
                let children = self.cell().core().children();
                survivors
                    .into_iter()
                    .filter(|c| children.get(c).is_some_and(|r| !r.stopping()))
                    .collect()
            };
            for child in survivors {
                child.send_system(SystemMsg::Recreate(failure.clone()));
            }
        }
        // Failures of children that arrived while this actor was failed:
        // those of children stopped by the restart are dropped (no longer
        // children); a survivor's is decided by the new instance.
        let deferred = self.take_awaiting().deferred;
        self.handle_deferred(deferred);
    }

    // ---- supervision ------------------------------------------------------

    fn strategy(&self) -> SupervisorStrategy {
        match &self.actor {
            Some(a) => catch_unwind(AssertUnwindSafe(|| a.supervisor_strategy()))
                .unwrap_or_else(|_| {
                    tracing::error!(actor = %self.path(), "supervisor_strategy panicked; using the default");
                    SupervisorStrategy::default()
                }),
            None => SupervisorStrategy::default(),
        }
    }

    fn handle_failure(&mut self, child: ActorId, failure: Failure) {
        if self.is_stopping() {
            return; // every child is being stopped anyway
        }
        if self.cell().core().children().get(&child).is_none() {
            tracing::debug!(child = %child, "dropping a failure of a child that is gone");
            return;
        }
        if self.failed {
            // Decided once this actor is resumed or restarted.
            let awaiting = &mut self.ctx.rare_mut().awaiting;
            awaiting.deferred.push((child, failure));
            return;
        }
        let strategy = self.strategy();
        let decided = strategy.decide(&failure);
        // What is done: the decision, unless it is a restart over the
        // strategy's limit, which stops instead ("limits on how often a
        // child is allowed to fail before terminating it"). Worked out
        // before the event and the log line, so both say what is done.
        let now = Instant::now();
        let (directive, reason) = match decided {
            Directive::Restart if !self.restart_allowed(&strategy, &child, now) => {
                (Directive::Stop, SupervisionReason::RestartLimitReached)
            }
            decided => (decided, SupervisionReason::Decided),
        };
        publish_supervision(
            self.actor_system(),
            || self.me(),
            &child,
            &failure,
            directive,
            reason,
        );
        log_decision(
            strategy.logs(),
            &child,
            &failure,
            directive,
            reason,
            strategy.retry_limit(),
        );
        match (directive, strategy.kind()) {
            (Directive::Resume, _) => child.send_system(SystemMsg::Resume { by_failure: true }),
            (Directive::Restart, StrategyKind::OneForOne) => {
                child.send_system(SystemMsg::Recreate(failure));
            }
            (Directive::Restart, StrategyKind::AllForOne) => {
                let all: Vec<ActorId> = self.cell().core().children().ids().cloned().collect();
                for c in &all {
                    if *c != child {
                        c.send_system(SystemMsg::Suspend);
                    }
                    c.send_system(SystemMsg::Recreate(failure.clone()));
                }
            }
            (Directive::Stop, StrategyKind::OneForOne) => self.stop_child(&child),
            // Also when every child was to restart and not all of them may.
            (Directive::Stop, StrategyKind::AllForOne) => self.ctx.stop_all_children(),
            (Directive::Escalate, _) => {
                self.ctx.rare_mut().awaiting.perpetrator = Some(child.clone());
                self.fail(failure, SuspendChildren::AllBut(child));
            }
        }
    }

    /// Whether the strategy allows a restart now, counting it in the
    /// restart statistics: of the failed child (one-for-one), or of every
    /// child (all-for-one: each is restarted, so each must be allowed).
    fn restart_allowed(&self, strategy: &SupervisorStrategy, child: &ActorId, now: Instant) -> bool {
        let mut children = self.cell().core().children();
        match strategy.kind() {
            StrategyKind::OneForOne => {
                let record = children.get_mut(child).expect("checked by handle_failure");
                strategy.restart_allowed(record.stats(), now)
            }
            StrategyKind::AllForOne => children
                .iter_mut()
                .all(|(_, r)| strategy.restart_allowed(r.stats(), now)),
        }
    }

    fn stop_child(&mut self, child: &ActorId) {
        self.ctx.stop(child);
    }

    // ---- death watch -------------------------------------------------------

    fn add_watcher(&mut self, watcher: Watcher) {
        if let Watcher::Actor(id) = &watcher {
            let me = self.me();
            if *id == me
                || self.ctx.rare.as_deref().is_some_and(|rare| {
                    rare.watchers
                        .iter()
                        .any(|w| matches!(w, Watcher::Actor(x) if x == id))
                })
            {
                return;
            }
        }
        self.ctx.rare_mut().watchers.push(watcher);
    }

    fn death_notification(&mut self, who: ActorId) {
        let was_child = self.cell().core().children().remove(&who);
        let watched = self.ctx.watch_mut().is_some_and(|state| {
            let pos = state.watching.iter().position(|w| *w == who);
            pos.map(|pos| state.watching.swap_remove(pos)).is_some()
        });
        if watched {
            self.queue_terminated(who);
        }
        if was_child {
            match self.life {
                Life::Terminating => self.termination_progress(),
                Life::Restarting => self.restart_progress(),
                _ => {}
            }
        }
    }

    /// Queues the Terminated signal in the user lane, behind what was sent
    /// before it (at most once per watch: the watch is gone now).
    fn queue_terminated(&mut self, who: ActorId) {
        if self.is_stopping() {
            return;
        }
        let state = self.ctx.watch_state();
        let seq = state.next_terminated;
        state.next_terminated += 1;
        state.terminated_queued.push((seq, who));
        match self.cell().mailbox.enqueue_user(Envelope::Terminated(seq)) {
            // We hold the run, so the owner is already scheduled.
            Ok(_) => {}
            Err(TrySendError::Full(_)) => {
                // A full bounded mailbox: handle it now rather than lose it.
                let (_, who) =
                    (self.ctx.watch_state().terminated_queued.pop()).expect("pushed above");
                if self.failed {
                    tracing::warn!(actor = %self.path(), watched = %who, "Terminated dropped: the mailbox is full and the actor is suspended");
                } else if let Err(failure) = self.call(|a, ctx| a.on_terminated(ctx, who)) {
                    self.fail(failure, SuspendChildren::All);
                }
            }
            Err(TrySendError::Closed(_)) => {}
        }
    }

    // ---- stopping ---------------------------------------------------------

    /// Stop: suspend, unwatch, stop the children, and finish once they have
    /// all terminated.
    fn terminate(&mut self) {
        if self.is_stopping() {
            return;
        }
        // SAFETY: we hold the run.
        unsafe { self.cell().mailbox.suspend() };
        self.life = Life::Terminating;
        // No timer outlives its actor: none fires while the children stop.
        self.ctx.cancel_timers();
        let _ = self.cancel_own_restart();
        let me = self.me();
        // Dropping the state also forgets the Terminated signals queued and
        // not yet handled: a stopping actor handles no more of them.
        if let Some(state) = self.ctx.watch_mut().map(std::mem::take) {
            for watched in state.watching {
                watched.send_system(SystemMsg::Unwatch(me.clone()));
            }
        }
        self.cell().core().children().close();
        self.ctx.stop_all_children();
        self.termination_progress();
    }

    fn termination_progress(&mut self) {
        if matches!(self.life, Life::Terminating) && self.cell().core().children().is_empty() {
            self.finish_terminate();
        }
    }

    /// Every child has terminated: `post_stop`, close the mailbox, tell the
    /// parent and the watchers.
    fn finish_terminate(&mut self) {
        if self.actor.is_some() {
            self.call_logged("post_stop", |a, ctx| a.post_stop(ctx));
            // Timers started by `post_stop` itself.
            self.ctx.cancel_timers();
        }
        self.drop_instance();
        self.life = Life::Terminated;
        // The stash goes to dead letters first: it is older than the queue.
        // Each step from here on runs user code only inside `contain` (a
        // message's `Drop`, a subscriber), so the termination always runs
        // to its end: the parent and the watchers are told.
        let me = self.me();
        let stash = self.ctx.take_stash();
        let system = &self.cell().core().system;
        for msg in stash {
            contain("sending a stashed message to dead letters", || {
                system.dead_envelope(me.clone(), Envelope::Msg(msg));
            });
        }
        // What is still queued goes to dead letters before anyone can learn
        // of the end: so a watcher (or a graceful stop) that sees this actor
        // terminated also sees the dead letters of everything that was
        // queued before. The user lane is drained while the mailbox is still
        // open, with signals held back until it is empty (a Watch answered
        // early would confirm the end too soon); a cap keeps a sender that
        // floods a dying actor from holding this run forever. Then the
        // mailbox closes (late senders get their dead letters themselves),
        // what raced in is drained, and the held-back signals are answered.
        // (`close_and_drain`, in runtime/drain.rs, is loom-modelled.)
        // SAFETY: we hold the run.
        let held = unsafe {
            close_and_drain(&self.cell().mailbox, DRAIN_BEFORE_CLOSE, |d| {
                self.drain(d)
            })
        };
        let me = self.me();
        // The Stopped event goes first, before anyone can learn of the end
        // (an actor subscribed to the event stream is removed by it, and a
        // monitor sees it before a watcher is told); then the signals held
        // back during the drain: a watch that came meanwhile is answered.
        #[cfg(feature = "metrics")]
        self.actor_system().metrics_state().stopped();
        contain("publishing an actor's stop", || {
            publish_lifecycle(self.actor_system(), || me.clone(), LifecycleKind::Stopped);
        });
        for msg in held {
            contain("answering a signal to a terminated actor", || {
                undeliverable_system(&me, msg);
            });
        }
        let parent = self.cell().core().parent.clone();
        if let Some(parent) = &parent {
            parent.send_system(SystemMsg::DeathWatchNotification(me.clone()));
        }
        let watchers = (self.ctx.rare.as_deref_mut()).map(|r| std::mem::take(&mut r.watchers));
        for watcher in watchers.unwrap_or_default() {
            match watcher {
                Watcher::Actor(w) if Some(&w) == parent.as_ref() => {}
                Watcher::Actor(w) => w.send_system(SystemMsg::DeathWatchNotification(me.clone())),
                Watcher::Callback(f) => run_callback(f),
            }
        }
        // The factory may have captured anything, and so may the own
        // supervision's `only_when`.
        let factory = self.factory.take();
        contain("dropping an actor's props", || drop(factory));
        let own = (self.ctx.rare.as_deref_mut()).and_then(|r| r.own.take());
        contain("dropping an actor's supervision", || drop(own));
        // Every child has terminated: their deferred failures are moot.
        drop(self.take_awaiting());
        if parent.is_none() {
            self.cell().core().system.root_terminated();
        }
    }

    /// After termination: what is still queued, or races in, goes to dead
    /// letters (user messages) or is answered as undeliverable (signals).
    fn drain(&self, dequeued: Dequeued<SystemMsg, Envelope<A::Msg>>) {
        let me = self.me();
        let system = &self.cell().core().system;
        contain(
            "sending a message of a terminated actor to dead letters",
            || match dequeued {
                Dequeued::System(msg) => undeliverable_system(&me, msg),
                Dequeued::User(envelope) => system.dead_envelope(me, envelope),
                Dequeued::Empty | Dequeued::Retry => {}
            },
        );
    }
}

/// Logs a supervision decision about `child` (by its parent, or by its own
/// supervision), if the strategy logs: Resume as a warning, Restart and
/// Stop as errors (a stop over the limit with the reason and the limit),
/// Escalate not at all (the failure is logged where it is decided).
fn log_decision(
    logs: bool,
    child: &ActorId,
    failure: &Failure,
    directive: Directive,
    reason: SupervisionReason,
    max_retries: Option<u32>,
) {
    if !logs {
        return;
    }
    match (directive, reason) {
        (Directive::Escalate, _) => {}
        (Directive::Resume, _) => {
            tracing::warn!(actor = %child, %failure, ?directive, "actor failed")
        }
        (Directive::Stop, SupervisionReason::RestartLimitReached) => {
            tracing::error!(
                actor = %child,
                %failure,
                ?directive,
                reason = reason.as_str(),
                max_retries,
                "actor failed"
            )
        }
        (Directive::Restart | Directive::Stop, _) => {
            tracing::error!(actor = %child, %failure, ?directive, "actor failed")
        }
    }
}

impl<A: Actor> Driver<A> {
    /// The next item for an actor that uses timers, a receive timeout or
    /// the stash: a user message resets the receive timeout's clock, and
    /// unstashed messages come first (see `next_unstashed`). `Err` ends the
    /// run.
    #[inline(never)]
    fn next_with_extras(
        &mut self,
        cell: &Arc<ActorCell<A>>,
    ) -> Result<Dequeued<SystemMsg, Envelope<A::Msg>>, RunEnd> {
        let dequeued = if self.ctx.has_unstashed() {
            self.next_unstashed(cell)?
        } else {
            // SAFETY: `Cell::run` holds the run while it calls us.
            unsafe { cell.mailbox.dequeue() }
        };
        // A timer's message resets it too, once it is known to be
        // delivered (`timer_due`); the receive timeout's own does not.
        if matches!(dequeued, Dequeued::User(Envelope::Msg(_))) {
            self.ctx.touch_receive();
        }
        Ok(dequeued)
    }

    /// The next item while unstashed messages wait: a system message if
    /// one is queued (invariant 3), else the oldest unstashed message, which
    /// comes before anything still in the user lane. `Err` ends the run.
    fn next_unstashed(
        &mut self,
        cell: &Arc<ActorCell<A>>,
    ) -> Result<Dequeued<SystemMsg, Envelope<A::Msg>>, RunEnd> {
        // The user lane is closed for one dequeue, so only the system lane
        // answers (a suspended actor's does anyway; `dequeue_system_only`,
        // in runtime/drain.rs, is loom-modelled).
        // SAFETY: `Cell::run` holds the run while it calls us.
        let (suspended, dequeued) = unsafe { dequeue_system_only(&cell.mailbox) };
        let blocked = suspended || !matches!(self.life, Life::Running);
        match dequeued {
            // A system message half-pushed: come back for it (releasing
            // could leave the unstashed messages behind).
            Dequeued::Retry => Err(RunEnd::Yield),
            // Suspended or stopping: the unstashed messages wait for the
            // resume (a system message, which schedules the cell again) or
            // go to dead letters with the stash.
            Dequeued::Empty if blocked => Err(RunEnd::Release),
            Dequeued::Empty => {
                let msg = self.ctx.next_unstashed().expect("has_unstashed said so");
                Ok(Dequeued::User(Envelope::Msg(msg)))
            }
            dequeued => Ok(dequeued),
        }
    }
}

impl<A: Actor> Driver<A> {
    /// Handles messages until the budget is used (`Yield`) or the mailbox
    /// has nothing the holder may take (`Release`). Must not release the
    /// run itself: the caller (`Cell::run`) does, after this borrow has
    /// ended.
    pub(crate) fn run(&mut self, cell: &Arc<ActorCell<A>>, budget: &mut Budget) -> RunEnd {
        // SAFETY: `cell` is the reference `Cell::run` holds for the whole
        // run; every way out of this run (the return below, or a panic,
        // after which `Cell::run` calls `abandon_run`) calls `leave`.
        unsafe { self.ctx.enter(cell) };
        let end = loop {
            if budget.is_exhausted() {
                break RunEnd::Yield;
            }
            // One branch for actors with no timers, receive timeout or
            // stash; the others take the next item out of line.
            let dequeued = if self.ctx.extras().is_some() {
                match self.next_with_extras(cell) {
                    Ok(dequeued) => dequeued,
                    Err(end) => break end,
                }
            } else {
                // SAFETY: `Cell::run` holds the run while it calls us.
                unsafe { cell.mailbox.dequeue() }
            };
            if matches!(dequeued, Dequeued::Empty | Dequeued::Retry) {
                break RunEnd::Release;
            }
            // Spent only with a message in hand: from the second one on,
            // `consume` lets other workers steal what this run woke (see
            // `Budget::consume`), which an idle mailbox must not trigger.
            let _ = budget.consume();
            match dequeued {
                Dequeued::Empty | Dequeued::Retry => unreachable!("handled above"),
                _ if matches!(self.life, Life::Terminated) => {
                    // Everything else that raced in, system messages last
                    // (`drain_closed`, loom-modelled in terminate.rs).
                    // SAFETY: `Cell::run` holds the run while it calls us;
                    // a terminated actor's mailbox is closed.
                    unsafe { drain_closed(&cell.mailbox, dequeued, |d| self.drain(d)) };
                    break RunEnd::Release;
                }
                Dequeued::User(envelope) => self.invoke(envelope),
                Dequeued::System(msg) => self.system(msg),
            }
        };
        self.ctx.leave();
        end
    }

    /// A panic escaped `run`: forget the run's state (the context's
    /// reference to the cell), so the cell can be run again or freed.
    pub(crate) fn abandon_run(&mut self) {
        self.ctx.leave();
    }
}
