//! Plain references in front of patterns (issue 13, item 5): the
//! `message_ref` of a router and of a backoff supervisor is an
//! `ActorRef<M>` of the routees' or the child's messages, for tell and ask,
//! that stops with the pattern.

use std::time::Duration;

use proscenium::prelude::*;
use proscenium::testkit::{TestProbe, TestSystem};

const PATIENCE: Duration = Duration::from_secs(5);

enum Work {
    /// Tell the probe this actor's path.
    Note,
    /// Answer with this actor's path.
    Who(Reply<String>),
    /// Stop this actor.
    Quit,
}

/// Reports to a probe (its start too, if asked to).
struct Worker {
    seen: ActorRef<String>,
    report_start: bool,
}

impl Actor for Worker {
    type Msg = Work;

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        if self.report_start {
            self.seen.tell(format!("start {}", ctx.id().path()));
        }
        Ok(())
    }

    fn receive(&mut self, ctx: &mut Context<Self>, msg: Work) -> Outcome {
        match msg {
            Work::Note => self.seen.tell(ctx.id().path()),
            Work::Who(reply) => reply.send(ctx.id().path()),
            Work::Quit => ctx.stop_self(),
        }
        Ok(())
    }
}

fn worker(seen: &TestProbe<String>, report_start: bool) -> Props<Worker> {
    let seen = seen.actor_ref();
    Props::new(move || Worker {
        seen: seen.clone(),
        report_start,
    })
}

#[test]
fn a_routers_message_ref_routes_tells_and_asks_and_stops_with_the_router() {
    let system = TestSystem::new();
    let seen = TestProbe::<String>::new(&system);
    let pool = system
        .spawn(Pool::round_robin(3).props(worker(&seen, false)), "pool")
        .expect("spawn");
    let pool = RouterRef::new(pool);
    let workers: ActorRef<Work> = pool.message_ref().expect("message_ref");
    for _ in 0..3 {
        workers.tell(Work::Note);
    }
    let mut paths = seen.receive_n(3, PATIENCE);
    paths.sort();
    paths.dedup();
    assert_eq!(
        paths.len(),
        3,
        "round robin reached every routee: {paths:?}"
    );
    assert!(
        paths.iter().all(|p| p.starts_with("/user/pool/")),
        "{paths:?}"
    );
    let who = workers.ask(Work::Who, PATIENCE).wait().expect("an answer");
    assert!(who.starts_with("/user/pool/"), "{who}");
    seen.watch(&workers.id());
    assert!(pool.graceful_stop(PATIENCE).wait());
    seen.expect_terminated(&workers.id(), PATIENCE);
    assert!(workers.is_terminated());
}

#[test]
fn a_backoff_supervisors_message_ref_reaches_each_child_and_stops_with_the_supervisor() {
    let system = TestSystem::new();
    let seen = TestProbe::<String>::new(&system);
    let props = BackoffOptions::on_stop(
        worker(&seen, true),
        "worker",
        Duration::from_millis(10),
        Duration::from_millis(100),
        0.0,
    )
    .props();
    let supervisor = system.spawn(props, "supervisor").expect("spawn");
    let child: ActorRef<Work> = supervisor.message_ref().expect("message_ref");
    assert_eq!(seen.expect_msg(PATIENCE), "start /user/supervisor/worker");
    child.tell(Work::Note);
    assert_eq!(seen.expect_msg(PATIENCE), "/user/supervisor/worker");
    assert_eq!(
        child.ask(Work::Who, PATIENCE).wait(),
        Ok("/user/supervisor/worker".to_owned())
    );
    // The child stops; the supervisor starts a new one, which the same
    // reference reaches.
    child.tell(Work::Quit);
    assert_eq!(seen.expect_msg(PATIENCE), "start /user/supervisor/worker");
    child.tell(Work::Note);
    assert_eq!(seen.expect_msg(PATIENCE), "/user/supervisor/worker");
    seen.watch(&child.id());
    assert!(supervisor.graceful_stop(PATIENCE).wait());
    seen.expect_terminated(&child.id(), PATIENCE);
    assert!(child.is_terminated());
}
