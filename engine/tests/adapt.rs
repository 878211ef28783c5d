//! Narrowed references (issue 14): `ActorRef::adapt` and
//! `Context::message_adapter` give an `ActorRef<N>` in front of an actor of
//! `M`s, usable for tell, ask and watch; an adapter stops with its target.

mod support;

use std::sync::mpsc::Sender;

use proscenium::prelude::*;
use support::*;

enum Cmd {
    Add(u64),
    Get(Reply<u64>),
    /// Makes a message adapter for [`Narrow`] and sends it out.
    MakeAdapter(Sender<ActorRef<Narrow>>),
}

struct Counter(u64);

impl Actor for Counter {
    type Msg = Cmd;

    fn receive(&mut self, ctx: &mut Context<Self>, msg: Cmd) -> Outcome {
        match msg {
            Cmd::Add(n) => self.0 += n,
            Cmd::Get(r) => r.send(self.0),
            Cmd::MakeAdapter(out) => {
                let _ = out.send(ctx.message_adapter(|n| match n {
                    Narrow::Add(k) => Cmd::Add(k),
                    Narrow::Total(r) => Cmd::Get(r),
                })?);
            }
        }
        Ok(())
    }
}

/// Another protocol, adapted.
enum Narrow {
    Add(u64),
    Total(Reply<u64>),
}

/// A narrow protocol: only asks.
enum Query {
    Total(Reply<u64>),
}

/// Reports the termination of what it watches.
struct Watcher {
    who: ActorId,
    terminated: Sender<ActorId>,
}

impl Actor for Watcher {
    type Msg = ();

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        ctx.watch(&self.who);
        Ok(())
    }

    fn receive(&mut self, _: &mut Context<Self>, _: ()) -> Outcome {
        Ok(())
    }

    fn on_terminated(&mut self, _: &mut Context<Self>, who: ActorId) -> Outcome {
        let _ = self.terminated.send(who);
        Ok(())
    }
}

fn watch(system: &ActorSystem, who: ActorId, name: &str) -> Probe<ActorId> {
    let probe = Probe::new();
    let tx = probe.tx();
    system
        .spawn(
            Props::new(move || Watcher {
                who: who.clone(),
                terminated: tx.clone(),
            }),
            name,
        )
        .expect("spawn");
    probe
}

#[test]
fn an_adapted_ref_tells_and_asks() {
    let system = system();
    let counter = system
        .spawn(Props::new(|| Counter(0)), "counter")
        .expect("spawn");
    let adder: ActorRef<u64> = counter.adapt(Cmd::Add).expect("adapt");
    assert!(adder.path().starts_with("/system/"), "{}", adder.path());
    let narrow: ActorRef<Narrow> = counter
        .adapt(|n| match n {
            Narrow::Add(k) => Cmd::Add(k),
            Narrow::Total(r) => Cmd::Get(r),
        })
        .expect("adapt");
    for n in 1..=10 {
        narrow.tell(Narrow::Add(n));
    }
    // In order behind the adds (one sender, one adapter): the sum is final.
    assert_eq!(narrow.ask(Narrow::Total, PATIENCE).wait(), Ok(55));
    adder.tell(45);
    // Once the adapter has stopped (after a PoisonPill behind the 45), it
    // has told the counter its add: an ask sent now comes after it.
    assert!(adder.graceful_stop(PATIENCE).wait());
    let query: ActorRef<Query> = counter
        .adapt(|q| match q {
            Query::Total(r) => Cmd::Get(r),
        })
        .expect("adapt");
    assert_eq!(query.ask(Query::Total, PATIENCE).wait(), Ok(100));
    drop((counter, adder, narrow, query));
    shutdown(system);
}

#[test]
fn an_adapter_stops_with_its_target_and_can_be_watched() {
    let system = system();
    let counter = system
        .spawn(Props::new(|| Counter(0)), "counter")
        .expect("spawn");
    let adder = counter.adapt(Cmd::Add).expect("adapt");
    let stopped = watch(&system, adder.id(), "watcher");
    assert!(counter.graceful_stop(PATIENCE).wait());
    assert_eq!(stopped.next(), adder.id());
    assert!(adder.is_terminated());
    // An adapter of an actor that is already gone stops at once.
    let late = counter.adapt(Cmd::Add).expect("adapt");
    let late_stopped = watch(&system, late.id(), "late-watcher");
    assert_eq!(late_stopped.next(), late.id());
    drop((counter, adder, late));
    shutdown(system);
}

#[test]
fn a_message_adapter_is_a_child_that_stops_with_its_actor() {
    let system = system();
    let counter = system
        .spawn(Props::new(|| Counter(0)), "counter")
        .expect("spawn");
    let out = Probe::new();
    counter.tell(Cmd::MakeAdapter(out.tx()));
    let adder = out.next();
    assert!(
        adder.path().starts_with("/user/counter/"),
        "{}",
        adder.path()
    );
    adder.tell(Narrow::Add(4));
    adder.tell(Narrow::Add(5));
    // In order behind the adds (one sender, one adapter).
    assert_eq!(adder.ask(Narrow::Total, PATIENCE).wait(), Ok(9));
    let stopped = watch(&system, adder.id(), "watcher");
    assert!(counter.graceful_stop(PATIENCE).wait());
    assert_eq!(stopped.next(), adder.id());
    drop((counter, adder));
    shutdown(system);
}
