//! The system events on the event stream: lifecycle, supervision
//! decisions, unhandled messages, and the removal of dead subscribers.
//! Recorded with the testkit's `EventProbe`, on its `TestSystem` (whose
//! drop checks the clean termination).

mod support;

use proscenium::prelude::*;
use proscenium::testkit::{EventProbe, TestSystem};
use proscenium::{
    LifecycleEvent, LifecycleKind, StrategyKind, SupervisionEvent, SupervisionReason,
    UnhandledMessage,
};
use support::actors::*;
use support::{Probe, PATIENCE};

/// An actor is started, restarted after a failure, and stopped: one
/// lifecycle event each, in that order.
#[test]
fn lifecycle_events_follow_start_restart_stop() {
    let system = TestSystem::new();
    let events = EventProbe::new(&system)
        .subscribe_map(|e: &LifecycleEvent| (e.actor.path() == "/user/boss/w").then_some(e.kind));
    let log = Probe::new();
    let boss = system
        .spawn(
            Boss::props(&log.tx(), StrategyKind::OneForOne, Some(Directive::Restart)),
            "boss",
        )
        .expect("boss");
    let w = hire(&boss, Worker::props("w", &log.tx()), "w");
    assert_eq!(
        events.expect_event::<LifecycleKind>(PATIENCE),
        LifecycleKind::Started
    );
    w.tell(WorkerMsg::Fail);
    assert_eq!(
        events.expect_event::<LifecycleKind>(PATIENCE),
        LifecycleKind::Restarted
    );
    assert!(w.graceful_stop(PATIENCE).wait());
    assert_eq!(
        events.expect_event::<LifecycleKind>(PATIENCE),
        LifecycleKind::Stopped
    );
}

/// A supervisor's decision is published with the child, the failure and
/// the directive.
#[test]
fn supervision_decisions_are_published() {
    let system = TestSystem::new();
    let decisions = EventProbe::new(&system).subscribe_map(|e: &SupervisionEvent| {
        Some((
            e.supervisor.path(),
            e.child.path(),
            e.failure.to_string(),
            e.directive,
        ))
    });
    let log = Probe::new();
    let boss = system
        .spawn(
            Boss::props(&log.tx(), StrategyKind::OneForOne, Some(Directive::Resume)),
            "boss",
        )
        .expect("boss");
    let w = hire(&boss, Worker::props("w", &log.tx()), "w");
    w.tell(WorkerMsg::Panic("kaboom"));
    assert_eq!(
        decisions.expect_event::<(String, String, String, Directive)>(PATIENCE),
        (
            "/user/boss".to_owned(),
            "/user/boss/w".to_owned(),
            "panicked: kaboom".to_owned(),
            Directive::Resume
        )
    );
    w.tell(WorkerMsg::Fail);
    let (_, _, failure, directive) =
        decisions.expect_event::<(String, String, String, Directive)>(PATIENCE);
    assert_eq!(
        (failure.as_str(), directive),
        ("worker failure", Directive::Resume)
    );
}

/// "Both are configured with a mapping from exception type to supervision
/// directive and limits on how often a child is allowed to fail before
/// terminating it." With `max_retries(2)` the third failure terminates
/// the child: the event says so (`Stop`, because the restart limit was
/// reached), and so does the log line. Before, both said `Restart`, the
/// decider's choice, and nothing told a monitor that the child was gone.
#[test]
fn a_restart_over_the_limit_is_published_and_logged_as_a_stop() {
    let logs = support::Logs::capture();
    let system = TestSystem::new();
    let decisions = EventProbe::new(&system).subscribe_map(|e: &SupervisionEvent| {
        (e.child.path() == "/user/limited/w").then_some((e.directive, e.reason))
    });
    let log = Probe::new();
    let boss = system
        .spawn(
            Boss::props_with_retries(
                &log.tx(),
                StrategyKind::OneForOne,
                Some(Directive::Restart),
                Some(2),
            ),
            "limited",
        )
        .expect("boss");
    let w = hire(&boss, Worker::props("w", &log.tx()), "w");
    for _ in 0..3 {
        w.tell(WorkerMsg::Fail);
    }
    for _ in 0..2 {
        assert_eq!(
            decisions.expect_event::<(Directive, SupervisionReason)>(PATIENCE),
            (Directive::Restart, SupervisionReason::Decided)
        );
    }
    assert_eq!(
        decisions.expect_event::<(Directive, SupervisionReason)>(PATIENCE),
        (Directive::Stop, SupervisionReason::RestartLimitReached)
    );
    assert!(
        w.graceful_stop(PATIENCE).wait(),
        "the third failure stops it"
    );
    let line = logs.wait_for(&["/user/limited/w", "actor failed", "directive=Stop"]);
    assert!(line.contains("restart limit reached"), "{line}");
    assert!(
        logs.lines_with(&["/user/limited/w", "directive=Restart"])
            .len()
            == 2,
        "{:?}",
        logs.lines_with(&["/user/limited/w"])
    );
}

enum Cmd {
    Known(Reply<()>),
    Other(String),
}

struct Strict;

impl Actor for Strict {
    type Msg = Cmd;
    fn receive(&mut self, ctx: &mut Context<Self>, msg: Cmd) -> Outcome {
        match msg {
            Cmd::Known(reply) => reply.send(()),
            Cmd::Other(text) => ctx.unhandled(text),
        }
        Ok(())
    }
}

/// `ctx.unhandled(msg)` publishes the message, with its recipient.
#[test]
fn unhandled_messages_are_published() {
    let system = TestSystem::new();
    let unhandled = EventProbe::new(&system).subscribe_map(|e: &UnhandledMessage| {
        Some((
            e.recipient().path(),
            e.downcast_ref::<String>().cloned(),
            e.message_type(),
        ))
    });
    let strict = system
        .spawn(Props::new(|| Strict), "strict")
        .expect("spawn");
    strict.tell(Cmd::Other("what?".to_owned()));
    assert_eq!(
        unhandled.expect_event::<(String, Option<String>, &'static str)>(PATIENCE),
        (
            "/user/strict".to_owned(),
            Some("what?".to_owned()),
            std::any::type_name::<String>()
        )
    );
    // Unhandled is not a failure: the actor goes on.
    assert_eq!(strict.ask(Cmd::Known, PATIENCE).wait(), Ok(()));
}

/// Nobody subscribes: nothing is built or delivered, and the actor still
/// works.
#[test]
fn without_subscribers_nothing_is_published() {
    let system = TestSystem::new();
    let stream = system.event_stream();
    assert!(!stream.has_subscribers::<LifecycleEvent>());
    assert!(!stream.has_subscribers::<SupervisionEvent>());
    assert!(!stream.has_subscribers::<UnhandledMessage>());
    assert!(!stream.has_subscribers::<DeadLetter>());
    let strict = system
        .spawn(Props::new(|| Strict), "strict")
        .expect("spawn");
    strict.tell(Cmd::Other("ignored".to_owned()));
    assert_eq!(strict.ask(Cmd::Known, PATIENCE).wait(), Ok(()));
    let sub = stream.subscribe(|_: &LifecycleEvent| {});
    assert!(stream.has_subscribers::<LifecycleEvent>());
    assert!(stream.unsubscribe(&sub));
    assert!(!stream.has_subscribers::<LifecycleEvent>());
}

/// "a subscriber actor that has terminated is removed": the subscriber's
/// own Stopped event finds its mailbox closed and ends the subscription,
/// before anyone learns that it terminated.
#[test]
fn a_dead_subscriber_actor_is_removed() {
    let system = TestSystem::new();
    let log = Probe::new();
    let w = system
        .spawn(Worker::props("w", &log.tx()), "w")
        .expect("spawn");
    // w has started (its own Started event is published before it handles
    // anything) before it subscribes, so that event is not counted below;
    // nor are the guardians' (published before `build` returned: see
    // `no_guardian_is_still_starting_when_build_returns`).
    assert_eq!(count(&w), 0);
    let stream = system.event_stream();
    stream.subscribe_actor(&w, |_: &LifecycleEvent| WorkerMsg::Inc);
    stream.subscribe_actor(&w, |_: &u32| WorkerMsg::Inc);
    assert_eq!(stream.publish(7_u32), 1);
    assert_eq!(count(&w), 1);
    assert!(w.graceful_stop(PATIENCE).wait());
    assert!(!stream.has_subscribers::<LifecycleEvent>());
    // The u32 subscription ends at the first publish after the death.
    assert!(stream.has_subscribers::<u32>());
    assert_eq!(stream.publish(8_u32), 0);
    assert!(!stream.has_subscribers::<u32>());
}

/// A watch that reaches an actor while it drains its mailbox at its stop is
/// held back and answered after the drain (so the watcher sees the dead
/// letters first). It was answered before the actor's Stopped event was
/// published, so a watcher that learned of the end could still find the
/// actor subscribed to the event stream ("a subscriber actor that has
/// terminated is removed" by its own Stopped event, which had not been
/// published yet). Now the Stopped event comes first. Deterministic: the
/// drain is held at a message whose drop blocks, the watch is sent then.
#[test]
fn a_watch_held_during_the_drain_is_answered_after_the_stopped_event() {
    use std::sync::mpsc;
    use std::sync::{Arc, Mutex};

    /// Reports its drop, then blocks it until the gate opens (bounded, so
    /// a broken run fails instead of hanging).
    struct GatedDrop {
        dropping: mpsc::Sender<()>,
        gate: Mutex<mpsc::Receiver<()>>,
    }
    impl Drop for GatedDrop {
        fn drop(&mut self) {
            let _ = self.dropping.send(());
            let _ = self.gate.lock().map(|gate| gate.recv_timeout(PATIENCE));
        }
    }
    enum HolderMsg {
        /// Report, then block the handler until the gate opens.
        Block(mpsc::Sender<()>, Mutex<mpsc::Receiver<()>>),
        Gated(GatedDrop),
    }
    struct Holder;
    impl Actor for Holder {
        type Msg = HolderMsg;
        fn receive(&mut self, _ctx: &mut Context<Self>, msg: HolderMsg) -> Outcome {
            match msg {
                HolderMsg::Block(blocked, gate) => {
                    let _ = blocked.send(());
                    let _ = gate.lock().map(|gate| gate.recv_timeout(PATIENCE));
                }
                // Never handled: it is queued behind the PoisonPill.
                HolderMsg::Gated(gated) => drop(gated),
            }
            Ok(())
        }
    }

    let system = TestSystem::new();
    let late: Arc<Mutex<Option<proscenium::ActorTermination>>> = Arc::new(Mutex::new(None));
    let seen = Probe::new();
    let (at_stop, tx) = (Arc::clone(&late), Mutex::new(seen.tx()));
    system.event_stream().subscribe(move |e: &LifecycleEvent| {
        if e.kind == LifecycleKind::Stopped && e.actor.path() == "/user/holder" {
            let told = at_stop
                .lock()
                .expect("late")
                .as_ref()
                .map(|t| t.is_terminated());
            let _ = tx.lock().expect("tx").send(told);
        }
    });
    let holder = system
        .spawn(Props::new(|| Holder), "holder")
        .expect("spawn");
    // The holder is busy while the PoisonPill and the gated message are
    // queued behind it (sent to a stopped actor, the gated message would
    // be dropped here, on this thread).
    let (blocked_tx, blocked) = mpsc::channel();
    let (release, hold) = mpsc::channel();
    holder.tell(HolderMsg::Block(blocked_tx, Mutex::new(hold)));
    blocked.recv_timeout(PATIENCE).expect("the holder is busy");
    holder.poison_pill();
    let (dropping_tx, dropping) = mpsc::channel();
    let (open, gate) = mpsc::channel();
    holder.tell(HolderMsg::Gated(GatedDrop {
        dropping: dropping_tx,
        gate: Mutex::new(gate),
    }));
    release.send(()).expect("release");
    // Behind the PoisonPill: drained into dead letters at the stop, on the
    // holder's worker, which blocks in its drop.
    dropping
        .recv_timeout(PATIENCE)
        .expect("the drain reached it");
    // Sent while the drain is under way: held back until it ends.
    let watch = holder.when_terminated();
    *late.lock().expect("late") = Some(watch.clone());
    open.send(()).expect("open");
    assert!(watch.wait_timeout(PATIENCE));
    assert_eq!(
        seen.next(),
        Some(false),
        "the Stopped event is published before the held watch is answered"
    );
}

/// After `build()` returns, the three guardians have started and their
/// Started events are published: a subscriber from then on sees only what
/// happens to the user's own actors. Each guardian's creation used to run
/// on a worker after the root had reported to the builder, so on a loaded
/// machine a guardian's Started event could come after a test had
/// subscribed (the flake of `a_dead_subscriber_actor_is_removed`, whose
/// subscriber actor counted it: 2 instead of 1). Spinning threads make the
/// workers lose their core at random points; the check itself is on counts
/// after termination, by when every guardian has started.
#[test]
fn no_guardian_is_still_starting_when_build_returns() {
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::sync::Arc;

    let stop = Arc::new(AtomicBool::new(false));
    let spinners: Vec<_> = (0..4)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let mut late = 0;
    for _ in 0..300 {
        let system = TestSystem::new();
        let seen = Arc::new(AtomicU32::new(0));
        let counter = Arc::clone(&seen);
        system.event_stream().subscribe(move |e: &LifecycleEvent| {
            let path = e.actor.path();
            if e.kind == LifecycleKind::Started
                && matches!(path.as_str(), "/" | "/user" | "/system")
            {
                counter.fetch_add(1, Ordering::SeqCst);
            }
        });
        system.shutdown();
        late += seen.load(Ordering::SeqCst);
    }
    stop.store(true, Ordering::Relaxed);
    for s in spinners {
        s.join().expect("spinner");
    }
    assert_eq!(
        late, 0,
        "guardian Started events published after build() returned"
    );
}
