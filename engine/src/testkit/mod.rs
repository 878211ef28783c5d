//! Test helpers for code built on the engine (cargo feature `testkit`):
//! a [`TestSystem`] preset for tests that checks its own clean termination,
//! a [`TestProbe`] to hand out as an [`ActorRef`](crate::ActorRef) and
//! assert on what it receives, and an [`EventProbe`] for the event stream
//! (dead letters, lifecycle and supervision events, your own events).
//!
//! Every expectation takes a timeout and waits on the event itself, never
//! on a sleep (except [`TestProbe::expect_no_msg`], whose meaning is to wait
//! the duration). A failed expectation panics with what was expected and
//! what came instead: the `Debug` of the message where the method asks for
//! it, else its type name.
//!
//! ```
//! use proscenium::prelude::*;
//! use proscenium::testkit::{TestProbe, TestSystem};
//! use std::time::Duration;
//!
//! struct Greeter;
//! impl Actor for Greeter {
//!     type Msg = (String, ActorRef<String>);
//!     fn receive(&mut self, _ctx: &mut Context<Self>, (name, to): Self::Msg) -> Outcome {
//!         to.tell(format!("hello, {name}"));
//!         Ok(())
//!     }
//! }
//!
//! let system = TestSystem::new();
//! let probe = TestProbe::<String>::new(&system);
//! let greeter = system.spawn(Props::new(|| Greeter), "greeter")?;
//! greeter.tell(("ada".into(), probe.actor_ref()));
//! assert_eq!(probe.expect_msg(Duration::from_secs(5)), "hello, ada");
//! probe.watch(&greeter.id());
//! greeter.stop();
//! probe.expect_terminated(&greeter.id(), Duration::from_secs(5));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! // Dropping `system` terminates it and asserts that nothing was left.
//! ```

mod events;
mod probe;
mod system;

pub use self::events::{EventProbe, ObservedDeadLetter};
pub use self::probe::TestProbe;
pub use self::system::TestSystem;

/// The timeout used by the testkit where a test gives none (its own
/// termination): long enough never to fire on a healthy run, short enough
/// that a hang fails the test.
pub const PATIENCE: std::time::Duration = std::time::Duration::from_secs(20);

/// How a value appears in a failure message when its `Debug` is not
/// available: its type name.
fn type_name_of<T>(_: &T) -> &'static str {
    std::any::type_name::<T>()
}

/// `timeout` from now (a timeout too long to represent: about a century).
fn deadline_after(timeout: std::time::Duration) -> std::time::Instant {
    let now = std::time::Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + std::time::Duration::from_secs(100 * 365 * 24 * 3600))
}
