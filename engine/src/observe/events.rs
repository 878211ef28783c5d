//! The system events published on the [`EventStream`](crate::EventStream):
//! actor lifecycle ([`LifecycleEvent`]), supervision decisions
//! ([`SupervisionEvent`], [`SupervisionReason`]) and messages an actor declared unhandled
//! ([`UnhandledMessage`], see [`Context::unhandled`]).
//!
//! Publishing costs one relaxed atomic load when nobody subscribes: the
//! event stream keeps a subscriber count per built-in event type, and the
//! event is built only when the count is not zero.

use std::any::Any;
use std::fmt;

use crate::api::actor::Actor;
use crate::api::actor_ref::ActorId;
use crate::api::context::Context;
use crate::runtime::system::ActorSystem;
use crate::supervision::failure::Failure;
use crate::supervision::strategy::Directive;

/// What happened to an actor in a [`LifecycleEvent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LifecycleKind {
    /// Its first incarnation was created and `pre_start` succeeded.
    Started,
    /// A new incarnation replaced a failed one and `post_restart` succeeded.
    Restarted,
    /// It terminated: its children have stopped and `post_stop` has run.
    Stopped,
}

/// An actor started, restarted or stopped; published on the event stream.
///
/// ```
/// use proscenium::prelude::*;
/// use std::sync::mpsc;
///
/// struct Idle;
/// impl Actor for Idle {
///     type Msg = ();
///     fn receive(&mut self, _: &mut Context<Self>, _: ()) -> Outcome { Ok(()) }
/// }
///
/// let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
/// let (tx, rx) = mpsc::channel();
/// let tx = std::sync::Mutex::new(tx);
/// system.event_stream().subscribe(move |e: &LifecycleEvent| {
///     let _ = tx.lock().map(|tx| tx.send((e.actor.path(), e.kind)));
/// });
/// let _idle = system.spawn(Props::new(|| Idle), "idle")?;
/// let started = rx.iter().find(|(path, _)| path == "/user/idle");
/// assert_eq!(started, Some(("/user/idle".to_owned(), LifecycleKind::Started)));
/// system.terminate().wait();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LifecycleEvent {
    /// The actor.
    pub actor: ActorId,
    /// What happened to it.
    pub kind: LifecycleKind,
}

/// A supervisor decided what to do with a failed child; published on the
/// event stream before the directive is carried out.
///
/// `directive` is what is done to the child, which is the strategy's
/// decision except when a restart is over the strategy's limit
/// ([`SupervisorStrategy::max_retries`](crate::SupervisorStrategy::max_retries)
/// within its window): then the child is stopped (with all-for-one, every
/// child is), `directive` is [`Directive::Stop`] and `reason` is
/// [`SupervisionReason::RestartLimitReached`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SupervisionEvent {
    /// The supervisor that decided.
    pub supervisor: ActorId,
    /// The child that failed.
    pub child: ActorId,
    /// Why it failed (its `Display` describes the cause).
    pub failure: Failure,
    /// What the supervisor does with the child.
    pub directive: Directive,
    /// Why that: the strategy's decision, or a restart over its limit.
    pub reason: SupervisionReason,
}

/// Why a supervisor does what a [`SupervisionEvent`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SupervisionReason {
    /// The strategy's decider chose the directive.
    Decided,
    /// The decider chose Restart, but the child had already been restarted
    /// `max_retries` times within the strategy's window: the child is
    /// stopped instead ("limits on how often a child is allowed to fail
    /// before terminating it").
    RestartLimitReached,
}

impl SupervisionReason {
    /// A short description, as the log line gives it: `"decided"` or
    /// `"restart limit reached"`.
    pub fn as_str(self) -> &'static str {
        match self {
            SupervisionReason::Decided => "decided",
            SupervisionReason::RestartLimitReached => "restart limit reached",
        }
    }
}

impl fmt::Display for SupervisionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A message an actor declared unhandled with [`Context::unhandled`];
/// published on the event stream.
pub struct UnhandledMessage {
    recipient: ActorId,
    message: Box<dyn Any + Send>,
    message_type: &'static str,
}

impl UnhandledMessage {
    /// The actor that did not handle it.
    pub fn recipient(&self) -> &ActorId {
        &self.recipient
    }

    /// The message itself.
    pub fn message(&self) -> &(dyn Any + Send) {
        &*self.message
    }

    /// The message as a `T`, if it is one.
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        self.message.downcast_ref::<T>()
    }

    /// The message's type name.
    pub fn message_type(&self) -> &'static str {
        self.message_type
    }
}

impl fmt::Debug for UnhandledMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnhandledMessage")
            .field("recipient", &self.recipient)
            .field("message_type", &self.message_type)
            .finish()
    }
}

impl<A: Actor> Context<A> {
    /// Declares `msg` unhandled: it is published on the event stream as an
    /// [`UnhandledMessage`] (and logged at debug level). The message is
    /// dropped when nobody subscribes.
    ///
    /// ```
    /// # #![allow(dead_code)]
    /// use proscenium::prelude::*;
    ///
    /// enum Cmd { Known, Other(String) }
    /// struct Strict;
    /// impl Actor for Strict {
    ///     type Msg = Cmd;
    ///     fn receive(&mut self, ctx: &mut Context<Self>, msg: Cmd) -> Outcome {
    ///         match msg {
    ///             Cmd::Known => {}
    ///             Cmd::Other(text) => ctx.unhandled(text),
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn unhandled<T: Any + Send>(&self, msg: T) {
        let message_type = std::any::type_name::<T>();
        tracing::debug!(actor = %self.id(), message_type, "unhandled message");
        let events = self.system().event_stream();
        if events.has_subscribers::<UnhandledMessage>() {
            events.publish(UnhandledMessage {
                recipient: self.id(),
                message: Box::new(msg),
                message_type,
            });
        }
    }
}

/// Publishes a [`LifecycleEvent`] if anyone listens (the id is built only
/// then).
pub(crate) fn publish_lifecycle(
    system: &ActorSystem,
    actor: impl FnOnce() -> ActorId,
    kind: LifecycleKind,
) {
    let events = system.event_stream();
    if events.has_subscribers::<LifecycleEvent>() {
        events.publish(LifecycleEvent {
            actor: actor(),
            kind,
        });
    }
}

/// Publishes a [`SupervisionEvent`] if anyone listens.
pub(crate) fn publish_supervision(
    system: &ActorSystem,
    supervisor: impl FnOnce() -> ActorId,
    child: &ActorId,
    failure: &Failure,
    directive: Directive,
    reason: SupervisionReason,
) {
    let events = system.event_stream();
    if events.has_subscribers::<SupervisionEvent>() {
        events.publish(SupervisionEvent {
            supervisor: supervisor(),
            child: child.clone(),
            failure: failure.clone(),
            directive,
            reason,
        });
    }
}
