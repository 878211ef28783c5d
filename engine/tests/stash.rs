//! The stash: messages set aside and handled again later, in order, before
//! newer ones; bounded; unstashed on restart; dead letters on stop.
//!
//! The stash is not in the seed documents; the Akka behaviour is quoted,
//! in our words, from Akka's documentation of `Stash`.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

use proscenium::prelude::*;
use support::actors::Gate;
use support::*;

#[derive(Debug)]
enum G {
    Work(u32),
    /// Become ready and unstash everything.
    Open,
    /// Report `Held`, then hold the handler until the gate opens.
    Hold(Gate),
    /// Open and unstash, then hold as `Hold`.
    OpenThenHold(Gate),
    Fail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
    Started(usize),
    Handled(u32),
    Overflow(u32),
    Held,
}

#[derive(Debug, thiserror::Error)]
#[error("gatekeeper failure")]
struct Failed;

/// Stashes work until opened; its first incarnation starts closed, later
/// ones (after a restart) open.
struct Gatekeeper {
    open: bool,
    seen: Sender<Ev>,
}

fn props(seen: Sender<Ev>, stash_capacity: Option<usize>) -> Props<Gatekeeper> {
    let incarnations = Arc::new(AtomicUsize::new(0));
    let seen = Mutex::new(seen);
    let props = Props::new(move || {
        let n = incarnations.fetch_add(1, Ordering::Relaxed);
        let seen = seen.lock().expect("probe").clone();
        let _ = seen.send(Ev::Started(n));
        Gatekeeper { open: n > 0, seen }
    });
    match stash_capacity {
        Some(c) => props.with_stash_capacity(c),
        None => props,
    }
}

impl Actor for Gatekeeper {
    type Msg = G;

    fn receive(&mut self, ctx: &mut Context<Self>, msg: G) -> Outcome {
        match msg {
            G::Work(n) if self.open => {
                let _ = self.seen.send(Ev::Handled(n));
            }
            work @ G::Work(_) => {
                if let Err(full) = ctx.stash(work) {
                    if let G::Work(n) = full.into_inner() {
                        let _ = self.seen.send(Ev::Overflow(n));
                    }
                }
            }
            G::Open => {
                self.open = true;
                ctx.unstash_all();
            }
            G::Hold(gate) => {
                let _ = self.seen.send(Ev::Held);
                let _ = gate.lock().expect("gate").recv();
            }
            G::OpenThenHold(gate) => {
                self.open = true;
                ctx.unstash_all();
                let _ = self.seen.send(Ev::Held);
                let _ = gate.lock().expect("gate").recv();
            }
            G::Fail => return Err(Box::new(Failed)),
        }
        Ok(())
    }
}

/// Akka: "Invoking unstashAll() enqueues messages from the stash to the
/// actor's mailbox ... in the same order as they have been received
/// originally", ahead of what is already in the mailbox ("prepended").
/// Everything is queued while the actor is held, so message 4 is in the
/// mailbox when 1-3 are unstashed: they still come first.
#[test]
fn unstashed_messages_come_first_in_their_order() {
    let system = system();
    let probe = Probe::new();
    let a = system.spawn(props(probe.tx(), None), "a").expect("spawn");
    assert_eq!(probe.next(), Ev::Started(0));
    let (open, gate) = support::actors::gate();
    a.tell(G::Hold(gate));
    for n in 1..=3 {
        a.tell(G::Work(n));
    }
    a.tell(G::Open);
    a.tell(G::Work(4));
    assert_eq!(probe.next(), Ev::Held);
    open.send(()).expect("open");
    assert_eq!(
        probe.take(4),
        [
            Ev::Handled(1),
            Ev::Handled(2),
            Ev::Handled(3),
            Ev::Handled(4)
        ]
    );
    drop(a);
    shutdown(system);
}

/// Akka: stashing into a full stash fails with a `StashOverflowException`;
/// here a typed `StashOverflowError` that hands the message back.
#[test]
fn a_full_stash_hands_the_message_back() {
    let system = system();
    let probe = Probe::new();
    let a = system
        .spawn(props(probe.tx(), Some(2)), "a")
        .expect("spawn");
    assert_eq!(probe.next(), Ev::Started(0));
    for n in 1..=3 {
        a.tell(G::Work(n));
    }
    assert_eq!(probe.next(), Ev::Overflow(3));
    a.tell(G::Open);
    assert_eq!(probe.take(2), [Ev::Handled(1), Ev::Handled(2)]);
    drop(a);
    shutdown(system);
}

/// Akka: "the stash ... is unstashed ... when the actor is restarted":
/// the new incarnation handles the stashed messages first.
#[test]
fn a_restart_unstashes_for_the_new_incarnation() {
    let system = system();
    let probe = Probe::new();
    let a = system
        .spawn(props(probe.tx(), Some(8)), "a")
        .expect("spawn");
    assert_eq!(probe.next(), Ev::Started(0));
    let (open, gate) = support::actors::gate();
    a.tell(G::Hold(gate));
    a.tell(G::Work(1));
    a.tell(G::Work(2));
    a.tell(G::Fail);
    a.tell(G::Work(3));
    assert_eq!(probe.next(), Ev::Held);
    open.send(()).expect("open");
    assert_eq!(probe.next(), Ev::Started(1));
    assert_eq!(
        probe.take(3),
        [Ev::Handled(1), Ev::Handled(2), Ev::Handled(3)]
    );
    drop(a);
    shutdown(system);
}

/// Akka: when the actor stops, "the stash ... [is] sent to deadLetters".
/// Counted, and in order (the stash before the mailbox's queue).
#[test]
fn a_stopped_actors_stash_goes_to_dead_letters() {
    let system = system();
    let dead = dead_letter_probe(&system, |d| match d.downcast_ref::<G>() {
        Some(G::Work(n)) => *n,
        _ => 0,
    });
    let probe = Probe::new();
    let a = system.spawn(props(probe.tx(), None), "a").expect("spawn");
    assert_eq!(probe.next(), Ev::Started(0));
    let (open, gate) = support::actors::gate();
    for n in 1..=3 {
        a.tell(G::Work(n));
    }
    a.tell(G::Hold(gate));
    a.tell(G::Work(4));
    assert_eq!(probe.next(), Ev::Held);
    a.stop();
    open.send(()).expect("open");
    assert_eq!(dead.take(4), [1, 2, 3, 4]);
    eventually_terminated(&a);
    assert_eq!(system.dead_letter_count(), 4);
    assert!(probe.drain_now().is_empty());
    drop(a);
    shutdown(system);
}

/// System signals keep their priority over unstashed messages (invariant
/// 3): a stop that arrives while unstashed messages wait stops the actor
/// before them, and they go to dead letters.
#[test]
fn a_stop_overtakes_unstashed_messages() {
    let system = system();
    let dead = dead_letter_probe(&system, |d| match d.downcast_ref::<G>() {
        Some(G::Work(n)) => *n,
        _ => 0,
    });
    let probe = Probe::new();
    let a = system.spawn(props(probe.tx(), None), "a").expect("spawn");
    assert_eq!(probe.next(), Ev::Started(0));
    let (open, gate) = support::actors::gate();
    a.tell(G::Work(1));
    a.tell(G::Work(2));
    a.tell(G::OpenThenHold(gate));
    assert_eq!(probe.next(), Ev::Held); // 1 and 2 unstashed, not handled
    a.stop();
    open.send(()).expect("open");
    assert_eq!(dead.take(2), [1, 2]);
    assert!(probe.drain_now().is_empty());
    eventually_terminated(&a);
    drop(a);
    shutdown(system);
}

fn eventually_terminated(a: &ActorRef<G>) {
    support::scripted::eventually(|| a.is_terminated());
}
