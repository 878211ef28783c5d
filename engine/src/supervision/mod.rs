//! Supervision, as user code meets it: what a failure is and how a parent
//! decides about it. The runtime (`runtime/driver.rs`) carries it out.

/// Why an actor failed, what a handler returns, the engine's own causes.
pub(crate) mod failure;
/// Strategies, directives, the default decider, the retry window.
pub(crate) mod strategy;
