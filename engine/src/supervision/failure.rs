//! Why an actor failed: [`Failure`], what a handler returns ([`Outcome`]),
//! and the engine's own failure causes ([`Killed`], [`DeathPact`]).

use std::any::Any;
use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use crate::api::actor_ref::ActorId;

/// The error a handler returns: any error type, boxed.
///
/// `?` converts every `std::error::Error + Send + Sync` into it, and so does
/// `.into()` on a `String` or `&str`.
pub type ActorError = Box<dyn StdError + Send + Sync + 'static>;

/// What a handler returns: `Ok(())`, or an error that fails the actor and
/// hands the failure to its supervisor.
pub type Outcome = Result<(), ActorError>;

/// The failure cause of an actor that received [`Kill`](crate::ActorRef::kill):
/// the analogue of Akka's `ActorKilledException`. The default decider stops
/// an actor that failed with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the actor was killed")]
pub struct Killed;

/// The failure cause of an actor that did not handle the `Terminated` signal
/// of an actor it watched: the analogue of Akka's `DeathPactException`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("death pact: watched actor {0} terminated and the watcher did not handle it")]
pub struct DeathPact(pub ActorId);

/// Why an actor failed, as its supervisor sees it.
///
/// Cheap to clone (shared). A supervisor's decider matches on it:
///
/// ```
/// use proscenium::{Directive, Failure};
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("database unavailable")]
/// struct DbDown;
///
/// fn decide(f: &Failure) -> Directive {
///     if f.is::<DbDown>() {
///         Directive::Restart
///     } else if f.is_initialization() || f.is_killed() {
///         Directive::Stop
///     } else {
///         Directive::Escalate
///     }
/// }
/// # let _ = decide;
/// ```
#[derive(Clone)]
pub struct Failure {
    inner: Arc<FailureInner>,
}

struct FailureInner {
    cause: Cause,
    /// The factory, `pre_start` or `post_restart` failed (Akka's
    /// `ActorInitializationException`).
    initialization: bool,
    /// Path of the actor that failed first (the perpetrator).
    actor: String,
}

enum Cause {
    Error(ActorError),
    Panic(String),
}

impl Failure {
    pub(crate) fn from_error(actor: String, error: ActorError) -> Failure {
        Failure::new(actor, Cause::Error(error), false)
    }

    pub(crate) fn panic(actor: String, payload: Box<dyn Any + Send>) -> Failure {
        Failure::new(actor, Cause::Panic(panic_message(payload.as_ref())), false)
    }

    fn new(actor: String, cause: Cause, initialization: bool) -> Failure {
        Failure {
            inner: Arc::new(FailureInner {
                cause,
                initialization,
                actor,
            }),
        }
    }

    /// The same cause, marked as a failure of initialization.
    pub(crate) fn into_initialization(self) -> Failure {
        if self.inner.initialization {
            return self;
        }
        let inner = match Arc::try_unwrap(self.inner) {
            Ok(inner) => inner,
            Err(shared) => FailureInner {
                cause: match &shared.cause {
                    Cause::Error(e) => Cause::Error(e.to_string().into()),
                    Cause::Panic(m) => Cause::Panic(m.clone()),
                },
                initialization: true,
                actor: shared.actor.clone(),
            },
        };
        Failure {
            inner: Arc::new(FailureInner {
                initialization: true,
                ..inner
            }),
        }
    }

    /// Whether the actor failed while it was being created: its factory,
    /// `pre_start`, or (after a restart) `post_restart` failed.
    pub fn is_initialization(&self) -> bool {
        self.inner.initialization
    }

    /// Whether the actor was killed ([`Killed`]).
    pub fn is_killed(&self) -> bool {
        self.is::<Killed>()
    }

    /// Whether the actor did not handle the termination of an actor it
    /// watched ([`DeathPact`]).
    pub fn is_death_pact(&self) -> bool {
        self.is::<DeathPact>()
    }

    /// Whether the failure is a panic caught in a handler.
    pub fn is_panic(&self) -> bool {
        matches!(self.inner.cause, Cause::Panic(_))
    }

    /// The panic's message, for a caught panic.
    pub fn panic_message(&self) -> Option<&str> {
        match &self.inner.cause {
            Cause::Panic(m) => Some(m),
            Cause::Error(_) => None,
        }
    }

    /// The error a handler returned, if it returned one.
    pub fn error(&self) -> Option<&(dyn StdError + Send + Sync + 'static)> {
        match &self.inner.cause {
            Cause::Error(e) => Some(e.as_ref()),
            Cause::Panic(_) => None,
        }
    }

    /// Whether the handler's error is an `E`.
    pub fn is<E: StdError + 'static>(&self) -> bool {
        self.downcast_ref::<E>().is_some()
    }

    /// The handler's error as an `E`, if it is one.
    pub fn downcast_ref<E: StdError + 'static>(&self) -> Option<&E> {
        self.error().and_then(|e| e.downcast_ref::<E>())
    }

    /// The path of the actor that failed first (an escalated failure keeps
    /// the path of the child that caused it).
    pub fn actor_path(&self) -> &str {
        &self.inner.actor
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.inner.initialization {
            f.write_str("initialization failed: ")?;
        }
        match &self.inner.cause {
            Cause::Error(e) => write!(f, "{e}"),
            Cause::Panic(m) => write!(f, "panicked: {m}"),
        }
    }
}

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Failure")
            .field("actor", &self.inner.actor)
            .field("initialization", &self.inner.initialization)
            .field("cause", &format_args!("{self}"))
            .finish()
    }
}

/// The message of a caught panic's payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("boom")]
    struct Boom;

    #[test]
    fn downcasts_and_display() {
        let f = Failure::from_error("/user/a".into(), Box::new(Boom));
        assert!(f.is::<Boom>());
        assert!(!f.is_killed());
        assert!(!f.is_panic());
        assert_eq!(f.to_string(), "boom");
        let init = f.clone().into_initialization();
        assert!(init.is_initialization());
        assert_eq!(init.to_string(), "initialization failed: boom");
        assert!(init.is::<Boom>() || init.error().is_some());
        let k = Failure::from_error("/user/k".into(), Box::new(Killed));
        assert!(k.is_killed());
        let p = Failure::panic("/user/p".into(), Box::new("oops"));
        assert_eq!(p.panic_message(), Some("oops"));
        assert_eq!(p.to_string(), "panicked: oops");
        assert_eq!(p.actor_path(), "/user/p");
    }
}
