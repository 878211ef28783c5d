//! Receipts (`ActorRef::tell_receipt`): a callback queued in the user lane
//! runs once the actor has handled everything ahead of it, and never if
//! it does not get there. Cluster sharding's reliable delivery confirms a
//! message with one (decision 0030): a receipt that ran too early would
//! confirm a message that a crash can still lose. Every wait is on an
//! event.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use proscenium::prelude::*;
use proscenium::testkit::{TestProbe, TestSystem};

const T: Duration = Duration::from_secs(10);

/// Counts what it handles; `None` fails it.
struct Counting(Arc<AtomicUsize>);

impl Actor for Counting {
    type Msg = Option<u32>;
    fn receive(&mut self, _: &mut Context<Self>, msg: Option<u32>) -> Outcome {
        // Relaxed: read by the receipt on this actor's turn, after it.
        self.0.fetch_add(1, Ordering::Relaxed);
        match msg {
            Some(_) => Ok(()),
            None => Err("asked to fail".into()),
        }
    }
}

fn counting(system: &TestSystem, name: &str) -> (ActorRef<Option<u32>>, Arc<AtomicUsize>) {
    let handled = Arc::new(AtomicUsize::new(0));
    let h = Arc::clone(&handled);
    let actor = system
        .spawn(Props::new(move || Counting(Arc::clone(&h))), name)
        .expect("spawn");
    (actor, handled)
}

/// A receipt runs after every message sent before it, and before any sent
/// after it; a message that failed its handler counts as handled.
#[test]
fn a_receipt_runs_once_what_was_sent_before_it_is_handled() {
    let system = TestSystem::new();
    let (actor, handled) = counting(&system, "counting");
    let (tx, rx) = mpsc::channel();
    for round in 1..=50 {
        for i in 0..20 {
            actor.tell(if i == 7 { None } else { Some(i) });
        }
        let (h, tx) = (Arc::clone(&handled), tx.clone());
        actor.tell_receipt(move || {
            // Relaxed: the actor's own turn wrote it (same thread).
            tx.send((round, h.load(Ordering::Relaxed)))
                .expect("the test waits");
        });
    }
    for round in 1..=50 {
        assert_eq!(rx.recv_timeout(T), Ok((round, round * 20)));
    }
}

/// A receipt behind a PoisonPill is never run: the actor stopped before
/// it; the callback is dropped (its sender with it).
#[test]
fn a_receipt_the_actor_never_reaches_is_dropped_uncalled() {
    let system = TestSystem::new();
    let (actor, _) = counting(&system, "stopping");
    let (tx, rx) = mpsc::channel::<&str>();
    actor.tell(Some(1));
    actor.poison_pill();
    actor.tell_receipt(move || tx.send("ran").expect("the test waits"));
    assert!(actor.id().when_terminated().wait_timeout(T));
    assert_eq!(
        rx.recv_timeout(T),
        Err(mpsc::RecvTimeoutError::Disconnected)
    );
    // Sent to a terminated actor: dropped at once.
    let (tx, rx) = mpsc::channel::<&str>();
    actor.tell_receipt(move || tx.send("ran").expect("the test waits"));
    assert_eq!(
        rx.recv_timeout(T),
        Err(mpsc::RecvTimeoutError::Disconnected)
    );
}

/// A panic in a receipt's callback is the sender's: logged, and the actor
/// goes on (it neither fails nor restarts).
#[test]
fn a_panicking_receipt_does_not_fail_the_actor() {
    let system = TestSystem::new();
    let (actor, handled) = counting(&system, "calm");
    actor.tell(Some(1));
    actor.tell_receipt(|| panic!("a receipt's callback panicked (expected by the test)"));
    let (tx, rx) = mpsc::channel();
    actor.tell(Some(2));
    let h = Arc::clone(&handled);
    // Relaxed: as above.
    actor.tell_receipt(move || tx.send(h.load(Ordering::Relaxed)).expect("waits"));
    assert_eq!(rx.recv_timeout(T), Ok(2));
}

/// An async handler has handled its message once its future completes: a
/// receipt that reaches the mailbox while the future waits runs after it.
/// The handler queues the receipt itself, then awaits a task whose wake-up
/// is queued behind the receipt, so the receipt is taken from the mailbox
/// while the future is pending, every run.
#[test]
fn a_receipt_waits_for_a_running_async_handler() {
    struct Awaiting {
        out: ActorRef<String>,
    }
    impl AsyncActor for Awaiting {
        type Msg = u32;
        async fn handle(&mut self, ctx: &mut AsyncContext<Self>, n: u32) -> Outcome {
            let out = self.out.clone();
            ctx.self_ref()
                .tell_receipt(move || out.tell(format!("receipt after {n}")));
            ctx.system().spawn_task(async {}).await?;
            self.out.tell(format!("end {n}"));
            Ok(())
        }
    }
    let system = TestSystem::new();
    let probe = TestProbe::<String>::new(&system);
    let out = probe.actor_ref();
    let actor = system
        .spawn(
            Props::new(move || Async::new(Awaiting { out: out.clone() })),
            "awaiting",
        )
        .expect("spawn");
    for n in 1..=3 {
        actor.tell(n);
        let got = probe.receive_n(2, T);
        assert_eq!(got, [format!("end {n}"), format!("receipt after {n}")]);
    }
}
