//! Coordinated shutdown for proscenium: the phases of Akka's
//! `CoordinatedShutdown` as a validated DAG, tasks added to phases, and one
//! run that executes them phase after phase on the scheduler.
//!
//! * [`ShutdownConfig`] and [`PhaseConfig`]: the phases (the defaults of
//!   [`Phase`], plus your own), their timeouts, `recover` and `enabled`, and
//!   the process-level flags; in code or from TOML with Akka's key names.
//! * [`de`]: configuration through serde: the TOML reader every proscenium
//!   section uses (errors naming the key path and the line) and the value
//!   formats they share (durations, sizes, flags), for an application's
//!   own configuration struct too.
//! * [`CoordinatedShutdown`]: `add_task`, `add_cancellable_task`, `run`
//!   (idempotent: one shared [`ShutdownRun`]), `state` (which phase, which
//!   task holds it up).
//!
//! This crate knows phases, tasks and the scheduler, not actors: the engine
//! adds the actor-termination tasks and terminates the system in the last
//! phase.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

mod config;
pub mod de;
mod phase;
mod run;
mod shutdown;
mod signals;

pub use crate::config::{ConfigError, ShutdownConfig};
pub use crate::phase::{Phase, PhaseConfig};
pub use crate::run::{Reason, ShutdownError, ShutdownRun, TaskError, TaskFailure};
pub use crate::shutdown::{
    AddTaskError, CancellableTask, CoordinatedShutdown, RunState, ShutdownState, TaskReport,
    TaskState,
};
pub use crate::signals::{SignalError, SignalRegistration};

/// The README's example, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
