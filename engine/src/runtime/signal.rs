//! What travels in a cell's two lanes: [`SystemMsg`] on the system lane,
//! [`Envelope`] on the user lane.

use std::fmt;
use std::sync::Arc;

use crate::api::actor_ref::ActorId;
use crate::patterns::timers::TimerSlot;
use crate::supervision::failure::Failure;

/// Lifecycle and supervision signals: handled ahead of any user message
/// that is not yet being handled, also while the user lane is suspended.
pub(crate) enum SystemMsg {
    /// Create the first incarnation (factory, then `pre_start`).
    Create,
    /// Supervisor's directive (or a restarting parent's request): restart.
    Recreate(Failure),
    /// A failing parent suspends its children, recursively.
    Suspend,
    /// Undo one `Suspend`; `by_failure` when it answers this actor's own
    /// failure (a Resume directive), which also clears its failed flag.
    Resume { by_failure: bool },
    /// Stop: after the current message, children first, then `post_stop`.
    Terminate,
    /// A child failed; its supervisor decides.
    Failed { child: ActorId, failure: Failure },
    /// Someone wants to know when this actor terminates.
    Watch(Watcher),
    /// The actor with this id no longer wants to know.
    Unwatch(ActorId),
    /// An actor this one watches, or a child, has terminated.
    DeathWatchNotification(ActorId),
    /// The delay of a restart that this actor's own supervision decided
    /// (with backoff) has passed; the token says which arming it answers.
    RestartDue(u64),
}

impl fmt::Debug for SystemMsg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SystemMsg::Create => f.write_str("Create"),
            SystemMsg::Recreate(failure) => f.debug_tuple("Recreate").field(failure).finish(),
            SystemMsg::Suspend => f.write_str("Suspend"),
            SystemMsg::Resume { by_failure } => f
                .debug_struct("Resume")
                .field("by_failure", by_failure)
                .finish(),
            SystemMsg::Terminate => f.write_str("Terminate"),
            SystemMsg::Failed { child, failure } => f
                .debug_struct("Failed")
                .field("child", child)
                .field("failure", failure)
                .finish(),
            SystemMsg::Watch(w) => f.debug_tuple("Watch").field(w).finish(),
            SystemMsg::Unwatch(w) => f.debug_tuple("Unwatch").field(w).finish(),
            SystemMsg::DeathWatchNotification(who) => {
                f.debug_tuple("DeathWatchNotification").field(who).finish()
            }
            SystemMsg::RestartDue(token) => f.debug_tuple("RestartDue").field(token).finish(),
        }
    }
}

/// Who is told when an actor terminates.
pub(crate) enum Watcher {
    /// An actor: it gets a `DeathWatchNotification` on its system lane.
    Actor(ActorId),
    /// A callback (graceful stop): called once, on the terminating worker.
    Callback(Box<dyn FnOnce() + Send>),
}

impl fmt::Debug for Watcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Watcher::Actor(id) => f.debug_tuple("Actor").field(id).finish(),
            Watcher::Callback(_) => f.write_str("Callback"),
        }
    }
}

/// A user-lane item: a user message, or one of the auto-handled messages
/// that must keep their place in the user order.
pub(crate) enum Envelope<M: Send + 'static> {
    /// A user message.
    Msg(M),
    /// Stop once everything queued ahead of it is handled.
    PoisonPill,
    /// Fail with `Killed` when reached.
    Kill,
    /// The watched actor queued under this number terminated (a number,
    /// not the id, keeps the envelope as small as the message).
    Terminated(u64),
    /// A scheduled message: taken from its slot when handled, unless the
    /// timer was cancelled or replaced meanwhile (see `timers`).
    Timer(Arc<TimerSlot<M>>),
    /// The future of an async handler ([`AsyncActor`](crate::AsyncActor))
    /// was woken: poll it (a unit variant: the envelope stays the size of
    /// the message).
    Wake,
    /// A receipt ([`ActorRef::tell_receipt`](crate::ActorRef::tell_receipt)):
    /// its callback runs once everything queued ahead of it is handled
    /// (a thin pointer: the envelope stays the size of the message).
    Receipt(Receipt),
}

/// A callback that runs once an actor has handled everything queued ahead
/// of it in its user lane, on the actor's worker, in its turn; dropped
/// uncalled if the actor terminates first (it then goes nowhere: it is a
/// confirmation, not a message). Boxed twice so that it is one pointer.
///
/// Public only as the type of the hidden
/// [`Actor::defer_receipt`](crate::Actor) hook; it cannot be named outside
/// the crate.
pub struct Receipt(Box<Box<dyn FnOnce() + Send>>);

impl Receipt {
    pub(crate) fn new(f: impl FnOnce() + Send + 'static) -> Receipt {
        Receipt(Box::new(Box::new(f)))
    }

    /// Runs the callback; a panic in it is logged (it is the sender's
    /// code, not the actor's: the actor does not fail).
    pub(crate) fn run(self, actor: impl FnOnce() -> String) {
        let f = *self.0;
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
            tracing::error!(actor = %actor(), "a receipt's callback panicked");
        }
    }
}

impl fmt::Debug for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Receipt")
    }
}

/// The untyped auto-handled messages, which any [`ActorId`] can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AutoMsg {
    PoisonPill,
    Kill,
}

impl<M: Send + 'static> From<AutoMsg> for Envelope<M> {
    fn from(m: AutoMsg) -> Envelope<M> {
        match m {
            AutoMsg::PoisonPill => Envelope::PoisonPill,
            AutoMsg::Kill => Envelope::Kill,
        }
    }
}
