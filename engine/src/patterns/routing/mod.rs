//! Routers: one actor reference in front of many routees, after Akka's
//! routing.
//!
//! * [`Pool`]: the router creates its routees from one [`Props`](crate::Props)
//!   and is their parent and supervisor.
//! * [`Group`]: the router is given existing actors.
//!
//! Logics: round-robin, random, smallest-mailbox, consistent-hashing on a
//! key of the message, and broadcast; a [`Broadcast`] envelope reaches
//! every routee whatever the logic. A pool can resize with the load
//! ([`Resizer`]). Spawning a router's props gives an
//! `ActorRef<RouterMsg<M>>`, where `M` is the routees' message type;
//! [`RouterRef`] wraps it for `tell(m)` and `broadcast(m)`, and
//! [`RouterRef::message_ref`] hands out a plain `ActorRef<M>` that routes
//! (one extra hop) to code that should not see the router.
//!
//! ```
//! use proscenium::prelude::*;
//! use std::time::Duration;
//!
//! struct Square;
//! impl Actor for Square {
//!     type Msg = (u64, Reply<u64>);
//!     fn receive(&mut self, _: &mut Context<Self>, (n, reply): Self::Msg) -> Outcome {
//!         reply.send(n * n);
//!         Ok(())
//!     }
//! }
//!
//! let system = ActorSystem::builder().workers(2).pin_workers(false).build()?;
//! let pool = system.spawn(Pool::round_robin(4).props(Props::new(|| Square)), "squares")?;
//! let pool = RouterRef::new(pool);
//! assert_eq!(pool.ask(|r| (12, r), Duration::from_secs(1)).wait(), Ok(144));
//! assert!(pool.graceful_stop(Duration::from_secs(5)).wait()); // routees stop with it
//! system.terminate().wait();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod config;
mod logic;
mod message;
mod resizer;
mod router;

pub use self::{
    config::{Group, Pool},
    message::{Broadcast, RouterMsg, RouterRef},
    resizer::Resizer,
    router::Router,
};
