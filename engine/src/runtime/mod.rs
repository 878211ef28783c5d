//! The core runtime: what runs an actor. A cell (mailbox, shared core,
//! driver) run on the scheduler's workers, what travels in its lanes, the
//! guardians, and the `ActorSystem` that owns them, with its settings and
//! its coordinated shutdown.

/// The actor cell: two-lane mailbox, shared core, run as a `Runnable`.
pub(crate) mod cell;
/// The system's one-shot claims (terminate, reap).
pub(crate) mod claim;
/// The system's settings from TOML.
pub(crate) mod config;
/// Containing panics from user code run outside the handlers.
pub(crate) mod contain;
/// The coordinated shutdown wired into the system.
pub(crate) mod coordinated;
/// The run holder's close-and-drain and system-only dequeue (loom-modelled).
pub(crate) mod drain;
/// The lifecycle state machine of a cell's run holder.
pub(crate) mod driver;
/// The guardians `/`, `/user` and `/system`.
pub(crate) mod guardian;
/// Messages too large to move by value on an ordinary stack.
pub(crate) mod large;
/// What travels in a cell's lanes: system messages and envelopes.
pub(crate) mod signal;
/// `ActorSystem`, `SystemBuilder`, termination.
pub(crate) mod system;
