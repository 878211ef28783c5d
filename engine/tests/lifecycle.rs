//! Creation and naming: paths, unique names per parent (typed errors),
//! names freed by termination, hooks in order, Props factories called again
//! on restart. On the testkit's `TestSystem`, whose drop checks the clean
//! termination.

mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use proscenium::prelude::*;
use proscenium::testkit::{TestProbe, TestSystem};
use proscenium::SpawnError;
use support::actors::*;
use support::Probe;

/// Names are unique per parent: a duplicate is a typed error that names the
/// parent and the name, and nothing is created; the same name under
/// another parent is fine; a name is free again once its holder has
/// terminated.
#[test]
fn names_are_unique_per_parent() {
    let system = TestSystem::new();
    let log = Probe::new();
    let a = system.spawn(Worker::props("a", &log.tx()), "a").expect("a");
    let err = system
        .spawn(Worker::props("a2", &log.tx()), "a")
        .expect_err("duplicate");
    assert_eq!(
        err,
        SpawnError::DuplicateName {
            parent: "/user".into(),
            name: "a".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "actor name \"a\" is not unique under /user"
    );
    let child = spawn_child(&a, "a");
    assert_eq!(child.path(), "/user/a/a");
    assert!(a.graceful_stop(Duration::from_secs(20)).wait());
    let again = system
        .spawn(Worker::props("again", &log.tx()), "a")
        .expect("the name is free");
    assert_ne!(again.id(), a.id(), "a new incarnation has a new id");
    let lines = log.drain_now();
    assert!(
        !lines.contains(&"a2 created".to_owned()),
        "nothing was created for the duplicate"
    );
}

/// Invalid names and zero capacity are typed errors.
#[test]
fn invalid_names_and_capacities_are_refused() {
    let system = TestSystem::new();
    let log = Probe::new();
    for bad in ["", "$x", "a/b", "spa ce", "ünï", ".", ".."] {
        assert!(
            matches!(
                system.spawn(Worker::props("x", &log.tx()), bad),
                Err(SpawnError::InvalidName { .. })
            ),
            "{bad:?} accepted"
        );
    }
    assert_eq!(
        system
            .spawn(
                Worker::props("x", &log.tx()).with_mailbox_capacity(0),
                "zero"
            )
            .map(|_| ()),
        Err(SpawnError::ZeroCapacity)
    );
    let anon = system
        .spawn_anonymous(Worker::props("x", &log.tx()))
        .expect("anonymous");
    assert!(anon.name().starts_with('$'), "{}", anon.name());
}

/// A terminating parent takes no new children: a typed error.
#[test]
fn a_stopping_parent_refuses_children() {
    struct Parent;
    impl Actor for Parent {
        type Msg = Reply<Result<(), SpawnError>>;
        fn receive(&mut self, ctx: &mut Context<Self>, reply: Self::Msg) -> Outcome {
            ctx.stop_self();
            // The stop is queued on the system lane; we are not stopped yet,
            // so this still works...
            let first = ctx.spawn(Props::new(|| Parent), "c1").map(|_| ());
            reply.send(first);
            Ok(())
        }
        fn post_stop(&mut self, ctx: &mut Context<Self>) {
            // ...but once terminating, spawning is refused.
            let refused = ctx.spawn(Props::new(|| Parent), "c2").map(|_| ());
            assert!(matches!(refused, Err(SpawnError::ParentTerminating { .. })));
        }
    }
    let system = TestSystem::new();
    let p = system.spawn(Props::new(|| Parent), "p").expect("p");
    assert_eq!(p.ask(|r| r, Duration::from_secs(20)).wait(), Ok(Ok(())));
    assert!(p.graceful_stop(Duration::from_secs(20)).wait());
    drop(p);
    let report = system.shutdown();
    assert_eq!(report.quiesce.expect("quiesced").panics, 0);
}

/// Restart calls the Props factory again (a new instance); a bounded
/// mailbox hands messages back with `try_tell` when full.
#[test]
fn restart_calls_the_factory_again_and_bounded_mailboxes_push_back() {
    let system = TestSystem::new();
    let made = Arc::new(AtomicU32::new(0));
    let m = made.clone();
    let log = Probe::new();
    let tx = log.tx();
    let w = system
        .spawn(
            Props::new(move || {
                m.fetch_add(1, Ordering::SeqCst);
                Worker {
                    tag: "w".into(),
                    log: tx.clone(),
                    count: 0,
                    keep_children: false,
                }
            })
            .with_mailbox_capacity(4),
            "w",
        )
        .expect("w");
    w.tell(WorkerMsg::Fail);
    w.tell(WorkerMsg::Fail);
    assert_eq!(count(&w), 0);
    assert_eq!(made.load(Ordering::SeqCst), 3);
    // Fill the bounded lane while the worker is blocked.
    let (gate_tx, gate_rx) = std::sync::mpsc::channel();
    w.tell(WorkerMsg::Block(Arc::new(std::sync::Mutex::new(gate_rx))));
    let mut accepted = 0;
    let refused = loop {
        match w.try_tell(WorkerMsg::Inc) {
            Ok(()) => accepted += 1,
            Err(e) => break e,
        }
        assert!(
            accepted <= 5,
            "a capacity of 4 holds at most 4 (+1 being handled)"
        );
    };
    assert!(refused.is_full());
    gate_tx.send(()).expect("unblock");
    // The lane may still be full for a moment: a refused ask is dead-
    // lettered at once (NoReply), so retry until one gets in.
    let n = loop {
        match w.ask(WorkerMsg::Get, Duration::from_secs(20)).wait() {
            Ok(n) => break n,
            Err(AskError::NoReply(NoReplyReason::DeadLetter)) => continue,
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(n, accepted);
}

/// The hooks in order, seen by a testkit probe: `pre_start` before the
/// first message, `post_stop` after the last, nothing after it.
#[test]
fn hooks_run_in_order_around_the_messages() {
    struct Hooked {
        to: ActorRef<String>,
    }
    impl Actor for Hooked {
        type Msg = u32;
        fn receive(&mut self, _: &mut Context<Self>, n: u32) -> Outcome {
            self.to.tell(format!("got {n}"));
            Ok(())
        }
        fn pre_start(&mut self, _: &mut Context<Self>) -> Outcome {
            self.to.tell("pre_start".to_owned());
            Ok(())
        }
        fn post_stop(&mut self, _: &mut Context<Self>) {
            self.to.tell("post_stop".to_owned());
        }
    }
    let system = TestSystem::new();
    let probe = TestProbe::<String>::new(&system);
    let to = probe.actor_ref();
    let h = system
        .spawn(Props::new(move || Hooked { to: to.clone() }), "hooked")
        .expect("spawn");
    let ended = h.when_terminated();
    h.tell(1);
    h.tell(2);
    h.poison_pill();
    h.tell(3); // behind the PoisonPill: a dead letter
    assert_eq!(
        probe.receive_n(4, Duration::from_secs(20)),
        ["pre_start", "got 1", "got 2", "post_stop"]
    );
    assert!(ended.wait_timeout(Duration::from_secs(20)));
    probe.expect_no_msg(Duration::from_millis(20));
}

/// A name freed by a terminated child is taken by the next child at once,
/// even before the parent has handled the notice of the old one's death
/// (see `spawn` in context.rs): the parent's table holds the new child
/// under that name from then on, and the late notice about the old one
/// removes nothing. (The table keys a child by its id, compared by name:
/// a plain `insert` would keep the old child's key.)
#[test]
fn a_reused_name_belongs_to_the_new_child() {
    struct Parent {
        log: support::actors::Log,
        report: std::sync::mpsc::Sender<(&'static str, Option<ActorId>, Option<ActorId>)>,
        new: Option<ActorId>,
    }
    impl Actor for Parent {
        type Msg = ();
        fn receive(&mut self, ctx: &mut Context<Self>, (): ()) -> Outcome {
            let old = ctx.spawn(Worker::props("old", &self.log), "c")?;
            // Its Terminated (queued once this actor has handled the notice
            // of its death) is when the late notice has been seen.
            ctx.watch(&old.id());
            ctx.stop(&old.id());
            // This actor is busy here, so the notice cannot be handled
            // before the new child takes the name.
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while !old.is_terminated() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the child never stopped"
                );
                std::thread::yield_now();
            }
            let new = ctx.spawn(Worker::props("new", &self.log), "c")?;
            self.new = Some(new.id());
            let _ = self
                .report
                .send(("spawned", Some(new.id()), ctx.child("c")));
            Ok(())
        }
        fn on_terminated(&mut self, ctx: &mut Context<Self>, _: ActorId) -> Outcome {
            let _ = self
                .report
                .send(("notice", self.new.clone(), ctx.child("c")));
            Ok(())
        }
    }
    let system = TestSystem::new();
    let log = Probe::new();
    let (tx, rx) = std::sync::mpsc::channel();
    let tx2 = log.tx();
    let parent = system
        .spawn(
            Props::new(move || Parent {
                log: tx2.clone(),
                report: tx.clone(),
                new: None,
            }),
            "parent",
        )
        .expect("parent");
    parent.tell(());
    let mut new_child = None;
    for expected in ["spawned", "notice"] {
        let (when, new, child) = rx.recv_timeout(Duration::from_secs(20)).expect("report");
        assert_eq!(when, expected);
        assert!(new.is_some());
        assert_eq!(child, new, "{when}: child(\"c\") is the new child");
        new_child = new;
    }
    assert_eq!(system.lookup("/user/parent/c"), new_child);
}
