//! Waiting without blocking (issue 14): `ActorSystem::spawn_task`,
//! `Context::pipe_to_self` (delivery, dead letters after a stop, restart
//! does not cancel, cancel, panics) and `Context::ask_pipe` (answer,
//! timeout, no reply). Every wait is on an event (a probe, a gate), never
//! a sleep.

mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use proscenium::prelude::*;
use support::*;
use tokio::sync::oneshot;

#[derive(Debug, PartialEq)]
enum Event {
    Got { incarnation: u32, value: u32 },
    Cancelled(bool),
    Restarted(u32),
    Dropped,
    Answer(Result<u32, AskError>),
}

/// Sends `Event::Dropped` when dropped (with the future that owns it).
struct DropGuard(Sender<Event>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        let _ = self.0.send(Event::Dropped);
    }
}

/// What a piped future holds: its gate, dropped first, then its guard.
struct Held {
    gate: Option<oneshot::Receiver<u32>>,
    guard: Option<DropGuard>,
}

impl Drop for Held {
    fn drop(&mut self) {
        drop(self.gate.take());
        drop(self.guard.take());
    }
}

enum Msg {
    /// Pipes the value the gate will carry.
    Pipe(oneshot::Receiver<u32>, Option<DropGuard>),
    Got(u32),
    Cancel,
    Fail,
    PipePanic,
    PipeMapPanic,
    Ask(ActorRef<ClerkMsg>, bool, Duration),
    Answer(Result<u32, AskError>),
    Ping(Reply<u32>),
}

struct Piper {
    incarnation: u32,
    events: Sender<Event>,
    pending: Option<PipeHandle>,
}

impl Actor for Piper {
    type Msg = Msg;

    fn receive(&mut self, ctx: &mut Context<Self>, msg: Msg) -> Outcome {
        match msg {
            Msg::Pipe(gate, guard) => {
                let handle = ctx.pipe_to_self(
                    async move {
                        // The gate is dropped before the guard reports
                        // (`Held`), so a test that saw `Dropped` knows the
                        // gate's receiver is gone.
                        let mut held = Held {
                            gate: Some(gate),
                            guard,
                        };
                        match held.gate.as_mut() {
                            Some(gate) => gate.await.unwrap_or(0),
                            None => 0,
                        }
                    },
                    Msg::Got,
                );
                self.pending = Some(handle);
            }
            Msg::Got(value) => {
                let _ = self.events.send(Event::Got {
                    incarnation: self.incarnation,
                    value,
                });
            }
            Msg::Cancel => {
                let cancelled = self.pending.take().is_some_and(|h| h.cancel());
                let _ = self.events.send(Event::Cancelled(cancelled));
            }
            Msg::Fail => return Err("asked to fail".into()),
            Msg::PipePanic => {
                let future = async {
                    if true {
                        panic!("the future blows up");
                    }
                    1
                };
                drop(ctx.pipe_to_self(future, Msg::Got));
            }
            Msg::PipeMapPanic => {
                drop(ctx.pipe_to_self(async { 1u32 }, |_| -> Msg { panic!("the map blows up") }));
            }
            Msg::Ask(clerk, answer, timeout) => {
                let make = if answer {
                    ClerkMsg::Get
                } else {
                    ClerkMsg::Hold
                };
                ctx.ask_pipe(&clerk, make, timeout, Msg::Answer);
            }
            Msg::Answer(answer) => {
                let _ = self.events.send(Event::Answer(answer));
            }
            Msg::Ping(reply) => reply.send(self.incarnation),
        }
        Ok(())
    }

    fn post_restart(&mut self, _ctx: &mut Context<Self>, _failure: &Failure) -> Outcome {
        let _ = self.events.send(Event::Restarted(self.incarnation));
        Ok(())
    }
}

fn piper(system: &ActorSystem, events: &Probe<Event>) -> ActorRef<Msg> {
    let tx = events.tx();
    let incarnations = Arc::new(AtomicU32::new(0));
    system
        .spawn(
            Props::new(move || Piper {
                incarnation: incarnations.fetch_add(1, Ordering::Relaxed) + 1,
                events: tx.clone(),
                pending: None,
            }),
            "piper",
        )
        .expect("spawn")
}

fn ping(actor: &ActorRef<Msg>) -> u32 {
    actor
        .ask(Msg::Ping, PATIENCE)
        .wait()
        .expect("the actor answers")
}

/// Answers `Get` with 7, keeps `Hold` replies unanswered, drops `Drop`'s.
struct Clerk {
    held: Vec<Reply<u32>>,
}

enum ClerkMsg {
    Get(Reply<u32>),
    Hold(Reply<u32>),
}

impl Actor for Clerk {
    type Msg = ClerkMsg;

    fn receive(&mut self, _ctx: &mut Context<Self>, msg: ClerkMsg) -> Outcome {
        match msg {
            ClerkMsg::Get(r) => r.send(7),
            ClerkMsg::Hold(r) => self.held.push(r),
        }
        Ok(())
    }
}

#[test]
fn spawn_task_runs_a_future_on_the_workers() {
    let system = system();
    let handle: JoinHandle<u32> = system.spawn_task(async { 40 + 2 });
    assert_eq!(handle.wait(), Ok(42));
    let panicked = system.spawn_task(async {
        if true {
            panic!("task panic");
        }
    });
    assert!(matches!(panicked.wait(), Err(JoinError::Panicked(m)) if m.contains("task panic")));
    shutdown(system);
}

#[test]
fn pipe_to_self_delivers_the_output_as_a_message() {
    let system = system();
    let events = Probe::new();
    let actor = piper(&system, &events);
    let (gate, rx) = oneshot::channel();
    actor.tell(Msg::Pipe(rx, None));
    ping(&actor); // the pipe is set up; the future waits on the gate
    gate.send(5).expect("the future waits");
    assert_eq!(
        events.next(),
        Event::Got {
            incarnation: 1,
            value: 5
        }
    );
    drop(actor);
    shutdown(system);
}

#[test]
fn an_output_for_a_stopped_actor_is_one_dead_letter() {
    let system = system();
    let events = Probe::new();
    let dead = dead_letter_probe(&system, |d| {
        d.downcast_ref::<Msg>().map(|m| match m {
            Msg::Got(v) => *v,
            _ => u32::MAX,
        })
    });
    let actor = piper(&system, &events);
    let (gate, rx) = oneshot::channel();
    actor.tell(Msg::Pipe(rx, None));
    ping(&actor);
    assert!(actor.graceful_stop(PATIENCE).wait());
    gate.send(9)
        .expect("the future still waits: a stop does not cancel");
    assert_eq!(dead.next(), Some(9));
    drop(actor);
    let report = shutdown(system);
    assert_eq!(report.dead_letters, 1, "exactly one dead letter");
    assert!(dead.drain_now().is_empty());
    assert!(events.drain_now().is_empty(), "nothing was handled");
}

#[test]
fn a_restart_does_not_cancel_a_pipe() {
    let system = system();
    let events = Probe::new();
    let actor = piper(&system, &events);
    let (gate, rx) = oneshot::channel();
    actor.tell(Msg::Pipe(rx, None));
    actor.tell(Msg::Fail);
    assert_eq!(events.next(), Event::Restarted(2));
    assert_eq!(ping(&actor), 2);
    gate.send(3).expect("the restart did not drop the future");
    assert_eq!(
        events.next(),
        Event::Got {
            incarnation: 2,
            value: 3
        }
    );
    drop(actor);
    shutdown(system);
}

#[test]
fn a_cancelled_pipe_drops_its_future_and_delivers_nothing() {
    let system = system();
    let events = Probe::new();
    let actor = piper(&system, &events);
    let (gate, rx) = oneshot::channel();
    actor.tell(Msg::Pipe(rx, Some(DropGuard(events.tx()))));
    actor.tell(Msg::Cancel);
    // "the future is dropped (on its executor, soon after)" (`cancel`'s
    // doc): the cancel wakes the pipe's task, which may drop the future on
    // the other worker before the handler reports, so the two events come
    // in either order.
    let mut seen = [events.next(), events.next()];
    seen.sort_by_key(|e| matches!(e, Event::Dropped));
    assert_eq!(seen, [Event::Cancelled(true), Event::Dropped]);
    assert!(gate.send(1).is_err(), "the future is gone");
    ping(&actor);
    assert!(events.drain_now().is_empty(), "nothing was delivered");
    drop(actor);
    let report = shutdown(system);
    assert_eq!(report.dead_letters, 0);
}

#[test]
fn a_cancel_after_delivery_reports_false() {
    let system = system();
    let events = Probe::new();
    let actor = piper(&system, &events);
    let (gate, rx) = oneshot::channel();
    actor.tell(Msg::Pipe(rx, None));
    ping(&actor);
    gate.send(4).expect("the future waits");
    assert_eq!(
        events.next(),
        Event::Got {
            incarnation: 1,
            value: 4
        }
    );
    actor.tell(Msg::Cancel);
    assert_eq!(events.next(), Event::Cancelled(false));
    drop(actor);
    shutdown(system);
}

#[test]
fn a_panic_in_a_piped_future_or_its_map_delivers_nothing_and_is_counted() {
    let logs = Logs::capture();
    let system = system();
    let events = Probe::new();
    let actor = piper(&system, &events);
    actor.tell(Msg::PipePanic);
    logs.wait_for(&[
        "a piped future panicked",
        "/user/piper",
        "the future blows up",
    ]);
    assert!(system.pipe_panics() >= 1);
    actor.tell(Msg::PipeMapPanic);
    logs.wait_for(&["mapping closure panicked", "the map blows up"]);
    assert_eq!(system.pipe_panics(), 2);
    // The actor was not failed (no restart: still its first incarnation),
    // and the workers still run it.
    assert_eq!(ping(&actor), 1);
    assert!(events.drain_now().is_empty());
    drop(actor);
    shutdown(system);
}

#[test]
fn ask_pipe_delivers_the_answer_as_a_message() {
    let system = system();
    let events = Probe::new();
    let actor = piper(&system, &events);
    let clerk = system
        .spawn(Props::new(|| Clerk { held: Vec::new() }), "clerk")
        .expect("spawn");
    actor.tell(Msg::Ask(clerk.clone(), true, PATIENCE));
    assert_eq!(events.next(), Event::Answer(Ok(7)));
    // Many in flight at once, each answered once.
    for _ in 0..100 {
        actor.tell(Msg::Ask(clerk.clone(), true, PATIENCE));
    }
    assert!(events.take(100).iter().all(|e| *e == Event::Answer(Ok(7))));
    drop((actor, clerk));
    shutdown(system);
}

#[test]
fn ask_pipe_delivers_the_timeout_as_a_message() {
    let system = system();
    let events = Probe::new();
    let actor = piper(&system, &events);
    let clerk = system
        .spawn(Props::new(|| Clerk { held: Vec::new() }), "clerk")
        .expect("spawn");
    let timeout = Duration::from_millis(5);
    actor.tell(Msg::Ask(clerk.clone(), false, timeout));
    assert_eq!(
        events.next(),
        Event::Answer(Err(AskError::Timeout(timeout)))
    );
    drop((actor, clerk));
    shutdown(system);
}

#[test]
fn ask_pipe_to_a_stopped_actor_delivers_no_reply() {
    let system = system();
    let events = Probe::new();
    let actor = piper(&system, &events);
    let clerk = system
        .spawn(Props::new(|| Clerk { held: Vec::new() }), "clerk")
        .expect("spawn");
    assert!(clerk.graceful_stop(PATIENCE).wait());
    actor.tell(Msg::Ask(clerk.clone(), true, PATIENCE));
    assert_eq!(
        events.next(),
        Event::Answer(Err(AskError::NoReply(NoReplyReason::DeadLetter)))
    );
    drop((actor, clerk));
    shutdown(system);
}
