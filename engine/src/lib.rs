//! proscenium: a lock-free, high-throughput actor engine with Akka-grade
//! supervision.
//!
//! Actors are state plus a synchronous handler ([`Actor`]); they run on an
//! M:N work-stealing scheduler (`proscenium-scheduler`) and receive through
//! two-lane intrusive mailboxes (`proscenium-mailbox`): lifecycle and
//! supervision signals on a system lane handled ahead of user messages.
//! Every actor has a parent that supervises it ([`SupervisorStrategy`]);
//! any actor can watch any other ([`Context::watch`]); actors stop with
//! [`ActorId::stop`], a PoisonPill, Kill, or a confirmed
//! [`graceful_stop`](ActorRef::graceful_stop); undeliverable messages go to
//! dead letters, which are counted and published on the [`EventStream`].
//!
//! Messages move by value: through a few frames of the send and receive
//! path, some of which keep a copy each, so a message costs several times
//! its size on the stack of the worker that handles it. The workers have
//! std's default stack of 2 MiB, and a message of a few hundred KiB (a large
//! array inside the message type) can overflow it, which aborts the
//! process (measured with a 1 MiB message: 10–12 MiB of stack in an
//! optimised build, 24–32 MiB in a debug build). Box large payloads, or
//! raise the stack with [`SystemBuilder::worker_stack_size`] (TOML
//! `[scheduler] stack-size`).
//!
//! Patterns on top: scheduled messages and keyed timers
//! ([`ActorRef::tell_after`], [`Context::start_single_timer`]), a receive
//! timeout, a stash, the [`BackoffSupervisor`], pool and group routers
//! ([`Pool`], [`Group`]). The system shuts down in order through its
//! [`CoordinatedShutdown`] (Akka's phases; run by
//! [`ActorSystem::terminate`], SIGTERM/SIGINT or the application), whose
//! last phase stops every actor before the workers are joined.
//!
//! ```
//! use proscenium::prelude::*;
//! use std::time::Duration;
//!
//! struct Greeter { greeted: u32 }
//! enum Greet { Hello(String, Reply<String>) }
//!
//! impl Actor for Greeter {
//!     type Msg = Greet;
//!     fn receive(&mut self, _ctx: &mut Context<Self>, msg: Greet) -> Outcome {
//!         let Greet::Hello(name, reply) = msg;
//!         self.greeted += 1;
//!         reply.send(format!("hello, {name} (#{})", self.greeted));
//!         Ok(())
//!     }
//! }
//!
//! let system = ActorSystem::builder().workers(2).pin_workers(false).build()?;
//! let greeter = system.spawn(Props::new(|| Greeter { greeted: 0 }), "greeter")?;
//! let answer = greeter
//!     .ask(|reply| Greet::Hello("ada".into(), reply), Duration::from_secs(1))
//!     .wait()?;
//! assert_eq!(answer, "hello, ada (#1)");
//! system.terminate().wait();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Waiting without blocking
//!
//! A handler runs on one of a few worker threads, and every other actor
//! waits while it runs: it must never block. Every blocking wait the engine
//! offers ([`Ask::wait`], [`GracefulStop::wait`], [`Termination::wait`],
//! [`JoinHandle::wait`]) therefore panics when called on a worker (see
//! `proscenium_scheduler::assert_not_on_worker`): inside a handler, the
//! panic fails the actor, which beats a deadlock. Do not block on anything
//! else either (a `std::sync::mpsc::Receiver::recv`, a mutex held by a slow
//! thread, blocking I/O, `std::thread::sleep`). Instead:
//!
//! - **An answer from another actor**: [`Context::ask_pipe`] sends the
//!   request and delivers the answer (or the timeout) to this actor as a
//!   message. No task is spawned for it.
//! - **Any future** (a client call, a computation on another executor):
//!   [`Context::pipe_to_self`] runs it on the system's workers and delivers
//!   its output as a message; [`PipeHandle::cancel`] cancels it. With the
//!   `tokio` feature, `Context::pipe_to_self_on` runs it on a tokio runtime
//!   (for tokio's I/O and timers).
//! - **An actor that awaits a client on every message**: implement
//!   [`AsyncActor`] (`async fn handle`) and spawn it through the [`Async`]
//!   adapter: one message at a time, in mailbox order, the next handled once
//!   the future completes; a stop or a Kill drops a running future.
//! - **Work that awaits several things in turn**: [`ActorSystem::spawn_task`]
//!   runs an `async` block on the workers (`.await` asks, graceful stops,
//!   timers there), and its [`JoinHandle`] is itself a future, or tell the
//!   result to an actor at the end of the block.
//! - **Later, not now**: timers ([`Context::start_single_timer`],
//!   [`ActorRef::tell_after`]) instead of sleeping.
//! - **Blocking code you cannot change**: give it a thread of its own
//!   (`std::thread::spawn`), and have the thread tell the actor its result.
//!
//! ```
//! use proscenium::prelude::*;
//! use std::sync::mpsc;
//! use std::time::Duration;
//!
//! struct Store;
//! impl Actor for Store {
//!     type Msg = Reply<u32>;
//!     fn receive(&mut self, _: &mut Context<Self>, reply: Reply<u32>) -> Outcome {
//!         reply.send(7);
//!         Ok(())
//!     }
//! }
//!
//! enum Msg { Load, Loaded(Result<u32, AskError>), Computed(u32) }
//! struct Front { store: ActorRef<Reply<u32>>, out: mpsc::Sender<u32> }
//! impl Actor for Front {
//!     type Msg = Msg;
//!     fn receive(&mut self, ctx: &mut Context<Self>, msg: Msg) -> Outcome {
//!         match msg {
//!             // Not `self.store.ask(..).wait()`: that panics on a worker.
//!             Msg::Load => ctx.ask_pipe(&self.store, |r| r, Duration::from_secs(1), Msg::Loaded),
//!             Msg::Loaded(n) => {
//!                 let n = n?;
//!                 let _handle = ctx.pipe_to_self(async move { n * 6 }, Msg::Computed);
//!             }
//!             Msg::Computed(n) => { let _ = self.out.send(n); }
//!         }
//!         Ok(())
//!     }
//! }
//!
//! let system = ActorSystem::builder().workers(2).pin_workers(false).build()?;
//! let store = system.spawn(Props::new(|| Store), "store")?;
//! let (tx, rx) = mpsc::channel();
//! let front = system.spawn(
//!     Props::new(move || Front { store: store.clone(), out: tx.clone() }),
//!     "front",
//! )?;
//! front.tell(Msg::Load);
//! assert_eq!(rx.recv()?, 42);
//! system.terminate().wait();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Narrowed references ([`ActorRef::adapt`], [`Context::message_adapter`])
//! let an actor hand out an `ActorRef` of another protocol, such as the
//! reply-to type another actor expects; [`ActorSystem::lookup`] finds a
//! live actor by its path.
//!
//! # Metrics
//!
//! Metrics appear only where `ActorSystem::publish_metrics` is called or a
//! sampler (`spawn_metrics_sampler`) runs: each call samples the values
//! into the installed recorder, which stays empty otherwise.
//!
//! The cargo feature `metrics` adds `ActorSystem::publish_metrics`: the
//! scheduler's per-worker counters and queue depths, actors spawned,
//! restarted and stopped, dead letters and panics, through the
//! [`metrics`](https://docs.rs/metrics) facade (any exporter: Prometheus,
//! OpenTelemetry, StatsD), each labelled `system`; extensions add theirs
//! (`add_metrics_source`: the HTTP server's and remote's `metrics`
//! features), and `spawn_metrics_sampler` publishes periodically for
//! exporters that push. A publication samples counters the engine keeps
//! anyway; without the feature none of it is compiled, and with it the
//! message path is unchanged (the three actor counters are on the spawn,
//! restart and stop paths). docs/metrics.md lists every metric.
//!
//! # Testing
//!
//! The cargo feature `testkit` adds `proscenium::testkit`: a `TestSystem`
//! (2 unpinned workers, no signal handlers, the dead-letter log off; when
//! dropped it terminates the system and asserts that nothing was left), a
//! `TestProbe` to hand out as an [`ActorRef`] and assert on what it
//! receives and which actors it saw terminate, and an `EventProbe` for dead
//! letters and other events. Turn it on for tests only:
//! `[dev-dependencies] proscenium = { version = "0.1", features = ["testkit"] }`.
//!
//! ```
//! # #[cfg(feature = "testkit")] {
//! use proscenium::prelude::*;
//! use proscenium::testkit::{TestProbe, TestSystem};
//! use std::time::Duration;
//!
//! struct Doubler;
//! impl Actor for Doubler {
//!     type Msg = (u32, ActorRef<u32>);
//!     fn receive(&mut self, _ctx: &mut Context<Self>, (n, to): Self::Msg) -> Outcome {
//!         to.tell(2 * n);
//!         Ok(())
//!     }
//! }
//!
//! let system = TestSystem::new();
//! let probe = TestProbe::<u32>::new(&system);
//! let doubler = system.spawn(Props::new(|| Doubler), "doubler").expect("spawn");
//! doubler.tell((21, probe.actor_ref()));
//! assert_eq!(probe.expect_msg(Duration::from_secs(5)), 42);
//! probe.watch(&doubler.id());
//! doubler.stop();
//! probe.expect_terminated(&doubler.id(), Duration::from_secs(5));
//! // Dropping `system` terminates it and asserts a clean termination.
//! # }
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![doc(test(attr(deny(warnings))))]

// Under `--cfg loom` only the modules with loom models compile (the result
// slot, the timer slot's state machine, the run holder's drains, a pipe's
// state word), with the
// shim they need, re-exported in `__loom` for `loom-tests/`: the rest of
// the engine sits on the scheduler, which compiles only in part under loom
// (decision record 0015). Every other item of this file is `not_loom!`.
mod sync;

/// The items in it compile only without `--cfg loom`.
macro_rules! not_loom {
    ($($item:item)*) => { $( #[cfg(not(loom))] $item )* };
}

#[cfg(loom)]
#[allow(missing_debug_implementations)] // internals, for the models only
#[path = "runtime/claim.rs"]
mod claim;
#[cfg(loom)]
#[allow(missing_debug_implementations)] // internals, for the models only
#[path = "runtime/drain.rs"]
mod drain;
#[cfg(loom)]
#[allow(missing_debug_implementations)] // internals, for the models only
#[path = "api/pipe_state.rs"]
mod pipe_state;
#[cfg(loom)]
#[allow(missing_debug_implementations)] // internals, for the models only
#[path = "api/promise.rs"]
mod promise;
#[cfg(loom)]
#[allow(missing_debug_implementations)] // internals, for the models only
#[path = "patterns/timer_state.rs"]
mod timer_state;

/// The loom-modelled modules, for `loom-tests/` (loom builds only).
#[cfg(loom)]
#[doc(hidden)]
pub mod __loom {
    pub use crate::claim::Claim;
    pub use crate::drain::{
        close_and_drain, dequeue_system_only, drain_closed, DRAIN_BEFORE_CLOSE,
    };
    /// A pipe's state word and waker (its state names clash with the
    /// timer slot's).
    pub mod pipe {
        pub use crate::pipe_state::{PipeShared, CANCELLED, DELIVERED, PANICKED, PENDING};
    }
    pub use crate::promise::{Expiry, Slot};
    pub use crate::sync::ModelTimer;
    pub use crate::timer_state::{Disarm, Payload, SlotState, ACTIVE, CANCELLED, DONE};

    impl Disarm for ModelTimer {
        fn disarm(self) {
            self.cancel();
        }
    }
}

not_loom! {
// Modules by concern (each folder's mod.rs lists its files):
mod api; // what user code names: actors, refs, context, ask, futures
mod error; // spawn and system errors
mod observe; // dead letters, the event stream, system events
mod patterns; // backoff, routers, stash, timers
mod runtime; // cells, the driver, guardians, the system, its shutdown
mod supervision; // failures and strategies
#[cfg(feature = "testkit")]
pub mod testkit;

// The actor API: actors, references, context, ask, futures.
pub use crate::api::actor::{Actor, Props};
pub use crate::api::actor_ref::{ActorId, ActorRef, StopSignal};
pub use crate::api::async_actor::{Async, AsyncActor, AsyncContext};
pub use crate::api::ask::{Ask, AskError, FromReply, GracefulStop, NoReplyReason, Reply};
pub use crate::api::context::Context;
pub use crate::api::pipe::PipeHandle;
pub use crate::api::terminated::ActorTermination;
// Supervision: failures and strategies.
pub use crate::supervision::failure::{ActorError, DeathPact, Failure, Killed, Outcome};
pub use crate::supervision::own::Supervision;
pub use crate::supervision::strategy::{
    default_decider, Directive, StrategyKind, SupervisorStrategy,
};
// Observability: dead letters and the event stream.
pub use crate::observe::dead_letters::{DeadLetter, Kill, PoisonPill};
pub use crate::observe::event_stream::{EventStream, Subscription};
#[cfg(feature = "metrics")]
pub use crate::observe::metrics::SamplerTick;
pub use crate::observe::events::{
    LifecycleEvent, LifecycleKind, SupervisionEvent, SupervisionReason, UnhandledMessage,
};
// Patterns: backoff, routers, stash, timers.
pub use crate::patterns::backoff::{
    backoff_delay, BackoffMsg, BackoffOptions, BackoffRestartScheduled, BackoffSupervisor,
    BackoffTimer,
};
pub use crate::patterns::routing::{Broadcast, Group, Pool, Resizer, Router, RouterMsg, RouterRef};
pub use crate::patterns::stash::StashOverflowError;
pub use crate::patterns::timers::{Cancellable, TimerKey};
// The runtime: the system, its settings and its shutdown.
pub use crate::runtime::config::SchedulerSettings;
pub use crate::runtime::coordinated::CoordinatedShutdownExt;
pub use crate::runtime::system::{ActorSystem, SystemBuilder, Termination, TerminationReport};
// Errors.
pub use crate::error::{SpawnError, SystemError};
// From the layers below: mailbox, scheduler, shutdown.
pub use proscenium_mailbox::TrySendError;
/// Frees this thread's cache of spare mailbox nodes (leak checks call it
/// before they count the heap); not needed in an application.
#[doc(hidden)]
pub use proscenium_mailbox::trim_node_cache;
pub use proscenium_scheduler::net;
/// The scheduler's handle and task types, as [`ActorSystem::scheduler_handle`]
/// and [`ActorSystem::spawn_task`] return them, and [`Sleep`], the future of
/// [`Handle::sleep`].
pub use proscenium_scheduler::{Handle, JoinError, JoinHandle, Sleep};
/// Configuration through serde: the TOML reader and the value formats
/// every proscenium section shares.
pub use proscenium_shutdown::de;
pub use proscenium_shutdown::{
    AddTaskError, CancellableTask, ConfigError, CoordinatedShutdown, Phase, PhaseConfig, Reason,
    RunState, ShutdownConfig, ShutdownError, ShutdownRun, ShutdownState, TaskError, TaskFailure,
    TaskReport, TaskState,
};

/// What most users import: `use proscenium::prelude::*;`.
pub mod prelude {
    pub use crate::{
        Actor, ActorError, ActorId, ActorRef, ActorSystem, AskError, Cancellable, Context,
        CoordinatedShutdownExt, DeadLetter, Directive, Failure, NoReplyReason, Outcome, Props,
        Reply, StashOverflowError, Supervision, SupervisorStrategy, TimerKey,
    };
    // Waiting without blocking (issue 14); async handlers (issue 35).
    pub use crate::{Async, AsyncActor, AsyncContext, JoinError, JoinHandle, PipeHandle};

    // By feature, what a user of it names in ordinary code (the rest,
    // such as error and report types, is named through `proscenium::`).
    //
    // Stopping, waiting for an end, death watch.
    pub use crate::{ActorTermination, StopSignal};
    // Supervision: a decider that falls back to the default; the events a
    // monitor subscribes to, and the subscription to cancel.
    pub use crate::{
        default_decider, LifecycleEvent, LifecycleKind, Subscription, SupervisionEvent,
        SupervisionReason,
    };
    // Coordinated shutdown: its configuration, phases and run reasons.
    pub use crate::{Phase, PhaseConfig, Reason, ShutdownConfig};
    // Routers.
    pub use crate::{Broadcast, Group, Pool, Resizer, RouterMsg, RouterRef};
    // The BackoffSupervisor.
    pub use crate::{BackoffMsg, BackoffOptions, BackoffSupervisor};
}

/// The README's code blocks, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(test)]
mod readme {
    /// The README's first example and `examples/readme.rs` are the same code.
    #[test]
    fn the_readme_example_is_examples_readme_rs() {
        let readme = include_str!("../README.md");
        let example = include_str!("../examples/readme.rs");
        let block = readme
            .split("## An actor in twenty lines\n\n```rust\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("the README has the section");
        let code: String = example
            .lines()
            .skip_while(|l| l.starts_with("//!") || l.is_empty())
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(block, code);
    }
}
}
