//! Patterns built on the actor API (`api/`): actors, messages and timers,
//! each readable without the runtime's internals.

/// The BackoffSupervisor: restart one child after a growing delay.
pub(crate) mod backoff;
/// Pool and group routers: one reference in front of many routees.
pub(crate) mod routing;
/// The stash: set user messages aside and take them back later.
pub(crate) mod stash;
/// The state machine of a scheduled message's slot (loom-modelled).
pub(crate) mod timer_state;
/// Scheduled messages, keyed timers and the receive timeout.
pub(crate) mod timers;
