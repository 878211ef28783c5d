//! [`TestProbe`]: an actor that records what it receives, for a test to
//! assert on.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

use crate::api::actor::{Actor, Props};
use crate::api::actor_ref::{ActorId, ActorRef};
use crate::api::context::Context;
use crate::runtime::signal::{SystemMsg, Watcher};
use crate::runtime::system::ActorSystem;
use crate::supervision::failure::Outcome;

use super::{deadline_after as deadline, type_name_of};

/// What a probe has received, in arrival order.
enum Item<M> {
    Msg(M),
    /// A watched actor terminated.
    Terminated(ActorId),
}

/// The probe's actor: forwards every message to the probe.
struct ProbeActor<M: Send + 'static> {
    tx: Sender<Item<M>>,
}

impl<M: Send + 'static> Actor for ProbeActor<M> {
    type Msg = M;

    fn receive(&mut self, _ctx: &mut Context<Self>, msg: M) -> Outcome {
        // The probe is gone: the message has nowhere to go.
        let _ = self.tx.send(Item::Msg(msg));
        Ok(())
    }
}

/// Names of probe actors, unique in the process.
static NEXT_PROBE: AtomicU64 = AtomicU64::new(1);

/// A probe actor (under `/system`, so it outlives the user actors at
/// termination and still hears their end) to hand out as an
/// [`ActorRef<M>`](ActorRef) with [`actor_ref`](Self::actor_ref); the test
/// then asserts on what it received, in order. Dropping the probe stops its
/// actor.
///
/// ```
/// use proscenium::testkit::{TestProbe, TestSystem};
/// use std::time::Duration;
///
/// let system = TestSystem::new();
/// let probe = TestProbe::<u32>::new(&system);
/// let to_probe = probe.actor_ref();
/// to_probe.tell(1);
/// to_probe.tell(2);
/// to_probe.tell(3);
/// assert_eq!(probe.expect_msg(Duration::from_secs(5)), 1);
/// assert_eq!(probe.receive_n(2, Duration::from_secs(5)), [2, 3]);
/// probe.expect_no_msg(Duration::from_millis(10));
/// ```
pub struct TestProbe<M: Send + 'static> {
    actor: ActorRef<M>,
    /// For the watches' callbacks.
    tx: Sender<Item<M>>,
    rx: Receiver<Item<M>>,
}

impl<M: Send + 'static> TestProbe<M> {
    /// Spawns a probe actor in `system` (under `/system`).
    ///
    /// # Panics
    ///
    /// If the system has terminated.
    #[track_caller]
    pub fn new(system: &ActorSystem) -> TestProbe<M> {
        let (tx, rx) = mpsc::channel();
        let actor_tx = tx.clone();
        // Relaxed: only uniqueness matters.
        let n = NEXT_PROBE.fetch_add(1, Ordering::Relaxed);
        let props = Props::new(move || ProbeActor {
            tx: actor_tx.clone(),
        });
        let actor = match system.spawn_system_actor(props, &format!("testProbe-{n}")) {
            Ok(actor) => actor,
            Err(e) => panic!("the test probe could not be spawned: {e}"),
        };
        TestProbe { actor, tx, rx }
    }

    /// The probe's actor, to hand out: what it is told, the probe records.
    pub fn actor_ref(&self) -> ActorRef<M> {
        self.actor.clone()
    }

    /// The probe actor's id.
    pub fn id(&self) -> ActorId {
        self.actor.id()
    }

    /// Watches `target`: once it terminates (at once if it already has),
    /// the probe records its termination for
    /// [`expect_terminated`](Self::expect_terminated). It is recorded when
    /// it happens, after the messages the probe's actor has already
    /// handled, but not after those still queued in its mailbox (as the
    /// engine's death watch, whose notice travels on the system lane).
    pub fn watch(&self, target: &ActorId) {
        let tx = self.tx.clone();
        let who = target.clone();
        target.send_system(SystemMsg::Watch(Watcher::Callback(Box::new(move || {
            let _ = tx.send(Item::Terminated(who));
        }))));
    }

    fn next(&self, deadline: Instant) -> Option<Item<M>> {
        let left = deadline.saturating_duration_since(Instant::now());
        // A timeout, or (never: the probe holds a sender itself) no sender left.
        self.rx.recv_timeout(left).ok()
    }

    /// The next message, which must come within `timeout`.
    ///
    /// # Panics
    ///
    /// If nothing comes in time, or a watched actor's termination comes
    /// first.
    #[track_caller]
    pub fn expect_msg(&self, timeout: Duration) -> M {
        match self.next(deadline(timeout)) {
            Some(Item::Msg(m)) => m,
            Some(Item::Terminated(who)) => panic!(
                "{}: expected a message ({}) within {timeout:?}, got the termination of {who}",
                self.actor.path(),
                std::any::type_name::<M>()
            ),
            None => panic!(
                "{}: expected a message ({}) within {timeout:?}, nothing came",
                self.actor.path(),
                std::any::type_name::<M>()
            ),
        }
    }

    /// The next message, which must come within `timeout` and satisfy
    /// `pred`.
    ///
    /// # Panics
    ///
    /// As [`expect_msg`](Self::expect_msg), and if the message does not
    /// satisfy `pred` (the failure shows its `Debug`).
    #[track_caller]
    pub fn expect_msg_matching(&self, pred: impl FnOnce(&M) -> bool, timeout: Duration) -> M
    where
        M: fmt::Debug,
    {
        let m = self.expect_msg(timeout);
        if !pred(&m) {
            panic!(
                "{}: expected a message matching the predicate, got {m:?}",
                self.actor.path()
            );
        }
        m
    }

    /// The next message, which must come within `timeout` and equal
    /// `expected` (the failure shows both).
    #[track_caller]
    pub fn expect_msg_eq(&self, expected: M, timeout: Duration) -> M
    where
        M: fmt::Debug + PartialEq,
    {
        let m = self.expect_msg(timeout);
        if m != expected {
            panic!("{}: expected {expected:?}, got {m:?}", self.actor.path());
        }
        m
    }

    /// The next `n` messages, which must all come within `timeout` (in
    /// total).
    ///
    /// # Panics
    ///
    /// If fewer come in time (the failure says how many did), or a watched
    /// actor's termination comes among them.
    #[track_caller]
    pub fn receive_n(&self, n: usize, timeout: Duration) -> Vec<M> {
        let deadline = deadline(timeout);
        let mut got = Vec::with_capacity(n);
        while got.len() < n {
            match self.next(deadline) {
                Some(Item::Msg(m)) => got.push(m),
                Some(Item::Terminated(who)) => panic!(
                    "{}: expected {n} messages within {timeout:?}, got {} and then the \
                     termination of {who}",
                    self.actor.path(),
                    got.len()
                ),
                None => panic!(
                    "{}: expected {n} messages ({}) within {timeout:?}, got {}",
                    self.actor.path(),
                    std::any::type_name::<M>(),
                    got.len()
                ),
            }
        }
        got
    }

    /// Waits `duration` and asserts that nothing came meanwhile (neither a
    /// message nor a watched actor's termination). This one waits the whole
    /// duration: that is what it means.
    ///
    /// # Panics
    ///
    /// If something came (the failure names its type; see
    /// [`expect_no_msg_debug`](Self::expect_no_msg_debug) for its `Debug`).
    #[track_caller]
    pub fn expect_no_msg(&self, duration: Duration) {
        match self.next(deadline(duration)) {
            None => {}
            Some(Item::Msg(m)) => panic!(
                "{}: expected no message for {duration:?}, got a {}",
                self.actor.path(),
                type_name_of(&m)
            ),
            Some(Item::Terminated(who)) => panic!(
                "{}: expected no message for {duration:?}, got the termination of {who}",
                self.actor.path()
            ),
        }
    }

    /// As [`expect_no_msg`](Self::expect_no_msg), with the `Debug` of what
    /// came in the failure.
    #[track_caller]
    pub fn expect_no_msg_debug(&self, duration: Duration)
    where
        M: fmt::Debug,
    {
        match self.next(deadline(duration)) {
            None => {}
            Some(Item::Msg(m)) => panic!(
                "{}: expected no message for {duration:?}, got {m:?}",
                self.actor.path()
            ),
            Some(Item::Terminated(who)) => panic!(
                "{}: expected no message for {duration:?}, got the termination of {who}",
                self.actor.path()
            ),
        }
    }

    /// The next thing the probe records must be the termination of
    /// `target` (watched with [`watch`](Self::watch)), within `timeout`.
    ///
    /// # Panics
    ///
    /// If nothing comes in time, a message comes first (the failure names
    /// its type), or another watched actor's termination does.
    #[track_caller]
    pub fn expect_terminated(&self, target: &ActorId, timeout: Duration) {
        match self.next(deadline(timeout)) {
            Some(Item::Terminated(who)) if who == *target => {}
            Some(Item::Terminated(who)) => panic!(
                "{}: expected the termination of {target} within {timeout:?}, got the \
                 termination of {who}",
                self.actor.path()
            ),
            Some(Item::Msg(m)) => panic!(
                "{}: expected the termination of {target} within {timeout:?}, got a message \
                 ({})",
                self.actor.path(),
                type_name_of(&m)
            ),
            None => panic!(
                "{}: expected the termination of {target} within {timeout:?}, nothing came \
                 (watched with `watch`?)",
                self.actor.path()
            ),
        }
    }
}

impl<M: Send + 'static> Drop for TestProbe<M> {
    fn drop(&mut self) {
        self.actor.stop();
    }
}

impl<M: Send + 'static> fmt::Debug for TestProbe<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestProbe")
            .field("actor", &self.actor)
            .finish()
    }
}
