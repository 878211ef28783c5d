//! A system's life follows its user handles (docs/decisions/0009): when the
//! last `ActorSystem` handle that user code holds is dropped, the system
//! terminates in the background, like a tokio `Runtime`. References the
//! engine keeps (cells, the reaper, a `Termination`, `ctx.system()` and its
//! clones) do not keep it alive.

mod support;

use std::sync::mpsc::Sender;

use proscenium::prelude::*;
use support::{system, Probe, PATIENCE};

/// Holds what it is given: the system as its context shows it, or a
/// handle the test gives it; logs its stop.
struct Holder {
    log: Sender<&'static str>,
    /// `ctx.system().clone()`, taken in `pre_start` if asked to.
    own: Option<ActorSystem>,
    take_own: bool,
    /// A handle the test sent.
    given: Option<ActorSystem>,
}

enum HolderMsg {
    Ping(Reply<&'static str>),
    Hold(ActorSystem),
    Release,
}

impl Holder {
    fn props(log: Sender<&'static str>, take_own: bool) -> Props<Holder> {
        Props::new(move || Holder {
            log: log.clone(),
            own: None,
            take_own,
            given: None,
        })
    }
}

impl Actor for Holder {
    type Msg = HolderMsg;

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        if self.take_own {
            self.own = Some(ctx.system().clone());
        }
        Ok(())
    }

    fn receive(&mut self, _ctx: &mut Context<Self>, msg: HolderMsg) -> Outcome {
        match msg {
            HolderMsg::Ping(reply) => reply.send("pong"),
            HolderMsg::Hold(system) => self.given = Some(system),
            // Dropped here, on a worker thread.
            HolderMsg::Release => {
                self.given = None;
                let _ = self.log.send("released");
            }
        }
        Ok(())
    }

    fn post_stop(&mut self, _ctx: &mut Context<Self>) {
        let _ = self.log.send("stopped");
    }
}

fn ping(actor: &ActorRef<HolderMsg>) -> Result<&'static str, AskError> {
    actor.ask(HolderMsg::Ping, PATIENCE).wait()
}

#[test]
fn dropping_every_user_handle_terminates_the_system() {
    let system = system();
    let log = Probe::new();
    let actor = system
        .spawn(Holder::props(log.tx(), false), "holder")
        .expect("spawn");
    assert_eq!(ping(&actor), Ok("pong"));
    // A Termination does not keep the system alive; neither does an
    // ActorRef.
    let terminated = system.when_terminated();
    drop(system);
    let report = terminated
        .wait_timeout(PATIENCE)
        .expect("dropping the last handle terminates the system");
    assert!(report.clean(), "{report:?}");
    assert_eq!(log.next(), "stopped");
    assert!(actor.id().is_terminated());
}

#[test]
fn the_system_lives_until_its_last_user_handle_is_dropped() {
    let system = system();
    let second = system.clone();
    let log = Probe::new();
    let actor = system
        .spawn(Holder::props(log.tx(), false), "holder")
        .expect("spawn");
    let terminated = system.when_terminated();
    drop(system);
    // The clone still holds it: it spawns and answers.
    let other = second
        .spawn(Holder::props(log.tx(), false), "other")
        .expect("a clone keeps the system");
    assert_eq!(ping(&other), Ok("pong"));
    assert_eq!(ping(&actor), Ok("pong"));
    assert!(!second.is_terminated());
    drop(second);
    let report = terminated.wait_timeout(PATIENCE).expect("terminates");
    assert!(report.clean(), "{report:?}");
}

/// `ctx.system()` (and a clone of it kept in the actor) is the engine's
/// reference, like tokio's `Handle`: it does not keep the system alive, so
/// an actor that stores it does not make its system immortal.
#[test]
fn an_actor_keeping_ctx_system_does_not_keep_the_system_alive() {
    let system = system();
    let log = Probe::new();
    let actor = system
        .spawn(Holder::props(log.tx(), true), "holder")
        .expect("spawn");
    assert_eq!(ping(&actor), Ok("pong")); // pre_start has run
    let terminated = system.when_terminated();
    drop(system);
    let report = terminated
        .wait_timeout(PATIENCE)
        .expect("the actor's clone does not keep the system alive");
    assert!(report.clean(), "{report:?}");
    assert_eq!(log.next(), "stopped");
}

/// A user handle given to an actor is a user handle: the system lives
/// while the actor holds it, and terminates when the actor drops it, on a
/// worker thread of the system itself (in the background, no deadlock).
#[test]
fn a_user_handle_held_by_an_actor_keeps_the_system_until_the_actor_drops_it() {
    let system = system();
    let log = Probe::new();
    let actor = system
        .spawn(Holder::props(log.tx(), false), "holder")
        .expect("spawn");
    actor.tell(HolderMsg::Hold(system.clone()));
    let terminated = system.when_terminated();
    drop(system);
    // Handled after Hold: the system is still up.
    assert_eq!(ping(&actor), Ok("pong"));
    actor.tell(HolderMsg::Release);
    let report = terminated
        .wait_timeout(PATIENCE)
        .expect("the last handle, dropped on a worker, terminates the system");
    assert!(report.clean(), "{report:?}");
    assert_eq!(log.take(2), ["released", "stopped"]);
}

/// Dropping the last handle after `terminate` only lets go of it.
#[test]
fn dropping_the_last_handle_of_a_terminated_system_is_quiet() {
    let system = system();
    let report = system
        .terminate()
        .wait_timeout(PATIENCE)
        .expect("terminates");
    assert!(report.clean(), "{report:?}");
    assert!(system.is_terminated());
    drop(system);
}
