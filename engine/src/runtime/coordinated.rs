//! The coordinated shutdown wired into the actor system: actor-termination
//! tasks, the system's own task in the last phase, and the triggers
//! (`ActorSystem::terminate`, signals, process exit).

use std::sync::Weak;
use std::time::Instant;

use proscenium_shutdown::{
    AddTaskError, CoordinatedShutdown, Phase, ShutdownConfig, SignalRegistration,
};

use crate::api::actor_ref::{ActorId, ActorRef};
use crate::api::ask::termination_watch;
use crate::runtime::system::{ActorSystem, SystemInner};

/// The engine's additions to [`CoordinatedShutdown`]: tasks that stop an
/// actor and complete when it has terminated.
///
/// ```
/// use proscenium::prelude::*;
///
/// struct Flusher;
/// enum FlusherMsg { FlushAndStop }
/// impl Actor for Flusher {
///     type Msg = FlusherMsg;
///     fn receive(&mut self, ctx: &mut Context<Self>, msg: FlusherMsg) -> Outcome {
///         match msg {
///             FlusherMsg::FlushAndStop => ctx.stop_self(), // after flushing
///         }
///         Ok(())
///     }
/// }
///
/// let system = ActorSystem::builder().workers(1).pin_workers(false)
///     .coordinated_shutdown(ShutdownConfig::default().run_by_signals(false))
///     .build()?;
/// let flusher = system.spawn(Props::new(|| Flusher), "flusher")?;
/// let cs = system.coordinated_shutdown();
/// cs.add_actor_termination_task(
///     Phase::BEFORE_SERVICE_UNBIND, "flush", &flusher, Some(FlusherMsg::FlushAndStop))?;
/// cs.run(Reason::User("maintenance".into())).wait()?;
/// assert!(flusher.is_terminated());
/// system.when_terminated().wait(); // the last phase terminated the system
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait CoordinatedShutdownExt {
    /// Adds a task to `phase` that sends `msg` to `actor` (or, with `None`,
    /// stops it) and completes once the actor has terminated, also if it
    /// already had. The watch is registered before the message is sent, so
    /// the termination cannot be missed. The phase's timeout bounds it.
    fn add_actor_termination_task<M: Send + 'static>(
        &self,
        phase: &str,
        name: &str,
        actor: &ActorRef<M>,
        msg: Option<M>,
    ) -> Result<(), AddTaskError>;
}

impl CoordinatedShutdownExt for CoordinatedShutdown {
    fn add_actor_termination_task<M: Send + 'static>(
        &self,
        phase: &str,
        name: &str,
        actor: &ActorRef<M>,
        msg: Option<M>,
    ) -> Result<(), AddTaskError> {
        let actor = actor.clone();
        self.add_task(phase, name, move || {
            let terminated = termination_watch(&actor.id());
            match msg {
                Some(msg) => actor.tell(msg),
                None => actor.stop(),
            }
            async move {
                terminated.await;
                Ok(())
            }
        })
    }
}

/// The name of the system's own task in `actor-system-terminate`.
pub(crate) const TERMINATE_TASK: &str = "terminate-actor-system";

/// Builds the system's coordinated shutdown: validates `config`, adds the
/// termination task (when `terminate-actor-system` is on), the process-exit
/// wait, and registers for signals (when `run-by-signals` is on). The
/// closures hold the system weakly: the system owns its shutdown.
pub(crate) fn install(
    system: &ActorSystem,
    weak: Weak<SystemInner>,
    config: &ShutdownConfig,
    cs: &CoordinatedShutdown,
) -> Option<SignalRegistration> {
    if config.terminate_actor_system {
        let task = weak.clone();
        cs.add_task(Phase::ACTOR_SYSTEM_TERMINATE, TERMINATE_TASK, move || {
            let system = task.upgrade().map(ActorSystem::from_inner);
            async move {
                if let Some(system) = system {
                    stop_guardians_in_order(system).await;
                }
                Ok(())
            }
        })
        .expect("the last phase exists and the run has not started");
    }
    if config.exit_process {
        let exiting = weak.clone();
        let patience = system.quiesce_timeout();
        cs.before_process_exit(move || {
            if let Some(inner) = exiting.upgrade() {
                let system = ActorSystem::from_inner(inner);
                if system.when_terminated().wait_timeout(patience).is_none() {
                    tracing::warn!("exiting before the workers were joined");
                }
            }
        });
    }
    if !config.run_by_signals {
        return None;
    }
    match cs.register_signals() {
        Ok(registration) => {
            announce_shared_signals(system, registration.others());
            Some(registration)
        }
        Err(e) => {
            tracing::warn!(error = %e, "run-by-signals is on but signals cannot be handled");
            None
        }
    }
}

/// Says so when this system is not the only one registered for SIGTERM and
/// SIGINT in the process: a signal runs the coordinated shutdown of every
/// registered system (shutdown/src/signals.rs `dispatch`), not only the
/// first's, and a second system built with the default config (a test, a
/// tool inside a server) would otherwise take the signals silently.
fn announce_shared_signals(system: &ActorSystem, others: usize) {
    if others > 0 {
        tracing::info!(
            system = %system.name(),
            others,
            "SIGTERM/SIGINT will run the coordinated shutdown of this system and of every \
             other system registered in this process ({others} more): each signal goes to \
             all of them; build with `ShutdownConfig::run_by_signals(false)` (as tests \
             should, or use the testkit's TestSystem) to keep a system out"
        );
    }
}

/// Quiesces the actors step by step: stop `/user` and wait until every
/// user actor has terminated (children before parents), then `/system`
/// (which stops itself once `/user` is gone) and the root. The workers are
/// then drained, parked and joined by the system's reaper, once this run
/// has completed.
async fn stop_guardians_in_order(system: ActorSystem) {
    let Some((root, user, sys)) = system.guardian_ids() else {
        return; // already terminated
    };
    let started = Instant::now();
    let root_done = termination_watch(&root);
    let user_done = termination_watch(&user);
    tracing::info!(system = %system.name(), "stopping /user");
    user.stop();
    user_done.await;
    tracing::info!(took = ?started.elapsed(), "every user actor has terminated; stopping /system");
    stop_if_alive(&sys);
    root_done.await;
    tracing::info!(took = ?started.elapsed(), "every actor has terminated");
}

fn stop_if_alive(id: &ActorId) {
    if !id.is_terminated() {
        id.stop();
    }
}
