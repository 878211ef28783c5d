//! Supervision, as user code meets it: what a failure is and how a parent
//! decides about it, or the actor itself when its props carry a
//! [`Supervision`](own::Supervision). The runtime (`runtime/driver.rs`)
//! carries it out.

/// Why an actor failed, what a handler returns, the engine's own causes.
pub(crate) mod failure;
/// An actor's own supervision, given to its props.
pub(crate) mod own;
/// Strategies, directives, the default decider, the retry window.
pub(crate) mod strategy;
