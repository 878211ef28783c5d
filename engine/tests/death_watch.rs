//! Death watch, sentence by sentence from the "What Lifecycle Monitoring
//! Means" part of `akka-net-supervision.txt` (and its all-for-one remark).
//!
//! The tests run on the testkit's `TestSystem`, whose drop checks that the
//! system terminated cleanly (locals declared after it are dropped first).
//!
//! Ordering trick used below: once `graceful_stop` of a target confirms,
//! the target has already sent its death notices, so the notice of a target
//! stopped later reaches a watcher's system lane after it. A watcher's
//! "saw B terminate" therefore comes after any "saw A terminate" it would
//! log: waiting for B is a barrier for A.

mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use proscenium::prelude::*;
use proscenium::testkit::{TestProbe, TestSystem};
use proscenium::StrategyKind;
use support::actors::*;
use support::{Logs, Probe, PATIENCE};

/// Spawns a top-level worker and waits until it has started.
fn worker(system: &ActorSystem, log: &Probe<String>, tag: &str) -> ActorRef<WorkerMsg> {
    let w = system.spawn(Worker::props(tag, &log.tx()), tag).expect(tag);
    log.until(format!("{tag} started"));
    w
}

/// Makes `watcher` watch `target`, and waits until the watch is registered
/// on the watcher's side (the `count` ask is handled after it).
fn watch(watcher: &ActorRef<WorkerMsg>, target: &ActorRef<WorkerMsg>) {
    watcher.tell(WorkerMsg::Watch(target.id()));
    count(watcher);
}

/// "each actor may monitor any other actor. Since actors emerge from
/// creation fully alive and restarts are not visible outside of the
/// affected supervisors, the only state change available for monitoring is
/// the transition from alive to dead."
///
/// "In order to start listening for Terminated messages, invoke
/// ActorContext.Watch(targetActorRef)"
///
/// A watcher that is not the target's parent learns of its end, but not of
/// its restarts.
#[test]
fn any_actor_may_watch_any_other_and_sees_only_its_death() {
    let system = TestSystem::new();
    let log = Probe::new();
    let watcher = worker(&system, &log, "watcher");
    let target = worker(&system, &log, "target");
    watch(&watcher, &target);
    target.tell(WorkerMsg::Fail); // restarted by /user: not visible
    assert_eq!(count(&target), 0);
    assert!(target.graceful_stop(PATIENCE).wait());
    let lines = log.until("watcher saw target terminate");
    assert!(
        lines.contains(&"target post_restart".to_owned()),
        "the restart happened: {lines:?}"
    );
    assert!(!lines
        .iter()
        .any(|l| l.starts_with("watcher") && l != "watcher started"));
}

/// "One important property is that the message will be delivered
/// irrespective of the order in which the monitoring request and target's
/// termination occur, i.e. you still get the message even if at the time of
/// registration the target is already dead."
#[test]
fn terminated_arrives_even_if_the_target_was_already_dead() {
    let system = TestSystem::new();
    let log = Probe::new();
    let watcher = worker(&system, &log, "watcher");
    let target = worker(&system, &log, "target");
    assert!(target.graceful_stop(PATIENCE).wait());
    assert!(target.is_terminated());
    watcher.tell(WorkerMsg::Watch(target.id()));
    assert_eq!(
        log.until("watcher saw target terminate"),
        ["target stopped"]
    );
}

/// "Lifecycle monitoring is implemented using a Terminated message to be
/// received by the monitoring actor"
///
/// At most once per watch: watching twice is one watch, and one Terminated.
#[test]
fn terminated_arrives_at_most_once_per_watch() {
    let system = TestSystem::new();
    let log = Probe::new();
    let watcher = worker(&system, &log, "watcher");
    let a = worker(&system, &log, "a");
    let b = worker(&system, &log, "b");
    watch(&watcher, &a);
    watch(&watcher, &a);
    watch(&watcher, &b);
    assert!(a.graceful_stop(PATIENCE).wait());
    assert!(b.graceful_stop(PATIENCE).wait());
    let lines = log.until("watcher saw b terminate");
    let seen_a = lines
        .iter()
        .filter(|l| *l == "watcher saw a terminate")
        .count();
    assert_eq!(seen_a, 1, "{lines:?}");
}

/// "To stop listening, invoke ActorContext.Unwatch(targetActorRef)"
#[test]
fn unwatch_stops_listening() {
    let system = TestSystem::new();
    let log = Probe::new();
    let watcher = worker(&system, &log, "watcher");
    let a = worker(&system, &log, "a");
    let b = worker(&system, &log, "b");
    watch(&watcher, &a);
    watch(&watcher, &b);
    watcher.tell(WorkerMsg::Unwatch(a.id()));
    assert_eq!(count(&watcher), 0);
    assert!(a.graceful_stop(PATIENCE).wait());
    assert!(b.graceful_stop(PATIENCE).wait());
    let lines = log.until("watcher saw b terminate");
    assert!(
        !lines.contains(&"watcher saw a terminate".to_owned()),
        "{lines:?}"
    );
}

/// An actor that watches its worker children and does not handle
/// Terminated itself: the default `on_terminated` fails it with a death
/// pact.
struct Pact {
    log: Log,
    kind: StrategyKind,
}

enum PactMsg {
    Hire(String, Reply<ActorRef<WorkerMsg>>),
}

impl Actor for Pact {
    type Msg = PactMsg;

    fn receive(&mut self, ctx: &mut Context<Self>, msg: PactMsg) -> Outcome {
        let PactMsg::Hire(tag, reply) = msg;
        let child = ctx.spawn(Worker::props(&tag, &self.log), &tag)?;
        ctx.watch(&child.id());
        reply.send(child);
        Ok(())
    }

    fn pre_start(&mut self, _ctx: &mut Context<Self>) -> Outcome {
        let _ = self.log.send("pact started".to_owned());
        Ok(())
    }

    fn supervisor_strategy(&self) -> SupervisorStrategy {
        match self.kind {
            StrategyKind::OneForOne => SupervisorStrategy::one_for_one(),
            StrategyKind::AllForOne => SupervisorStrategy::all_for_one(),
        }
    }
}

fn pact_hire(pact: &ActorRef<PactMsg>, tag: &str) -> ActorRef<WorkerMsg> {
    pact.ask(|r| PactMsg::Hire(tag.to_owned(), r), PATIENCE)
        .wait()
        .expect("hired")
}

/// "the default behavior is to throw a special DeathPactException if not
/// otherwise handled."
///
/// "Another common use case is that an actor needs to fail in the absence
/// of an external resource, which may also be one of its own children. If a
/// third party terminates a child by way of the system.Stop(child) method
/// or sending a PoisonPill, the supervisor might well be affected."
///
/// A third party stops the child with a PoisonPill; the watching parent
/// fails with a death-pact failure, which its own supervisor sees.
#[test]
fn an_unhandled_terminated_fails_the_watcher_with_a_death_pact() {
    let logs = Logs::capture();
    let system = TestSystem::new();
    let log = Probe::new();
    let tx = log.tx();
    let pact = system
        .spawn(
            Props::new(move || Pact {
                log: tx.clone(),
                kind: StrategyKind::OneForOne,
            }),
            // Unique among the tests of this binary: they share the log
            // capture, and every test system is named "test".
            "lone-pact",
        )
        .expect("pact");
    log.until("pact started");
    let child = pact_hire(&pact, "resource");
    log.until("resource started");
    child.poison_pill(); // a third party
                         // /user's default decider restarts the pact (a death pact is not an
                         // initialization failure), and the logs say why.
    log.until("pact started");
    let line = logs.wait_for(&["actor failed", "/user/lone-pact "]);
    assert!(line.contains("Restart"), "{line}");
    assert!(
        line.contains("resource"),
        "the failure names the dead: {line}"
    );
}

/// "Normally stopping a child (i.e. not in response to a failure) will not
/// automatically terminate the other children in an all-for-one strategy;
/// this can easily be done by watching their lifecycle: if the Terminated
/// message is not handled by the supervisor, it will throw a
/// DeathPactException which (depending on its supervisor) will restart it,
/// and the default PreRestart action will terminate all children."
#[test]
fn all_for_one_siblings_stop_together_through_death_watch() {
    let system = TestSystem::new();
    let log = Probe::new();
    let tx = log.tx();
    // Without watching: stopping one child leaves the other alone.
    let plain = system
        .spawn(Boss::props(&tx, StrategyKind::AllForOne, None), "plain")
        .expect("plain");
    let p1 = hire(&plain, Worker::props("p1", &tx), "p1");
    let p2 = hire(&plain, Worker::props("p2", &tx), "p2");
    assert!(p1.graceful_stop(PATIENCE).wait());
    assert_eq!(count(&p2), 0);
    assert!(!p2.is_terminated());

    // Watching: the supervisor fails with a death pact, is restarted by
    // its parent (/user), and its default pre_restart stops the others.
    let pact = system
        .spawn(
            Props::new({
                let tx = tx.clone();
                move || Pact {
                    log: tx.clone(),
                    kind: StrategyKind::AllForOne,
                }
            }),
            "pact",
        )
        .expect("pact");
    log.until("pact started");
    let c1 = pact_hire(&pact, "c1");
    let c2 = pact_hire(&pact, "c2");
    let c3 = pact_hire(&pact, "c3");
    c1.stop();
    // The restart: its pre_start runs after the old children are gone.
    let lines = log.until("pact started");
    assert!(lines.contains(&"c2 stopped".to_owned()), "{lines:?}");
    assert!(lines.contains(&"c3 stopped".to_owned()), "{lines:?}");
    assert!(c2.is_terminated() && c3.is_terminated());
}

/// "Monitoring is particularly useful if a supervisor cannot simply restart
/// its children and has to terminate them, e.g. in case of errors during
/// actor initialization. In that case it should monitor those children and
/// re-create them or schedule itself to retry this at a later time."
///
/// A child whose first `pre_start` fails is stopped by the default decider;
/// its watching parent re-creates it (same name), and the second one runs.
#[test]
fn a_watching_parent_recreates_a_child_that_failed_to_start() {
    struct Flaky {
        tries: Arc<AtomicU32>,
        log: Log,
    }
    impl Actor for Flaky {
        type Msg = WorkerMsg;
        fn receive(&mut self, _: &mut Context<Self>, msg: WorkerMsg) -> Outcome {
            if let WorkerMsg::Get(r) = msg {
                r.send(u64::from(self.tries.load(Ordering::SeqCst)));
            }
            Ok(())
        }
        fn pre_start(&mut self, _: &mut Context<Self>) -> Outcome {
            if self.tries.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err("the database is not up yet".into());
            }
            let _ = self.log.send("flaky started".to_owned());
            Ok(())
        }
    }
    struct Parent {
        tries: Arc<AtomicU32>,
        log: Log,
    }
    impl Parent {
        fn create(&self, ctx: &mut Context<Self>) -> Outcome {
            let (tries, log) = (self.tries.clone(), self.log.clone());
            let child = ctx.spawn(
                Props::new(move || Flaky {
                    tries: tries.clone(),
                    log: log.clone(),
                }),
                "flaky",
            )?;
            ctx.watch(&child.id());
            Ok(())
        }
    }
    impl Actor for Parent {
        type Msg = ();
        fn receive(&mut self, _: &mut Context<Self>, (): ()) -> Outcome {
            Ok(())
        }
        fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
            self.create(ctx)
        }
        fn on_terminated(&mut self, ctx: &mut Context<Self>, who: ActorId) -> Outcome {
            let _ = self
                .log
                .send(format!("parent saw {} terminate", who.name()));
            self.create(ctx)
        }
    }
    let system = TestSystem::new();
    let log = Probe::new();
    let tries = Arc::new(AtomicU32::new(0));
    let _parent = system
        .spawn(
            Props::new({
                let (tries, tx) = (tries.clone(), log.tx());
                move || Parent {
                    tries: tries.clone(),
                    log: tx.clone(),
                }
            }),
            "parent",
        )
        .expect("parent");
    assert_eq!(log.take(2), ["parent saw flaky terminate", "flaky started"]);
    assert_eq!(tries.load(Ordering::SeqCst), 2);
}

/// The testkit's probe watches like an actor: it records the termination,
/// also of a target that was already dead when watched, and a message
/// handled before the target stopped comes first.
#[test]
fn a_probe_watches_and_sees_the_end() {
    let system = TestSystem::new();
    let log = Probe::new();
    let w = worker(&system, &log, "w");
    let probe = TestProbe::<u64>::new(&system);
    probe.watch(&w.id());
    probe.actor_ref().tell(1);
    assert_eq!(probe.expect_msg(PATIENCE), 1);
    assert!(w.graceful_stop(PATIENCE).wait());
    probe.expect_terminated(&w.id(), PATIENCE);
    probe.watch(&w.id()); // already dead
    probe.expect_terminated(&w.id(), PATIENCE);
}

/// "Waiting for an actor from outside": a plain thread waits for an
/// actor's end without sending it anything; the actor stops by itself.
#[test]
fn when_terminated_waits_without_stopping_the_actor() {
    let system = TestSystem::new();
    let log = Probe::new();
    let w = worker(&system, &log, "w");
    let ended = w.when_terminated();
    assert_eq!(ended.actor(), &w.id());
    let waiter = {
        let ended = ended.clone();
        std::thread::spawn(move || ended.wait_timeout(PATIENCE))
    };
    assert_eq!(count(&w), 0, "still alive: the wait sent it nothing");
    assert!(!ended.is_terminated());
    w.tell(WorkerMsg::StopSelf);
    assert!(waiter.join().expect("the waiter"));
    assert!(ended.is_terminated());
    assert!(w.is_terminated());
    // Its post_stop ran before the end was announced.
    log.until("w stopped");
    ended.wait();
}

/// Already dead: resolves at once; a live actor times out with `false`;
/// the future works on the engine's scheduler and on a foreign executor.
#[test]
fn when_terminated_is_a_future_and_resolves_for_the_dead_at_once() {
    let system = TestSystem::new();
    let log = Probe::new();
    let alive = worker(&system, &log, "alive");
    let dead = worker(&system, &log, "dead");
    assert!(dead.graceful_stop(PATIENCE).wait());
    assert!(dead.id().when_terminated().wait_timeout(PATIENCE));
    assert!(!alive
        .when_terminated()
        .wait_timeout(std::time::Duration::ZERO));

    let on_ours = {
        let ended = alive.when_terminated();
        system.scheduler_handle().spawn(ended)
    };
    let tokio = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("tokio");
    let ended = alive.when_terminated();
    alive.stop();
    tokio.block_on(ended);
    on_ours.wait().expect("the task completes");
    assert!(alive.is_terminated());
}

/// Waiting blocks, so a handler (a worker thread) may not: it panics
/// there with the name of the wait, as every blocking wait of the engine.
#[test]
fn when_terminated_refuses_to_block_a_worker() {
    struct Impatient;
    impl Actor for Impatient {
        type Msg = (ActorId, Reply<String>);
        fn receive(&mut self, _: &mut Context<Self>, (who, r): Self::Msg) -> Outcome {
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                who.when_terminated().wait_timeout(PATIENCE)
            }));
            let text = match caught {
                Ok(_) => "no panic".to_owned(),
                Err(p) => p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default(),
            };
            r.send(text);
            Ok(())
        }
    }
    let system = TestSystem::new();
    let log = Probe::new();
    let w = worker(&system, &log, "w");
    let i = system
        .spawn(Props::new(|| Impatient), "impatient")
        .expect("spawn");
    let text = i.ask(|r| (w.id(), r), PATIENCE).wait().expect("answers");
    assert!(text.contains("ActorTermination::wait_timeout"), "{text}");
}
