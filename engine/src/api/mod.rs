//! The actor API: what user code names to write actors and talk to them.
//! The runtime (`runtime/`) carries these calls out; nothing here needs to
//! be read to use them.

/// The `Actor` trait and `Props`, the recipe an actor is created from.
pub(crate) mod actor;
/// Async handlers: `AsyncActor`, its `Async` adapter, `AsyncContext`.
pub(crate) mod async_actor;
/// `ActorRef` (typed, carries messages) and `ActorId` (untyped: watch, stop).
pub(crate) mod actor_ref;
/// Narrowed references: `ActorRef::adapt`, `Context::message_adapter`.
pub(crate) mod adapt;
/// Request-reply (`Reply`, `Ask`) and confirmed stops (`GracefulStop`).
pub(crate) mod ask;
/// `Context`: spawn, watch, stop, reach itself and the system.
pub(crate) mod context;
/// Finding a live actor by its path.
pub(crate) mod lookup;
/// Futures and asks delivered to an actor as messages.
pub(crate) mod pipe;
/// A pipe's state word and waker (loom-modelled).
pub(crate) mod pipe_state;
/// The write-once slot behind asks, graceful stops and termination.
pub(crate) mod promise;
/// Waiting for an actor's end from outside it.
pub(crate) mod terminated;
