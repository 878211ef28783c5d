//! A supervisor that is itself failed (it escalated, and waits for its own
//! supervisor's directive) gets a second child's failure: the stall the
//! chaos soak found once (decision 0016, "Open: a stall, seen once").
//!
//! Before the fix, the supervisor handled the second failure at once; the
//! decider said Escalate, and escalating again while already failed did
//! nothing but overwrite the escalated child (`perpetrator`). The second
//! child, suspended twice (by its own failure and by the supervisor's
//! Suspend), got only one resume when the top resumed the supervisor, and
//! stayed suspended for good with its mailbox filling: a stranded actor.
//! Akka stashes a `Failed` that reaches a failed supervisor and handles it
//! once the supervisor is resumed or restarted (`StashWhenFailed`); so does
//! the engine now.

mod support;

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

use proscenium::prelude::*;
use proscenium::Directive;
use support::*;

enum LeafMsg {
    /// Says so on the sender, then fails.
    Fail(Sender<()>),
    /// Answers with the leaf's name.
    Ping(Sender<String>),
}

struct Leaf {
    name: String,
}

impl Actor for Leaf {
    type Msg = LeafMsg;

    fn receive(&mut self, _ctx: &mut Context<Self>, msg: LeafMsg) -> Outcome {
        match msg {
            LeafMsg::Fail(failing) => {
                let _ = failing.send(());
                Err("leaf failure".into())
            }
            LeafMsg::Ping(reply) => {
                let _ = reply.send(self.name.clone());
                Ok(())
            }
        }
    }
}

enum MidMsg {
    /// Says so on the first sender, then blocks the mid's run until `go`
    /// says so, so that both children fail before it handles either
    /// failure.
    Hold(Sender<()>, Arc<Mutex<Receiver<()>>>),
}

struct Mid {
    leaves: Sender<ActorRef<LeafMsg>>,
}

impl Actor for Mid {
    type Msg = MidMsg;

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        for name in ["l1", "l2"] {
            let n = name.to_owned();
            let leaf = ctx.spawn(Props::new(move || Leaf { name: n.clone() }), name)?;
            let _ = self.leaves.send(leaf);
        }
        Ok(())
    }

    fn receive(&mut self, _ctx: &mut Context<Self>, msg: MidMsg) -> Outcome {
        let MidMsg::Hold(holding, go) = msg;
        let _ = holding.send(());
        let _ = go.lock().expect("go lock").recv_timeout(PATIENCE);
        Ok(())
    }

    fn supervisor_strategy(&self) -> SupervisorStrategy {
        SupervisorStrategy::one_for_one().decider(|_| Directive::Escalate)
    }
}

struct Top {
    mid: Sender<ActorRef<MidMsg>>,
    props: Mutex<Option<Props<Mid>>>,
}

impl Actor for Top {
    type Msg = ();

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        let props = self.props.lock().expect("props lock").take().expect("once");
        let mid = ctx.spawn(props, "mid")?;
        let _ = self.mid.send(mid);
        Ok(())
    }

    fn receive(&mut self, _ctx: &mut Context<Self>, _msg: ()) -> Outcome {
        Ok(())
    }

    fn supervisor_strategy(&self) -> SupervisorStrategy {
        SupervisorStrategy::one_for_one().decider(|_| Directive::Resume)
    }
}

/// "Resume the subordinate, keeping its accumulated internal state"
/// (akka-net-supervision.txt): the top resumes the mid, whose two children
/// both failed and were escalated; both must handle messages again. The
/// second escalation reached the mid while it was failed.
#[test]
fn a_child_failing_while_its_supervisor_is_failed_is_not_stranded() {
    let system = ActorSystem::builder()
        .name("escalation")
        .workers(4)
        .pin_workers(false)
        .dead_letter_logging(0, std::time::Duration::from_secs(1))
        .build()
        .expect("the system starts");
    let (leaves_tx, leaves_rx) = mpsc::channel();
    let (mid_tx, mid_rx) = mpsc::channel();
    let mid_props = Props::new(move || Mid {
        leaves: leaves_tx.clone(),
    });
    let props = Mutex::new(Some(mid_props));
    let top_props = Props::new(move || Top {
        mid: mid_tx.clone(),
        props: Mutex::new(props.lock().expect("props lock").take()),
    });
    let top = system.spawn(top_props, "top").expect("spawn the top");
    let mid: ActorRef<MidMsg> = mid_rx.recv_timeout(PATIENCE).expect("the mid");
    let l1 = leaves_rx.recv_timeout(PATIENCE).expect("l1");
    let l2 = leaves_rx.recv_timeout(PATIENCE).expect("l2");

    // Hold the mid, fail both leaves, then let the mid handle the failures:
    // it escalates the first one and fails, and the second one reaches it
    // while it is failed, before the top's Resume (which the top sends only
    // once the mid's Failed reached it, after both leaves' Failed were
    // queued at the mid). The one residual order that misses the case (a
    // leaf's worker preempted between its `failing` signal and its Failed's
    // enqueue, for as long as the mid and the top take to run) makes this
    // test pass before the fix too, never fail after it.
    let (go_tx, go_rx) = mpsc::channel();
    let holding = Probe::new();
    mid.tell(MidMsg::Hold(holding.tx(), Arc::new(Mutex::new(go_rx))));
    holding.next();
    let failing = Probe::new();
    l1.tell(LeafMsg::Fail(failing.tx()));
    l2.tell(LeafMsg::Fail(failing.tx()));
    failing.take(2);
    go_tx.send(()).expect("the mid holds");

    let pong = Probe::new();
    l1.tell(LeafMsg::Ping(pong.tx()));
    l2.tell(LeafMsg::Ping(pong.tx()));
    let mut names = pong.take(2);
    names.sort();
    assert_eq!(names, ["l1", "l2"]);

    drop((top, mid, l1, l2));
    shutdown(system);
}
